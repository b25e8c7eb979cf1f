"""The C heap of a process whose engine runs channels-last PyTorch kernels on the CPU: freed blocks are kept.

PyTorch's CPU tensors come from ``malloc``. glibc serves a block above its mmap threshold (128 KiB at first, raised
to at most 32 MiB as such blocks are freed) with fresh pages from the kernel and returns them when it is freed, and
gives back the top of its heap above a trim threshold. A channels-last run hands over the tensors its oneDNN
kernels return (``ops/hand_over.py``), so every run allocates its large activations anew: above the threshold each
one is new pages, zeroed by the kernel and faulted in one by one. MobileNetV2 at batch 8 (one thread): its 1x1
convolution into a 38.5 MB tensor took 12.8 ms a run against 2.5 ms with the freed blocks kept; the whole run 40-55
against 35 ms (onnxruntime keeps its own arena: 40 ms).

:func:`keep_freed_memory` raises both thresholds once per process (``mallopt``), so freed blocks stay in the heap
and the next run's tensors reuse them. The process then keeps what its largest run freed (the engine's runs
allocate the same sizes each time). Only channels-last runs ask for it (``ops/torch_cpu.py``): elsewhere the kept
blocks cost peak memory and save nothing measurable (BERT-base's peak at batch 1: 760 -> 791 MB). Only where the
C library is glibc; ``PLUGRT_KEEP_HEAP=0`` leaves the heap as it is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

__all__ = ["KEEP_BELOW", "SWITCH", "keep_freed_memory", "return_freed_memory"]

#: blocks below this size come from the heap and stay there when freed (glibc's default: 128 KiB rising to 32 MiB)
KEEP_BELOW = 1 << 30
#: ``PLUGRT_KEEP_HEAP=0`` leaves glibc's thresholds as they are
SWITCH = "PLUGRT_KEEP_HEAP"

#: glibc's ``mallopt`` parameters
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3

_LOCK = threading.Lock()
_STATE: dict[str, bool | None] = {"kept": None}
_TRIM: list[object] = []


def keep_freed_memory() -> bool:
    """Keep freed blocks up to :data:`KEEP_BELOW` in the C heap for the rest of the process (glibc's
    ``mallopt``), once; True where that is in effect. False without glibc, where ``mallopt`` refused, or with
    ``PLUGRT_KEEP_HEAP=0``."""
    with _LOCK:
        if _STATE["kept"] is None:
            _STATE["kept"] = os.environ.get(SWITCH, "1") != "0" and _set_thresholds()
        return bool(_STATE["kept"])


def _set_thresholds() -> bool:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return False
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):  # not glibc
        return False
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, KEEP_BELOW)) and bool(mallopt(_M_TRIM_THRESHOLD, KEEP_BELOW))


def return_freed_memory() -> None:
    """Give the free pages of the C heap back to the system (glibc's ``malloc_trim``; nothing elsewhere, nor where
    :func:`keep_freed_memory` is in effect). glibc keeps what is freed below its trim threshold, which it raises as
    large blocks are freed (up to 64 MiB): after a build's timing buffers PP-OCR det held 61 MB of freed heap (196
    -> 135 MB with this), and a plain weight freed after packing stays otherwise while the packed ones are
    allocated elsewhere (BERT-base's peak after its first run 871 MB without this, 752 MB with it). A call costs
    tens of microseconds."""
    if _STATE["kept"]:
        return
    if not _TRIM:
        try:
            trim = ctypes.CDLL(None).malloc_trim
        except (AttributeError, OSError):
            trim = None
        _TRIM.append(trim)
    if _TRIM[0] is not None:
        _TRIM[0](0)  # type: ignore[operator]
