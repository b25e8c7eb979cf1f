"""Matrix products on the CPU as blocks that two host threads share.

A large product (:func:`~plugrt.ops.blas_threads.split_products`) is cut into blocks of
output columns (rows when the output is narrow), or of batch matrices for a batched product;
this thread and the helper thread (:func:`~plugrt.ops.host_threads.pulled_by_two`) each
take the next block as they finish one, every block a one-thread BLAS call, with the
bias added to the block while it is in cache. Without a split (small products, one
core, an unknown BLAS) the product is one BLAS call on one thread, or on the BLAS's
own threads when it is large and the machine has a core to spare
(:func:`~plugrt.ops.blas_threads.blas_threads_for`).

Each output element is computed by the same BLAS kernel over the same reduction, but
BLAS may order a dot product's additions differently for blocks of another size, so
results agree with the one-call product to rounding (a few ulp), not bit for bit.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from .blas_threads import blas_threads_for, one_blas_thread, split_products
from .host_threads import pulled_by_two
from .products import matmul_into

__all__ = ["BLOCK_ALIGN", "MAX_BLOCKS", "MIN_BLOCK_FLOPS", "as_rows", "matmul_parts_into", "product_blocks"]

#: at most this many blocks per product (enough for the two threads to even out a busy core; more blocks
#: cost more: on one thread a 128x768 by 768x3072 product took 6.9 ms whole, 7.7 ms as four column blocks)
MAX_BLOCKS = 6
#: a block does at least this much work (below it, per-call overhead and repacking outweigh the gain)
MIN_BLOCK_FLOPS = 4e6
#: narrower products split into row blocks (each packs all of b again, which costs more than packing a:
#: 10.9 ms against 7.7 for a 128x768 by 768x3072 product in four blocks, on one thread)
MIN_COLUMNS = 64
#: column and row blocks are multiples of this many (whole vector registers)
BLOCK_ALIGN = 16

Block = tuple[Any, Any, Any, Any]


def matmul_parts_into(xp: Any, a: Any, b: Any, out: Any, bias: Any = None) -> None:
    """``out[...] = a @ b`` (+ ``bias`` over the last axis), as :func:`~plugrt.ops.products.matmul_into`,
    split into blocks on two threads on the CPU when large; ``out`` is C-contiguous."""
    if xp is not np:
        matmul_into(xp, a, b, out, bias)
        return
    flops = 2.0 * out.size * a.shape[-1]
    blocks = product_blocks(a, b, out, bias, flops) if split_products(flops) else None
    if blocks is None:
        with blas_threads_for(flops):
            matmul_into(xp, a, b, out, bias)
        return
    with one_blas_thread():
        pulled_by_two(len(blocks), lambda item: _run(*blocks[item]))


def _run(a: Any, b: Any, out: Any, bias: Any) -> None:
    np.matmul(a, b, out=out)
    if bias is not None:
        np.add(out, bias, out=out)


def product_blocks(a: Any, b: Any, out: Any, bias: Any, flops: float) -> list[Block] | None:
    """The blocks ``(a, b, out, bias)`` (views) that together compute ``out = a @ b + bias``, or None when
    the product does not split (too little work for two blocks, operands of another rank)."""
    count = min(MAX_BLOCKS, int(flops // MIN_BLOCK_FLOPS))
    if count < 2 or not a.ndim == b.ndim == out.ndim >= 2:
        return None
    if all(d == 1 for d in b.shape[:-2]) and out.shape[:-2] == a.shape[:-2]:
        rows = as_rows(a)
        if rows is not None:  # one matrix product: a's batch folded into its rows
            return _matrix_blocks(rows, b.reshape(b.shape[-2:]), out.reshape(-1, out.shape[-1]), bias, count)
    return _batch_blocks(a, b, out, bias, count)


def as_rows(x: Any) -> Any:
    """``x`` of dims ``[..., M, K]`` as a view of dims ``[rows, K]``, or None where that needs a copy."""
    lead = [(n, s) for n, s in zip(x.shape[:-1], x.strides[:-1]) if n != 1]
    if any(outer != inner * n for (_, outer), (n, inner) in itertools.pairwise(lead)):
        return None
    rows = int(np.prod(x.shape[:-1], dtype=np.int64))
    stride = lead[-1][1] if lead else x.itemsize * x.shape[-1]
    return np.lib.stride_tricks.as_strided(x, (rows, x.shape[-1]), (stride, x.strides[-1]), writeable=False)


def _spans(length: int, count: int) -> list[tuple[int, int]]:
    step = -(-length // count)
    if length >= count * BLOCK_ALIGN:
        step = -(-step // BLOCK_ALIGN) * BLOCK_ALIGN
    return [(start, min(start + step, length)) for start in range(0, length, step)]


def _matrix_blocks(a: Any, b: Any, out: Any, bias: Any, count: int) -> list[Block] | None:
    rows, cols = out.shape
    if cols >= MIN_COLUMNS * 2:  # column blocks: every block packs all of a again, and its slice of b
        spans = _spans(cols, count)
        blocks = [(a, b[:, s:e], out[:, s:e], None if bias is None else bias[..., s:e]) for s, e in spans]
    else:
        blocks = [(a[s:e], b, out[s:e], bias) for s, e in _spans(rows, count)]
    return blocks if len(blocks) >= 2 else None


def _batch_blocks(a: Any, b: Any, out: Any, bias: Any, count: int) -> list[Block] | None:
    """Blocks of batch matrices along the first batch axis longer than one (leading ones dropped)."""
    while out.ndim > 2 and out.shape[0] == 1 and a.shape[0] == 1 and b.shape[0] == 1:
        a, b, out = a[0], b[0], out[0]
    if out.ndim <= 2 or out.shape[0] < 2 or a.shape[0] not in (1, out.shape[0]) or b.shape[0] not in (1, out.shape[0]):
        return None
    size = out.shape[0]
    return [
        (a if a.shape[0] == 1 else a[s:e], b if b.shape[0] == 1 else b[s:e], out[s:e], bias)
        for s, e in _spans(size, min(count, size))
    ]
