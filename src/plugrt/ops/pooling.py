"""Pooling over sliding windows (ONNX MaxPool, AveragePool, LpPool) and over whole spatial extents.

Windows are products of per-axis windows, and max and sum are separable, so
the kernel pools one spatial axis at a time (a 3x3 window costs 3 + 3 strided
operations, not 9). Each pass loops over that axis's taps, not over outputs:
a tap combines one strided slice into the outputs that read inside the input
(:func:`~plugrt.ops.spatial.tap_slices`), so padding is never materialised.
AVERAGE divides by the number of taps inside the input (``count_include_pad``
false) or inside the padded input (true; taps past the end padding, possible in
ceil mode, never count); that divisor is separable and built in ``prepare``.
MAX can also give the flattened input index of each maximum (the first one in
window order), row-major or, with ``storage_order`` 1, column-major over the
spatial axes. With PyTorch installed, ``max_pool{1,2,3}d`` / ``avg_pool{1,2,3}d`` (MAX and AVERAGE windows
without ceil mode that pad both ends of an axis alike, as torch does) and a mean or max over the spatial
axes (global pooling) are a second tactic, timed per layer at build (:mod:`plugrt.ops.torch_cpu`).

2-D MAX pooling (no indices) also offers ``torch.max_pool2d`` on channels-last tensors (tactic
``torch-nhwc``): 0.27 ms for ResNet-18's 3x3 stride-2 pooling of 64 x 112 x 112, against 0.64 ms
for the NumPy passes and 4.8 ms for torch's on NCHW; between channels-last convolutions it keeps
their run unbroken.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType, TensorFormat
from ..shape import constant
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import FLOAT_TYPES, expect_inputs, label
from .onednn_pooling import end_padding, global_pooling_onednn, pooling_onednn
from .spatial import Window, kernel_taps, tap_slices
from .torch_channels_last import global_pooling_channels_last, window_pooling
from .torch_cpu import CHANNELS_LAST_TACTIC, Kernel, TorchOperator, direct_runs, torch_module, view

__all__ = ["GlobalPoolingOperator", "PoolingOperator"]

_MODES = ("MAX", "AVERAGE", "LP")
_MAX_TYPES = FLOAT_TYPES | {DataType.INT8, DataType.UINT8}


def _check_mode(op: Operator, mode: str) -> str:
    if mode not in _MODES:
        raise NetworkError(f"{op.kind}: unknown mode {mode!r}; valid: {', '.join(_MODES)}")
    return mode


def _check_type(op: Operator, mode: str, dtype: DataType) -> None:
    allowed = _MAX_TYPES if mode == "MAX" else FLOAT_TYPES
    if dtype not in allowed:
        valid = ", ".join(sorted(t.name for t in allowed))
        raise TypeMismatchError(f"{label(op)}: {mode} pooling takes {valid}, got {dtype.name}")


def _torch_pads(window: Window, begins: Sequence[int], ends: Sequence[int]) -> bool:
    """Whether torch's pooling pads as the window does: the same at both ends, at most half the kernel."""
    return list(begins) == list(ends) and all(2 * b <= window.kernel[a] for a, b in enumerate(begins))


def _lowest(dtype: np.dtype) -> Any:
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


