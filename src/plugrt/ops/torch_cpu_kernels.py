"""The PyTorch kernels of the (transposed) convolution, unary, activation and softmax operators (see
:mod:`.torch_cpu`).

Each function takes the operator and one binding's FLOAT arrays and returns the kernel
over them (``torch.from_numpy`` views made here, once), or None where PyTorch does not
compute that layer as the operator does (the NumPy kernel runs then). Results are
written into the output's memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.types import TensorFormat
from .conv_cudnn import fused_conv_relu
from .hand_over import hand_over, taken
from .torch_cpu import Kernel, torch_module, use_threads, view

if TYPE_CHECKING:
    from .conv import ConvolutionOperator
    from .deconv import DeconvolutionOperator
    from .normalization import NormalizationOperator

__all__ = [
    "ACTIVATIONS",
    "ELEMENT_FLOPS",
    "RELAYOUT_BLOCKS_FROM",
    "UNARY",
    "activation",
    "bias_tensor",
    "convolution",
    "deconvolution",
    "logical_view",
    "normalization",
    "post_affine",
    "relayout",
    "same_maps",
    "softmax",
    "unary",
]

#: unary ops with a PyTorch kernel: UnaryOperation name -> torch function name (each takes ``out=``)
UNARY = {
    "EXP": "exp",
    "LOG": "log",
    "SQRT": "sqrt",
    "RECIP": "reciprocal",
    "SIN": "sin",
    "COS": "cos",
    "TAN": "tan",
    "ATAN": "atan",
    "ERF": "erf",
}

#: activation types and unary ops whose NumPy kernel is as fast as PyTorch's on the CPU, which is therefore not
#: offered there (importing torch costs ~190 MB of memory): one thread, 1 x 512 x 2048 FLOAT, NumPy against PyTorch,
#: ReLU 0.113 against 0.088 ms, Clip 0.112 against 0.095, Exp 0.47 against 0.85, Log 0.38 against 1.05, Sin, Cos, Tan
#: and Atan 0.41-0.55 against 1.25-2.50 (docs/benchmarks.md)
NUMPY_AS_FAST = frozenset({"RELU", "CLIP", "EXP", "LOG", "SIN", "COS", "TAN", "ATAN"})

#: activations with a PyTorch kernel: type -> fn(torch, x, out, alpha, beta) writing into ``out``
ACTIVATIONS: dict[str, Callable[[Any, Any, Any, float, float], None]] = {
    "RELU": lambda torch, x, out, a, b: torch.clamp_min(x, 0.0, out=out),
    "SIGMOID": lambda torch, x, out, a, b: torch.sigmoid(x, out=out),
    "TANH": lambda torch, x, out, a, b: torch.tanh(x, out=out),
    "GELU_ERF": lambda torch, x, out, a, b: torch._C._nn.gelu(x, out=out),
    "GELU_TANH": lambda torch, x, out, a, b: _gelu_tanh(torch, x, out),
    "LEAKY_RELU": lambda torch, x, out, a, b: torch._C._nn.leaky_relu(x, a, out=out),
    "HARD_SIGMOID": lambda torch, x, out, a, b: _hard_sigmoid(torch, x, out, a, b),
    "HARD_SWISH": lambda torch, x, out, a, b: torch._C._nn.hardswish(x, out=out),
    "CLIP": lambda torch, x, out, a, b: _clip(torch, x, out, a, b),
}


_GELU_TANH_SCALE = math.sqrt(2.0 / math.pi)


def _gelu_tanh(torch: Any, x: Any, out: Any, work: Any = None) -> None:
    """GELU's tanh form: on the CPU as ``x * sigmoid(2u)``, ``2u = x (2s + 2s 0.044715 x^2)``, ``s = sqrt(2/pi)``
    (``0.5 (1 + tanh(u)) = sigmoid(2u)``): torch's vectorised sigmoid, where its CPU ``gelu(approximate="tanh")``
    and ``tanh`` take 2-3 ns an element (one thread, GPT-2's 128 x 3072: 0.32 against 0.65 ms; within 1.6e-7 of
    float64, relative to the value or 1, where the fused kernel is within 1.5e-7); on a GPU torch's fused kernel.
    In place (``out`` is ``x``) it needs ``work``, a tensor like ``x`` (made here where not given)."""
    if x.is_cuda:
        torch._C._nn.gelu(x, approximate="tanh", out=out)
        return
    if out.data_ptr() != x.data_ptr():
        work = out
    elif work is None:
        work = torch.empty_like(x)
    torch.mul(x, x, out=work)
    work.mul_(2.0 * 0.044715 * _GELU_TANH_SCALE).add_(2.0 * _GELU_TANH_SCALE).mul_(x)
    work.sigmoid_()
    torch.mul(work, x, out=out)


def _clip(torch: Any, x: Any, out: Any, low: float, high: float) -> None:
    # max(alpha, min(beta, x)), as the activation layer
    torch.clamp_max(x, high, out=out)
    out.clamp_min_(low)


def _hard_sigmoid(torch: Any, x: Any, out: Any, alpha: float, beta: float) -> None:
    # max(0, min(1, alpha * x + beta)), the float32 operations of the NumPy kernel
    torch.mul(x, alpha, out=out)
    out.add_(beta)
    out.clamp_(0.0, 1.0)


#: elementwise kernels cost about this many operations per element when sizing their thread count
ELEMENT_FLOPS = 20


def unary(op_name: str, x: np.ndarray, out: np.ndarray) -> Kernel | None:
    """``out = op(x)`` with torch's vectorised function of that name."""
    function = getattr(torch_module(), UNARY[op_name])
    xt, ot = view(x), view(out)
    flops = ELEMENT_FLOPS * x.size

    def run() -> None:
        use_threads(flops)
        function(xt, out=ot)

    return run


