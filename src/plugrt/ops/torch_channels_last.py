"""The PyTorch kernels of channels-last runs on the CPU (tactic ``torch-nhwc``, see :mod:`.torch_cpu` and
``builder/layouts.py``): the 2-D convolution as oneDNN's on channels-last tensors with its kernel reordered once
(a small 1x1 one as NumPy's product of the rows with torch's epilogue, :data:`SMALL_PRODUCT_FLOPS`),
MAX and AVERAGE pooling, concatenation along the channels and squeeze-and-excitation on channels-last tensors; tensors between such layers are handed over as
torch's results (:func:`~plugrt.ops.hand_over.hand_over`) instead of being copied into the engine's buffers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.types import TensorFormat
from .blas_threads import blas_threads_for, product_guard
from .hand_over import HandOver, hand_over, taken
from .torch_cpu import Kernel, torch_module, use_threads, view
from .torch_cpu_kernels import (
    ACTIVATIONS,
    ELEMENT_FLOPS,
    bias_tensor,
    logical_view,
    post_affine,
    relayout,
    same_maps,
)
from .torch_cpu_linear import linear_function

if TYPE_CHECKING:
    from .conv import ConvolutionOperator
    from .pooling import PoolingOperator

__all__ = [
    "NUMBA_MAX_POOL_READS",
    "POST_OPS",
    "SMALL_PRODUCT_FLOPS",
    "concatenation_channels_last",
    "convolution_channels_last",
    "global_pooling_channels_last",
    "squeeze_excitation",
    "window_pooling",
]

#: a 1x1 convolution between two channels-last tensors with fewer operations than this runs as NumPy's product of
#: the rows ``[N*H*W, C] @ [C, M]`` with torch's epilogue in place, not as oneDNN's convolution: oneDNN's call
#: through torch costs ~20 us above its kernel whatever its size (setup redone at every call), NumPy's product
#: ~3 us, and NumPy's BLAS (AVX2 here) loses on rate from several MFLOP (each alone, one thread: PP-OCR cls's
#: 104 -> 32 at 2 x 96 16.7 against 30.1 us, 32 -> 200 with hard-swish 35.9 against 46.9 us; MobileNetV2's 1x1
#: layers of 9-22 MFLOP 1.4-2.2x slower; docs/benchmarks.md)
SMALL_PRODUCT_FLOPS = 4e6

#: activations oneDNN's convolution applies itself (a post-op): type -> (alpha, beta) -> its attribute and scalars;
#: hard-sigmoid is not among them (ONNX's slope and offset are parameters, oneDNN's fixed)
POST_OPS: dict[str, Callable[[float, float], tuple[str, list[float]]]] = {
    "RELU": lambda a, b: ("relu", []),
    "CLIP": lambda a, b: ("hardtanh", [a, b]),
    "HARD_SWISH": lambda a, b: ("hardswish", []),
    "SIGMOID": lambda a, b: ("sigmoid", []),
    "TANH": lambda a, b: ("tanh", []),
    "LEAKY_RELU": lambda a, b: ("leaky_relu", [a]),
}


def convolution_channels_last(
    op: ConvolutionOperator,
    x: np.ndarray,
    out: np.ndarray,
    residual: np.ndarray | None,
    formats: Sequence[TensorFormat],
) -> Kernel | None:
    """The 2-D convolution (bias and epilogue included) as oneDNN's on channels-last tensors, its kernel
    reordered for them once here (``torch.ops.mkldnn._convolution_pointwise``).

    ``formats``: the input's, the residual's (when there is one) and the output's; a LINEAR input is
    copied into a channels-last buffer first (with uneven padding, a TensorFlow "same" first layer, into the
    interior of a zero-bordered one, convolved unpadded), a LINEAR output written from the channels-last result.
    The activation is oneDNN's post-op where it has it (:data:`POST_OPS`), a residual its ``add``
    post-op when both are channels-last (then only ReLU can follow inside), anything else the pass
    that writes ``out``. Padding that differs between an axis's ends is made the same by
    :func:`_symmetric_pads`, the result cropped as it is written. A uniform kernel's convolution runs alone,
    then its maps are made bit-identical and the bias added (:func:`~.torch_cpu_kernels.same_maps`) before the
    rest of the epilogue. None where it does not apply: other ranks, a kernel or bias given as an input, empty
    tensors.
    """
    torch = torch_module()
    w = op.window
    if w.rank != 2 or "kernel" not in op.weights or op.bias_input is not None:
        return None
    x_format, out_format = formats[0], formats[-1]
    xt, ot = logical_view(x, x_format), logical_view(out, out_format)
    if xt.numel() == 0 or ot.numel() == 0:
        return None
    shape = tuple(xt.shape)
    sizes, begins, ends = w.resolve(shape[2:])
    if tuple(sizes) != tuple(ot.shape[2:]):
        return None
    channels_last = torch.channels_last
    interior = None  # a LINEAR input with uneven padding: copied into a zero-bordered buffer, convolved unpadded
    if x_format != TensorFormat.HWC and list(begins) != list(ends):
        bordered = (*shape[:2], *(shape[2 + a] + begins[a] + ends[a] for a in range(2)))
        source = torch.zeros(bordered).contiguous(memory_format=channels_last)
        interior = source[:, :, begins[0] : begins[0] + shape[2], begins[1] : begins[1] + shape[3]]
        shape, begins, ends = bordered, [0, 0], [0, 0]
    pads, skip = _symmetric_pads(w, begins, ends)
    padded = [(shape[2 + a] + 2 * pads[a] - w.extent(a)) // w.strides[a] + 1 for a in range(2)]
    exact = not any(skip) and padded == list(sizes)
    crop = None if exact else (slice(None), slice(None), *(slice(k, k + n) for k, n in zip(skip, sizes)))
    channels = shape[1] // op.group
    strides, dilations, group = list(w.strides), list(w.dilations), op.group

    def reorder() -> Any:
        weight = op.torch_weight("kernel", xt, (op.maps, channels, *w.kernel)).contiguous(memory_format=channels_last)
        return torch.ops.mkldnn._reorder_convolution_weight(weight, pads, strides, dilations, group, list(shape))

    bias_t = bias_tensor(op, None, xt)
    # a uniform kernel: the convolution alone, its maps made bit-identical, then the bias and the epilogue
    uniform = None if not op.uniform else (op.group, None if bias_t is None else bias_t.reshape(-1, 1, 1))
    if uniform is not None:
        bias_t = None
    if interior is None:
        source = xt if x_format == TensorFormat.HWC else torch.empty(shape).contiguous(memory_format=channels_last)
        interior = source
    staged = source is not xt
    flops = 2.0 * ot.numel() * channels * math.prod(w.kernel)
    low, high = op.activation_range
    conv = torch.ops.mkldnn._convolution_pointwise
    rt = None if residual is None else logical_view(residual, formats[1])
    post = POST_OPS.get(op.activation) if uniform is None else None
    affine = post_affine(torch, op)
    rows = _product_of_rows(op, x, out, residual, formats, crop is None and not any(pads), flops)
    if rows is not None:
        return rows
    packed = op.derived_weight("kernel", ("nhwc", xt.dtype, shape, *pads, *strides, *dilations, group), reorder)
    # tensors between channels-last layers are handed over as torch's results (no copy into the buffers)
    given = hand_over(x) if x_format == TensorFormat.HWC else None
    given_residual = hand_over(residual) if residual is not None and formats[1] == TensorFormat.HWC else None
    handed = hand_over(out) if out_format == TensorFormat.HWC and crop is None else None
    written = hand_over(out) if out_format == TensorFormat.HWC and crop is not None else None

    def deliver(result: Any, act: Any) -> None:
        """Apply what is left of the epilogue to ``result`` and hand it over, or write it into ``out``."""
        if handed is not None:
            if act is not None:
                act(torch, result, result, low, high)
            if affine is not None:
                affine(result, result)
            handed.tensor = result
            return
        if written is not None:
            written.tensor = None
        if act is not None:
            if affine is None:
                act(torch, result, ot, low, high)
                return
            act(torch, result, result, low, high)
        if affine is not None:
            affine(result, ot)
        else:
            relayout(ot, result)

    def start() -> Any:
        use_threads(flops)
        if given is not None and given.tensor is not None:
            return given.tensor
        if staged:
            relayout(interior, xt)
        return source

    if rt is None:
        attr, scalars = post(low, high) if post is not None else ("none", [])
        after = ACTIVATIONS[op.activation] if op.activation and post is None else None

        def run() -> None:
            result = conv(start(), packed, bias_t, pads, strides, dilations, group, attr, scalars, "")
            result = result if crop is None else result[crop]
            if uniform is not None:
                same_maps(result, *uniform)
            deliver(result, after)

        return run
    # oneDNN adds a channels-last residual as a post-op (only ReLU may follow there) unless the output is cropped
    inside = crop is None and uniform is None and rt.is_contiguous(memory_format=channels_last)
    relu = inside and op.activation == "RELU"
    act = ACTIVATIONS[op.activation] if op.activation and not relu else None

    def run_residual() -> None:
        x_now = start()
        r_now = given_residual.tensor if given_residual is not None and given_residual.tensor is not None else rt
        if inside:
            unary = "relu" if relu else None
            result = conv.binary(
                x_now, r_now, packed, bias_t, pads, strides, dilations, group, "add", None, unary, [], ""
            )
            deliver(result, act)
            return
        result = conv(x_now, packed, bias_t, pads, strides, dilations, group, "none", [], "")
        if crop is not None:
            result = result[crop]
        if uniform is not None:
            same_maps(result, *uniform)
        if handed is not None:
            result.add_(r_now)
            deliver(result, act)
            return
        if written is not None:
            written.tensor = None
        torch.add(result, r_now, out=ot)
        if act is not None:
            act(torch, ot, ot, low, high)
        if affine is not None:
            affine(ot, ot)

    return run_residual


def _product_of_rows(
    op: ConvolutionOperator,
    x: np.ndarray,
    out: np.ndarray,
    residual: np.ndarray | None,
    formats: Sequence[TensorFormat],
    unpadded: bool,
    flops: float,
) -> Kernel | None:
    """A 1x1 convolution (one group, unit strides, no padding, its kernel a FLOAT weight) from an HWC tensor on the
    CPU as a product of the rows ``[N*H*W, C] @ [C, M]``: NumPy's below :data:`SMALL_PRODUCT_FLOPS`
    (:func:`_small_product`), else oneDNN's (:func:`_rows_linear`). None for any other layer."""
    w = op.window
    if not isinstance(x, np.ndarray) or not unpadded or op.group != 1 or op.uniform or op.bias_input is not None:
        return None
    if any(k != 1 for k in w.kernel) or any(s != 1 for s in w.strides) or formats[0] != TensorFormat.HWC:
        return None
    if "kernel" not in op.weights or x.dtype != np.float32 or out.dtype != np.float32:
        return None
    if flops < SMALL_PRODUCT_FLOPS:
        return _small_product(op, x, out, residual, formats)
    return _rows_linear(op, x, out, residual, formats, flops)