@register_operator
class PoolingOperator(TorchOperator):
    """params: ``mode`` (MAX, AVERAGE, LP), the window (``kernel_shape``, ``strides``,
    ``dilations``, ``pads``, ``auto_pad``, ``ceil_mode``), ``count_include_pad`` (AVERAGE),
    ``p`` (LP), ``with_indices`` and ``storage_order`` (MAX: a second, INT64 output)."""

    kind = "pooling"
    channels_last = True

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self.mode = _check_mode(self, str(self.param("mode")))
        self.window = Window.from_params(self.params, f"pooling {self.name!r}")
        self.count_include_pad = bool(self.params.get("count_include_pad", False))
        self.p = float(self.params.get("p", 2))
        self.with_indices = bool(self.params.get("with_indices", False))
        self.storage_order = int(self.params.get("storage_order", 0))
        if self.with_indices and self.mode != "MAX":
            raise NetworkError(f"pooling: only MAX pooling gives indices, not {self.mode}")
        self._shapes: tuple[tuple[int, ...], tuple[int, ...]] | None = None
        self._taps: list[tuple[tuple[Any, ...], tuple[Any, ...], Any]] = []
        #: each tap's input indices (the third items of ``_taps``), one list per ``prepare``
        self._tap_indices: list[np.ndarray] = []
        self._passes: list[_Pass] = []
        self._count: np.ndarray = np.ones(())
        self._base: np.ndarray = np.zeros((), dtype=np.int64)

    @property
    def num_outputs(self) -> int:
        return 2 if self.with_indices else 1

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        _check_type(self, self.mode, input_types[0])
        return [input_types[0], DataType.INT64][: self.num_outputs]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 1)
        x, rank = input_shapes[0], self.window.rank
        if len(x) != rank + 2:
            raise ShapeError(
                f"{label(self)}: input has rank {len(x)}; {rank}-D pooling takes [N, C, {rank} spatial dims]"
            )
        shape = [x[0], x[1], *self.window.output_dims(x[2:])]
        return [shape] * self.num_outputs

    # --- kernel -------------------------------------------------------------------------
    def channels_last_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """2-D MAX pooling, and AVERAGE pooling without dilation or ceil mode, of ``[N, C, H, W]`` whose padding
        torch takes (see :func:`_torch_pads`); on the CPU with oneDNN's library, any padding and AVERAGE's ceil mode
        too where :func:`~.onednn_pooling.end_padding` takes them (``ops/onednn_pooling.py``)."""
        if self.mode not in ("MAX", "AVERAGE") or self.window.rank != 2 or len(shapes[0]) != 4:
            return False
        if self.mode == "AVERAGE" and any(d != 1 for d in self.window.dilations):
            return False
        if direct_runs(self.xp) and self.direct_supports(types, shapes, constant):
            return True
        if self.mode == "AVERAGE" and self.window.ceil_mode:
            return False
        _, begins, ends = self.window.resolve(shapes[0][2:])
        return _torch_pads(self.window, begins, ends)

    def channels_last_positions(self, inputs: int, outputs: int) -> list[int]:
        """The input and the output."""
        return [0, inputs]

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        x_shape, out_shape = tuple(input_shapes[0]), tuple(output_shapes[0])
        if self._shapes == (x_shape, out_shape):
            return
        self._shapes = None
        spatial, out_spatial = x_shape[2:], out_shape[2:]
        _, begins, ends = self.window.resolve(spatial)
        self._count = self._divisor(spatial, out_spatial, begins, ends) if self.mode == "AVERAGE" else np.ones(())
        self._passes, self._taps = [], []
        if self.with_indices:
            self._prepare_taps(x_shape, out_spatial, begins)
        else:
            self._prepare_passes(x_shape, out_spatial, begins)
        self._shapes = (x_shape, out_shape)

    def _prepare_passes(self, x_shape: tuple[int, ...], out_spatial: Sequence[int], begins: Sequence[int]) -> None:
        """One pass per spatial axis (last first): the window is a product of per-axis windows."""
        w = self.window
        current = list(x_shape)
        work = np.float32 if self.mode != "MAX" else None
        for a in reversed(range(w.rank)):
            axis, size, out = a + 2, current[a + 2], out_spatial[a]
            lead = (slice(None),) * axis
            taps: list[tuple[Any, Any]] = []
            full: int | None = None
            for k in range(w.kernel[a]):
                pair = tap_slices(size, out, w.strides[a], k * w.dilations[a] - begins[a])
                if pair is None:
                    continue
                if full is None and pair[0] == slice(0, out):
                    full = len(taps)
                taps.append(((*lead, pair[0]), (*lead, pair[1])))
            if full is not None:  # start from a tap that covers every output: no fill needed
                taps.insert(0, taps.pop(full))
            current[axis] = out
            self._passes.append(_Pass(tuple(current), taps, full is not None, work))

    def _prepare_taps(self, x_shape: tuple[int, ...], out_spatial: Sequence[int], begins: Sequence[int]) -> None:
        """Whole-window taps, for MAX with indices (the winning tap must be known)."""
        w = self.window
        spatial = x_shape[2:]
        for _, pairs in kernel_taps(w, spatial, out_spatial, begins):
            dst = (slice(None), slice(None), *(p[0] for p in pairs))
            src = (slice(None), slice(None), *(p[1] for p in pairs))
            self._taps.append((dst, src, self._tap_index(spatial, [p[1] for p in pairs])))
        self._tap_indices = [index for _, _, index in self._taps]
        channels = x_shape[0] * x_shape[1]
        volume = int(np.prod(spatial, dtype=np.int64))
        self._base = (np.arange(channels, dtype=np.int64) * volume).reshape(x_shape[:2] + (1,) * w.rank)

    def _tap_index(self, spatial: Sequence[int], sources: Sequence[slice]) -> np.ndarray:
        """Flattened spatial input index of each output this tap reads (row- or column-major)."""
        grids = np.meshgrid(*(np.arange(s.start, s.stop, s.step) for s in sources), indexing="ij")
        order = range(len(spatial)) if self.storage_order == 0 else reversed(range(len(spatial)))
        index = np.zeros(grids[0].shape, dtype=np.int64)
        for axis in order:
            index = index * spatial[axis] + grids[axis]
        return index

    def _divisor(self, spatial: Sequence[int], out: Sequence[int], begins: Sequence[int], ends: Sequence[int]) -> Any:
        w = self.window
        count: Any = np.ones((), dtype=np.float32)
        for a in range(w.rank):
            low, high = (-begins[a], spatial[a] + ends[a]) if self.count_include_pad else (0, spatial[a])
            starts = np.arange(out[a]) * w.strides[a] - begins[a]
            taps = starts[:, None] + np.arange(w.kernel[a]) * w.dilations[a]
            per_axis = ((taps >= low) & (taps < high)).sum(axis=1).astype(np.float32)
            count = np.multiply.outer(count, np.maximum(per_axis, 1))
        return count

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        if self._shapes is None or self._shapes != (x.shape, out.shape):
            self.prepare([x.shape], [out.shape])
        if self.with_indices:
            self._run_with_indices(x, out, outputs[1], xp)
            return
        source = x
        if self.mode == "LP":
            powered = self.scratch("powered", x.shape, np.float32, xp)
            xp.abs(x, out=powered)
            if self.p == 2.0:
                xp.multiply(powered, powered, out=powered)
            elif self.p != 1.0:
                xp.power(powered, self.p, out=powered)
            source = powered
        combine = xp.maximum if self.mode == "MAX" else xp.add
        for number, step in enumerate(self._passes):
            last = number == len(self._passes) - 1
            if last and (self.mode == "MAX" or out.dtype == np.float32):
                target = out
            else:
                target = self.scratch(("pass", number), step.shape, np.dtype(step.work or source.dtype), xp)
            step.run(source, target, combine, _lowest(target.dtype) if self.mode == "MAX" else 0, xp)
            source = target
        if self.mode == "AVERAGE":
            xp.divide(source, self.on_device("count", self._count, xp), out=source)
        elif self.mode == "LP":
            if self.p == 2.0:
                xp.sqrt(source, out=source)
            elif self.p != 1.0:
                xp.power(source, 1.0 / self.p, out=source)
        if source is not out:
            xp.copyto(out, source, casting="unsafe")

    def torch_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """MAX (any dilation) and AVERAGE (none) windows of 1-3 axes, no indices, no ceil mode, on FLOAT (HALF on a
        GPU) inputs; the padding is checked per shape in :meth:`torch_kernel`."""
        if self.mode not in ("MAX", "AVERAGE") or self.with_indices:
            return False
        # ceil mode: 2-D MAX through the channels-last kernel (the NCHW one declines)
        if self.window.ceil_mode and not (self.mode == "MAX" and self.window.rank == 2):
            return False
        if self.mode == "AVERAGE" and any(d != 1 for d in self.window.dilations):
            return False
        return self.window.rank <= 3 and super().torch_supports(types, shapes, constant)

    def direct_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """2-D MAX and AVERAGE (no dilation) windows without indices whose padding and ceil mode
        :func:`~.onednn_pooling.end_padding` takes (``ops/onednn_pooling.py``)."""
        if self.mode not in ("MAX", "AVERAGE") or self.with_indices or self.window.rank != 2 or len(shapes[0]) != 4:
            return False
        if self.mode == "AVERAGE" and any(d != 1 for d in self.window.dilations):
            return False
        return end_padding(self, shapes[0][2:]) is not None

    def direct_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        """oneDNN's pooling primitive called directly (``ops/onednn_pooling.py``)."""
        return pooling_onednn(self, inputs[0], outputs[0], self.formats)

    def torch_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        if self.tactic == CHANNELS_LAST_TACTIC:  # on a device (untimed there) staged channels-last only in a run
            staged = self.xp is np or TensorFormat.HWC in self.formats
            return window_pooling(self, inputs[0], outputs[0], self.formats, staged)
        if self.window.ceil_mode or any(f != TensorFormat.LINEAR for f in self.formats):
            return None
        torch, w = torch_module(), self.window
        x, out = inputs[0], outputs[0]
        outs, begins, ends = w.resolve(x.shape[2:])
        # torch pads both ends alike, by at most half the window (the window's extent, for MAX)
        if begins != ends or tuple(outs) != tuple(out.shape[2:]) or x.size == 0 or out.size == 0:
            return None
        if any(2 * b > (w.extent(a) if self.mode == "MAX" else w.kernel[a]) for a, b in enumerate(begins)):
            return None
        xt, ot = view(x), view(out)
        window = (list(w.kernel), list(w.strides), list(begins))
        if self.mode == "AVERAGE":
            include = self.count_include_pad
            average = getattr(torch._C._nn, f"avg_pool{w.rank}d", None)  # 2-D and 3-D write into out=
            if average is None:
                one_axis = torch.nn.functional.avg_pool1d
                return lambda: ot.copy_(one_axis(xt, *window, False, include))  # type: ignore[no-any-return]
            return lambda: average(xt, *window, False, include, out=ot)  # type: ignore[no-any-return]
        pool = getattr(torch.nn.functional, f"max_pool{w.rank}d")
        dilations = list(w.dilations)
        return lambda: ot.copy_(pool(xt, *window, dilations))  # type: ignore[no-any-return]

    def _run_with_indices(self, x: Any, out: Any, indices: Any, xp: Any) -> None:
        out.fill(_lowest(out.dtype))
        indices.fill(-1)
        tap_indices = self.on_device("taps", self._tap_indices, xp)
        for (dst, src, _), index in zip(self._taps, tap_indices):
            region, tap = out[dst], x[src]
            better = xp.greater(tap, region)
            xp.copyto(region, tap, where=better)
            xp.copyto(indices[dst], index, where=better)
        valid = indices >= 0
        base = self.on_device("base", self._base, xp)
        if xp is np:
            np.add(indices, base, out=indices, where=valid)
        else:  # CuPy's ufuncs take no where=
            xp.copyto(indices, indices + base, where=valid)


