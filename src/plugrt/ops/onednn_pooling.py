"""2-D MAX and AVERAGE pooling, windowed and global, on the CPU as oneDNN's primitive called directly (:mod:`.onednn`).

A pooling layer of a channels-last run (tactic ``torch-nhwc``) or of PyTorch's linear tactic takes this kernel first
where the library is there (its buffers as oneDNN memories: :mod:`.onednn_buffers`): the primitive is made at bind,
a run is one execution. PyTorch's pooling costs ~20 us a call above its kernel (MobileNetV2's and SqueezeNet's
pools, the CRNN's three: 59 against onnxruntime's 11 us), and takes neither padding that differs between an axis's
ends (TensorFlow's "same", Inception's stride-2 pools) nor AVERAGE's ceil mode; oneDNN takes both (its end padding
is the one that gives the layer's output size; ONNX's AVERAGE with ``count_include_pad`` counts no tap past the end
padding, so there a ceil-mode window that reaches past it is declined). A global pooling is the primitive with a
window of the whole map (MobileNetV2's last layer: without it, PyTorch's channels-last kernel, the one layer that
imported torch).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.types import TensorFormat
from . import onednn
from .onednn_buffers import AXES, FIRST_STAGE, bound_run, fit, staged
from .torch_cpu import Kernel

if TYPE_CHECKING:
    from .pooling import PoolingOperator

__all__ = ["global_pooling_onednn", "pooling_onednn"]

#: ``dnnl_pooling_max``, ``dnnl_pooling_avg_include_padding``, ``dnnl_pooling_avg_exclude_padding``
_MAX, _AVERAGE_INCLUDING, _AVERAGE_EXCLUDING = 0x1FF, 0x2FF, 0x3FF


def end_padding(op: PoolingOperator, spatial: Sequence[int]) -> list[int] | None:
    """The end padding oneDNN is given for an input of ``spatial`` size: the layer's where it gives the layer's output
    size (oneDNN rounds the window count down), else the one that does (ceil mode); None where that would count
    padding ONNX does not (AVERAGE with ``count_include_pad``)."""
    w = op.window
    sizes, begins, ends = w.resolve(spatial)
    right = []
    for a in range(w.rank):
        if (spatial[a] + begins[a] + ends[a] - w.extent(a)) // w.strides[a] + 1 == sizes[a]:
            right.append(ends[a])
            continue
        needed = (sizes[a] - 1) * w.strides[a] + w.extent(a) - spatial[a] - begins[a]
        if needed < 0 or (op.mode == "AVERAGE" and op.count_include_pad and needed > ends[a]):
            return None
        right.append(needed)
    return right


def pooling_onednn(
    op: PoolingOperator, x: np.ndarray, out: np.ndarray, formats: Sequence[TensorFormat]
) -> Kernel | None:
    """2-D MAX or AVERAGE pooling (no indices; AVERAGE without dilation) as oneDNN's primitive on these buffers,
    ``formats`` the input's and the output's, each HWC or LINEAR (an HWC input read from its hand-over slot where a
    PyTorch kernel left a tensor there; a LINEAR one of several channels staged channels-last). None where it does
    not apply (see :func:`end_padding`), the library is absent, or oneDNN offers only its reference kernel."""
    lib = onednn.library()
    w = op.window
    if lib is None or w.rank != 2 or op.mode not in ("MAX", "AVERAGE") or op.with_indices:
        return None
    if (op.mode == "AVERAGE" and any(d != 1 for d in w.dilations)) or not fit([x, out], formats):
        return None
    shape = [int(x.shape[a]) for a in AXES[formats[0]]]
    sizes, begins, _ = w.resolve(shape[2:])
    out_shape = [int(out.shape[a]) for a in AXES[formats[-1]]]
    right = end_padding(op, shape[2:])
    if right is None or out_shape != [*shape[:2], *sizes]:
        return None
    algorithm = _MAX if op.mode == "MAX" else _AVERAGE_INCLUDING if op.count_include_pad else _AVERAGE_EXCLUDING
    window = (w.strides, w.kernel, [d - 1 for d in w.dilations], begins, right)
    return _pooling(lib, algorithm, x, out, formats, shape, out_shape, window)


def global_pooling_onednn(mode: str, x: np.ndarray, out: np.ndarray, formats: Sequence[TensorFormat]) -> Kernel | None:
    """Global MAX or AVERAGE pooling (``mode``) as oneDNN's pooling primitive with a window of the whole map;
    ``formats`` the input's (HWC or LINEAR) and the output's (LINEAR: one pixel, the same bytes as channels-last); a LINEAR input of
    one or three or more spatial axes is told as one ``S x 1`` map. None where it does not apply (other modes, no
    spatial axis, empty maps, the library absent)."""
    lib = onednn.library()
    if lib is None or mode not in ("MAX", "AVERAGE") or x.ndim < 3:
        return None
    if x.ndim != 4:  # [N, C, *S] stored LINEAR: the same bytes as [N, C, S, 1]
        if any(f != TensorFormat.LINEAR for f in formats) or not (x.flags.c_contiguous and out.flags.c_contiguous):
            return None
        x, out = x.reshape(*x.shape[:2], -1, 1), out.reshape(*out.shape[:2], 1, 1)
    if not fit([x, out], formats):
        return None
    shape = [int(x.shape[a]) for a in AXES[formats[0]]]
    out_shape = [int(out.shape[a]) for a in AXES[formats[-1]]]
    if out_shape != [*shape[:2], 1, 1]:
        return None
    window = ([1, 1], shape[2:], [0, 0], [0, 0], [0, 0])
    return _pooling(lib, _MAX if mode == "MAX" else _AVERAGE_EXCLUDING, x, out, formats, shape, out_shape, window)


def _pooling(
    lib: Any,
    algorithm: int,
    x: np.ndarray,
    out: np.ndarray,
    formats: Sequence[TensorFormat],
    shape: list[int],
    out_shape: list[int],
    window: tuple[Sequence[int], ...],
) -> Kernel | None:
    """The pooling primitive of ``algorithm`` from ``x`` (logical ``shape``) into ``out`` (``out_shape``) with the
    ``window``'s strides, kernel, dilations (oneDNN's: 0 is none), padding at the beginnings and at the ends."""
    flops = float(out.size * math.prod(window[1]))
    try:
        source, before = staged(lib, x, formats[0], shape, True, FIRST_STAGE)
        target, after = staged(lib, out, formats[-1], out_shape, False, FIRST_STAGE + 1)
        geometry = [onednn.dims(v) for v in window]

        def make(pd: Any, attr: Any) -> int:
            status: int = lib.dll.dnnl_pooling_forward_primitive_desc_create(
                pd, lib.engine, onednn.FORWARD_INFERENCE, algorithm, source.desc, target.desc, *geometry, attr
            )
            return status

    except onednn.OneDnnError:
        return None
    args = [(onednn.ARG_SRC, source), (onednn.ARG_DST, target)]
    return bound_run(lib, make, flops, args, out, formats[-1], [(x, formats[0], source, before)], [after])
