"""cuDNN's fused convolution epilogues on a GPU: convolution, bias, [residual add,] ReLU as one kernel.

TensorRT runs a convolution with its bias, the residual ``Add`` and the ``ReLU`` after it as one kernel.
PyTorch exposes cuDNN's fused forms as ``aten::cudnn_convolution_relu`` and
``aten::cudnn_convolution_add_relu`` (``relu(conv(x, w) + bias [+ z])``): the convolution's result is never
stored and read again, which the unfused epilogue (``torch_cpu_kernels.convolution``: a convolution into a
temporary, then the add and the activation into the output) costs per layer. Their ``out=`` forms compute into
a temporary and copy it into the engine's buffer; between the layers of a channels-last run the result is
handed over instead (``ops/hand_over.py``). Whether cuDNN fuses these on this GPU, type
and layout is probed once per (device, type, layout) on a small case checked against the unfused result; where
it does not, the unfused epilogue runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .hand_over import HandOver, taken
from .torch_cpu import Kernel

__all__ = ["fused_conv_relu"]

_PROBED: dict[tuple[str, Any, bool], bool] = {}


def fused_conv_relu(
    torch: Any,
    x: Any,
    weight: Any,
    bias: Any,
    residual: Any,
    out: Any,
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
    groups: int,
    slots: tuple[HandOver | None, HandOver | None, HandOver | None] = (None, None, None),
) -> Kernel | None:
    """``out = relu(conv(x, weight) + bias [+ residual])`` as one cuDNN kernel, or None where it does not apply
    (not CUDA, not 2-D, or cuDNN's fused form failed its probe for this device and type).

    ``slots``: the hand-over slots of ``x``, ``residual`` and ``out`` in a channels-last run, or None each
    (``ops/hand_over.py``): the input and residual are read from their slots where these hold a tensor, and
    the result, which PyTorch's ``out=`` forms of these kernels would compute into a temporary and copy into
    ``out`` (ResNet-50 fp16 at batch 32: 53 copies, 20% of its kernel time), is handed over instead."""
    if not (x.is_cuda and x.dim() == 4 and weight.dim() == 4):
        return None
    layouts = {_channels_last(torch, t) for t in (x, out, *([] if residual is None else [residual]))}
    nhwc = layouts.pop() if len(layouts) == 1 else None
    if nhwc is None or not _works(torch, x.device, x.dtype, nhwc):
        return None  # (tensors of both layouts: the unfused epilogue, as probed)
    args = (list(strides), list(pads), list(dilations), groups)
    given, given_residual, handed = slots
    if given is None and given_residual is None and handed is None:
        if residual is None:
            relu = torch.ops.aten.cudnn_convolution_relu.out
            return lambda: relu(x, weight, bias, *args, out=out)  # type: ignore[no-any-return]
        add_relu = torch.ops.aten.cudnn_convolution_add_relu.out
        return lambda: add_relu(x, weight, residual, 1.0, bias, *args, out=out)  # type: ignore[no-any-return]
    relu, add_relu = torch.ops.aten.cudnn_convolution_relu.default, torch.ops.aten.cudnn_convolution_add_relu.default
    layout = torch.channels_last if nhwc else torch.contiguous_format

    def run() -> None:
        source = taken(given, x)
        if residual is None:
            result = relu(source, weight, bias, *args)
        else:
            result = add_relu(source, weight, taken(given_residual, residual), 1.0, bias, *args)
        if handed is not None and result.is_contiguous(memory_format=layout):
            handed.tensor = result
            return
        out.copy_(result)
        if handed is not None:
            handed.tensor = None  # the buffer holds it

    return run


def _channels_last(torch: Any, tensor: Any) -> bool:
    """Whether ``tensor`` ``[N, C, H, W]`` has channels-last strides (not also plainly contiguous)."""
    return not tensor.is_contiguous() and bool(tensor.is_contiguous(memory_format=torch.channels_last))


def _works(torch: Any, device: Any, dtype: Any, nhwc: bool) -> bool:
    """Whether both fused forms give the unfused result on ``device`` in ``dtype``, on channels-last tensors
    where ``nhwc`` (probed once each)."""
    key = (str(device), dtype, nhwc)
    if key not in _PROBED:
        _PROBED[key] = _probe(torch, device, dtype, nhwc)
    return _PROBED[key]


def _probe(torch: Any, device: Any, dtype: Any, nhwc: bool) -> bool:
    try:
        generator = torch.Generator(device="cpu").manual_seed(0)
        layout = torch.channels_last if nhwc else torch.contiguous_format

        def make(*shape: int) -> Any:
            tensor = torch.randn(*shape, generator=generator).to(device=device, dtype=dtype)
            return tensor.contiguous(memory_format=layout) if len(shape) == 4 else tensor

        x, w, b, z = make(2, 8, 9, 9), make(16, 4, 3, 3), make(16), make(2, 16, 5, 5)
        args = ([2, 2], [1, 1], [1, 1], 2)
        want = torch.nn.functional.conv2d(x, w, b, *args)
        got, got_add = torch.empty_like(z), torch.empty_like(z)
        torch.ops.aten.cudnn_convolution_relu.out(x, w, b, *args, out=got)
        torch.ops.aten.cudnn_convolution_add_relu.out(x, w, z, 1.0, b, *args, out=got_add)
        tolerance = 2e-2 if dtype == torch.float16 else 1e-3
        scale = float(want.abs().max()) + 1.0
        ok = float((got - want.clamp_min(0)).abs().max()) <= tolerance * scale
        return ok and float((got_add - (want + z).clamp_min(0)).abs().max()) <= tolerance * scale
    except Exception:  # not built with these kernels, no fused engine for this type: the unfused epilogue
        return False
