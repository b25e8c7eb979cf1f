"""Attention on the CPU as oneDNN's matmul and softmax primitives called directly (:mod:`.onednn`).

``out = softmax((a @ b) [* factor] [+ mask] [* post]) @ v`` over every head at once: the first product's primitive
scales the scores and adds the mask as its post-ops (a linear eltwise, a binary add whose operand broadcasts, e.g.
BERT's ``[B, 1, 1, S]`` padding mask or GPT-2's ``[1, 1, S, S]`` causal one), the softmax primitive runs in place on
them, the second product writes the output through its strides (the transpose that follows attention in an export is
a view). The operands are read through their strides too (the heads of ``[B, S, H, D]`` as ``[B, H, S, D]``, no
copies). Scores that do not fit in the cache (from :data:`~.attention_blocks.MIN_BLOCKED_SCORES`, Whisper's 6 x 1500
x 1500) are computed in blocks of one head's query rows (:data:`BLOCK_SCORES` scores), the three primitives' memories
pointed at each block in turn. The scores are not written to the operator's second
output (as with PyTorch's kernels). BERT-base's heads (12 x 128 x 64, one thread): 0.71 ms against PyTorch's batched
products and softmax over contiguous copies 0.73 ms (docs/benchmarks.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import onednn
from .attention_blocks import MIN_BLOCKED_SCORES
from .blas_threads import threads_for
from .onednn_buffers import thread_counts
from .torch_cpu import MIN_OPENMP_FLOPS, Kernel

__all__ = ["BLOCK_SCORES", "attention_onednn"]

#: scores of a block (one head's query rows) where they are computed in blocks: the larger a block, the fewer times
#: oneDNN's products repack their right operand; Whisper-tiny's 6 heads of 1500 x 1500 (one thread, CPU time): 48 ms
#: in blocks of 2^17 scores, 51 of 2^19, 42 of a whole head (PyTorch's blocks 47, onnxruntime 25); 16 MB, in L3
BLOCK_SCORES = 1 << 22

#: blocks are a multiple of this many query rows
_ROW_ALIGN = 16


def _desc(lib: Any, array: np.ndarray) -> onednn.Desc:
    """The descriptor of ``array`` as it lies (its dims and element strides)."""
    return onednn.Desc(lib, array.shape, [s // array.itemsize for s in array.strides])


def _aligned(array: np.ndarray, rank: int) -> np.ndarray:
    """``array`` viewed with leading dimensions of one up to ``rank`` (oneDNN broadcasts dimensions of one)."""
    return array.reshape((1,) * (rank - array.ndim) + array.shape)


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


def _dense_part(whole: np.ndarray, rows: int) -> np.ndarray:
    """The first elements of ``whole`` (``[..., step, N]``) as a dense ``[..., rows, N]`` array."""
    shape = (*whole.shape[:-2], rows, whole.shape[-1])
    return whole.reshape(-1)[: math.prod(shape)].reshape(shape)


class _Block:
    """The three primitives (one set per thread count) for blocks of ``rows`` query rows, and the memories they read
    and write, pointed at a block before its run."""

    def __init__(
        self,
        lib: Any,
        views: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray],
        scores: np.ndarray,
        scalars: tuple[float | None, float | None],
        counts: Sequence[int],
        fused: bool,
    ) -> None:
        a, b, v, mask, out = views
        factor, post = scalars
        #: whether the first product adds the mask and applies the post-scale (else NumPy does, after it)
        self.fused = fused
        #: the block's scores (dense: oneDNN's softmax has only its reference kernel for a strided part)
        self.scores = scores
        if not fused:
            mask, post = None, None
        axis = scores.ndim - 1
        descs = {name: _desc(lib, x) for name, x in (("a", a), ("b", b), ("v", v), ("out", out), ("s", scores))}
        post_ops = onednn.PostOps(lib)
        if factor is not None:
            post_ops.eltwise("linear", factor, 0.0)
        mask_arg = None
        if mask is not None:
            descs["mask"] = _desc(lib, mask)
            mask_arg = post_ops.add(descs["mask"])
        if post is not None:
            post_ops.eltwise("linear", post, 0.0)

        def scores_of(pd: Any, attr: Any) -> int:
            status: int = lib.dll.dnnl_matmul_primitive_desc_create(
                pd, lib.engine, descs["a"].handle, descs["b"].handle, None, descs["s"].handle, attr
            )
            return status

        def softmax_of(pd: Any, attr: Any) -> int:
            status: int = lib.dll.dnnl_softmax_forward_primitive_desc_create(
                pd,
                lib.engine,
                onednn.FORWARD_INFERENCE,
                onednn.SOFTMAX_ACCURATE,
                descs["s"].handle,
                descs["s"].handle,
                axis,
                attr,
            )
            return status

        def output_of(pd: Any, attr: Any) -> int:
            status: int = lib.dll.dnnl_matmul_primitive_desc_create(
                pd, lib.engine, descs["s"].handle, descs["v"].handle, None, descs["out"].handle, attr
            )
            return status

        made = [
            onednn.fast_primitives(lib, scores_of, post_ops, counts),
            onednn.fast_primitives(lib, softmax_of, None, counts),
            onednn.fast_primitives(lib, output_of, None, counts),
        ]
        if any(m is None for m in made):
            raise onednn.OneDnnError("oneDNN has only its reference kernels for this attention")
        self.memories = {
            name: onednn.Memory(lib, descs[name], _address(x), hold=x)
            for name, x in (("a", a), ("b", b), ("v", v), ("out", out), ("s", scores), ("mask", mask))
            if x is not None
        }
        m = self.memories
        first: list[tuple[int, onednn.Memory]] = [
            (onednn.ARG_SRC, m["a"]),
            (onednn.ARG_WEIGHTS, m["b"]),
            (onednn.ARG_DST, m["s"]),
        ]
        if mask_arg is not None:
            first.append((mask_arg, m["mask"]))
        arguments = [first, [(onednn.ARG_SRC, m["s"]), (onednn.ARG_DST, m["s"])]]
        arguments.append([(onednn.ARG_SRC, m["s"]), (onednn.ARG_WEIGHTS, m["v"]), (onednn.ARG_DST, m["out"])])
        self.by_count: dict[int, list[onednn.Primitive]] = {}
        for primitives, args in zip(made, arguments):
            assert primitives is not None
            for primitive in primitives:
                primitive.bind(args)
                self.by_count.setdefault(primitive.threads, []).append(primitive)


def attention_onednn(
    a: np.ndarray,
    b: np.ndarray,
    v: np.ndarray,
    scores_shape: tuple[int, ...],
    out: np.ndarray,
    factor: float | None,
    mask: np.ndarray | None,
    post: float | None,
    nan_to_zero: bool,
) -> Kernel | None:
    """The kernel ``out = softmax((a @ b) [* factor] [+ mask] [* post]) @ v`` (NaN probabilities made 0 with
    ``nan_to_zero``): ``a`` ``[..., M, K]``, ``b`` ``[..., K, N]``, ``v`` ``[..., N, D]`` (views, any strides, batch
    dimensions broadcasting to ``scores_shape``'s ``[..., M, N]``), ``mask`` broadcasting to the scores, ``out`` a
    ``[..., M, D]`` view. None where it does not apply: the library absent, arrays that are not FLOAT NumPy arrays,
    empty tensors, or only oneDNN's reference kernels for it."""
    lib = onednn.library()
    arrays = [a, b, v, out, *([] if mask is None else [mask])]
    if lib is None or any(not isinstance(x, np.ndarray) or x.dtype != np.float32 or not x.size for x in arrays):
        return None
    rank = len(scores_shape)
    if rank < 3 or any(x.ndim > rank for x in arrays):
        return None
    a, b, v, out = (_aligned(x, rank) for x in (a, b, v, out))
    mask = None if mask is None else _aligned(mask, rank)
    *batch, rows, width = scores_shape
    whole = math.prod(batch) * rows * width < MIN_BLOCKED_SCORES
    # every head at once, else blocks of one head's query rows (the larger the row count, the faster each product)
    step = rows if whole else min(rows, max(_ROW_ALIGN, BLOCK_SCORES // width // _ROW_ALIGN * _ROW_ALIGN))
    heads = [None] if whole else list(np.ndindex(*batch))
    scores = np.empty((*(batch if whole else [1] * len(batch)), step, width), np.float32)
    flops = 2.0 * scores.size * (a.shape[-1] + v.shape[-1])  # a block's two products
    counts = thread_counts(flops)
    flags = np.empty(scores.shape, np.bool_) if nan_to_zero else None
    starts = list(range(0, rows, step))

    def views(head: tuple[int, ...] | None, start: int, stop: int) -> tuple[Any, ...]:
        """The operands, the mask and the output of one block: ``head``'s (batch dimensions of one) or every head's
        (None), query rows ``start:stop``."""
        picked: list[Any] = []
        for x in (a, b, v, mask, out):
            if x is not None and head is not None:  # (a broadcast dimension of one stays)
                x = x[tuple(slice(i, i + 1) if size != 1 else slice(None) for i, size in zip(head, x.shape))]
            picked.append(x)
        block_a, block_b, block_v, block_mask, block_out = picked
        if block_mask is not None and block_mask.shape[-2] != 1:
            block_mask = block_mask[..., start:stop, :]
        return block_a[..., start:stop, :], block_b, block_v, block_mask, block_out[..., start:stop, :]

    blocks: dict[int, _Block] = {}
    for size, start in {step: 0, rows - starts[-1]: starts[-1]}.items():
        block = None
        for fused in (True, False) if mask is not None or post is not None else (True,):
            try:  # (a mask whose broadcast oneDNN's post-op lacks, e.g. [1, 1, S, S]: added by NumPy)
                part = _dense_part(scores, size)
                block = _Block(lib, views(heads[0], start, start + size), part, (factor, post), counts, fused)
                break
            except onednn.OneDnnError:
                continue
        if block is None:
            return None
        blocks[size] = block
    plan = []
    for head in heads:
        for start in starts:
            stop = min(start + step, rows)
            block = blocks[stop - start]
            block_a, block_b, block_v, block_mask, block_out = views(head, start, stop)
            moved = [("a", block_a), ("b", block_b), ("v", block_v), ("out", block_out)]
            if block_mask is not None and block.fused:
                moved.append(("mask", block_mask))
            pointed = [(block.memories[name], _address(x)) for name, x in moved]
            unfused = None if block.fused else (block_mask, None if post is None else np.float32(post))
            guard = None if flags is None else _dense_part(flags, stop - start)
            plan.append((pointed, block, unfused, guard))

    def run() -> None:
        count = threads_for(flops, MIN_OPENMP_FLOPS)
        for pointed, block, unfused, guard in plan:
            for memory, address in pointed:
                memory.point(lib, address)
            first, softmax, second = block.by_count.get(count) or block.by_count[counts[0]]
            first.run()
            if unfused is not None:
                s = block.scores
                if unfused[0] is not None:
                    np.add(s, unfused[0], out=s)
                if unfused[1] is not None:
                    np.multiply(s, unfused[1], out=s)
            softmax.run()
            if guard is not None:  # a row the mask removes entirely: NaN probabilities, made 0
                np.isnan(block.scores, out=guard)
                np.copyto(block.scores, 0.0, where=guard)
            second.run()

    return run