def activation(kind: str, alpha: float, beta: float, x: np.ndarray, out: np.ndarray) -> Kernel | None:
    """``out = f(x)`` for activation type ``kind``."""
    torch = torch_module()
    function = ACTIVATIONS[kind]
    xt, ot = view(x), view(out)
    flops = ELEMENT_FLOPS * x.size
    if kind == "GELU_TANH" and not xt.is_cuda and xt.data_ptr() == ot.data_ptr():  # in place: its scratch made once
        work = torch.empty_like(xt)

        def run_in_place() -> None:
            use_threads(flops)
            _gelu_tanh(torch, xt, ot, work)

        return run_in_place

    def run() -> None:
        use_threads(flops)
        function(torch, xt, ot, alpha, beta)

    return run


def softmax(axis: int, x: np.ndarray, scale: np.ndarray | None, out: np.ndarray) -> Kernel | None:
    """``out = softmax(x * scale)`` over one axis (``scale`` None: no scaling)."""
    torch = torch_module()
    xt, ot = view(x), view(out)
    flops = ELEMENT_FLOPS * x.size
    if scale is None:

        def run() -> None:
            use_threads(flops)
            torch._softmax(xt, axis, False, out=ot)

        return run
    st = view(scale)
    work = ot if axis == x.ndim - 1 else torch.empty_like(xt)  # the last axis is computed row by row in place

    def run_scaled() -> None:
        use_threads(flops)
        torch.mul(xt, st, out=work)
        torch._softmax(work, axis, False, out=ot)

    return run_scaled


def bias_tensor(op: ConvolutionOperator | DeconvolutionOperator, bias: Any, like: Any) -> Any:
    """The bias as a torch vector: the ``bias`` input, else the operator's weight on ``like``'s device in its
    type; None without one."""
    if not op.has_bias:
        return None
    if bias is not None:
        return view(bias).reshape(-1)
    return op.torch_weight("bias", like, (-1,))