def _small_product(
    op: ConvolutionOperator,
    x: np.ndarray,
    out: np.ndarray,
    residual: np.ndarray | None,
    formats: Sequence[TensorFormat],
) -> Kernel | None:
    """A small 1x1 convolution (one group, unit strides, no padding) from an HWC tensor into an HWC tensor as
    NumPy's product of the rows (see :data:`SMALL_PRODUCT_FLOPS`), written into the output's buffer, then the
    bias, the residual, the activation and the affine map in place with torch's kernels (the NumPy epilogue's
    order; torch's elementwise kernels are several times faster than NumPy's on these small tensors). None for
    an output that is not HWC."""
    torch = torch_module()
    kernel = np.asarray(op.weights["kernel"])
    if kernel.dtype != np.float32 or formats[-1] != TensorFormat.HWC:
        return None
    channels, maps = x.shape[-1], op.maps
    if kernel.size != channels * maps or out.shape[-1] != maps or x.shape[:-1] != out.shape[:-1]:
        return None
    columns = np.ascontiguousarray(kernel.reshape(maps, channels).T)  # [C, M], made once per bind
    rows_in, rows_out = x.reshape(-1, channels), out.reshape(-1, maps)
    ot = logical_view(out, TensorFormat.HWC)
    bias_t = bias_tensor(op, None, ot)
    bias_rows = None if bias_t is None else bias_t.reshape(1, maps)
    out_rows_t = view(rows_out)
    rt = None if residual is None else logical_view(residual, formats[1])
    given = hand_over(x)
    handed = hand_over(out)
    given_residual = hand_over(residual) if residual is not None and formats[1] == TensorFormat.HWC else None
    act = ACTIVATIONS[op.activation] if op.activation else None
    low, high = op.activation_range
    affine = post_affine(torch, op)
    flops = 2.0 * rows_in.shape[0] * channels * maps
    guard = product_guard(rows_in.shape[0], maps, channels) or blas_threads_for(flops)  # decided here, once
    compiled = _compiled_epilogue(op, rows_out, bias_t, given_residual, residual, affine)
    if compiled is not None:

        def run_compiled() -> None:
            source = _rows(given, channels, rows_in)
            with guard:
                np.matmul(source, columns, out=rows_out)
            handed.tensor = None  # the buffer holds the result
            compiled()

        return run_compiled

    def run() -> None:
        use_threads(flops)
        source = _rows(given, channels, rows_in)
        with guard:
            np.matmul(source, columns, out=rows_out)
        handed.tensor = None  # the buffer holds the result
        if bias_rows is not None:
            out_rows_t.add_(bias_rows)
        if rt is not None:
            ot.add_(given_residual.tensor if given_residual is not None and given_residual.tensor is not None else rt)
        if act is not None:
            act(torch, ot, ot, low, high)
        if affine is not None:
            affine(ot, ot)

    return run