class _Pass:
    """Pooling along one axis: (target, source) index pairs per tap, the first covering all outputs when ``full``."""

    def __init__(self, shape: tuple[int, ...], taps: list[tuple[Any, Any]], full: bool, work: Any) -> None:
        self.shape, self.taps, self.full, self.work = shape, taps, full, work

    def run(self, source: Any, target: Any, combine: Any, initial: Any, xp: Any) -> None:
        taps = self.taps
        if self.full:
            dst, src = taps[0]
            xp.copyto(target[dst], source[src], casting="unsafe")
            taps = taps[1:]
        else:
            target.fill(initial)
        for dst, src in taps:
            region = target[dst]
            combine(region, source[src], out=region)


@register_operator
class GlobalPoolingOperator(TorchOperator):
    """Pooling over all spatial axes: ``[N, C, *S] -> [N, C, 1, ...]``; params: ``mode``, ``p`` (LP)."""

    kind = "global_pooling"
    channels_last = True

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self.mode = _check_mode(self, str(self.param("mode")))
        self.p = float(self.params.get("p", 2))

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        _check_type(self, self.mode, input_types[0])
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 1)
        x = input_shapes[0]
        if len(x) < 3:
            raise ShapeError(f"{label(self)}: global pooling takes [N, C, spatial...], got rank {len(x)}")
        return [[x[0], x[1]] + [constant(1)] * (len(x) - 2)]

    def torch_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """MAX and AVERAGE over the spatial axes of FLOAT (HALF on a GPU) inputs."""
        return self.mode in ("MAX", "AVERAGE") and super().torch_supports(types, shapes, constant)

    def channels_last_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """MAX and AVERAGE over the two spatial axes of ``[N, C, H, W]``: the end of a channels-last run (a
        network's pooled features) reads the last convolution's output as it was written."""
        return len(shapes[0]) == 4

    def channels_last_positions(self, inputs: int, outputs: int) -> list[int]:
        """The input (the output ``[N, C, 1, 1]`` is the same bytes in either layout)."""
        return [0]

    def direct_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """MAX and AVERAGE over the spatial axes of ``[N, C, *S]`` (``ops/onednn_pooling.py``)."""
        return self.mode in ("MAX", "AVERAGE") and len(shapes[0]) >= 3

    def direct_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        """oneDNN's pooling primitive over the whole map, called directly (``ops/onednn_pooling.py``)."""
        return global_pooling_onednn(self.mode, inputs[0], outputs[0], self.formats)

    def torch_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        torch = torch_module()
        x, out = inputs[0], outputs[0]
        if x.size == 0:
            return None
        reduce = torch.amax if self.mode == "MAX" else torch.mean
        if self.tactic == CHANNELS_LAST_TACTIC:
            return global_pooling_channels_last(reduce, x, out, self.formats[0])
        flat = view(x).view(x.shape[0], x.shape[1], -1)
        target = view(out).view(x.shape[0], x.shape[1])
        return lambda: reduce(flat, 2, out=target)  # type: ignore[no-any-return]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        flat = x.reshape(x.shape[0], x.shape[1], -1)
        target = out.reshape(x.shape[0], x.shape[1])
        if self.mode == "MAX":
            xp.max(flat, axis=2, out=target)
        elif self.mode == "AVERAGE":
            target[...] = xp.mean(flat, axis=2, dtype=np.float32)
        else:
            magnitude = xp.abs(flat, dtype=np.float32)
            target[...] = xp.power(xp.sum(xp.power(magnitude, self.p), axis=2), 1.0 / self.p)