def convolution(
    op: ConvolutionOperator,
    x: np.ndarray,
    kernel: np.ndarray | None,
    bias: np.ndarray | None,
    out: np.ndarray,
    residual: np.ndarray | None = None,
    formats: Sequence[TensorFormat] | None = None,
) -> Kernel | None:
    """The convolution (bias and fused epilogue included) with ``torch.nn.functional.conv{1,2,3}d``.

    ``kernel`` / ``bias``: the kernel ``[M, C / group, *k]`` and bias ``[M]`` inputs, None when they are
    weights; ``residual``: the tensor added before the activation, or None. The epilogue is the pass
    that writes ``out`` from torch's result (the residual's sum, else the activation, else a copy). Padding that differs between an axis's two ends (TensorFlow's "same" at stride 2) copies
    the input into a zero-bordered buffer made here first. None for what torch does not do as the
    operator: other ranks, empty tensors. ``formats`` (the input's, the
    residual's when there is one, the output's; on a GPU): ``HWC`` tensors are read and written as channels-last
    views, and the kernel is made channels-last, so cuDNN runs its NHWC kernels without reordering; an HWC input or
    residual is read from its hand-over slot where that holds a tensor, and cuDNN's fused ReLU result is handed over
    (``ops/hand_over.py``; every other path writes the buffer and empties its slot); a depthwise layer there runs
    as one generated kernel (``ops/depthwise_cuda.py``). A uniform
    kernel (``uniform_kernel``) runs without the bias, then its maps are made bit-identical and the bias added, as
    the NumPy kernel does.
    """
    torch = torch_module()
    w = op.window
    formats = list(formats) if formats is not None else [TensorFormat.LINEAR] * (3 if residual is not None else 2)
    xt, ot = logical_view(x, formats[0]), logical_view(out, formats[-1])
    if w.rank not in (1, 2, 3) or xt.numel() == 0 or ot.numel() == 0:
        return None
    shape = tuple(xt.shape)
    _, begins, ends = w.resolve(shape[2:])
    padded = [shape[2 + a] + begins[a] + ends[a] for a in range(w.rank)]
    sizes = [(padded[a] - w.extent(a)) // w.strides[a] + 1 for a in range(w.rank)]
    if tuple(sizes) != tuple(ot.shape[2:]):
        return None
    channels = shape[1] // op.group
    if kernel is None:  # the packing keeps the order
        weight = op.torch_weight("kernel", xt, (op.maps, channels, *w.kernel))
    else:
        weight = view(kernel)
    relaid = TensorFormat.HWC in formats
    if relaid:
        weight = weight.contiguous(memory_format=torch.channels_last)
    bias_t = bias_tensor(op, bias, xt)
    # a uniform kernel: the convolution without its bias, its maps made equal, then the bias (see same_maps)
    uniform = None if not op.uniform else (op.group, None if bias_t is None else bias_t.reshape(-1, *[1] * w.rank))
    if uniform is not None:
        bias_t = None
    function = (torch.nn.functional.conv1d, torch.nn.functional.conv2d, torch.nn.functional.conv3d)[w.rank - 1]
    strides, pads, dilations, group = list(w.strides), list(begins), list(w.dilations), op.group
    source, interior = xt, None
    if begins != ends:  # torch pads both ends alike: the input goes into a zero-bordered buffer, unpadded
        layout = torch.channels_last if relaid else torch.contiguous_format
        source = torch.zeros((*shape[:2], *padded), dtype=xt.dtype, device=xt.device).contiguous(memory_format=layout)
        index = (slice(None), slice(None), *(slice(b, b + n) for b, n in zip(begins, shape[2:])))
        interior = source[index]
        pads = [0] * w.rank
    flops = 2.0 * out.size * channels * math.prod(w.kernel)
    low, high = op.activation_range
    act = ACTIVATIONS[op.activation] if op.activation else None
    rt = None if residual is None else logical_view(residual, formats[1])
    affine = post_affine(torch, op)
    # channels-last tensors (a GPU's run) are read from, and a fused ReLU's result handed over in, their slots
    hwc = TensorFormat.HWC
    slots = (
        hand_over(x) if formats[0] == hwc else None,
        hand_over(residual) if residual is not None and formats[1] == hwc else None,
        hand_over(out) if formats[-1] == hwc else None,
    )
    given, given_residual, handed = slots
    if relaid and xt.is_cuda and kernel is None:  # a depthwise layer: its own kernel, epilogue included
        from .depthwise_cuda import depthwise_cuda

        depthwise = depthwise_cuda(op, xt, ot, list(begins), slots)
        if depthwise is not None:
            return depthwise
    if op.activation == "RELU" and interior is None and affine is None and uniform is None:  # cuDNN
        fused = fused_conv_relu(torch, xt, weight, bias_t, rt, ot, strides, pads, dilations, group, slots)
        if fused is not None:
            return fused

    def finish(result: Any, r: Any) -> None:
        if r is not None:
            torch.add(result, r, out=ot)
            if act is not None:
                act(torch, ot, ot, low, high)
            if affine is not None:
                affine(ot, ot)
        elif act is not None:
            if affine is None:
                act(torch, result, ot, low, high)
            else:
                act(torch, result, result, low, high)
                affine(result, ot)
        elif affine is not None:
            affine(result, ot)
        else:
            ot.copy_(result)
        if handed is not None:
            handed.tensor = None  # the buffer holds it

    def staged() -> Any:
        """The input to convolve: the slot's tensor or the buffer, copied into the zero border where there is one."""
        if interior is None:
            return taken(given, xt)
        interior.copy_(taken(given, xt))
        return source

    if xt.is_cuda and bias_t is not None and uniform is None:  # bias, residual, activation: one kernel
        from .conv_epilogue_cuda import conv_epilogue

        epilogue = conv_epilogue(ot, bias_t, rt, op.activation or None, low, high, op.post_affine)
        if epilogue is not None:
            maps_bias = bias_t.reshape(1, -1, *[1] * w.rank)

            def run_epilogue() -> None:
                result = function(staged(), weight, None, strides, pads, dilations, group)
                r = None if given_residual is None else given_residual.tensor
                if epilogue(result, r):
                    if handed is not None:
                        handed.tensor = None
                else:  # (a result laid out unlike the output: the passes one by one)
                    result.add_(maps_bias)
                    finish(result, taken(given_residual, rt))

            return run_epilogue

    def run() -> None:
        use_threads(flops)
        result = function(staged(), weight, bias_t, strides, pads, dilations, group)
        if uniform is not None:
            same_maps(result, *uniform)
        finish(result, taken(given_residual, rt))

    return run


def same_maps(result: Any, group: int, bias: Any) -> None:
    """A uniform kernel's result: every map of a group made bit-identical to the group's first (the maps are equal;
    the library's need not be to the bit, the NumPy kernel's are), then the bias (``[M, 1, ...]`` or None) added:
    the first maps copied aside (a ``1 / maps-per-group`` share of the result), then one pass writing every map as
    its group's first plus its bias, in the result's own layout (for channels-last storage the maps are its fastest
    axis: copying the first map across them through a broadcast view, then adding the bias, took three passes, 3.1
    of SqueezeNet's 7.3 ms of convolutions)."""
    split = result.unflatten(1, (group, -1))
    first = split[:, :, :1].clone()
    if bias is None:
        split.copy_(first.expand_as(split))
        return
    torch_module().add(first, bias.reshape(1, group, -1, *bias.shape[1:]), out=split)


def post_affine(torch: Any, op: ConvolutionOperator) -> Callable[[Any, Any], None] | None:
    """The convolution's scalar affine map after its activation as ``fn(y, out)``: ``out = shift + scale * y`` in
    one pass; None when it has none."""
    scale, shift = op.post_affine
    if scale == 1.0 and shift == 0.0:
        return None
    offset = torch.tensor(shift, dtype=torch.float32)

    def apply(y: Any, out: Any) -> None:
        torch.add(offset, y, alpha=scale, out=out)

    return apply


def logical_view(array: np.ndarray, fmt: TensorFormat) -> Any:
    """A torch view of ``array`` with the tensor's logical ``[N, C, H, W]`` shape: channels-last strides for
    an ``HWC`` array (stored ``[N, H, W, C]``)."""
    tensor = view(array)
    return tensor.permute(0, 3, 1, 2) if fmt == TensorFormat.HWC else tensor


#: tensors with fewer elements than this are relaid by torch's own copy (the views per image cost a few us)
RELAYOUT_BLOCKS_FROM = 1 << 15


def relayout(target: Any, source: Any) -> None:
    """``target.copy_(source)`` between a contiguous and a channels-last ``[N, C, H, W]`` tensor (either way),
    image by image as a 2-D transpose where that is faster than torch's own copy (bit-identical either way):
    torch copies a 2-D transposed matrix in blocks, a 4-D relayout element by element. Measured (one thread,
    us, the views made once): to contiguous, 512 x 508 x 1 315 -> 153, 64 x 112 x 112 570 -> 317; to
    channels-last the blocks win only where a spatial axis is 1 (256 x 512 x 1 165 -> 52; 64 x 112 x 112 374
    -> 336 but 96 x 60 x 60 222 -> 283, 3 x 224 x 224 56 -> 224), so there only where one is. Fewer than 16
    channels or :data:`RELAYOUT_BLOCKS_FROM` elements keep torch's copy."""
    n, channels, height, width = (int(d) for d in source.shape)
    stored_target, stored_source = target.permute(0, 2, 3, 1), source.permute(0, 2, 3, 1)
    to_channels_last = stored_target.is_contiguous() and source.is_contiguous() and (height == 1 or width == 1)
    to_contiguous = target.is_contiguous() and stored_source.is_contiguous()
    if channels < 16 or source.numel() < RELAYOUT_BLOCKS_FROM or not (to_contiguous or to_channels_last):
        target.copy_(source)
        return
    pixels = height * width
    if to_channels_last:  # source contiguous: [C, HW] per image, transposed into the target's [HW, C]
        rows, columns = stored_target.reshape(n, pixels, channels), source.reshape(n, channels, pixels)
    else:  # source channels-last: its [HW, C] per image, transposed into the target's [C, HW]
        rows, columns = target.reshape(n, channels, pixels), stored_source.reshape(n, pixels, channels)
    for image in range(n):
        rows[image].copy_(columns[image].t())


def deconvolution(
    op: DeconvolutionOperator, x: np.ndarray, kernel: np.ndarray | None, bias: np.ndarray | None, out: np.ndarray
) -> Kernel | None:
    """The transposed convolution with ``torch.nn.functional.conv_transpose{1,2,3}d``, bias included.

    ``kernel`` / ``bias``: the ``[C, M / group, *k]`` kernel and ``[M]`` bias inputs, None when they are
    weights. torch pads both ends of an axis alike: the operator's begin padding is torch's, and the
    output size is reached with torch's output padding, which must be below the stride or dilation;
    None otherwise (the NumPy kernel runs), and for other ranks or empty tensors.
    """
    torch = torch_module()
    w = op.window
    if w.rank not in (1, 2, 3) or x.size == 0 or out.size == 0:
        return None
    spatial, out_spatial = x.shape[2:], out.shape[2:]
    begins = [op.pad_begin(a, spatial[a], out_spatial[a]) for a in range(w.rank)]
    extra = [out_spatial[a] - ((spatial[a] - 1) * w.strides[a] - 2 * begins[a] + w.extent(a)) for a in range(w.rank)]
    if any(not 0 <= e < max(w.strides[a], w.dilations[a]) for a, e in enumerate(extra)):
        return None
    channels = x.shape[1]
    xt, ot = view(x), view(out)
    if kernel is None:  # packed [group, M / group * prod(k), C / group]: back to [C, M / group, *k]
        packed = op.weights["kernel"]
        onnx = np.ascontiguousarray(packed.transpose(0, 2, 1).reshape(channels, op.maps // op.group, *w.kernel))
        weight = view(op.on_device("torch_kernel", onnx.astype(np.float32, copy=False), op.xp)).to(xt.dtype)
    else:
        weight = view(kernel)
    bias_t = bias_tensor(op, bias, xt)
    function = (
        torch.nn.functional.conv_transpose1d,
        torch.nn.functional.conv_transpose2d,
        torch.nn.functional.conv_transpose3d,
    )[w.rank - 1]
    strides, dilations, group = list(w.strides), list(w.dilations), op.group
    flops = 2.0 * x.size * (op.maps // op.group) * math.prod(w.kernel)

    def run() -> None:
        use_threads(flops)
        ot.copy_(function(xt, weight, bias_t, strides, begins, extra, group, dilations))

    return run


def normalization(op: NormalizationOperator, inputs: Sequence[Any], out: Any) -> Kernel | None:
    """Layer normalization with ``torch.nn.functional.layer_norm``, instance and group normalization with
    ``group_norm`` (one kernel each, statistics in FLOAT also for HALF tensors).

    None where torch does not compute the layer as the operator does: a scale or bias that only
    broadcasts to the normalized shape (layer), per-group affine values (group), statistics outputs.
    """
    torch = torch_module()
    x = inputs[0]
    if op.stash or x.size == 0:
        return None
    xt, ot = view(x), view(out)
    affine: list[Any] = []
    for name, index, wanted in (("scale", 1, True), ("bias", len(inputs) - 1, op.has_bias)):
        if not wanted:
            affine.append(None)
        elif name in op.weights:
            affine.append(op.torch_weight(name, xt))
        else:
            affine.append(view(inputs[index]).to(xt.dtype))
    if op.mode == "layer":
        axis = op.axis + x.ndim if op.axis < 0 else op.axis
        normalized = tuple(x.shape[axis:])
        if any(a is not None and tuple(a.shape) != normalized for a in affine):
            return None
        weight, bias, eps = affine[0], affine[1], op.epsilon

        def run_layer() -> None:
            use_threads(ELEMENT_FLOPS * x.size)
            ot.copy_(torch.nn.functional.layer_norm(xt, normalized, weight, bias, eps))  # (no out= form)

        return run_layer
    groups = x.shape[1] if op.mode == "instance" else op.groups
    if (op.per_group and op.mode == "group") or any(a is not None and a.numel() != x.shape[1] for a in affine):
        return None
    weight, bias = (None if a is None else a.reshape(-1) for a in affine)

    def run_group() -> None:
        use_threads(ELEMENT_FLOPS * x.size)
        ot.copy_(torch.nn.functional.group_norm(xt, groups, weight, bias, op.epsilon))

    return run_group
