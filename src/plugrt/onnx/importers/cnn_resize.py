"""ONNX importers: Resize, Upsample and Pad.

Resize before opset 11 and Upsample (opsets 7 to 9) use the asymmetric
coordinate mapping with floor rounding for nearest. Scales must be known when
importing; sizes may also be computed from shapes (a shape tensor), which keeps
dynamic shapes working. Pad takes its pads as an attribute before opset 11 and
as an input after (with an optional axes input from opset 18).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.types import DataType
from ...network.tensor import ITensor
from .base import ImportContext, register_importer

__all__: list[str] = []


def _given(inputs: list[Any], index: int) -> ITensor | None:
    return inputs[index] if len(inputs) > index else None


def _floats(ctx: ImportContext, tensor: ITensor | None, what: str) -> list[float] | None:
    """The values of a constant float input; None when absent or empty; unknown values fail."""
    if tensor is None:
        return None
    value = ctx.value_of(tensor)
    if value is None:
        if ctx.dims_of(tensor) == [0]:
            return None
        ctx.fail(f"the {what} input is computed at run time; plugrt needs it known when importing")
    flat = np.asarray(value, dtype=np.float32).reshape(-1)
    return None if flat.size == 0 else [float(v) for v in flat]


def _resize(ctx: ImportContext, x: ITensor, params: dict[str, Any], sizes: ITensor | None) -> list[Any]:
    rank = ctx.rank_of(x)
    axes = params.get("axes")
    count = rank if axes is None else len(axes)
    scales = params.get("scales")
    if scales is not None and len(scales) != count:
        ctx.fail(f"{len(scales)} scales for {count} resized axes")
    op_inputs = [x]
    if sizes is not None:
        value = ctx.value_of(sizes)
        exprs = ctx.values_of(sizes) if value is None else None
        if exprs is not None and all(e.is_constant() for e in exprs):
            value = np.asarray([e.get_constant_value() for e in exprs], dtype=np.int64)
        if value is not None:
            params["sizes"] = [int(v) for v in np.asarray(value).reshape(-1)]
            if len(params["sizes"]) != count:
                ctx.fail(f"{len(params['sizes'])} sizes for {count} resized axes")
        elif exprs is not None:
            params["sizes_input"] = True
            op_inputs.append(ctx.cast(sizes, DataType.INT64))
        else:
            ctx.fail("the sizes input is computed from data; plugrt needs it known when importing or from shapes")
    if scales is None and sizes is None:
        ctx.fail("Resize needs scales or sizes")
    if scales is not None and sizes is not None:
        ctx.fail("Resize takes scales or sizes, not both")
    return ctx.op("resize", op_inputs, params)


@register_importer("Resize")
def import_resize(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = ctx.input(inputs, 0, "X")
    mode = ctx.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic") or (mode == "cubic" and ctx.opset < 11):
        ctx.fail(f"unknown mode {mode!r}; valid: nearest, linear" + (", cubic" if ctx.opset >= 11 else ""))
    if ctx.opset < 11:
        params: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
        params["scales"] = _floats(ctx, _given(inputs, 1), "scales")
        return _resize(ctx, x, params, None)
    params = {
        "mode": mode,
        "coordinate_transformation_mode": ctx.attr("coordinate_transformation_mode", "half_pixel"),
        "nearest_mode": ctx.attr("nearest_mode", "round_prefer_floor"),
        "cubic_coeff_a": float(ctx.attr("cubic_coeff_a", -0.75)),
        "exclude_outside": bool(ctx.attr("exclude_outside", 0)),
        "extrapolation_value": float(ctx.attr("extrapolation_value", 0.0)),
        "antialias": bool(ctx.attr("antialias", 0)),
        "keep_aspect_ratio_policy": ctx.attr("keep_aspect_ratio_policy", "stretch"),
    }
    if ctx.has_attr("axes"):
        rank = ctx.rank_of(x)
        params["axes"] = [ctx.axis(int(a), rank, "resize axis") for a in ctx.attr("axes")]
    if params["coordinate_transformation_mode"] == "tf_crop_and_resize":
        params["roi"] = _floats(ctx, _given(inputs, 1), "roi")
        if params["roi"] is None:
            ctx.fail("tf_crop_and_resize needs the roi input")
    params["scales"] = _floats(ctx, _given(inputs, 2), "scales")
    sizes = _given(inputs, 3)
    if sizes is not None and ctx.dims_of(sizes) == [0]:
        sizes = None
    return _resize(ctx, x, params, sizes)


@register_importer("Upsample")
def import_upsample(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = ctx.input(inputs, 0, "X")
    mode = ctx.attr("mode", "nearest")
    if mode == "bilinear":
        mode = "linear"
    if mode not in ("nearest", "linear"):
        ctx.fail(f"unknown mode {mode!r}; valid: nearest, linear")
    scales = [float(s) for s in ctx.attr("scales", [])] if ctx.opset < 9 else _floats(ctx, _given(inputs, 1), "scales")
    if not scales:
        ctx.fail("Upsample needs scales")
    params = {"mode": mode, "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor", "scales": scales}
    return _resize(ctx, x, params, None)


@register_importer("Pad")
def import_pad(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = ctx.input(inputs, 0, "X")
    mode = ctx.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap") or (mode == "wrap" and ctx.opset < 19):
        ctx.fail(f"unknown mode {mode!r}; valid: constant, reflect, edge" + (", wrap" if ctx.opset >= 19 else ""))
    params: dict[str, Any] = {"mode": mode}
    op_inputs = [x]
    numpy_type = ctx.dtype_of(x).nptype()
    if ctx.opset < 11:
        params["pads"] = [int(p) for p in ctx.attr("pads", ctx.attr("paddings", []))]
        fill_attr = np.asarray(ctx.attr("value", 0.0)).astype(numpy_type).reshape(1)
        return ctx.op("pad", op_inputs, params, {"value": fill_attr})
    pads = ctx.input(inputs, 1, "pads")
    pads_value = ctx.value_of(pads)
    if pads_value is not None:
        params["pads"] = [int(p) for p in np.asarray(pads_value).reshape(-1)]
    elif ctx.values_of(pads) is not None:
        op_inputs.append(ctx.cast(pads, DataType.INT64))
    else:
        ctx.fail("the pads input is computed from data; plugrt needs it known when importing or from shapes")
    axes = _given(inputs, 3)
    if axes is not None:
        axes_value = ctx.value_of(axes)
        if axes_value is None:
            ctx.fail("the axes input is computed at run time; plugrt needs it known when importing")
        rank = ctx.rank_of(x)
        params["axes"] = [ctx.axis(int(a), rank, "pad axis") for a in np.asarray(axes_value).reshape(-1)]
    fill = _given(inputs, 2)
    if fill is not None and ctx.dims_of(fill) not in ([], [1], [0]):
        ctx.fail(f"constant_value must be a scalar, got shape {ctx.dims_of(fill)}")
    fill_value = ctx.value_of(fill) if fill is not None else np.zeros(1, numpy_type)
    weights = {}
    if fill_value is not None:
        flat = np.asarray(fill_value).reshape(-1).astype(numpy_type)
        weights["value"] = flat[:1] if flat.size else np.zeros(1, numpy_type)
    else:
        params["value_input"] = True
        op_inputs.append(ctx.cast(fill, ctx.dtype_of(x)))  # type: ignore[arg-type]
    return ctx.op("pad", op_inputs, params, weights)
