"""Hand-over slots of channels-last buffers: a layer of a channels-last run may leave its result, a torch tensor,
in the slot of the HWC buffer it would write instead of copying it there; the next layer of the run takes it
from the slot (see :mod:`plugrt.ops.torch_cpu` on hand-over, and ``torch_channels_last.py``). Host and device
buffers both have slots (a device's by its CuPy array's address; in a CUDA graph the capture's tensors are
the ones its replays read and write, from the graph's memory pool)."""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["HandOver", "hand_over", "taken"]


class HandOver:
    """The slot of one HWC buffer: the torch tensor its last writer left there instead of the buffer, or None
    (see the module's note on hand-over)."""

    __slots__ = ("__weakref__", "tensor")

    def __init__(self) -> None:
        self.tensor: Any = None


_SLOTS: weakref.WeakValueDictionary[tuple[bool, int, int], HandOver] = weakref.WeakValueDictionary()


def hand_over(array: Any) -> HandOver:
    """The hand-over slot of the buffer ``array`` occupies (a NumPy or CuPy array; by where it is, its address
    and its size; kept while a kernel holds it)."""
    host = hasattr(array, "__array_interface__")
    address = array.__array_interface__["data"][0] if host else array.__cuda_array_interface__["data"][0]
    key = (host, int(address), int(array.nbytes))
    slot = _SLOTS.get(key)
    if slot is None:
        slot = HandOver()
        _SLOTS[key] = slot
    return slot


def taken(slot: HandOver | None, buffer: Any) -> Any:
    """What a reader of a buffer reads: the tensor its slot holds, else ``buffer`` (a torch view of it)."""
    if slot is None or slot.tensor is None:
        return buffer
    return slot.tensor
