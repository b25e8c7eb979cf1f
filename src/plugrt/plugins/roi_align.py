"""``ROIAlign_TRT`` version 1 (IPluginV2DynamicExt): ONNX RoiAlign as TensorRT's plugin computes it.

Inputs: ``X`` ``[N, C, H, W]``, ``rois`` ``[R, 4]`` (``x1, y1, x2, y2`` in input
coordinates), ``batch_indices`` ``[R]`` INT32. Output ``[R, C, output_height, output_width]``.

Each output bin averages (``mode`` 1) or takes the maximum (``mode`` 0) of a grid of
bilinear samples: ``sampling_ratio`` per side, or ``ceil(roi_size / output_size)``
when it is 0. ``coordinate_transformation_mode`` 1 (half_pixel) shifts the scaled
ROI by -0.5; 0 (output_half_pixel) does not and stretches ROIs to at least 1x1.
Samples beyond one pixel outside the image count as 0.

Averaging is separable, so it runs as two matrix products: the bilinear weights of
every row and column sample are summed into ``[R, out_h, H]`` and ``[R, out_w, W]``
matrices. The maximum is taken over gathered samples.

The same code runs on NumPy (the CPU) and CuPy (a CUDA engine). On the device no shape
may depend on the data (nothing is read back, so the work can be captured in a CUDA
graph), which changes three things there: with adaptive sampling each bin evaluates a
window of ``extent + 6`` samples along each axis that holds every sample inside the
image (the others count as 0 and are only accounted for), and takes its maximum one axis
at a time; averages multiply by the images through a one-hot batch matrix instead of
grouping ROIs per image; and a ``batch_indices`` entry outside ``[0, N)`` gives zeros
instead of raising.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..core.errors import ExecutionError, ShapeError
from ..core.types import DataType, TensorFormat
from ..interfaces.descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from ..shape.builder import DimsExprs, IExprBuilder
from ._base import FLOAT_TYPES, LibraryCreator, check_dim
from ._scaffold import DynamicLibraryPlugin
from ._schema import FLOAT, INT, FieldSpec, Schema, at_least, one_of

__all__ = ["ROIAlignPlugin", "ROIAlignPluginCreator", "roi_align"]

_MAGIC, _FORMAT = 0x524F4941, 1  # "ROIA"

#: Sample slots beyond the image extent that a device window adds (see _sample_window).
_WINDOW_SLACK = 6


class _Taps(NamedTuple):
    """Bilinear taps of the samples along one axis, per ``[R, bins, slots]`` sample slot."""

    low: Any  #: index of the lower tap (int64)
    high: Any  #: index of the upper tap
    w_low: Any  #: its weight (float32; 0 for samples more than a pixel outside)
    w_high: Any
    exists: Any  #: the slot holds one of the bin's samples (bool)
    grid: Any  #: samples per bin side, ``[R]`` (int64)
    skipped: Any  #: ``[R, bins]``: the bin has samples outside its slots (device windows; None elsewhere)


def _axis_samples(xp: Any, start: Any, size: Any, bins: int, ratio: int, extent: int) -> _Taps:
    """Bilinear taps along one axis for ``[R, bins, slots]`` samples."""
    grid = xp.full(size.shape, ratio) if ratio > 0 else xp.ceil(size / np.float32(bins)).astype(np.int64)
    grid = xp.maximum(grid, 0)
    step = (size / np.float32(bins))[:, None, None]
    offset = start[:, None, None] + xp.arange(bins, dtype=np.float32)[None, :, None] * step
    fraction = step / xp.maximum(grid, 1).astype(np.float32)[:, None, None]
    skipped = None
    if ratio > 0:
        sample = xp.arange(ratio)[None, None, :]
    elif xp is np:  # the host reads the largest grid to size the slots
        sample = np.arange(max(int(grid.max(initial=0)), 1))[None, None, :]
    else:
        sample, skipped = _sample_window(xp, offset, fraction, grid, extent)
    pos = offset + (sample.astype(np.float32) + np.float32(0.5)) * fraction
    exists = xp.broadcast_to(sample < grid[:, None, None], pos.shape)
    inside = (pos >= -1.0) & (pos <= extent)
    pos = xp.maximum(pos, 0)
    low = pos.astype(np.int64)
    if xp is not np:  # positions of NaN or huge ROIs (weight 0) must still index inside the image
        low = xp.clip(low, 0, extent - 1)
    clamp = low >= extent - 1
    low = xp.where(clamp, extent - 1, low)
    high = xp.where(clamp, low, low + 1)
    frac = xp.where(clamp, 0, pos - low).astype(np.float32)
    return _Taps(low, high, (1 - frac) * inside, frac * inside, exists, grid, skipped)


def _sample_window(xp: Any, offset: Any, fraction: Any, grid: Any, extent: int) -> tuple[Any, Any]:
    """Static sample slots for adaptive sampling on the device: ``[R, bins, extent + 6]`` sample
    numbers, starting a little before the first sample at or after -1, and which bins have
    samples outside them.

    With ``g = ceil(b)`` samples ``b / g`` apart (``b`` the bin size), at most ``extent + 2``
    lie in ``[-1, extent]``, and the first of them is at most 3 after the window's start;
    samples outside that interval weigh 0, so the window holds every sample that matters.
    """
    spacing = fraction.astype(np.float64)
    ahead = (-1.0 - offset.astype(np.float64)) / xp.where(spacing > 0, spacing, 1) - 0.5
    ahead = xp.minimum(xp.where(ahead > 0, ahead, 0), np.float64(2**52))  # NaN and inf included
    first = xp.maximum(xp.floor(ahead).astype(np.int64) - 2, 0)  # [R, bins, 1]
    slots = extent + _WINDOW_SLACK
    sample = first + xp.arange(slots)[None, None, :]
    total = grid[:, None, None]
    skipped = ((first > 0) & (total > 0)) | (total > first + slots)
    return sample, skipped[..., 0]


def roi_align(x: Any, rois: Any, batch_indices: Any, params: dict[str, Any], out: Any, xp: Any = np) -> None:
    """Compute ROIAlign into ``out`` ``[R, C, out_h, out_w]`` (float32 inside, any float I/O).

    ``xp`` is the arrays' module: NumPy, or CuPy for device arrays.
    """
    n, _, height, width = x.shape
    bins_h, bins_w = params["output_height"], params["output_width"]
    if rois.shape[0] == 0:
        return
    host = xp is np
    if host:
        bad = (batch_indices < 0) | (batch_indices >= n)
        if bad.any():
            raise ExecutionError(f"ROIAlign_TRT: batch_indices {batch_indices[bad][:8].tolist()} outside [0, {n})")
    elif n == 0 or height == 0 or width == 0:
        out.fill(0)
        return
    aligned = params["coordinate_transformation_mode"] == 1
    box = rois.astype(np.float32) * np.float32(params["spatial_scale"]) - np.float32(0.5 if aligned else 0.0)
    size_w, size_h = box[:, 2] - box[:, 0], box[:, 3] - box[:, 1]
    if not aligned:
        size_w, size_h = xp.maximum(size_w, 1), xp.maximum(size_h, 1)
    ratio = params["sampling_ratio"]
    ys = _axis_samples(xp, box[:, 1], size_h, bins_h, ratio, height)
    xs = _axis_samples(xp, box[:, 0], size_w, bins_w, ratio, width)
    data = x.astype(np.float32, copy=False)
    if params["mode"] == 1:
        count = (ys.grid * xs.grid).astype(np.float32)
        weights_y, weights_x = _weights(xp, ys, height), _weights(xp, xs, width)
        if host:
            for b in np.unique(batch_indices):
                sel = np.flatnonzero(batch_indices == b)
                rows = np.matmul(weights_y[sel][:, None], data[b][None])  # [r, C, bins_h, W]
                pooled = np.matmul(rows, weights_x[sel].transpose(0, 2, 1)[:, None])  # [r, C, bins_h, bins_w]
                scale = np.divide(1, count[sel], out=np.zeros_like(count[sel]), where=count[sel] > 0)
                out[sel] = pooled * scale[:, None, None, None]
        else:
            out[...] = _average_device(xp, data, batch_indices, weights_y, weights_x, count)
    elif host:
        out[...] = _max_pool(xp, data, batch_indices, ys, xs).transpose(0, 3, 1, 2)
    else:
        valid = (batch_indices >= 0) & (batch_indices < n)
        pool = _max_pool if ys.skipped is None else _max_pool_windows
        pooled = pool(xp, data, xp.clip(batch_indices, 0, n - 1), ys, xs).transpose(0, 3, 1, 2)
        out[...] = xp.where(valid[:, None, None, None], pooled, 0)


def _weights(xp: Any, taps: _Taps, extent: int) -> Any:
    """Sum the taps' weights into a ``[R, bins, extent]`` interpolation matrix."""
    rois, bins, _ = taps.low.shape
    base = (xp.arange(rois)[:, None, None] * bins + xp.arange(bins)[None, :, None]) * extent
    if xp is np:
        index = np.concatenate([(base + taps.low)[taps.exists], (base + taps.high)[taps.exists]])
        weight = np.concatenate([taps.w_low[taps.exists], taps.w_high[taps.exists]])
        matrix = np.bincount(index, weights=weight, minlength=rois * bins * extent)
    else:  # no boolean selection (its size is data): slots without a sample add 0
        matrix = xp.zeros(rois * bins * extent, np.float64)
        for tap, weight in ((taps.low, taps.w_low), (taps.high, taps.w_high)):
            index = xp.broadcast_to(base + tap, taps.exists.shape).reshape(-1)
            xp.add.at(matrix, index, xp.where(taps.exists, weight, 0).astype(np.float64).reshape(-1))
    return matrix.reshape(rois, bins, extent).astype(np.float32)


