"""``ROIAlign_TRT`` version 1 (IPluginV2DynamicExt): ONNX RoiAlign as TensorRT's plugin computes it.

Inputs: ``X`` ``[N, C, H, W]``, ``rois`` ``[R, 4]`` (``x1, y1, x2, y2`` in input
coordinates), ``batch_indices`` ``[R]`` INT32. Output ``[R, C, output_height, output_width]``.

Each output bin averages (``mode`` 1) or takes the maximum (``mode`` 0) of a grid of
bilinear samples: ``sampling_ratio`` per side, or ``ceil(roi_size / output_size)``
when it is 0. ``coordinate_transformation_mode`` 1 (half_pixel) shifts the scaled
ROI by -0.5; 0 (output_half_pixel) does not and stretches ROIs to at least 1x1.
Samples beyond one pixel outside the image count as 0.

Averaging is separable, so it runs as two matrix products per image: the bilinear
weights of every row and column sample are summed into ``[R, out_h, H]`` and
``[R, out_w, W]`` matrices. The maximum is taken over gathered samples.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import plugrt as trt

from ._base import FLOAT_TYPES, LibraryCreator, SchemaSerialized, check_dim, host_buffers
from ._schema import FLOAT, INT, FieldSpec, Schema, at_least, one_of

__all__ = ["ROIAlignPlugin", "ROIAlignPluginCreator", "roi_align"]

_MAGIC, _FORMAT = 0x524F4941, 1  # "ROIA"


def _axis_samples(start: np.ndarray, size: np.ndarray, bins: int, ratio: int, extent: int) -> tuple[np.ndarray, ...]:
    """Bilinear taps along one axis: low/high index, their weights, per ``[R, bins, G]`` sample."""
    grid = np.full(size.shape, ratio) if ratio > 0 else np.ceil(size / np.float32(bins)).astype(np.int64)
    grid = np.maximum(grid, 0)
    most = max(int(grid.max(initial=0)), 1)
    step = (size / np.float32(bins))[:, None, None]
    offset = start[:, None, None] + np.arange(bins, dtype=np.float32)[None, :, None] * step
    fraction = step / np.maximum(grid, 1).astype(np.float32)[:, None, None]
    pos = offset + (np.arange(most, dtype=np.float32)[None, None, :] + np.float32(0.5)) * fraction
    exists = np.broadcast_to(np.arange(most)[None, None, :] < grid[:, None, None], pos.shape)
    inside = (pos >= -1.0) & (pos <= extent)
    pos = np.maximum(pos, 0)
    low = pos.astype(np.int64)
    clamp = low >= extent - 1
    low = np.where(clamp, extent - 1, low)
    high = np.where(clamp, low, low + 1)
    frac = np.where(clamp, 0, pos - low).astype(np.float32)
    return low, high, (1 - frac) * inside, frac * inside, exists, grid


def roi_align(
    x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, params: dict[str, Any], out: np.ndarray
) -> None:
    """Compute ROIAlign into ``out`` ``[R, C, out_h, out_w]`` (float32 inside, any float I/O)."""
    n, _, height, width = x.shape
    bins_h, bins_w = params["output_height"], params["output_width"]
    if rois.shape[0] == 0:
        return
    bad = (batch_indices < 0) | (batch_indices >= n)
    if bad.any():
        raise trt.ExecutionError(f"ROIAlign_TRT: batch_indices {batch_indices[bad][:8].tolist()} outside [0, {n})")
    aligned = params["coordinate_transformation_mode"] == 1
    box = rois.astype(np.float32) * np.float32(params["spatial_scale"]) - np.float32(0.5 if aligned else 0.0)
    size_w, size_h = box[:, 2] - box[:, 0], box[:, 3] - box[:, 1]
    if not aligned:
        size_w, size_h = np.maximum(size_w, 1), np.maximum(size_h, 1)
    ratio = params["sampling_ratio"]
    ys = _axis_samples(box[:, 1], size_h, bins_h, ratio, height)
    xs = _axis_samples(box[:, 0], size_w, bins_w, ratio, width)
    data = x.astype(np.float32, copy=False)
    if params["mode"] == 1:
        count = (ys[5] * xs[5]).astype(np.float32)
        weights_y, weights_x = _weights(ys, height), _weights(xs, width)
        for b in np.unique(batch_indices):
            sel = np.flatnonzero(batch_indices == b)
            rows = np.matmul(weights_y[sel][:, None], data[b][None])  # [r, C, bins_h, W]
            pooled = np.matmul(rows, weights_x[sel].transpose(0, 2, 1)[:, None])  # [r, C, bins_h, bins_w]
            scale = np.divide(1, count[sel], out=np.zeros_like(count[sel]), where=count[sel] > 0)
            out[sel] = pooled * scale[:, None, None, None]
    else:
        out[...] = _max_pool(data, batch_indices, ys, xs).transpose(0, 3, 1, 2)


def _weights(taps: tuple[np.ndarray, ...], extent: int) -> np.ndarray:
    """Sum the taps' weights into a ``[R, bins, extent]`` interpolation matrix."""
    low, high, w_low, w_high, exists, _ = taps
    rois, bins, _ = low.shape
    base = (np.arange(rois)[:, None, None] * bins + np.arange(bins)[None, :, None]) * extent
    index = np.concatenate([(base + low)[exists], (base + high)[exists]])
    weight = np.concatenate([w_low[exists], w_high[exists]])
    matrix = np.bincount(index, weights=weight, minlength=rois * bins * extent)
    return matrix.reshape(rois, bins, extent).astype(np.float32)


