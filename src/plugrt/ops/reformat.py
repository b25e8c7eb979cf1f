"""The reformat operator: converts a tensor's type and/or layout (inserted by the builder)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.layouts import from_storage, to_storage
from ..core.types import DataType, TensorFormat
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator

__all__ = ["Reformat"]


#: the largest finite half
_HALF_MAX = 65504.0


@register_operator
class Reformat(Operator):
    """Copy a tensor into another type and/or format.

    Params: ``dst_type`` (DataType name), ``src_format`` and ``dst_format``
    (TensorFormat names), ``scale`` (optional): the INT8 scale of a conversion to INT8
    (``clip(rint(x / scale), -128, 127)``) or from INT8 (``q * scale``).
    """

    kind = "reformat"

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        return [DataType[self.param("dst_type")]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        return [list(input_shapes[0])]

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        return [input_values[0]]

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        # Shapes here are logical; the arrays run() gets are laid out per format.
        self._src_format = TensorFormat[self.param("src_format")]
        self._dst_format = TensorFormat[self.param("dst_format")]
        self._linear: Any = None
        self._logical = tuple(output_shapes[0])
        self._scale = self.params.get("scale")
        self._scaled: Any = None

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        if self._scale is not None:
            self._run_scaled(inputs[0], outputs[0], xp)
            return
        if self._src_format == self._dst_format == TensorFormat.LINEAR:
            if self.params.get("saturate") and outputs[0].dtype == np.float16:
                # finite values beyond the half range become ±65504 (not ±inf); infinities stay
                finite = xp.isfinite(inputs[0])
                outputs[0][...] = xp.where(finite, xp.clip(inputs[0], -_HALF_MAX, _HALF_MAX), inputs[0])
                return
            outputs[0][...] = inputs[0]
            return
        if self._linear is None or self._linear.dtype != inputs[0].dtype:
            self._linear = xp.empty(self._logical, dtype=inputs[0].dtype)
        from_storage(inputs[0], self._src_format, self._linear)
        to_storage(self._linear, self._dst_format, outputs[0])

    def _run_scaled(self, source: Any, target: Any, xp: Any) -> None:
        """An INT8 quantize or dequantize with ``scale``, through linear layouts where the formats are not."""
        from .int8 import dequantize_into, quantize_into

        if self._src_format != TensorFormat.LINEAR:
            if self._linear is None or self._linear.dtype != source.dtype:
                self._linear = xp.empty(self._logical, dtype=source.dtype)
            from_storage(source, self._src_format, self._linear)
            source = self._linear
        dst = target
        if self._dst_format != TensorFormat.LINEAR:
            if self._scaled is None:
                self._scaled = xp.empty(self._logical, dtype=target.dtype)
            dst = self._scaled
        scale = float(self.params["scale"])
        if dst.dtype == np.int8:
            quantize_into(xp, source, scale, dst)
        else:
            dequantize_into(xp, source, scale, dst)
        if dst is not target:
            to_storage(dst, self._dst_format, target)
