"""Attention on the CPU in blocks of query rows that stay in the cache, shared by two host threads.

The attention operator's own kernel computes all the scores ``op(a) @ op(b)``, then each
elementwise step and the softmax over all of them, then ``scores @ v``: with long sequences the
scores do not fit in any cache (Whisper's encoder: 6 heads of 1500 x 1500, 54 MB a layer), so
each of the half a dozen passes over them goes to memory, and the softmax runs on one thread.
Here each item is one matrix's block of query rows (``ROW_BLOCK_ELEMENTS`` scores): its scores
product, the scaling, the mask, the softmax and its share of the second product, while the block
is in the cache; the items are taken in turn by this thread and the helper thread
(:func:`~plugrt.ops.host_threads.pulled_by_two`), every product a one-thread BLAS call. The
scores still go to the operator's second output (the block is written where it belongs).

Every score gets the same float operations as in the whole-tensor kernel; the products' BLAS
calls are of other sizes, so results agree to rounding (a few ulp), not bit for bit; the
softmax's shortcut for rows whose maximum is small (``softmax.softmax_rows``) is decided per
block of rows, which changes results by rounding only.

The operator's PyTorch tactic on the CPU runs every head at once where the scores fit in the cache (fewer
than ``MIN_BLOCKED_SCORES``: batched products, one softmax; :func:`_torch_whole`), else the same blocks with
PyTorch's kernels (:func:`torch_attention_blocks`):
both products with oneDNN's linear (``torch_cpu_linear.py``: AVX-512 kernels where NumPy's BLAS
runs AVX2 ones), the softmax with torch's; as ``scaled_dot_product_attention`` there, the scores
are not written. Whisper-tiny's encoder layer (6 x 1500 x 1500, one thread's CPU time): NumPy
blocks 48 ms, torch's scaled_dot_product_attention 45, onnxruntime's MatMul/Softmax/MatMul 25.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .blas_threads import one_blas_thread
from .host_threads import on_helper, pulled_by_two
from .softmax import softmax_rows
from .torch_cpu import Kernel, one_thread_here, torch_module, use_threads, view
from .torch_cpu_linear import linear_function

__all__ = [
    "MIN_BLOCKED_SCORES",
    "ROW_BLOCK_ELEMENTS",
    "attention_blocks",
    "blocked",
    "torch_attention_blocks",
    "whole_attention",
]

#: attention with at least this many scores runs in blocks (below, the scores fit in the cache anyway)
MIN_BLOCKED_SCORES = 1 << 20
#: scores per block (a multiple of the row length): 512 KiB of FLOAT, within a core's L2 cache
ROW_BLOCK_ELEMENTS = 1 << 17
#: blocks are a multiple of this many rows (whole vector registers in the products)
_ROW_ALIGN = 16


def _rows_per_block(rows: int, width: int) -> int:
    step = max(_ROW_ALIGN, ROW_BLOCK_ELEMENTS // max(width, 1) // _ROW_ALIGN * _ROW_ALIGN)
    return min(step, rows)


def _items(
    a: np.ndarray, b: np.ndarray, v: np.ndarray, mask: np.ndarray | None, shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, int, list[tuple[tuple[int, ...], int]]]:
    """The operands broadcast to the scores' batch, the mask to the scores, rows per block, and the items."""
    batch = shape[:-2]
    a = np.broadcast_to(a, (*batch, *a.shape[-2:]))
    b = np.broadcast_to(b, (*batch, *b.shape[-2:]))
    v = np.broadcast_to(v, (*batch, *v.shape[-2:]))
    masks = None if mask is None else np.broadcast_to(mask, shape)
    step = _rows_per_block(shape[-2], shape[-1])
    return a, b, v, masks, step, [(index, start) for index in np.ndindex(*batch) for start in range(0, shape[-2], step)]


def attention_blocks(
    a: np.ndarray,
    b: np.ndarray,
    v: np.ndarray,
    scores: np.ndarray,
    out: np.ndarray,
    pre: tuple[str, np.ndarray] | None,
    mask: np.ndarray | None,
    post: np.ndarray | None,
    nan_to_zero: bool,
) -> None:
    """``scores = softmax((a @ b) [pre] [+ mask] [* post])``, ``out = scores @ v`` in row blocks on two threads.

    ``a`` ``[..., M, K]``, ``b`` ``[..., K, N]`` and ``v`` ``[..., N, D]`` are the products' operands (views,
    transposes applied); their batch dimensions broadcast to ``scores``' (``[..., M, N]``) and ``out``'s
    (``[..., M, D]``). ``pre``: ("PROD" or "DIV", a one-element array); ``mask``: broadcasts to
    ``scores``; ``post``: a one-element array multiplying the masked scores.
    """
    a, b, v, masks, step, items = _items(a, b, v, mask, scores.shape)
    rows = scores.shape[-2]
    factor = None if pre is None else pre[1].reshape(())
    divide = pre is not None and pre[0] == "DIV"
    scale = None if post is None else post.reshape(())

    def block(item: int) -> None:
        index, start = items[item]
        stop = min(start + step, rows)
        s = scores[index][start:stop]
        np.matmul(a[index][start:stop], b[index], out=s)
        if factor is not None:
            (np.divide if divide else np.multiply)(s, factor, out=s)
        if masks is not None:
            np.add(s, masks[index][start:stop], out=s)
        if scale is not None:
            np.multiply(s, scale, out=s)
        softmax_rows(s, s)
        if nan_to_zero:
            np.putmask(s, np.isnan(s), 0)
        np.matmul(s, v[index], out=out[index][start:stop])

    with one_blas_thread():
        pulled_by_two(len(items), block)


