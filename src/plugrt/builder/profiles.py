"""Resolve optimization profiles into symbol environments (min, opt, max per dynamic axis)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.dims import Dims
from ..core.errors import BuildError
from ..network.tensor import ITensor
from .config import IOptimizationProfile

__all__ = ["ResolvedProfile", "resolve_profiles", "symbol_name"]


def symbol_name(input_name: str, axis: int) -> str:
    """The symbol of dynamic axis ``axis`` of network input ``input_name``."""
    return f"{input_name}[{axis}]"


@dataclass
class ResolvedProfile:
    """A profile as shapes per input and environments per symbol."""

    shapes: dict[str, tuple[Dims, Dims, Dims]]
    low: dict[str, int]
    opt: dict[str, int]
    high: dict[str, int]


def resolve_profiles(
    inputs: Sequence[ITensor], profiles: Sequence[IOptimizationProfile]
) -> tuple[list[ResolvedProfile], dict[str, tuple[str, int]]]:
    """Check profiles against the network inputs; return them and the symbol table."""
    names = [t.name for t in inputs]
    dynamic = {t.name: [k for k, d in enumerate(t.shape) if d < 0] for t in inputs}
    symbols = {symbol_name(n, k): (n, k) for n, axes in dynamic.items() for k in axes}
    if not profiles:
        needing = [f"{n!r} (dynamic axes {axes})" for n, axes in dynamic.items() if axes]
        if needing:
            raise BuildError(
                f"network input(s) {', '.join(needing)} have dynamic dimensions; add an optimization profile "
                "with profile.set_shape(name, min, opt, max) and config.add_optimization_profile(profile)"
            )
        profiles = [IOptimizationProfile()]
    resolved = []
    for index, profile in enumerate(profiles):
        unknown = [n for n in profile.inputs if n not in names]
        if unknown:
            raise BuildError(
                f"optimization profile {index} sets shapes of {unknown}, which are not network inputs; inputs: {names}"
            )
        shapes: dict[str, tuple[Dims, Dims, Dims]] = {}
        low: dict[str, int] = {}
        opt: dict[str, int] = {}
        high: dict[str, int] = {}
        for tensor in inputs:
            declared = tensor.shape
            entry = profile.get_shape(tensor.name)
            if not entry:
                if dynamic[tensor.name]:
                    raise BuildError(
                        f"optimization profile {index} has no shape for dynamic input {tensor.name!r} {declared}; "
                        f"call set_shape({tensor.name!r}, min, opt, max)"
                    )
                entry = [Dims(declared)] * 3
            lo, mid, hi = entry
            if len(lo) != len(declared):
                raise BuildError(
                    f"optimization profile {index}: input {tensor.name!r} has rank {len(declared)} {declared} but the "
                    f"profile gives rank {len(lo)} (min {lo})"
                )
            for axis, dim in enumerate(declared):
                if dim >= 0 and not lo[axis] == mid[axis] == hi[axis] == dim:
                    raise BuildError(
                        f"optimization profile {index}: input {tensor.name!r} axis {axis} is fixed at {dim} but the profile "
                        f"gives min {lo[axis]}, opt {mid[axis]}, max {hi[axis]}"
                    )
                if dim < 0:
                    name = symbol_name(tensor.name, axis)
                    low[name], opt[name], high[name] = lo[axis], mid[axis], hi[axis]
            shapes[tensor.name] = (Dims(lo), Dims(mid), Dims(hi))
        resolved.append(ResolvedProfile(shapes, low, opt, high))
    return resolved, symbols
