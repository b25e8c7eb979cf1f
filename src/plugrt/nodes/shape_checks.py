"""Broadcast checks: dimensions a shape rule broadcast without knowing their values.

``[n, 4] + [m, 4]`` builds to ``[max(n, m), 4]``, which is right only when ``n``
and ``m`` are equal or one of them is 1. The shape rule cannot tell (``n`` and
``m`` are symbols), so it records the pair (``Operator.broadcast_pairs``) and
the pair is checked with concrete values: by the builder at every profile's
min, opt and max, by the runtime when it loads a plan, and by the execution
context whenever input shapes change. Each failure names the layer, the axis
and both sizes, instead of a NumPy broadcasting error in the middle of a run.

Plugin output checks work the same way: the dimensions a plugin's shape hook
returned are expressions, and each must be >= 0 at every profile's min, opt and
max (the builder, and the runtime on load) and at every shape change (the
context), failing with the layer, the plugin, the output index and the value
rather than sizing a buffer from a negative number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.errors import BuildError, PlugrtError
from ..shape.expr import IDimensionExpr

__all__ = [
    "BroadcastCheck",
    "PluginOutputCheck",
    "ShapeCheck",
    "broadcast_checks",
    "check_at_points",
    "plugin_output_checks",
    "profile_points",
]


class ShapeCheck(Protocol):
    """A rule on symbol values: :meth:`problem` says what is wrong, or None."""

    def problem(self, env: Mapping[str, int]) -> str | None:
        """What is wrong for symbol values ``env`` (None when nothing is, or not known yet)."""
        ...


@dataclass(frozen=True)
class BroadcastCheck:
    """Dimension ``axis`` of layer ``layer``'s inputs: ``a`` and ``b`` must be equal or one of them 1."""

    layer: str
    axis: int
    a: IDimensionExpr
    b: IDimensionExpr

    def problem(self, env: Mapping[str, int]) -> str | None:
        """What is wrong for symbol values ``env`` (None when they broadcast or are not known yet)."""
        if (self.a.symbols() | self.b.symbols()) - set(env):
            return None
        x, y = self.a.evaluate(env), self.b.evaluate(env)
        if x == y or x == 1 or y == 1:
            return None
        return (
            f"layer {self.layer!r}: its inputs cannot broadcast: dimension {self.axis} is {x} in one and {y} in the "
            "other; they must be equal or one of them 1"
        )


@dataclass(frozen=True)
class PluginOutputCheck:
    """Output ``output`` of a plugin layer: every dimension its shape hook gave must be >= 0.

    ``where`` names the layer, the plugin and the hook (``PluginCaller.describe``).
    """

    where: str
    output: int
    shape: tuple[IDimensionExpr, ...]

    def problem(self, env: Mapping[str, int]) -> str | None:
        """What is wrong for symbol values ``env`` (None when every dimension is >= 0 or not known yet)."""
        if any(d.symbols() - set(env) for d in self.shape):
            return None
        for axis, dim in enumerate(self.shape):
            value = dim.evaluate(env)
            if value < 0:
                return (
                    f"{self.where}: output {self.output} dimension {axis} is {value} ({dim}); "
                    "dimensions must be >= 0"
                )
        return None


def plugin_output_checks(where: str, shapes: Sequence[Sequence[IDimensionExpr]]) -> list[PluginOutputCheck]:
    """One check per output of a plugin layer whose shape hook gave ``shapes``."""
    return [PluginOutputCheck(where, k, tuple(shape)) for k, shape in enumerate(shapes)]


def broadcast_checks(op: Any, layer: str) -> list[BroadcastCheck]:
    """The checks ``op``'s last shape rule recorded, for layer ``layer``."""
    return [BroadcastCheck(layer, axis, a, b) for axis, a, b in getattr(op, "broadcast_pairs", ())]


def profile_points(profiles: Sequence[Any]) -> list[tuple[str, Mapping[str, int]]]:
    """(label, symbol values) at each profile's min, opt and max; ``profiles`` have ``low``/``opt``/``high``
    or are (low, opt, high) tuples."""
    points: list[tuple[str, Mapping[str, int]]] = []
    for p, profile in enumerate(profiles):
        envs = (profile.low, profile.opt, profile.high) if hasattr(profile, "low") else tuple(profile)
        points += [(f"profile {p} {label}", env) for label, env in zip(("min", "opt", "max"), envs)]
    return points


def check_at_points(
    checks: Sequence[ShapeCheck],
    points: Sequence[tuple[str, Mapping[str, int]]],
    error: type[PlugrtError] = BuildError,
) -> None:
    """Raise ``error`` for the first check that fails at one of ``points`` ((label, symbol values))."""
    for check in checks:
        for label, env in points:
            problem = check.problem(env)
            if problem is not None:
                raise error(f"{problem} (at {label} shapes {dict(env)})")
