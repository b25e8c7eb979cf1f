"""What every check shares: the plugin source, its driver, inputs and the baseline runs.

The baseline is computed once: for every shape set, a fresh session (build,
initialize, context clone, configure, enqueue) runs the plugin twice from two
poison patterns. Checks compare against it; when the plugin cannot run at all,
the check that owns the failing hook reports it and the others are skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.types import DataType
from ..interfaces.creator import IPluginCreatorInterface, IPluginCreatorV3One
from ..interfaces.fields import PluginFieldCollection
from ..interfaces.registry import get_plugin_registry
from ..interfaces.v2 import IPluginV2
from ..interfaces.v3 import IPluginV3, TensorRTPhase
from .buffers import POISON_A, POISON_B
from .driver import Combination, OutputRule, PluginDriver, checked_plugin, driver_for
from .fields import make_fields
from .hooks import HookError, call, hint_for
from .report import CheckFailedError, CheckSkippedError
from .session import RunResult, Session
from .spec import CheckUsageError, InputRange, ShapeSet, make_shape_sets

__all__ = ["Baseline", "CheckContext", "compare_outputs"]

InputMaker = Callable[[list[tuple[int, ...]], list[np.dtype], np.random.Generator], Sequence[np.ndarray]]


@dataclass
class Baseline:
    """The reference runs at one shape set: same inputs, two poison patterns."""

    shape_set: ShapeSet
    inputs: list[np.ndarray]
    first: RunResult
    second: RunResult


def _default_inputs(
    shapes: list[tuple[int, ...]], dtypes: list[np.dtype], rng: np.random.Generator
) -> list[np.ndarray]:
    arrays = []
    for shape, dtype in zip(shapes, dtypes):
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.integers(0, 2, shape).astype(dtype))
        elif dtype.kind == "u":
            arrays.append(rng.integers(0, 8, shape).astype(dtype))
        else:
            arrays.append(rng.integers(-4, 5, shape).astype(dtype))
    return arrays


def compare_outputs(
    expected: Sequence[np.ndarray], got: Sequence[np.ndarray], rtol: float = 0.0, atol: float = 0.0
) -> str | None:
    """None when equal (exactly, or within tolerances), else where they first differ."""
    if len(expected) != len(got):
        return f"{len(got)} outputs instead of {len(expected)}"
    for i, (a, b) in enumerate(zip(expected, got)):
        if a.shape != b.shape:
            return f"output {i} has shape {b.shape} instead of {a.shape}"
        if a.dtype.kind == "f" or b.dtype.kind == "f":
            wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
            close = np.isclose(wide_b, wide_a, rtol=rtol, atol=atol, equal_nan=True)
        else:
            close = a == b
        bad = np.argwhere(~close)
        if len(bad):
            where = tuple(int(v) for v in bad[0])
            return (
                f"output {i} differs at {len(bad)} of {a.size} elements "
                f"(first at {where}: expected {_value(a[where])}, got {_value(b[where])})"
            )
    return None


def _value(x: Any) -> str:
    item = np.asarray(x).item()
    return f"{item:.7g}" if isinstance(item, float) else repr(item)


class CheckContext:
    """The plugin under test and everything the checks share."""

    def __init__(
        self,
        source: Any,
        fields: Any,
        ranges: Sequence[InputRange],
        dtypes: Sequence[DataType],
        *,
        reference: Callable[..., Any] | None = None,
        make_inputs: InputMaker | None = None,
        seed: int = 0,
        rtol: float | None = None,
        atol: float | None = None,
        name: str = "check",
    ) -> None:
        self.name = name
        self.ranges = list(ranges)
        self.input_types = list(dtypes)
        self.shape_sets = make_shape_sets(self.ranges)
        self.reference = reference
        self.make_inputs = make_inputs
        self.seed = seed
        self.rtol, self.atol = rtol, atol
        self.template: Any = None
        if isinstance(source, IPluginCreatorInterface):
            self.creator: Any = source
            self.fields = make_fields(source, fields)
            first = self._create_raw()
        else:
            self.template = source
            first = source
            self.creator = None
            self.fields = PluginFieldCollection()
        self.driver: PluginDriver = driver_for(first, self.ranges, name)
        if self.creator is None:
            self.creator = self.find_creator(self.driver.raw_identity(source))
            self.fields = make_fields(self.creator, fields) if self.creator is not None else self.fields
        self.first = first
        self._combo: Combination | HookError | None = None
        self._baseline: dict[str, Baseline] | HookError | None = None

    def _create_raw(self) -> Any:
        if isinstance(self.creator, IPluginCreatorV3One):
            plugin = call(self.creator, "create_plugin", self.name, self.fields, TensorRTPhase.BUILD)
            return checked_plugin(plugin, IPluginV3)
        return checked_plugin(call(self.creator, "create_plugin", self.name, self.fields), IPluginV2)

    @staticmethod
    def find_creator(identity: tuple[str, str, str]) -> Any:
        """The registered creator for (name, version, namespace), or None."""
        for creator in get_plugin_registry().all_creators:
            if (creator.name, creator.plugin_version, creator.plugin_namespace) == tuple(identity):
                return creator
        return None

    # --- plugins ------------------------------------------------------------------
    def fresh(self) -> Any:
        """A new plugin as the network would hold it (from the creator, else a clone)."""
        if self.creator is not None and self.template is None:
            return self.driver.create(self.creator, self.fields)
        return self.driver.clone(self.template)

    def session(self, combo: Combination | None = None, **options: Any) -> Session:
        """A new :class:`Session` (the primary combination unless ``combo``)."""
        return Session(self, combo or self.combo, **options)

    # --- lazily computed shared state ----------------------------------------------
    @property
    def combo(self) -> Combination:
        """The first full type/format combination the plugin accepts (inputs in the requested types)."""
        if self._combo is None:
            try:
                plugin = self.fresh()
                self._combo = self.driver.negotiate(plugin, self.rule_of(plugin), self.input_types)
            except HookError as exc:
                self._combo = exc
        if isinstance(self._combo, HookError):
            raise self._combo
        return self._combo

    def rule_of(self, plugin: Any, input_types: Sequence[DataType] | None = None) -> OutputRule:
        """Output types and shape expressions the plugin declares."""
        return self.driver.rule(plugin, list(input_types or self.input_types))

    def inputs_for(self, shape_set: ShapeSet, combo: Combination | None = None, variant: int = 0) -> list[np.ndarray]:
        """Deterministic input arrays for ``shape_set`` in the combination's input types."""
        combo = combo or self.combo
        index = [s.label for s in self.shape_sets].index(shape_set.label) if shape_set in self.shape_sets else 99
        rng = np.random.default_rng([self.seed, index, variant])
        dtypes = [np.dtype(t.nptype()) for t, _ in combo.inputs]
        shapes = [tuple(s) for s in shape_set.shapes]
        maker = self.make_inputs or _default_inputs
        arrays = [np.asarray(a) for a in maker(shapes, dtypes, rng)]
        if len(arrays) != len(shapes) or any(a.shape != s for a, s in zip(arrays, shapes)):
            raise CheckUsageError(f"make_inputs returned shapes {[a.shape for a in arrays]}; expected {shapes}")
        return [a.astype(d, copy=False) for a, d in zip(arrays, dtypes)]

    def baseline(self) -> dict[str, Baseline]:
        """The reference runs, one fresh session per shape set (errors re-raised as HookError)."""
        if self._baseline is None:
            try:
                self._baseline = {s.label: self._baseline_at(s) for s in self.shape_sets}
            except HookError as exc:
                self._baseline = exc
        if isinstance(self._baseline, HookError):
            raise self._baseline
        return self._baseline

    def _baseline_at(self, shape_set: ShapeSet) -> Baseline:
        inputs = self.inputs_for(shape_set)
        session = self.session()
        try:
            first = session.run(shape_set.shapes, inputs, poison=POISON_A)
            second = session.run(shape_set.shapes, inputs, poison=POISON_B)
        except HookError as exc:
            message, owner = f"at {shape_set}: {exc}", exc.owner
            if exc.hook in ("enqueue", "execute_async") and not session.workspace and "address 0" in str(exc):
                owner = "workspace"
                message += (
                    "; get_workspace_size returned 0, so enqueue got workspace 0, yet it used the workspace. "
                    "Fix: return the bytes enqueue needs from get_workspace_size"
                )
            raise HookError(exc.hook, message, owner) from exc
        finally:
            session.close()
        return Baseline(shape_set, inputs, first, second)

    def require_baseline(self, check_id: str) -> dict[str, Baseline]:
        """The baseline, or the failure (when ``check_id`` owns it) or a skip naming the owner."""
        try:
            return self.baseline()
        except HookError as exc:
            self.blame(check_id, exc)
            raise

    def blame(self, check_id: str, exc: HookError) -> None:
        """Fail ``check_id`` if it owns ``exc``'s hook, else skip it pointing at the owner."""
        if exc.owner == check_id:
            hint = hint_for(exc.hook)
            raise CheckFailedError(f"{exc}. {hint}" if hint else str(exc)) from None
        raise CheckSkippedError(f"the plugin could not run ({exc}); see {exc.owner}") from None

    def nondeterminism(self) -> str | None:
        """Where the two baseline runs differ on elements both wrote, or None."""
        for base in self.baseline().values():
            for i, (a, b) in enumerate(zip(base.first.outputs, base.second.outputs)):
                if a.shape != b.shape:
                    return f"at {base.shape_set}: output {i} had shape {a.shape}, then {b.shape}"
                from .buffers import unwritten_mask

                written = ~unwritten_mask(a, b)
                problem = compare_outputs([a[written]], [b[written]])
                if problem:
                    return f"at {base.shape_set}: {problem}"
        return None

    def require_deterministic(self) -> None:
        """Skip the calling check when identical runs give different outputs."""
        problem = self.nondeterminism()
        if problem:
            raise CheckSkippedError(f"identical runs give different outputs ({problem}); see determinism")

    def tolerances(self, types: Sequence[DataType]) -> tuple[float, float]:
        """(rtol, atol) for outputs of ``types`` unless the caller fixed them."""
        from .spec import tolerance

        rtol, atol = tolerance(types)
        return (self.rtol if self.rtol is not None else rtol), (self.atol if self.atol is not None else atol)
