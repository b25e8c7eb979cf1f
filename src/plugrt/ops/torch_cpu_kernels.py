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
from .torch_cpu import Kernel, hand_over, torch_module, use_threads, view

if TYPE_CHECKING:
    from .conv import ConvolutionOperator
    from .deconv import DeconvolutionOperator
    from .normalization import NormalizationOperator
    from .pooling import PoolingOperator

__all__ = [
    "ACTIVATIONS",
    "POST_OPS",
    "UNARY",
    "activation",
    "convolution",
    "convolution_channels_last",
    "deconvolution",
    "max_pooling",
    "normalization",
    "softmax",
    "squeeze_excitation",
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

#: activations with a PyTorch kernel: type -> fn(torch, x, out, alpha, beta) writing into ``out``
ACTIVATIONS: dict[str, Callable[[Any, Any, Any, float, float], None]] = {
    "RELU": lambda torch, x, out, a, b: torch.clamp_min(x, 0.0, out=out),
    "SIGMOID": lambda torch, x, out, a, b: torch.sigmoid(x, out=out),
    "TANH": lambda torch, x, out, a, b: torch.tanh(x, out=out),
    "GELU_ERF": lambda torch, x, out, a, b: torch._C._nn.gelu(x, out=out),
    "GELU_TANH": lambda torch, x, out, a, b: torch._C._nn.gelu(x, approximate="tanh", out=out),
    "LEAKY_RELU": lambda torch, x, out, a, b: torch._C._nn.leaky_relu(x, a, out=out),
    "HARD_SIGMOID": lambda torch, x, out, a, b: _hard_sigmoid(torch, x, out, a, b),
    "HARD_SWISH": lambda torch, x, out, a, b: torch._C._nn.hardswish(x, out=out),
    "CLIP": lambda torch, x, out, a, b: _clip(torch, x, out, a, b),
}


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
_ELEMENT_FLOPS = 20


def unary(op_name: str, x: np.ndarray, out: np.ndarray) -> Kernel | None:
    """``out = op(x)`` with torch's vectorised function of that name."""
    function = getattr(torch_module(), UNARY[op_name])
    xt, ot = view(x), view(out)
    flops = _ELEMENT_FLOPS * x.size

    def run() -> None:
        use_threads(flops)
        function(xt, out=ot)

    return run


def activation(kind: str, alpha: float, beta: float, x: np.ndarray, out: np.ndarray) -> Kernel | None:
    """``out = f(x)`` for activation type ``kind``."""
    torch = torch_module()
    function = ACTIVATIONS[kind]
    xt, ot = view(x), view(out)
    flops = _ELEMENT_FLOPS * x.size

    def run() -> None:
        use_threads(flops)
        function(torch, xt, ot, alpha, beta)

    return run


def softmax(axis: int, x: np.ndarray, scale: np.ndarray | None, out: np.ndarray) -> Kernel | None:
    """``out = softmax(x * scale)`` over one axis (``scale`` None: no scaling)."""
    torch = torch_module()
    xt, ot = view(x), view(out)
    flops = _ELEMENT_FLOPS * x.size
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


def _bias(op: ConvolutionOperator | DeconvolutionOperator, bias: Any, like: Any) -> Any:
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
) -> Kernel | None:
    """The convolution (bias and fused epilogue included) with ``torch.nn.functional.conv{1,2,3}d``.

    ``kernel`` / ``bias``: the kernel ``[M, C / group, *k]`` and bias ``[M]`` inputs, None when they are
    weights; ``residual``: the tensor added before the activation, or None. The epilogue is the pass
    that writes ``out`` from torch's result (the residual's sum, else the activation, else a copy). Padding that differs between an axis's two ends (TensorFlow's "same" at stride 2) copies
    the input into a zero-bordered buffer made here first. None for what torch does not do as the
    operator: other ranks, a uniform kernel (bit-identical maps), empty tensors.
    """
    torch = torch_module()
    w = op.window
    if w.rank not in (1, 2, 3) or op.uniform or x.size == 0 or out.size == 0:
        return None
    _, begins, ends = w.resolve(x.shape[2:])
    padded = [x.shape[2 + a] + begins[a] + ends[a] for a in range(w.rank)]
    sizes = [(padded[a] - w.extent(a)) // w.strides[a] + 1 for a in range(w.rank)]
    if tuple(sizes) != tuple(out.shape[2:]):
        return None
    channels = x.shape[1] // op.group
    xt, ot = view(x), view(out)
    if kernel is None:  # the packing keeps the order
        weight = op.torch_weight("kernel", xt, (op.maps, channels, *w.kernel))
    else:
        weight = view(kernel)
    bias_t = _bias(op, bias, xt)
    function = (torch.nn.functional.conv1d, torch.nn.functional.conv2d, torch.nn.functional.conv3d)[w.rank - 1]
    strides, pads, dilations, group = list(w.strides), list(begins), list(w.dilations), op.group
    source, interior = xt, None
    if begins != ends:  # torch pads both ends alike: the input goes into a zero-bordered buffer, unpadded
        source = torch.zeros((*x.shape[:2], *padded), dtype=xt.dtype, device=xt.device)
        index = (slice(None), slice(None), *(slice(b, b + n) for b, n in zip(begins, x.shape[2:])))
        interior = source[index]
        pads = [0] * w.rank
    flops = 2.0 * out.size * channels * math.prod(w.kernel)
    low, high = op.activation_range
    act = ACTIVATIONS[op.activation] if op.activation else None
    rt = None if residual is None else view(residual)
    affine = _post_affine(torch, op)
    if op.activation == "RELU" and interior is None and affine is None:  # one cuDNN kernel where it fuses
        fused = fused_conv_relu(torch, xt, weight, bias_t, rt, ot, strides, pads, dilations, group)
        if fused is not None:
            return fused

    def run() -> None:
        use_threads(flops)
        if interior is not None:
            interior.copy_(xt)
        result = function(source, weight, bias_t, strides, pads, dilations, group)
        if rt is not None:
            torch.add(result, rt, out=ot)
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

    return run


def _post_affine(torch: Any, op: ConvolutionOperator) -> Callable[[Any, Any], None] | None:
    """The convolution's scalar affine map after its activation as ``fn(y, out)``: ``out = shift + scale * y`` in
    one pass; None when it has none."""
    scale, shift = op.post_affine
    if scale == 1.0 and shift == 0.0:
        return None
    offset = torch.tensor(shift, dtype=torch.float32)

    def apply(y: Any, out: Any) -> None:
        torch.add(offset, y, alpha=scale, out=out)

    return apply


def _logical(array: np.ndarray, fmt: TensorFormat) -> Any:
    """A torch view of ``array`` with the tensor's logical ``[N, C, H, W]`` shape: channels-last strides for
    an ``HWC`` array (stored ``[N, H, W, C]``)."""
    tensor = view(array)
    return tensor.permute(0, 3, 1, 2) if fmt == TensorFormat.HWC else tensor


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
    copied into a channels-last buffer first, a LINEAR output written from the channels-last result.
    The activation is oneDNN's post-op where it has it (:data:`POST_OPS`), a residual its ``add``
    post-op when both are channels-last (then only ReLU can follow inside), anything else the pass
    that writes ``out``. Padding that differs between an axis's ends is made the same by
    :func:`_symmetric_pads`, the result cropped as it is written. None where it does not apply:
    other ranks, a kernel or bias given as an input, a uniform kernel, empty tensors.
    """
    torch = torch_module()
    w = op.window
    if w.rank != 2 or op.uniform or "kernel" not in op.weights or op.bias_input is not None:
        return None
    x_format, out_format = formats[0], formats[-1]
    xt, ot = _logical(x, x_format), _logical(out, out_format)
    if xt.numel() == 0 or ot.numel() == 0:
        return None
    shape = tuple(xt.shape)
    sizes, begins, ends = w.resolve(shape[2:])
    if tuple(sizes) != tuple(ot.shape[2:]):
        return None
    pads, skip = _symmetric_pads(w, begins, ends)
    padded = [(shape[2 + a] + 2 * pads[a] - w.extent(a)) // w.strides[a] + 1 for a in range(2)]
    exact = not any(skip) and padded == list(sizes)
    crop = None if exact else (slice(None), slice(None), *(slice(k, k + n) for k, n in zip(skip, sizes)))
    channels_last = torch.channels_last
    channels = shape[1] // op.group
    strides, dilations, group = list(w.strides), list(w.dilations), op.group
    weight = op.torch_weight("kernel", xt, (op.maps, channels, *w.kernel)).contiguous(memory_format=channels_last)
    packed = torch.ops.mkldnn._reorder_convolution_weight(weight, pads, strides, dilations, group, list(shape))
    bias_t = _bias(op, None, xt)
    source = xt if x_format == TensorFormat.HWC else torch.empty(shape).contiguous(memory_format=channels_last)
    staged = source is not xt
    flops = 2.0 * ot.numel() * channels * math.prod(w.kernel)
    low, high = op.activation_range
    conv = torch.ops.mkldnn._convolution_pointwise
    rt = None if residual is None else _logical(residual, formats[1])
    post = POST_OPS.get(op.activation)
    affine = _post_affine(torch, op)
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
            ot.copy_(result)

    def start() -> Any:
        use_threads(flops)
        if given is not None and given.tensor is not None:
            return given.tensor
        if staged:
            source.copy_(xt)
        return source

    if rt is None:
        attr, scalars = post(low, high) if post is not None else ("none", [])
        after = ACTIVATIONS[op.activation] if op.activation and post is None else None

        def run() -> None:
            result = conv(start(), packed, bias_t, pads, strides, dilations, group, attr, scalars, "")
            deliver(result if crop is None else result[crop], after)

        return run
    # oneDNN adds a channels-last residual as a post-op (only ReLU may follow there) unless the output is cropped
    inside = crop is None and rt.is_contiguous(memory_format=channels_last)
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


def max_pooling(
    op: PoolingOperator, x: np.ndarray, out: np.ndarray, formats: Sequence[TensorFormat], channels_last: bool
) -> Kernel | None:
    """2-D MAX pooling with ``torch.max_pool2d``: on channels-last tensors (``channels_last``; a LINEAR input
    copied into a channels-last buffer first), else on NCHW ones. None where torch pads otherwise than the
    window (see ``PoolingOperator.torch_supports``) or for empty tensors."""
    torch = torch_module()
    w = op.window
    xt, ot = _logical(x, formats[0]), _logical(out, formats[-1])
    if w.rank != 2 or xt.numel() == 0 or ot.numel() == 0:
        return None
    shape = tuple(xt.shape)
    sizes, begins, ends = w.resolve(shape[2:])
    if list(begins) != list(ends) or any(2 * b > k for b, k in zip(begins, w.kernel)):
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
    source = xt
    if channels_last and formats[0] != TensorFormat.HWC:
        source = torch.empty(shape).contiguous(memory_format=torch.channels_last)
    staged = source is not xt
    kernel, strides, pads, dilations = list(w.kernel), list(w.strides), list(begins), list(w.dilations)
    ceil = w.ceil_mode
    flops = float(ot.numel() * math.prod(w.kernel))
    given = hand_over(x) if formats[0] == TensorFormat.HWC else None
    handed = hand_over(out) if formats[-1] == TensorFormat.HWC else None

    def run() -> None:
        use_threads(flops)
        pooled = given.tensor if given is not None and given.tensor is not None else source
        if staged and pooled is source:
            source.copy_(xt)
        result = torch.max_pool2d(pooled, kernel, strides, pads, dilations, ceil)
        if handed is not None:
            handed.tensor = result
        else:
            ot.copy_(result)

    return run


def squeeze_excitation(
    acts: Sequence[tuple[str, float, float]],
    weights: tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray | None],
    x: np.ndarray,
    out: np.ndarray,
    formats: Sequence[TensorFormat],
) -> Kernel | None:
    """The squeeze-and-excitation block (``ops/squeeze_excitation.py``) on ``[N, C, H, W]`` tensors, NCHW or
    channels-last (``formats``: the input's and the output's): the mean, two small products with their
    activations, the broadcast product; a channels-last output is handed over."""
    torch = torch_module()
    xt, ot = _logical(x, formats[0]), _logical(out, formats[-1])
    if xt.dim() != 4 or xt.numel() == 0:
        return None
    w1, b1, w2, b2 = (None if w is None else view(w) for w in weights)
    steps = [(w1, b1, acts[0]), (w2, b2, acts[1])]
    given = hand_over(x) if formats[0] == TensorFormat.HWC else None
    handed = hand_over(out) if formats[-1] == TensorFormat.HWC else None
    flops = float(_ELEMENT_FLOPS * xt.numel())

    def run() -> None:
        use_threads(flops)
        source = given.tensor if given is not None and given.tensor is not None else xt
        scale = source.mean((2, 3))
        for weight, bias, (name, alpha, beta) in steps:
            scale = torch.mm(scale, weight) if bias is None else torch.addmm(bias, scale, weight)
            if name:
                ACTIVATIONS[name](torch, scale, scale, alpha, beta)
        scale = scale[:, :, None, None]
        if handed is not None:
            handed.tensor = source * scale
        else:
            torch.mul(source, scale, out=ot)

    return run


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
    bias_t = _bias(op, bias, xt)
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
            use_threads(_ELEMENT_FLOPS * x.size)
            ot.copy_(torch.nn.functional.layer_norm(xt, normalized, weight, bias, eps))  # (no out= form)

        return run_layer
    groups = x.shape[1] if op.mode == "instance" else op.groups
    if (op.per_group and op.mode == "group") or any(a is not None and a.numel() != x.shape[1] for a in affine):
        return None
    weight, bias = (None if a is None else a.reshape(-1) for a in affine)

    def run_group() -> None:
        use_threads(_ELEMENT_FLOPS * x.size)
        ot.copy_(torch.nn.functional.group_norm(xt, groups, weight, bias, op.epsilon))

    return run_group
