"""2-D transposed convolutions on the CPU as oneDNN's deconvolution primitive called directly (:mod:`.onednn`).

The transposed convolution's second tactic takes this first where the library is there (PP-OCR det's 2 x 2
upsampling layers; without it they imported torch for ``conv_transpose2d``). oneDNN's deconvolution computes
``dst(n, m, oh, ow) = bias(m) + sum src(n, c, ih, iw) weights(m, c, kh, kw)`` at ``oh = ih * stride + kh * dilation
- pad``: ONNX's ConvTranspose with the kernel's two channel axes swapped, reordered once into the layout oneDNN picks.
LINEAR tensors go through channels-last buffers of the layer's (:func:`~.onednn_buffers.staged`), as the
convolutions' do. The padding at an axis's end is what gives the layer's output size (ONNX's output padding and
``output_shape`` included).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.types import TensorFormat
from . import onednn
from .onednn_buffers import AXES, FIRST_STAGE, dense_strides, fit, launcher, staged, thread_counts
from .torch_cpu import Kernel

if TYPE_CHECKING:
    from .deconv import DeconvolutionOperator

__all__ = ["deconvolution_onednn"]


def _weights(op: DeconvolutionOperator, channels: int) -> np.ndarray:
    """The packed kernel (``[group, M / group * prod(k), C / group]``) as oneDNN's ``[group, M / group, C / group,
    *k]``, dense."""
    group, taps = op.group, tuple(op.window.kernel)
    packed = np.asarray(op.weights["kernel"], np.float32).reshape(group, op.maps // group, *taps, channels // group)
    return np.ascontiguousarray(np.moveaxis(packed, -1, 2))


def deconvolution_onednn(
    op: DeconvolutionOperator, x: np.ndarray, out: np.ndarray, formats: Sequence[TensorFormat]
) -> Kernel | None:
    """The transposed convolution (its bias included) over these buffers, ``formats`` the input's and the output's
    (LINEAR; channels-last ones are taken too); None where it does not apply: the library absent, not a 2-D FLOAT
    layer whose kernel (and bias) are weights, empty tensors, padding oneDNN cannot give (a negative end), or only
    oneDNN's reference kernel for it."""
    lib = onednn.library()
    w = op.window
    if lib is None or w.rank != 2 or "kernel" not in op.weights or (op.has_bias and "bias" not in op.weights):
        return None
    if not fit([x, out], formats):
        return None
    x_shape = [int(x.shape[a]) for a in AXES[formats[0]]]
    out_shape = [int(out.shape[a]) for a in AXES[formats[-1]]]
    n, channels, *spatial = x_shape
    if out_shape[:2] != [n, op.maps] or channels % op.group:
        return None
    begins = [op.pad_begin(a, spatial[a], out_shape[2 + a]) for a in range(2)]
    ends = [(spatial[a] - 1) * w.strides[a] + w.extent(a) - begins[a] - out_shape[2 + a] for a in range(2)]
    if min(*begins, *ends) < 0:
        return None
    weights = _weights(op, channels)
    shape = list(weights.shape) if op.group > 1 else list(weights.shape[1:])
    bias = np.ascontiguousarray(np.asarray(op.weights["bias"], np.float32).reshape(-1)) if op.has_bias else None
    flops = 2.0 * x.size * (op.maps // op.group) * int(np.prod(w.kernel))
    try:
        source, before = staged(lib, x, formats[0], x_shape, True, FIRST_STAGE)
        target, after = staged(lib, out, formats[-1], out_shape, False, FIRST_STAGE + 1)
        any_weights = onednn.Desc(lib, shape, None)
        bias_desc = None if bias is None else onednn.Desc(lib, [op.maps], [1])
        geometry = [onednn.dims(v) for v in (w.strides, [d - 1 for d in w.dilations], begins, ends)]

        def make(pd: Any, attr: Any) -> int:
            status: int = lib.dll.dnnl_deconvolution_forward_primitive_desc_create(
                pd,
                lib.engine,
                onednn.FORWARD_INFERENCE,
                onednn.DECONVOLUTION_DIRECT,
                source.desc,
                any_weights.handle,
                None if bias_desc is None else bias_desc.handle,
                target.desc,
                *geometry,
                attr,
            )
            return status

        primitives = onednn.fast_primitives(lib, make, None, thread_counts(flops))
        if primitives is None:
            return None
        plain = onednn.Desc(lib, shape, dense_strides(shape))
        args = [(onednn.ARG_SRC, source), (onednn.ARG_DST, target)]
        if bias is not None and bias_desc is not None:
            args.append((onednn.ARG_BIAS, onednn.Memory(lib, bias_desc, bias.ctypes.data, hold=bias)))
        for primitive in primitives:
            layout = primitive.arg_desc(onednn.ARG_WEIGHTS)
            key = ("onednn-deconv", tuple(x_shape), primitive.threads)
            make_packed = functools.partial(onednn.reorder, lib, weights, plain, layout)
            reordered = op.derived_weight(f"onednn-deconv-{primitive.threads}", key, make_packed)
            memory = onednn.Memory(lib, layout, reordered.ctypes.data, hold=reordered)
            primitive.bind([*args, (onednn.ARG_WEIGHTS, memory)])
    except onednn.OneDnnError:
        return None
    return launcher(
        lib, primitives, flops, [(x, formats[0], source, before)], out, formats[-1], [after] if after else []
    )
