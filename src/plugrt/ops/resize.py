"""Resize (ONNX Resize and Upsample): nearest, linear and cubic interpolation, axis by axis.

Interpolation is separable, so each resized axis is one pass: output ``i`` of
the axis is ``sum_t weight[i, t] * x[index[i, t]]`` over a few taps (nearest:
one, linear: two, cubic: four, more when antialiasing a downscale). ``prepare``
maps output coordinates to input coordinates (``coordinate_transformation_mode``),
picks the taps (the ``n`` input positions nearest the coordinate, clamped to the
edge) and their weights; the kernel is ``take`` plus multiply-adds into work
buffers (tables and buffers are in the memory of the run's array module).
Output sizes are ``sizes`` (optionally fitted to keep the aspect ratio) or
``floor(in * scale)``, computed exactly from the FLOAT scale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError
from ..core.types import DataType
from ..shape import DimensionOperation, IDimensionExpr, constant, operation
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import NUMERIC_TYPES, label
from .params import floats, ints, param

__all__ = ["ResizeOperator"]

_MODES = ("nearest", "linear", "cubic")
_COORDINATES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_crop_and_resize",
)
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_POLICIES = ("stretch", "not_larger", "not_smaller")
#: ``np.take``'s mode: the positions are in range, and ``clip`` spares NumPy a buffered copy (CuPy has no mode)
_CLIP = {"mode": "clip"}


class _Pass:
    """One resized axis: taps ``index`` ``[out, taps]`` and ``weight`` (None for nearest).

    ``tables`` holds what the kernel reads, per tap: the input positions and the
    weights shaped ``[1, out, 1]``, and the positions to fill with the extrapolation value.
    """

    def __init__(self, axis: int, index: np.ndarray, weight: np.ndarray | None, outside: np.ndarray) -> None:
        self.axis = axis
        self.index = index
        self.weight = weight
        self.outside = outside  # positions to fill with the extrapolation value
        #: work buffers (this pass's result, the FLOAT product of one tap), arrays of ``module``
        self.module: Any = None
        self.buffer: Any = None
        self.term: Any = None
        columns = range(index.shape[1])
        self.tables: tuple[list[np.ndarray], list[np.ndarray] | None, np.ndarray] = (
            [np.ascontiguousarray(index[:, t]) for t in columns],
            None if weight is None else [np.ascontiguousarray(weight[:, t]).reshape(1, -1, 1) for t in columns],
            outside,
        )


@register_operator
class ResizeOperator(Operator):
    """params: ``mode``, ``coordinate_transformation_mode``, ``nearest_mode``, ``cubic_coeff_a``,
    ``exclude_outside``, ``extrapolation_value``, ``antialias``, ``keep_aspect_ratio_policy``,
    ``axes`` (the resized axes; default all), one of ``scales`` or ``sizes`` (per axis in
    ``axes``) or ``sizes_input`` (input 1 holds the sizes, known at build time), ``roi``."""

    kind = "resize"
    mode: str = param(default="nearest", choices=_MODES)
    coordinates: str = param(key="coordinate_transformation_mode", default="half_pixel", choices=_COORDINATES)
    nearest: str = param(key="nearest_mode", default="round_prefer_floor", choices=_NEAREST)
    policy: str = param(key="keep_aspect_ratio_policy", default="stretch", choices=_POLICIES)
    cubic_a: float = param(float, key="cubic_coeff_a", default=-0.75)
    exclude_outside: bool = param(bool, default=False)
    extrapolation: float = param(float, key="extrapolation_value", default=0.0)
    axes: list[int] | None = param(ints, default=None)
    scales: list[float] | None = param(floats, default=None)
    sizes: list[int] | None = param(ints, default=None)
    sizes_input: bool = param(bool, default=False)
    roi: list[float] | None = param(floats, default=None)

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self.antialias = bool(self.params.get("antialias", False)) and self.mode != "nearest"
        if sum(v is not None and v is not False for v in (self.scales, self.sizes, self.sizes_input or None)) != 1:
            raise NetworkError("resize: give exactly one of scales, sizes or sizes_input")
        self._key: tuple[Any, ...] | None = None
        self._passes: list[_Pass] = []
        #: the passes' tables, one list per ``prepare`` (copied once to a device)
        self._tables: list[Any] = []
        self._extrapolated = False  # some outputs read outside the ROI

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expected = 2 if self.sizes_input else 1
        if len(input_types) != expected:
            raise NetworkError(f"{label(self)}: expected {expected} input(s), got {len(input_types)}")
        allowed = NUMERIC_TYPES if self.mode == "nearest" else NUMERIC_TYPES - {DataType.INT64}
        if input_types[0] not in allowed:
            raise NetworkError(f"{label(self)}: {self.mode} resize does not take {input_types[0].name}")
        return [input_types[0]]

    def _axes(self, rank: int) -> list[int]:
        axes = list(range(rank)) if self.axes is None else [a + rank if a < 0 else a for a in self.axes]
        if any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
            raise ShapeError(f"{label(self)}: axes {self.axes} are not distinct axes of a rank-{rank} input")
        count = len(self.scales if self.scales is not None else self.sizes or axes)
        if count != len(axes):
            raise ShapeError(f"{label(self)}: {count} scales or sizes for {len(axes)} axes")
        return axes

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        x = list(input_shapes[0])
        axes = self._axes(len(x))
        out = list(x)
        if self.scales is not None:
            for axis, scale in zip(axes, self.scales):
                if scale <= 0:
                    raise ShapeError(f"{label(self)}: scales must be positive, got {self.scales}")
                ratio = Fraction(scale)
                scaled = operation(DimensionOperation.PROD, x[axis], constant(ratio.numerator))
                out[axis] = operation(DimensionOperation.FLOOR_DIV, scaled, constant(ratio.denominator))
            return [out]
        sizes: list[IDimensionExpr]
        if self.sizes is not None:
            sizes = [constant(s) for s in self.sizes]
        else:
            values = input_values[1]
            if values is None or len(values) not in (len(axes), len(x)):
                raise ShapeError(f"{label(self)}: the sizes input must be known at build time, one per resized axis")
            sizes = [values[a] for a in axes] if len(values) == len(x) and len(axes) != len(x) else list(values)
        if self.policy == "stretch":
            for axis, size in zip(axes, sizes):
                out[axis] = size
            return [out]
        if self.sizes is None or not all(x[a].is_constant() for a in axes):
            raise ShapeError(
                f"{label(self)}: keep_aspect_ratio_policy {self.policy!r} needs sizes and input dims known when building"
            )
        concrete = self._fitted([x[a].get_constant_value() for a in axes], [d.get_constant_value() for d in sizes])
        for axis, fitted in zip(axes, concrete[0]):
            out[axis] = constant(fitted)
        return [out]

    def _fitted(self, dims: Sequence[int], sizes: Sequence[int]) -> tuple[list[int], list[float]]:
        """Sizes and scales per resized axis for the aspect-ratio policy."""
        ratios = [s / d for s, d in zip(sizes, dims)]
        if self.policy == "stretch":
            return list(sizes), ratios
        scale = min(ratios) if self.policy == "not_larger" else max(ratios)
        return [int(scale * d + 0.5) for d in dims], [scale] * len(dims)

    # --- taps ---------------------------------------------------------------------------
    def _source_coordinates(self, size: int, out: int, scale: float, roi: tuple[float, float]) -> np.ndarray:
        y = np.arange(out, dtype=np.float64)
        width = scale * size
        mode = self.coordinates
        if mode == "align_corners":  # the length is `scale * size`, fractional for some scales (as ONNX's tests)
            return np.zeros(out) if width == 1 else y * (size - 1) / (width - 1)
        if mode == "asymmetric":
            return y / scale
        if mode == "tf_crop_and_resize":
            # the ROI is FLOAT: its span and offset are FLOAT results, so ties land where other runtimes put them
            start, end = np.float32(roi[0]), np.float32(roi[1])
            span, offset = float(end - start), float(start * np.float32(size - 1))
            if width == 1:
                return np.full(out, float(np.float32(span * (size - 1) / 2)) + offset)
            return y * span * (size - 1) / (width - 1) + offset
        if mode == "pytorch_half_pixel":
            return np.full(out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
        if mode == "half_pixel_symmetric":
            offset = size / 2 * (1 - out / width)
            return offset + (y + 0.5) / scale - 0.5
        return (y + 0.5) / scale - 0.5

    def _kernel(self, distance: np.ndarray) -> np.ndarray:
        d = np.abs(distance)
        if self.mode == "linear":
            return np.clip(1 - d, 0, None)
        a = self.cubic_a
        near = ((a + 2) * d - (a + 3)) * d * d + 1
        far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
        return np.where(d <= 1, near, np.where(d < 2, far, 0.0))

    def _taps(self, size: int, out: int, scale: float, roi: tuple[float, float]) -> tuple[Any, Any, Any]:
        coords = self._source_coordinates(size, out, scale, roi)
        outside: Any = []
        if self.coordinates == "tf_crop_and_resize":
            outside = np.flatnonzero((coords < 0) | (coords > size - 1))
        floor = np.floor(coords)
        frac = coords - floor
        if self.mode == "nearest":
            rounding = {
                "round_prefer_floor": frac > 0.5,
                "round_prefer_ceil": frac >= 0.5,
                "floor": np.zeros_like(frac, dtype=bool),
                "ceil": frac > 0,
            }[self.nearest]
            index = np.clip(floor.astype(np.int64) + rounding, 0, size - 1)
            return index[:, None], None, outside
        reach = 1 if self.mode == "linear" else 2
        factor = min(scale, 1.0) if self.antialias else 1.0
        start = math.floor(-reach / factor) + 1 if self.antialias else 1 - reach
        taps = 2 - 2 * start
        # the `taps` positions nearest each coordinate; at an exact integer the window leans left
        first = floor.astype(np.int64) - taps // 2 + (frac != 0)
        positions = first[:, None] + np.arange(taps)[None, :]
        weight = self._kernel((positions - coords[:, None]) * factor)
        if self.antialias:
            weight /= weight.sum(axis=1, keepdims=True)
        if self.exclude_outside:
            weight = np.where((positions < 0) | (positions >= size), 0.0, weight)
            total = weight.sum(axis=1, keepdims=True)
            weight /= np.where(total == 0, 1.0, total)
        return np.clip(positions, 0, size - 1), weight, outside

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        shape, out_shape = tuple(input_shapes[0]), tuple(output_shapes[0])
        if self._key == (shape, out_shape):
            return
        rank = len(shape)
        axes = self._axes(rank)
        if self.scales is not None:
            scales = list(self.scales)
        elif self.policy != "stretch" and self.sizes is not None:
            _, scales = self._fitted([shape[a] for a in axes], self.sizes)
        else:
            scales = [out_shape[a] / shape[a] if shape[a] else 1.0 for a in axes]
        roi = self.roi or []
        self._passes = []
        for i, axis in enumerate(axes):
            bounds = (roi[i], roi[len(axes) + i]) if len(roi) == 2 * len(axes) else (0.0, 1.0)
            if len(roi) == 2 * rank and len(axes) != rank:
                bounds = (roi[axis], roi[rank + axis])
            trivial = math.isclose(scales[i], 1.0) and out_shape[axis] == shape[axis] and bounds == (0.0, 1.0)
            if trivial and self.coordinates != "tf_crop_and_resize":
                continue
            if shape[axis] == 0 or out_shape[axis] == 0:
                continue
            index, weight, outside = self._taps(shape[axis], out_shape[axis], scales[i], bounds)
            weight = None if weight is None else weight.astype(np.float32)
            self._passes.append(_Pass(axis, index, weight, np.asarray(outside, dtype=np.int64)))
        self._tables = [step.tables for step in self._passes]
        self._extrapolated = any(len(step.outside) for step in self._passes)
        self._key = (shape, out_shape)

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        if self._key != (x.shape, out.shape):
            self.prepare([x.shape], [out.shape])
        if out.size == 0:
            return
        if not self._passes:
            xp.copyto(out, x)
            return
        clip = _CLIP if xp is np else {}
        source = x
        if self.mode != "nearest" and x.dtype != np.float32:
            source = x.astype(np.float32)
        tables = self._tables if xp is np else self.on_device("tables", self._tables, xp)
        for number, (step, (indices, weights, _)) in enumerate(zip(self._passes, tables)):
            last = number == len(self._passes) - 1
            shape = list(source.shape)
            pre, size, post = math.prod(shape[: step.axis]), shape[step.axis], math.prod(shape[step.axis + 1 :])
            shape[step.axis] = len(step.index)
            src = source.reshape(pre, size, post)
            if step.module is not xp:
                step.module, step.buffer, step.term = xp, None, None
            if last and out.dtype == source.dtype:
                target = out
            else:
                if step.buffer is None or step.buffer.dtype != source.dtype:
                    step.buffer = xp.empty(shape, dtype=source.dtype)
                target = step.buffer
            flat = target.reshape(pre, -1, post)
            if weights is None:
                xp.take(src, indices[0], axis=1, out=flat, **clip)
            else:
                if step.term is None:
                    step.term = xp.empty(flat.shape, dtype=np.float32)
                term = step.term
                for t, (index, weight) in enumerate(zip(indices, weights)):
                    xp.take(src, index, axis=1, out=term if t else flat, **clip)
                    if t:
                        xp.multiply(term, weight, out=term)
                        xp.add(flat, term, out=flat)
                    else:
                        xp.multiply(flat, weight, out=flat)
            source = target
        if self._extrapolated:
            for step, (_, _, outside) in zip(self._passes, tables):
                if len(step.outside):
                    source[(slice(None),) * step.axis + (outside,)] = self.extrapolation
        if source is not out:
            if out.dtype.kind in "iu":
                info = np.iinfo(out.dtype)
                source = xp.clip(xp.rint(source), info.min, info.max)
            xp.copyto(out, source, casting="unsafe")