def _average_device(xp: Any, data: Any, batch: Any, weights_y: Any, weights_x: Any, count: Any) -> Any:
    """Average mode without grouping ROIs per image: ``[R, C, bins_h, bins_w]``.

    The row weights are spread over a one-hot batch axis (zeros for an index outside
    ``[0, N)``), so one matrix product against all images at once picks each ROI's own.
    Products go through :func:`~plugrt.ops.products.matmul_into` (capturable in
    a CUDA graph when PyTorch is installed, as for the engine's own matrix products).
    """
    from ..ops.products import matmul_into

    n, channels, height, width = data.shape
    rois, bins_h, _ = weights_y.shape
    bins_w = weights_x.shape[1]
    one_hot = (batch[:, None] == xp.arange(n)[None, :]).astype(np.float32)  # [R, N]
    weights = (weights_y[:, :, None, :] * one_hot[:, None, :, None]).reshape(rois * bins_h, n * height)
    images = data.transpose(0, 2, 1, 3).reshape(n * height, channels * width)
    rows = xp.empty((rois * bins_h, channels * width), np.float32)  # [R, bins_h, C, W]
    matmul_into(xp, weights, images, rows)
    pooled = xp.empty((rois, bins_h * channels, bins_w), np.float32)
    matmul_into(xp, rows.reshape(rois, bins_h * channels, width), weights_x.transpose(0, 2, 1), pooled)
    scale = xp.where(count > 0, 1 / xp.maximum(count, 1), 0).astype(np.float32)
    return pooled.reshape(rois, bins_h, channels, bins_w).transpose(0, 2, 1, 3) * scale[:, None, None, None]