def _max_pool(
    data: np.ndarray, batch: np.ndarray, ys: tuple[np.ndarray, ...], xs: tuple[np.ndarray, ...]
) -> np.ndarray:
    """Maximum over samples of the largest weighted tap (TensorRT's max mode): ``[R, bins_h, bins_w, C]``."""
    y_low, y_high, wy_low, wy_high, y_exists, _ = ys
    x_low, x_high, wx_low, wx_high, x_exists, _ = xs
    b = batch[:, None, None, None]
    best = np.full((*y_low.shape[:2], x_low.shape[1], data.shape[1]), -np.inf, np.float32)
    for i in range(y_low.shape[2]):  # one row of samples at a time; columns vectorised
        yl, yh = y_low[:, :, i, None, None], y_high[:, :, i, None, None]
        hy, ly = wy_low[:, :, i, None, None, None], wy_high[:, :, i, None, None, None]
        xl, xh = x_low[:, None], x_high[:, None]
        hx, lx = wx_low[:, None, ..., None], wx_high[:, None, ..., None]
        value = np.maximum.reduce(
            [
                hy * hx * data[b, :, yl, xl],
                hy * lx * data[b, :, yl, xh],
                ly * hx * data[b, :, yh, xl],
                ly * lx * data[b, :, yh, xh],
            ]
        )
        sampled = y_exists[:, :, i, None, None, None] & x_exists[:, None, ..., None]
        best = np.maximum(best, np.where(sampled, value, -np.inf).max(axis=3))
    return np.where(np.isneginf(best), 0, best)


class ROIAlignPlugin(SchemaSerialized, trt.IPluginV2DynamicExt):
    """Region-of-interest align: a fixed-size feature map per ROI."""

    NAME, VERSION = "ROIAlign_TRT", "1"
    MAGIC, FORMAT = _MAGIC, _FORMAT
    SCHEMA = Schema(
        NAME,
        (
            FieldSpec("coordinate_transformation_mode", INT, 1, one_of(0, 1), doc="1 half_pixel, 0 output_half_pixel"),
            FieldSpec("mode", INT, 1, one_of(0, 1), doc="1 average, 0 maximum"),
            FieldSpec("output_height", INT, 1, at_least(1)),
            FieldSpec("output_width", INT, 1, at_least(1)),
            FieldSpec("sampling_ratio", INT, 0, at_least(0), doc="samples per bin side; 0 adaptive"),
            FieldSpec("spatial_scale", FLOAT, 1.0, lambda v: None if v > 0 else "a positive value"),
        ),
    )

    def __init__(self, params: dict[str, Any]) -> None:
        trt.IPluginV2DynamicExt.__init__(self)
        self.num_outputs = 1
        self.plugin_type, self.plugin_version, self.plugin_namespace = self.NAME, self.VERSION, ""
        self.params = dict(params)

    def get_output_datatype(self, index: int, input_types: list[trt.DataType]) -> trt.DataType:
        return input_types[0]

    def get_output_dimensions(
        self, output_index: int, inputs: list[trt.DimsExprs], exprBuilder: trt.IExprBuilder
    ) -> trt.DimsExprs:
        ranks = [len(i) for i in inputs]
        if ranks != [4, 2, 1]:
            raise trt.ShapeError(
                f"{self.NAME}: expects X [N, C, H, W], rois [R, 4], batch_indices [R]; got ranks {ranks}"
            )
        height, width = (exprBuilder.constant(self.params[k]) for k in ("output_height", "output_width"))
        return trt.DimsExprs([inputs[1][0], inputs[0][1], height, width])

    def supports_format_combination(self, pos: int, in_out: list[trt.PluginTensorDesc], num_inputs: int) -> bool:
        desc = in_out[pos]
        if desc.format != trt.TensorFormat.LINEAR:
            return False
        if pos == 2:  # batch_indices
            return desc.type == trt.int32
        return desc.type in FLOAT_TYPES and desc.type == in_out[0].type

    def configure_plugin(self, inp: list[trt.DynamicPluginTensorDesc], out: list[trt.DynamicPluginTensorDesc]) -> None:
        check_dim(self.NAME, "rois dim 1", inp[1].desc.dims[1], 4)
        check_dim(self.NAME, "batch_indices length (number of rois)", inp[2].desc.dims[0], inp[1].desc.dims[0])

    def enqueue(
        self,
        input_desc: list[trt.PluginTensorDesc],
        output_desc: list[trt.PluginTensorDesc],
        inputs: list[int],
        outputs: list[int],
        workspace: int,
        stream: int,
    ) -> int:
        with host_buffers(inputs, input_desc, outputs, output_desc, stream) as ((x, rois, batch_indices), (y,)):
            roi_align(x, rois, batch_indices, self.params, y)
        return 0


class ROIAlignPluginCreator(LibraryCreator):
    """Creator of ``ROIAlign_TRT`` version 1."""

    plugin_class = ROIAlignPlugin