def _rows_linear(
    op: ConvolutionOperator,
    x: np.ndarray,
    out: np.ndarray,
    residual: np.ndarray | None,
    formats: Sequence[TensorFormat],
    flops: float,
) -> Kernel | None:
    """A larger 1x1 convolution from an HWC tensor as oneDNN's product of the rows ``[N*H*W, C] @ [C, M]``
    (``torch.ops.mkldnn._linear_pointwise``, its weight packed once with ``_reorder_linear_weight``), the bias and the activation its post-ops (:data:`POST_OPS`), an HWC residual
    its ``add`` post-op (the activation then in place after it); the result is handed over, or relaid into a
    LINEAR output (a network output, MobileNetV2's features). oneDNN's call of its matrix product costs 5-8 us less
    than its 1x1 convolution's with the kernel reordered (one thread, each alone: 44.5 against 51.9 us at
    196 x 384 -> 64, 161.7 against 166.2 us at 49 x 320 -> 1280; docs/benchmarks.md). None for any other layer, a
    LINEAR residual, or where this torch has no oneDNN linear."""
    torch = torch_module()
    if residual is not None and formats[1] != TensorFormat.HWC:
        return None
    function = linear_function()
    channels, maps = x.shape[-1], op.maps
    shape = (*x.shape[:-1], maps)  # the result's [N, H, W, M]
    ot = logical_view(out, formats[-1])
    if function is None or tuple(ot.shape) != (shape[0], maps, *shape[1:3]):
        return None
    rows_in = view(x.reshape(-1, channels))

    def pack() -> Any:
        weight = op.torch_weight("kernel", rows_in, (maps, channels)).contiguous()
        return torch.ops.mkldnn._reorder_linear_weight(weight, None)

    packed = op.derived_weight("kernel", ("rows", rows_in.dtype, channels, maps), pack)
    bias_t = bias_tensor(op, None, rows_in)
    bias_t = None if bias_t is None else bias_t.reshape(-1)
    given = hand_over(x)
    handed = hand_over(out) if formats[-1] == TensorFormat.HWC else None
    low, high = op.activation_range
    affine = post_affine(torch, op)
    post = POST_OPS.get(op.activation) if residual is None else None
    attr, scalars = post(low, high) if post is not None else ("none", [])
    act = ACTIVATIONS[op.activation] if op.activation and post is None else None
    given_residual = None if residual is None else hand_over(residual)
    residual_rows = None if residual is None else view(residual.reshape(-1, maps))

    def finish(result: Any) -> None:
        if act is not None:
            act(torch, result, result, low, high)
        if affine is not None:
            affine(result, result)
        if handed is not None:
            handed.tensor = result.view(shape).permute(0, 3, 1, 2)
        else:
            relayout(ot, result.view(shape).permute(0, 3, 1, 2))

    if residual is None:

        def run() -> None:
            use_threads(flops)
            finish(function(_row_view(given, channels, rows_in), packed, bias_t, attr, scalars, ""))

        return run
    binary = function.binary

    def run_residual() -> None:
        use_threads(flops)
        source = _row_view(given, channels, rows_in)
        added = _row_view(given_residual, maps, residual_rows)
        finish(binary(source, added, packed, bias_t, "add"))

    return run_residual


