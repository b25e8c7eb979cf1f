"""The engine's buffers as oneDNN memories (:mod:`.onednn`), for the kernels that call oneDNN directly
(``onednn_conv.py``, ``onednn_pooling.py``): their layouts, the channels-last staging of LINEAR tensors, and a
layer's run.

oneDNN's fast kernels read and write channels-last tensors (``[N, H, W, C]``, ``TensorFormat.HWC``): a LINEAR
(NCHW) tensor of more than one channel and pixel goes through a channels-last buffer of the layer's and a reorder
primitive; one of one channel or one pixel is the same bytes and is told so. Every buffer is described with the dense strides of its layout,
also along axes of one element (oneDNN recognises a layout by them: a one-pixel-wide map described with a buffer's
own strides got only the reference kernel).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core.types import TensorFormat
from . import onednn
from .blas_threads import engine_threads, machine_busy, threads_for
from .depthwise_numba import source_pixels
from .hand_over import hand_over
from .torch_cpu import MIN_OPENMP_FLOPS, Kernel

__all__ = [
    "AXES",
    "FIRST_STAGE",
    "bound_run",
    "described",
    "fit",
    "launcher",
    "one_layout",
    "staged",
    "thread_counts",
]

#: the axes of a stored tensor in the logical [N, C, H, W] order, by its format
AXES = {TensorFormat.HWC: (0, 3, 1, 2), TensorFormat.LINEAR: (0, 1, 2, 3)}


#: the first of the thread buffers a layer stages its tensors in (:func:`staged`; before it, the scratchpad's)
FIRST_STAGE = onednn.SCRATCH_SLOT + 1


def fit(arrays: Sequence[Any], formats: Sequence[TensorFormat]) -> bool:
    """Whether oneDNN's kernels can take these buffers as they are: C-contiguous 4-D FLOAT NumPy arrays, none empty,
    each HWC or LINEAR."""
    if any(f not in AXES for f in formats):
        return False
    return all(
        isinstance(a, np.ndarray) and a.dtype == np.float32 and a.ndim == 4 and a.size and a.flags.c_contiguous
        for a in arrays
    )


def described(lib: Any, shape: Sequence[int], fmt: TensorFormat) -> onednn.Desc:
    """The descriptor of a C-contiguous buffer holding a tensor of logical ``[N, C, H, W]`` shape ``shape`` stored as
    ``fmt`` (HWC: ``[N, H, W, C]``), with the dense strides of that layout along every axis (see the module's note)."""
    if fmt == TensorFormat.HWC:
        _, c, h, w = shape
        return onednn.Desc(lib, shape, [h * w * c, 1, w * c, c])
    return onednn.Desc(lib, shape, dense_strides(shape))


def dense_strides(shape: Sequence[int]) -> list[int]:
    """The element strides of a C-ordered array of ``shape``."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= int(d)
    return strides[::-1]


def staged(
    lib: Any, array: np.ndarray, fmt: TensorFormat, shape: list[int], into: bool, slot: int
) -> tuple[onednn.Memory, onednn.Primitive | None]:
    """The memory a primitive reads (``into``) or writes for the buffer ``array`` stored as ``fmt``, of logical shape
    ``shape`` as oneDNN is told it: the buffer itself, or for a LINEAR tensor of more than one channel and pixel a
    channels-last copy with the reorder primitive between the two (run before the layer's primitive for what it
    reads, after it for what it writes). The copy lives only during the layer's run, in the running thread's buffer
    ``slot`` (:meth:`~.onednn.Memory.transient`; a layer stages each tensor in a slot of its own, from
    :data:`FIRST_STAGE`)."""
    if fmt == TensorFormat.HWC or shape[1] == 1 or shape[2] * shape[3] == 1:  # (the same bytes as channels-last)
        desc = described(lib, shape, TensorFormat.HWC)
        return onednn.Memory(lib, desc, array.ctypes.data, hold=array), None
    stage_desc = described(lib, shape, TensorFormat.HWC)
    buffer_desc = described(lib, shape, fmt)
    stage_memory = onednn.Memory.transient(lib, stage_desc, slot)
    buffer = onednn.Memory(lib, buffer_desc, array.ctypes.data, hold=array)
    if into:
        move = onednn.reordering(lib, buffer_desc, stage_desc)
        move.bind([(onednn.ARG_SRC, buffer), (onednn.ARG_DST, stage_memory)])
    else:
        move = onednn.reordering(lib, stage_desc, buffer_desc)
        move.bind([(onednn.ARG_SRC, stage_memory), (onednn.ARG_DST, buffer)])
    return stage_memory, move


def one_layout(
    lib: Any,
    sources: Sequence[tuple[np.ndarray, TensorFormat, list[int]]],
    out: np.ndarray,
    out_format: TensorFormat,
    out_shape: list[int],
) -> tuple[list[tuple[onednn.Memory, onednn.Primitive | None]], tuple[onednn.Memory, onednn.Primitive | None]]:
    """The memories a primitive of several tensors reads (``sources``: buffer, format, logical shape) and writes
    (``out``), in one layout: the buffers as they are where their formats agree, else each staged channels-last
    (:func:`staged`; oneDNN's concat and binary primitives have only their reference kernels across layouts); each
    with its reorder or None."""
    if all(fmt == out_format for _, fmt, _ in sources):
        reads: list[tuple[onednn.Memory, onednn.Primitive | None]] = [
            (onednn.Memory(lib, described(lib, shape, fmt), x.ctypes.data, hold=x), None) for x, fmt, shape in sources
        ]
        return reads, (onednn.Memory(lib, described(lib, out_shape, out_format), out.ctypes.data, hold=out), None)
    reads = [staged(lib, x, fmt, shape, True, FIRST_STAGE + k) for k, (x, fmt, shape) in enumerate(sources)]
    return reads, staged(lib, out, out_format, out_shape, False, FIRST_STAGE + len(sources))


def bound_run(
    lib: Any,
    make: Any,
    flops: float,
    args: Sequence[tuple[int, onednn.Memory]],
    out: np.ndarray,
    out_format: TensorFormat,
    reads: Sequence[tuple[np.ndarray, TensorFormat, onednn.Memory, onednn.Primitive | None]] = (),
    after: Sequence[Any] = (),
) -> Kernel | None:
    """The primitives ``make`` describes (one per thread count, :func:`thread_counts`) bound to ``args`` (argument,
    memory), as a :func:`launcher` run; None where oneDNN has only its reference kernel or a call fails."""
    try:
        primitives = onednn.fast_primitives(lib, make, None, thread_counts(flops))
        if primitives is None:
            return None
        for primitive in primitives:
            primitive.bind(args)
    except onednn.OneDnnError:
        return None
    return launcher(lib, primitives, flops, reads, out, out_format, [step for step in after if step is not None])


def thread_counts(flops: float) -> list[int]:
    """The thread counts a layer of ``flops`` operations may run on, as :func:`launcher` chooses at each run (one, and
    the engine's from :data:`~.torch_cpu.MIN_OPENMP_FLOPS`): oneDNN splits the work when a primitive is made, so a
    layer has one primitive per count."""
    most = engine_threads()
    return [1] if most <= 1 or flops < MIN_OPENMP_FLOPS else [1, most]


def launcher(
    lib: Any,
    primitives: Sequence[onednn.Primitive],
    flops: float,
    reads: Sequence[tuple[np.ndarray, TensorFormat, onednn.Memory, onednn.Primitive | None]],
    out: np.ndarray,
    out_format: TensorFormat,
    after: Sequence[Any] = (),
    before: Sequence[Any] = (),
    split: Callable[[], Any] | None = None,
) -> Kernel:
    """A layer's run: each buffer it ``reads`` (the buffer, its format, the memory the primitive reads, the reorder
    staging it or None) taken from its hand-over slot where a PyTorch kernel left a tensor there (HWC), LINEAR ones
    staged channels-last, and the steps ``before`` (callables) run; the primitive made for
    :func:`~.blas_threads.threads_for`'s count; then ``after`` (the output's reorder, other finishing steps: callables
    or primitives) in order; an HWC output's slot emptied. ``split`` makes the layer's work in parts (an object
    whose ``run`` runs them, or None: :class:`~.onednn_parts.Parts`): on a busy machine
    (:func:`~.blas_threads.machine_busy`) they are made at the first run and run instead of the primitive."""
    single = primitives[0] if len(primitives) == 1 else None
    by_count = {p.threads: p for p in primitives}
    handed = [(hand_over(a), a, memory) for a, fmt, memory, _ in reads if fmt == TensorFormat.HWC]
    moves = [move.run for _, _, _, move in reads if move is not None] + list(before)
    finishing = [step.run if isinstance(step, onednn.Primitive) else step for step in after]
    slot = hand_over(out) if out_format == TensorFormat.HWC else None

    parts: list[Any] = []  # made at the first run on a busy machine (None where the layer has none)

    def run() -> None:
        primitive = single or by_count.get(threads_for(flops, MIN_OPENMP_FLOPS), primitives[0])
        taken = []
        for given, buffer, memory in handed:  # a PyTorch kernel's tensor where one is in the slot, else the buffer
            pixels = source_pixels(given.tensor, buffer)
            memory.point(lib, pixels.ctypes.data)
            taken.append(pixels)  # (held until oneDNN has read them)
        for move in moves:  # LINEAR tensors into the channels-last buffers the primitive reads, other preparations
            move()
        if split is not None and machine_busy():
            if not parts:
                parts.append(split())
            (parts[0] or primitive).run()
        else:
            primitive.run()
        for step in finishing:
            step()
        if slot is not None:
            slot.tensor = None  # the buffer holds the result

    return run
