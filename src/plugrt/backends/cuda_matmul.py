"""Matrix products into a given buffer on the GPU, capturable in a CUDA graph where PyTorch is installed.

CuPy's cuBLAS calls refuse to run while a stream is being captured into a CUDA graph;
PyTorch's do not. So when PyTorch is installed, products go through
``torch.matmul(..., out=)`` on the current CuPy stream (zero-copy views through
``__cuda_array_interface__``), which also makes engines with matrix products
capturable. Without PyTorch, CuPy's matmul is used (and graph capture of such
engines raises a clear error).
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from typing import Any

__all__ = ["matmul_into", "torch_for_graphs", "torch_on_stream", "torch_stream"]

_HAS_TORCH = importlib.util.find_spec("torch") is not None
_TORCH_STREAMS: dict[int, Any] = {}
#: torch where it has CUDA, once known (``torch.cuda.is_available()`` reads the environment at every call: two
#: calls a run were ~4 us of an eager run's host time)
_TORCH_CUDA: list[Any] = []


def torch_for_graphs() -> Any:
    """The torch module where PyTorch with CUDA is installed (its kernels run inside captured graphs), else None
    (asked of torch once a process)."""
    if not _TORCH_CUDA:
        if not _HAS_TORCH:
            return None
        import torch

        _TORCH_CUDA.append(torch if torch.cuda.is_available() else None)
    return _TORCH_CUDA[0]


@contextlib.contextmanager
def torch_on_stream(torch: Any, handle: int) -> Iterator[None]:
    """PyTorch launches on the raw stream ``handle`` inside the block, as in ``torch.cuda.stream(...)``, with two
    calls of torch's stream switch instead of its context's device and stream objects (an eager run enters this
    once; ``torch.cuda.stream`` cost ~10 us of host time there); nothing is switched where the stream is torch's
    current one already. A stream of another device than the current one takes ``torch.cuda.stream``."""
    target = torch_stream(torch, handle)
    get = getattr(torch._C, "_cuda_getCurrentStream", None)
    put = getattr(torch._C, "_cuda_setStream", None)
    device = target.device_index
    if get is None or put is None or device != torch._C._cuda_getDevice():
        with torch.cuda.stream(target):
            yield
        return
    previous = get(device)  # (stream id, device index, device type)
    if previous[0] == target.stream_id:
        yield
        return
    put(stream_id=target.stream_id, device_index=device, device_type=target.device_type)
    try:
        yield
    finally:
        put(stream_id=previous[0], device_index=previous[1], device_type=previous[2])


def torch_stream(torch: Any, handle: int) -> Any:
    """PyTorch's wrapper of a raw stream handle (cached; 0 is the legacy default stream)."""
    stream = _TORCH_STREAMS.get(handle)
    if stream is None:
        stream = torch.cuda.ExternalStream(handle) if handle else torch.cuda.default_stream()
        if len(_TORCH_STREAMS) >= 256:
            _TORCH_STREAMS.clear()
        _TORCH_STREAMS[handle] = stream
    return stream


def matmul_into(cp: Any, a: Any, b: Any, out: Any, bias: Any = None) -> None:
    """``out[...] = a @ b`` on CuPy arrays (NumPy broadcasting rules), plus ``bias`` (broadcast over
    the last axis) when given; ``out`` is C-contiguous.

    With PyTorch, a product of a (batched) matrix and one matrix with a bias is one ``addmm``
    (cuBLAS adds the bias in the product's epilogue).
    """
    if not _HAS_TORCH:
        cp.matmul(a, b, out=out)
        if bias is not None:
            cp.add(out, bias, out=out)
        return
    import torch

    with torch.cuda.stream(torch_stream(torch, cp.cuda.get_current_stream().ptr)):
        ta, tb, tout = (torch.as_tensor(t, device="cuda") for t in (a, b, out))
        if bias is None:
            torch.matmul(ta, tb, out=tout)
            return
        tbias = torch.as_tensor(bias, device="cuda").reshape(-1)
        single = all(d == 1 for d in tb.shape[:-2]) and tbias.numel() == tout.shape[-1]
        if single and tout.dim() >= 2 and tout.shape[:-1].numel() == ta.shape[:-1].numel():
            torch.addmm(tbias, ta.reshape(-1, ta.shape[-1]), tb.reshape(tb.shape[-2:]), out=tout.view(-1, tout.shape[-1]))
        else:
            torch.matmul(ta, tb, out=tout)
            tout.add_(tbias)