def _torch_whole(
    a: np.ndarray,
    b: np.ndarray,
    v: np.ndarray,
    scores_shape: tuple[int, ...],
    out: np.ndarray,
    pre: tuple[str, float] | None,
    mask: np.ndarray | None,
    post: float | None,
    nan_to_zero: bool,
) -> Kernel:
    """:func:`torch_attention_blocks` for scores that fit in the cache (fewer than :data:`MIN_BLOCKED_SCORES`):
    every head at once, each step one torch call (batched products, one softmax) where the blocks cost two
    oneDNN calls a head at ~12 us each (GPT-2's 12 x 128 x 128, one thread: 0.68 ms against 1.4 for the NumPy
    kernel and 1.7 for the blocks). The same float operations in the same order; other products' rounding."""
    torch = torch_module()
    batch = scores_shape[:-2]
    at, bt, vt = (view(np.broadcast_to(x, (*batch, *x.shape[-2:]))) for x in (a, b, v))
    mt = None if mask is None else view(mask)
    target = view(out)
    factor = None if pre is None else (pre[1] if pre[0] == "PROD" else 1.0 / pre[1])
    flops = 4.0 * out.size * scores_shape[-1]

    def run() -> None:
        use_threads(flops)
        p = _probabilities(torch, torch.matmul(at, bt), factor, mt, post, nan_to_zero)
        torch.matmul(p, vt, out=target) if target.is_contiguous() else target.copy_(torch.matmul(p, vt))

    return run


def _probabilities(torch: Any, s: Any, factor: float | None, mask: Any, post: float | None, nan_to_zero: bool) -> Any:
    """``softmax((s [* factor]) [+ mask] [* post])`` over the last axis, ``s`` scaled in place (the NumPy kernel's
    operations in its order); NaN probabilities 0 with ``nan_to_zero``."""
    if factor is not None:
        s.mul_(factor)
    if mask is not None:
        s.add_(mask)
    if post is not None:
        s.mul_(post)
    p = torch._softmax(s, -1, False)
    if nan_to_zero:
        torch.nan_to_num(p, nan=0.0, posinf=math.inf, neginf=-math.inf, out=p)
    return p


def whole_attention(scores_shape: tuple[int, ...]) -> bool:
    """Whether PyTorch's kernels take attention with scores of ``scores_shape`` whole (:func:`_torch_whole`): fewer
    than :data:`MIN_BLOCKED_SCORES`, which fit in the cache."""
    return math.prod(scores_shape) < MIN_BLOCKED_SCORES


def blocked(scores_shape: tuple[int, ...], *arrays: Any) -> bool:
    """Whether attention with scores of ``scores_shape`` runs in blocks: NumPy FLOAT arrays, many scores."""
    return not whole_attention(scores_shape) and all(isinstance(x, np.ndarray) and x.dtype == np.float32 for x in arrays)


def torch_attention_blocks(
    a: np.ndarray,
    b: np.ndarray,
    v: np.ndarray,
    scores_shape: tuple[int, ...],
    out: np.ndarray,
    pre: tuple[str, float] | None,
    mask: np.ndarray | None,
    post: float | None,
    nan_to_zero: bool,
) -> Kernel | None:
    """The blocks of :func:`attention_blocks` with PyTorch's kernels, over views made here once (the scores are
    not written; ``pre`` and ``post`` are read at bind). None without oneDNN's linear."""
    function = linear_function()
    if function is None:
        return None
    torch = torch_module()
    if whole_attention(scores_shape):
        return _torch_whole(a, b, v, scores_shape, out, pre, mask, post, nan_to_zero)
    a, b, v, _, step, items = _items(a, b, v, None, scores_shape)
    rows = scores_shape[-2]
    factor = None if pre is None else (pre[1] if pre[0] == "PROD" else 1.0 / pre[1])
    full = None if mask is None else mask.reshape((1,) * (len(scores_shape) - mask.ndim) + mask.shape)
    prepared = []
    for index, start in items:
        stop = min(start + step, rows)
        block_mask = None
        if full is not None:  # the mask's own rows (or its one row, broadcast by the addition): no copy
            own = full[tuple(i if full.shape[d] > 1 else 0 for d, i in enumerate(index))]
            block_mask = view(own[start:stop] if own.shape[0] > 1 else own)
        # linear(x, w) is x @ w^T: the keys' and the values' matrices as [N, K] (transposed views, no copies)
        prepared.append(
            (
                view(a[index][start:stop]),
                view(b[index]).t(),
                view(v[index]).t(),
                block_mask,
                view(out[index][start:stop]),
            )
        )
    flops = 4.0 * out.size * scores_shape[-1]

    def block(item: int) -> None:
        if on_helper():
            one_thread_here()
        q, keys, values, block_mask, target = prepared[item]
        p = _probabilities(torch, function(q, keys, None, "none", [], ""), factor, block_mask, post, nan_to_zero)
        target.copy_(function(p, values, None, "none", [], ""))

    def run() -> None:
        use_threads(flops if len(prepared) < 2 else 0.0)
        pulled_by_two(len(prepared), block)

    return run
