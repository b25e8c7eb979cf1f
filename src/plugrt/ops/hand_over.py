"""Hand-over slots of channels-last buffers: a layer of a channels-last run may leave its result, a torch tensor,
in the slot of the HWC buffer it would write instead of copying it there; the next layer of the run takes it
from the slot (see :mod:`plugrt.ops.torch_cpu` on hand-over, and ``torch_channels_last.py``)."""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["HandOver", "hand_over"]


class HandOver:
    """The slot of one HWC buffer: the torch tensor its last writer left there instead of the buffer, or None
    (see the module's note on hand-over)."""

    __slots__ = ("__weakref__", "tensor")

    def __init__(self) -> None:
        self.tensor: Any = None


_SLOTS: weakref.WeakValueDictionary[tuple[int, int], HandOver] = weakref.WeakValueDictionary()


def hand_over(array: Any) -> HandOver:
    """The hand-over slot of the buffer ``array`` occupies (by address and size; kept while a kernel holds it)."""
    key = (int(array.__array_interface__["data"][0]), int(array.nbytes))
    slot = _SLOTS.get(key)
    if slot is None:
        slot = HandOver()
        _SLOTS[key] = slot
    return slot