def _max_pool(xp: Any, data: Any, batch: Any, ys: _Taps, xs: _Taps) -> Any:
    """Maximum over samples of the largest weighted tap (TensorRT's max mode): ``[R, bins_h, bins_w, C]``."""
    b = batch[:, None, None, None]
    best = xp.full((*ys.low.shape[:2], xs.low.shape[1], data.shape[1]), -np.inf, np.float32)
    for i in range(ys.low.shape[2]):  # one row of samples at a time; columns vectorised
        yl, yh = ys.low[:, :, i, None, None], ys.high[:, :, i, None, None]
        hy, ly = ys.w_low[:, :, i, None, None, None], ys.w_high[:, :, i, None, None, None]
        xl, xh = xs.low[:, None], xs.high[:, None]
        hx, lx = xs.w_low[:, None, ..., None], xs.w_high[:, None, ..., None]
        value = xp.maximum(
            xp.maximum(hy * hx * data[b, :, yl, xl], hy * lx * data[b, :, yl, xh]),
            xp.maximum(ly * hx * data[b, :, yh, xl], ly * lx * data[b, :, yh, xh]),
        )
        sampled = ys.exists[:, :, i, None, None, None] & xs.exists[:, None, ..., None]
        best = xp.maximum(best, xp.where(sampled, value, -np.inf).max(axis=3))
    return xp.where(best == -np.inf, 0, best)