def _row_view(given: HandOver | None, channels: int, rows: Any) -> Any:
    """An HWC tensor's ``[N*H*W, C]`` rows: the handed-over tensor's as a torch tensor (copied where it is not
    channels-last contiguous), else ``rows`` (the buffer's, as given)."""
    tensor = None if given is None else given.tensor
    if tensor is None:
        return rows
    return tensor.permute(0, 2, 3, 1).reshape(-1, channels)


def _compiled_epilogue(
    op: ConvolutionOperator,
    rows_out: np.ndarray,
    bias_t: Any,
    given_residual: HandOver | None,
    residual: np.ndarray | None,
    affine: Any,
) -> Callable[[], None] | None:
    """The small 1x1 convolution's epilogue (bias, an HWC residual, the activation) as one compiled pass over its
    rows (``depthwise_numba_loops.rows_epilogue``) where numba is installed and the activation is one the compiled
    loops have; None otherwise (a scalar map, a LINEAR residual): torch's in-place kernels run."""
    from .depthwise_numba import ACTIVATION_CODES, available, loops

    if affine is not None or (op.activation or "") not in ACTIVATION_CODES or not available():
        return None
    if residual is not None and given_residual is None:  # a LINEAR residual: its rows are not [N*H*W, M]
        return None
    maps = rows_out.shape[1]
    bias = np.zeros(maps, np.float32) if bias_t is None else np.ascontiguousarray(bias_t.numpy().reshape(-1))
    act = ACTIVATION_CODES[op.activation or ""]
    low, high = (np.float32(v) for v in op.activation_range)
    none = np.empty((0, 0), np.float32)
    row = np.zeros((1, 1), np.float32)
    example = (row, np.zeros(1, np.float32), none, 0, np.float32(0.0), np.float32(0.0))
    epilogue = loops().entry_point(loops().rows_epilogue, *example)
    residual_rows = None if residual is None else residual.reshape(-1, maps)

    def run() -> None:
        added = none if residual_rows is None else _rows(given_residual, maps, residual_rows)  # type: ignore[arg-type]
        epilogue(rows_out, bias, added, act, low, high)

    return run


