"""What the user tells the checker: input shape ranges, data types and tolerances.

``input_shapes`` has one entry per plugin input: a single shape (static) or a
``(min, opt, max)`` triple, exactly what an optimization profile holds. For
IPluginV2/IPluginV2Ext plugins dim 0 is the batch (implicit batch).

>>> normalize_shapes([(2, 3), ((1, 4), (2, 4), (8, 4))])[1]
InputRange(min=(1, 4), opt=(2, 4), max=(8, 4))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.dims import Dims
from ..core.errors import PlugrtError
from ..core.types import DataType

__all__ = [
    "CheckUsageError",
    "InputRange",
    "ShapeSet",
    "make_shape_sets",
    "normalize_dtypes",
    "normalize_shapes",
    "parse_dtype",
    "tolerance",
]


class CheckUsageError(PlugrtError, ValueError):
    """The checker was called wrongly (bad shapes, unknown dtype, unknown plugin ...)."""


@dataclass(frozen=True)
class InputRange:
    """The min/opt/max shapes of one plugin input."""

    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]

    def __post_init__(self) -> None:
        if not len(self.min) == len(self.opt) == len(self.max):
            raise CheckUsageError(f"min {self.min}, opt {self.opt} and max {self.max} must have the same rank")
        for lo, mid, hi in zip(self.min, self.opt, self.max):
            if not 0 <= lo <= mid <= hi:
                raise CheckUsageError(
                    f"need 0 <= min <= opt <= max in every dimension, got {self.min} {self.opt} {self.max}"
                )

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.min)

    def is_static(self, axis: int) -> bool:
        """True when dimension ``axis`` cannot vary."""
        return self.min[axis] == self.max[axis]

    def __str__(self) -> str:
        def text(shape: tuple[int, ...]) -> str:
            return "x".join(map(str, shape)) if shape else "scalar"

        if self.min == self.max:
            return text(self.min)
        return f"{text(self.min)}..{text(self.opt)}..{text(self.max)}"


@dataclass(frozen=True)
class ShapeSet:
    """One concrete shape per input, with a label ('min', 'opt', 'max', 'min+1', 'max-1')."""

    label: str
    shapes: tuple[tuple[int, ...], ...]

    def __str__(self) -> str:
        return f"{self.label} " + ", ".join("x".join(map(str, s)) or "scalar" for s in self.shapes)


def _is_shape(value: Any) -> bool:
    if isinstance(value, Dims):
        return True
    return isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def _shape(value: Any, what: str) -> tuple[int, ...]:
    if not _is_shape(value):
        raise CheckUsageError(f"{what}: {value!r} is not a shape (a tuple of ints)")
    return tuple(int(v) for v in value)


def normalize_shapes(input_shapes: Sequence[Any]) -> list[InputRange]:
    """One :class:`InputRange` per input from shapes, ``(min, opt, max)`` triples or mappings."""
    if isinstance(input_shapes, (str, bytes)) or not isinstance(input_shapes, Sequence):
        raise CheckUsageError(f"input_shapes must be a list with one entry per input, got {input_shapes!r}")
    ranges = []
    for i, item in enumerate(input_shapes):
        what = f"input_shapes[{i}]"
        if isinstance(item, InputRange):
            ranges.append(item)
        elif isinstance(item, Mapping):
            missing = {"min", "opt", "max"} - set(item)
            if missing:
                raise CheckUsageError(f"{what} needs keys min, opt and max; missing {sorted(missing)}")
            ranges.append(InputRange(*(_shape(item[k], what) for k in ("min", "opt", "max"))))
        elif _is_shape(item):
            static = _shape(item, what)
            ranges.append(InputRange(static, static, static))
        elif isinstance(item, (list, tuple)) and len(item) == 3:
            ranges.append(InputRange(*(_shape(s, what) for s in item)))
        else:
            raise CheckUsageError(f"{what} must be a shape or a (min, opt, max) triple of shapes, got {item!r}")
    return ranges


def make_shape_sets(ranges: Sequence[InputRange]) -> list[ShapeSet]:
    """Profile min, opt and max, plus the edges min+1 and max-1 when they are new shapes."""

    def shifted(pick: str, step: int) -> tuple[tuple[int, ...], ...]:
        shapes = []
        for r in ranges:
            base = getattr(r, pick)
            shapes.append(tuple(min(max(b + step, lo), hi) for b, lo, hi in zip(base, r.min, r.max)))
        return tuple(shapes)

    candidates = [
        ShapeSet("min", tuple(r.min for r in ranges)),
        ShapeSet("opt", tuple(r.opt for r in ranges)),
        ShapeSet("max", tuple(r.max for r in ranges)),
        ShapeSet("min+1", shifted("min", 1)),
        ShapeSet("max-1", shifted("max", -1)),
    ]
    sets: list[ShapeSet] = []
    for candidate in candidates:
        if all(s.shapes != candidate.shapes for s in sets):
            sets.append(candidate)
    return sets


_DTYPE_NAMES: dict[str, DataType] = {
    "float": DataType.FLOAT,
    "float32": DataType.FLOAT,
    "fp32": DataType.FLOAT,
    "half": DataType.HALF,
    "float16": DataType.HALF,
    "fp16": DataType.HALF,
    "int8": DataType.INT8,
    "int32": DataType.INT32,
    "int64": DataType.INT64,
    "uint8": DataType.UINT8,
    "bool": DataType.BOOL,
}


def parse_dtype(value: Any) -> DataType:
    """A :class:`DataType` from a DataType, a NumPy dtype name or TensorRT's member name."""
    if isinstance(value, DataType):
        return value
    if isinstance(value, str):
        key = value.strip().lower().removeprefix("datatype.")
        if key in _DTYPE_NAMES:
            return _DTYPE_NAMES[key]
        raise CheckUsageError(f"unknown dtype {value!r}; choose from {', '.join(sorted(_DTYPE_NAMES))}")
    try:
        from ..core.types import from_nptype

        return from_nptype(value)
    except Exception:
        raise CheckUsageError(f"unknown dtype {value!r}; give a DataType or one of {sorted(_DTYPE_NAMES)}") from None


def normalize_dtypes(dtypes: Any, count: int) -> list[DataType]:
    """One DataType per input: None means FLOAT, a single value applies to every input."""
    if dtypes is None:
        return [DataType.FLOAT] * count
    if isinstance(dtypes, (str, DataType)) or not isinstance(dtypes, Sequence):
        return [parse_dtype(dtypes)] * count
    parsed = [parse_dtype(d) for d in dtypes]
    if len(parsed) == 1:
        return parsed * count
    if len(parsed) != count:
        raise CheckUsageError(f"got {len(parsed)} dtypes for {count} inputs; give one, or one per input")
    return parsed


def tolerance(dtypes: Sequence[DataType]) -> tuple[float, float]:
    """(rtol, atol) for comparing outputs of these types: the loosest float type decides."""
    if DataType.HALF in dtypes or DataType.BF16 in dtypes:
        return 1e-2, 1e-2
    if DataType.FLOAT in dtypes:
        return 1e-5, 1e-5
    return 0.0, 0.0