def _max_pool_windows(xp: Any, data: Any, batch: Any, ys: _Taps, xs: _Taps) -> Any:
    """Max mode over device windows (adaptive sampling): ``[R, bins_h, bins_w, C]``, separably.

    The weights are non-negative, so the largest ``wy * wx * value`` over a bin's grid of samples
    is the largest over its row samples of ``wy`` times the largest over its column samples of
    ``wx * value``. One pass over the column slots for every image row, then one over the row
    slots: the work grows with the two windows' sum, not their product. The products round in
    another order than :func:`_max_pool`'s (by a float32 ulp at most).
    """
    rois, bins_w, _ = xs.low.shape
    columns = xp.full((rois, bins_w, data.shape[1], data.shape[2]), -np.inf, np.float32)  # [R, bins_w, C, H]
    image = batch[:, None]
    for i in range(xs.low.shape[2]):
        exists = xs.exists[:, :, i, None, None]
        for tap, weight in ((xs.low, xs.w_low), (xs.high, xs.w_high)):
            value = weight[:, :, i, None, None] * data[image, :, :, tap[:, :, i]]  # [R, bins_w, C, H]
            columns = xp.maximum(columns, xp.where(exists, value, -np.inf))
    best = xp.full((rois, ys.low.shape[1], bins_w, data.shape[1]), -np.inf, np.float32)
    roi = xp.arange(rois)[:, None]
    for i in range(ys.low.shape[2]):
        exists = ys.exists[:, :, i, None, None]
        for tap, weight in ((ys.low, ys.w_low), (ys.high, ys.w_high)):
            row = columns[roi, :, :, tap[:, :, i]]  # [R, bins_h, bins_w, C]
            value = weight[:, :, i, None, None] * row
            best = xp.maximum(best, xp.where(exists & (row > -np.inf), value, -np.inf))
    # samples outside the windows weigh 0: each is a value of 0 when the bin has a sample at all
    outside = ys.skipped[:, :, None] | xs.skipped[:, None, :]
    outside &= ((ys.grid > 0) & (xs.grid > 0))[:, None, None]
    best = xp.maximum(best, xp.where(outside, 0, -np.inf).astype(np.float32)[..., None])
    return xp.where(best == -np.inf, 0, best)


class ROIAlignPlugin(DynamicLibraryPlugin):
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

    def get_output_dimensions(
        self, output_index: int, inputs: list[DimsExprs], exprBuilder: IExprBuilder
    ) -> DimsExprs:
        ranks = [len(i) for i in inputs]
        if ranks != [4, 2, 1]:
            raise ShapeError(
                f"{self.NAME}: expects X [N, C, H, W], rois [R, 4], batch_indices [R]; got ranks {ranks}"
            )
        height, width = (exprBuilder.constant(self.params[k]) for k in ("output_height", "output_width"))
        return DimsExprs([inputs[1][0], inputs[0][1], height, width])

    def supports_format_combination(self, pos: int, in_out: list[PluginTensorDesc], num_inputs: int) -> bool:
        desc = in_out[pos]
        if desc.format != TensorFormat.LINEAR:
            return False
        if pos == 2:  # batch_indices
            return desc.type == DataType.INT32
        return desc.type in FLOAT_TYPES and desc.type == in_out[0].type

    def configure_plugin(self, inp: list[DynamicPluginTensorDesc], out: list[DynamicPluginTensorDesc]) -> None:
        check_dim(self.NAME, "rois dim 1", inp[1].desc.dims[1], 4)
        check_dim(self.NAME, "batch_indices length (number of rois)", inp[2].desc.dims[0], inp[1].desc.dims[0])

    def compute(self, xp: Any, inputs: list[Any], outputs: list[Any], scratch: dict[str, Any]) -> None:
        x, rois, batch_indices = inputs
        roi_align(x, rois, batch_indices, self.params, outputs[0], xp)


class ROIAlignPluginCreator(LibraryCreator):
    """Creator of ``ROIAlign_TRT`` version 1."""

    plugin_class = ROIAlignPlugin