def _rows(given: HandOver, channels: int, rows: np.ndarray) -> np.ndarray:
    """:func:`_row_view` as a NumPy array (the buffer's ``rows``, or a view of the handed-over tensor's)."""
    found = _row_view(given, channels, rows)
    result: np.ndarray = found if found is rows else found.numpy()
    return result


def _symmetric_pads(w: Any, begins: Sequence[int], ends: Sequence[int]) -> tuple[list[int], list[int]]:
    """Padding that is the same at both ends of each axis (oneDNN's convolution through torch takes no other),
    and the outputs to skip at the start of each: where an axis's ends differ (TensorFlow's "same" at
    stride 2), the begin padding grows by whole strides until it covers the end's (or the end's grows to
    the begin's), and the output computed with it holds the wanted one from ``skip`` on (outputs past
    the wanted ones read only padding beyond the end's, and are cropped)."""
    pads, skip = [], []
    for axis, (begin, end) in enumerate(zip(begins, ends)):
        steps = 0 if end <= begin else -(-(end - begin) // w.strides[axis])
        pads.append(begin + steps * w.strides[axis])
        skip.append(steps)
    return pads, skip


def window_pooling(
    op: PoolingOperator, x: np.ndarray, out: np.ndarray, formats: Sequence[TensorFormat], channels_last: bool
) -> Kernel | None:
    """2-D MAX pooling with ``torch.max_pool2d``, AVERAGE pooling with ``torch.avg_pool2d`` (ONNX's
    ``count_include_pad``; no ceil mode: ``PoolingOperator.channels_last_supports``): on channels-last tensors
    (``channels_last``; a LINEAR input copied into a channels-last buffer first), else on NCHW ones. None where
    torch pads otherwise than the window (see ``PoolingOperator.torch_supports``) or for empty tensors."""
    torch = torch_module()
    w = op.window
    xt, ot = logical_view(x, formats[0]), logical_view(out, formats[-1])
    if w.rank != 2 or xt.numel() == 0 or ot.numel() == 0:
        return None
    shape = tuple(xt.shape)
    sizes, begins, ends = w.resolve(shape[2:])
    if list(begins) != list(ends) or any(2 * b > k for b, k in zip(begins, w.kernel)):
        return None
    average = op.mode == "AVERAGE"
    if average and (w.ceil_mode or any(d != 1 for d in w.dilations)):
        return None
    if tuple(
        torch.nn.functional.max_pool2d(
            torch.empty((1, 1, *shape[2:])),
            list(w.kernel),
            list(w.strides),
            list(begins),
            list(w.dilations),
            w.ceil_mode,
        ).shape[2:]
    ) != tuple(sizes):
        return None  # ceil mode's last window: torch drops one that starts in the end padding
    compiled = _compiled_max_pool(op, x, out, formats, begins) if channels_last and not average else None
    if compiled is not None:
        return compiled
    source = xt
    if channels_last and formats[0] != TensorFormat.HWC:
        source = torch.empty(shape, dtype=xt.dtype, device=xt.device).contiguous(memory_format=torch.channels_last)
    staged = source is not xt
    kernel, strides, pads, dilations = list(w.kernel), list(w.strides), list(begins), list(w.dilations)
    ceil, include = w.ceil_mode, bool(op.count_include_pad)
    flops = float(ot.numel() * math.prod(w.kernel))
    given = hand_over(x) if formats[0] == TensorFormat.HWC else None
    handed = hand_over(out) if formats[-1] == TensorFormat.HWC else None
    max_pool, avg_pool = torch.max_pool2d, torch.nn.functional.avg_pool2d

    def run() -> None:
        use_threads(flops)
        pooled = taken(given, source)
        if staged and pooled is source:
            source.copy_(xt)
        if average:
            result = avg_pool(pooled, kernel, strides, pads, False, include)
        else:
            result = max_pool(pooled, kernel, strides, pads, dilations, ceil)
        if handed is not None:
            handed.tensor = result
        else:
            ot.copy_(result)

    return run


def concatenation_channels_last(inputs: Sequence[Any], out: Any, formats: Sequence[TensorFormat]) -> Kernel | None:
    """Concatenation along the channels of 4-D tensors as ``torch.cat`` of their logical ``[N, C, H, W]`` views (an
    HWC input's hand-over tensor where its slot holds one) into the output's buffer in its layout (an HWC output's
    slot emptied: the buffer holds the result). ``torch.cat`` into channels-last strides copies as fast as into
    contiguous ones (SqueezeNet's 64 + 64 channels at 55 x 55, one thread: 41 against 38 us; NumPy's concatenate
    along the last axis 53). None for empty tensors."""
    torch = torch_module()
    views = [logical_view(x, f) for x, f in zip(inputs, formats)]
    target = logical_view(out, formats[-1])
    if target.numel() == 0 or any(v.numel() == 0 for v in views):
        return None
    slots = [hand_over(x) if f == TensorFormat.HWC else None for x, f in zip(inputs, formats)]
    handed = hand_over(out) if formats[-1] == TensorFormat.HWC else None
    cat = torch.cat

    def run() -> None:
        cat([taken(slot, v) for slot, v in zip(slots, views)], 1, out=target)
        if handed is not None:
            handed.tensor = None

    return run


#: a MAX pooling between HWC tensors of at most this many window reads (outputs times taps) runs as the compiled loop
#: where numba is installed: ``torch.max_pool2d`` costs ~20 us a call whatever its size (the CRNN's three pools: 59
#: against onnxruntime's 11 us), the loop a few; larger ones stay torch's (its kernel is vectorised over windows)
NUMBA_MAX_POOL_READS = 1_000_000


def _compiled_max_pool(
    op: PoolingOperator, x: np.ndarray, out: np.ndarray, formats: Sequence[TensorFormat], begins: Sequence[int]
) -> Kernel | None:
    """MAX pooling from an HWC FLOAT buffer as the compiled loop (``depthwise_numba_loops.max_pool``), reading the
    input's hand-over slot, writing the output's buffer (HWC, its slot emptied, or LINEAR: a run's last pool before
    a reshape, pooled channels-last into scratch and copied across); None where numba is not there, on a GPU, a LINEAR input,
    another type, or more than :data:`NUMBA_MAX_POOL_READS` reads. The caller has checked that torch's output size is the operator's
    (every window holds an input pixel)."""
    from .depthwise_numba import available, loops, source_pixels

    w = op.window
    if not isinstance(x, np.ndarray) or formats[0] != TensorFormat.HWC or x.ndim != 4 or out.ndim != 4:
        return None  # (a GPU's arrays: torch's kernel)
    if x.dtype != np.float32 or out.dtype != np.float32 or not (x.flags.c_contiguous and out.flags.c_contiguous):
        return None
    if out.size * math.prod(w.kernel) > NUMBA_MAX_POOL_READS or not available():
        return None
    linear = formats[-1] != TensorFormat.HWC
    # a LINEAR output: pooled into channels-last scratch, then copied across (written through its [N, H, W, C] view,
    # the loop's stores to channels H*W apart took 72 against 4 us for the CRNN's last pool, 128 x 4 x 32)
    target = op.scratch("pooled", (out.shape[0], *out.shape[2:], out.shape[1]), np.float32, np) if linear else out
    kernel = np.array(w.kernel, np.int64)
    geometry = np.array([*w.strides, *w.dilations, *begins], np.int64)
    pixels = np.zeros((1, 2, 2, 2), np.float32)  # an example of the layouts passed
    pool = loops().entry_point(loops().max_pool, pixels, pixels.copy(), np.ones(2, np.int64), geometry)
    given = hand_over(x)
    handed = hand_over(out) if formats[-1] == TensorFormat.HWC else None
    result = target.transpose(0, 3, 1, 2)

    def run() -> None:
        pool(source_pixels(given.tensor, x), target, kernel, geometry)
        if handed is not None:
            handed.tensor = None  # the buffer holds the result
        else:
            np.copyto(out, result)

    return run


def global_pooling_channels_last(reduce: Any, x: Any, out: Any, fmt: TensorFormat) -> Kernel:
    """``reduce`` (``torch.mean`` or ``torch.amax``) over the spatial axes of ``[N, C, H, W]`` stored as ``fmt``
    (an ``HWC`` input reduced as stored, over its middle axes ``[N, (H, W), C]``, or the tensor a channels-last
    kernel handed over when there is one) into ``out`` ``[N, C, 1, 1]``. On the CPU an HWC input's average is
    summed in float64: torch sums the channels of ``[N, H*W, C]`` in vector lanes and the last ``C % 16`` in another order, so
    equal maps got means an ulp apart (the ONNX light SqueezeNet's uniform maps, ~9.5e9: its softmax then put all
    the probability on an eighth of the classes)."""
    n, channels = (int(d) for d in (x.shape[0], x.shape[3] if fmt == TensorFormat.HWC else x.shape[1]))
    target = view(out).view(n, channels)
    if fmt != TensorFormat.HWC:
        flat = view(x).view(n, channels, -1)
        return lambda: reduce(flat, 2, out=target)  # type: ignore[no-any-return]
    rows = view(x).view(n, -1, channels)
    given = hand_over(x)
    if not isinstance(x, np.ndarray):  # a device's: the handed-over tensor ([N, C, H, W], channels-last), else the rows

        def run_device() -> None:
            tensor = given.tensor  # (stored as the buffer's rows: permuted back, a view, reduced as they are)
            reduce(rows if tensor is None else tensor.permute(0, 2, 3, 1).reshape(n, -1, channels), 1, out=target)

        return run_device
    flat = x.reshape(-1, channels)
    flops = float(x.size)
    torch = torch_module()
    # an average is summed in float64 (every channel's mean rounded alike, see the docstring), then rounded once
    wide = torch.empty((n, channels), dtype=torch.float64) if reduce is torch.mean else None

    def run() -> None:
        use_threads(flops)
        pixels = _row_view(given, channels, flat)  # the handed-over tensor's rows where it holds one
        source = rows if pixels is flat else pixels.view(n, -1, channels)
        if wide is None:
            reduce(source, 1, out=target)
            return
        torch.mean(source, 1, dtype=torch.float64, out=wide)
        target.copy_(wide)

    return run


def squeeze_excitation(
    acts: Sequence[tuple[str, float, float]],
    weights: tuple[Any, Any | None, Any, Any | None],
    x: Any,
    out: Any,
    formats: Sequence[TensorFormat],
) -> Kernel | None:
    """The squeeze-and-excitation block (``ops/squeeze_excitation.py``) on ``[N, C, H, W]`` tensors, NCHW or
    channels-last (``formats``: the input's and the output's), on the CPU or a GPU (``weights``, ``(w1 [C, M],
    b1 [M] or None, w2 [M, C], b2 [C] or None)``, arrays where ``x`` is): the mean, two small products with their
    activations, the broadcast product into the output's buffer (a channels-last output's hand-over slot emptied;
    a channels-last input read from its slot where that holds a tensor). Every intermediate is a tensor made here,
    written with ``out=`` (each allocation cost ~1 us a call on the CPU), in the input's type (a GPU's HALF: the
    mean accumulates in FLOAT, the products in cuBLAS's FLOAT)."""
    torch = torch_module()
    xt, ot = logical_view(x, formats[0]), logical_view(out, formats[-1])
    if xt.dim() != 4 or xt.numel() == 0:
        return None
    w1, b1, w2, b2 = (None if w is None else view(w).to(xt.dtype) for w in weights)
    n, channels = int(xt.shape[0]), int(xt.shape[1])
    pooled, scale = (torch.empty(n, channels, dtype=xt.dtype, device=xt.device) for _ in range(2))
    hidden = torch.empty(n, int(weights[0].shape[1]), dtype=xt.dtype, device=xt.device)
    steps = [(pooled, w1, b1, acts[0], hidden), (hidden, w2, b2, acts[1], scale)]
    broadcast = scale[:, :, None, None]
    given = hand_over(x) if formats[0] == TensorFormat.HWC else None
    handed = hand_over(out) if formats[-1] == TensorFormat.HWC else None
    flops = float(ELEMENT_FLOPS * xt.numel()) if isinstance(x, np.ndarray) else 0.0

    def run() -> None:
        if flops:
            use_threads(flops)
        source = taken(given, xt)
        torch.mean(source, (2, 3), out=pooled)
        for rows, weight, bias, (name, alpha, beta), target in steps:
            if bias is None:
                torch.mm(rows, weight, out=target)
            else:
                torch.addmm(bias, rows, weight, out=target)
            if name:
                ACTIVATIONS[name](torch, target, target, alpha, beta)
        torch.mul(source, broadcast, out=ot)
        if handed is not None:
            handed.tensor = None  # the buffer holds it

    return run
