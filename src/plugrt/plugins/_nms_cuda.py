"""CUDA kernels of the NMS plugins: per-row top-k and greedy NMS, with no host round trip.

:func:`top_k_rows` — one thread block per row ranks the row's candidates (entries above a
score threshold) and returns the best ``k``, best first, equal scores in index order: the
order :func:`plugrt.plugins._nms.top_k_desc` gives on the host. Each entry gets a unique
64-bit key (order-preserving bits of the score above the complement of its index); a
radix select over the keys finds the ``k``-th largest in eight histogram passes, the
entries at or above it are gathered and a bitonic sort in shared memory orders them.
Long rows (many more entries than ``k``) are first cut into segments ranked by their own
blocks, then the segments' winners are ranked again.

:func:`nms_keep` — greedy NMS over rows of score-sorted candidates: one kernel writes, for
every candidate, the bit mask of the later candidates it suppresses (64 per word); a
second walks each row's candidates in order with one warp, keeping a candidate unless a
kept one's mask has its bit, and stops at ``max_keep``. The overlap arithmetic is
:class:`plugrt.plugins._nms.OverlapRule`'s, in float32 without fused multiply-adds, so the
decisions equal the host's bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends.cuda import CudaModule
from ..backends.registry import gpu_backend
from ._nms_cuda_source import SOURCE

__all__ = ["MAX_K", "gather_corners", "nms_keep", "top_k_rows", "write_detections"]

#: The largest ``k`` :func:`top_k_rows` sorts in shared memory (and the largest row
#: :func:`nms_keep` takes): TensorRT's NMS plugins cap their candidates at 4096 too.
MAX_K = 4096
_THREADS = 512
_SEGMENT = 32768  # entries per block when a long row is split

# no fused multiply-adds: overlap decisions must round exactly as the host's float32 ones
_MODULE = CudaModule(SOURCE, ("--std=c++14", "--fmad=false"))
_kernel = _MODULE.function


def _capacity(k: int) -> int:
    capacity = 1
    while capacity < k:
        capacity *= 2
    return capacity


def top_k_rows(
    scores: Any,
    k: int,
    threshold: float,
    *,
    inclusive: bool = False,
    row_skip: int = -1,
    elem_mod: int = 0,
    elem_skip: int = -1,
    index_map: Any = None,
) -> tuple[Any, Any, Any]:
    """The ``k`` best candidates of each row of a float32 CuPy array, best first.

    ``scores`` is ``[outer, n]`` or ``[outer, inner, n]`` (any strides; rows are the
    leading axes). An entry is a candidate when its score is ``> threshold`` (``>=`` with
    ``inclusive``), its row's inner index is not ``row_skip`` and, with ``elem_mod``, its
    index modulo ``elem_mod`` is not ``elem_skip``. ``index_map`` (int32, same shape) gives
    each entry the index that is reported and breaks ties instead of its position.

    Returns ``(index int32, value float32, found bool)`` of shape ``[*rows, k]``; past a
    row's candidates: index 0, value -inf, found False. ``k`` must be at most :data:`MAX_K`.
    """
    cp = gpu_backend().xp
    if scores.dtype != np.float32:
        raise TypeError(f"top_k_rows: scores must be float32, got {scores.dtype}")
    if not 0 < k <= MAX_K:
        raise ValueError(f"top_k_rows: k must be in 1..{MAX_K}, got {k}")
    view = scores if scores.ndim == 3 else scores[:, None, :]
    outer, inner, n = view.shape
    item = scores.itemsize
    if index_map is not None:
        if index_map.dtype != np.int32 or index_map.shape != scores.shape or index_map.strides != scores.strides:
            raise ValueError("top_k_rows: index_map must be int32 with the scores' shape and strides")
    strides = [s // item for s in view.strides]
    rows = outer * inner
    segments = 1
    if rows < 128 and n > 4 * _SEGMENT and k * 8 <= _SEGMENT:  # few long rows: rank segments first
        segments = -(-n // _SEGMENT)
    shape = (*scores.shape[:-1], k)
    index = cp.empty((rows * segments, k), np.int32)
    value = cp.empty((rows * segments, k), np.float32)
    found = cp.empty((rows * segments, k), np.bool_)
    capacity = _capacity(min(k, -(-n // segments)))
    _kernel("top_k_rows")(
        (rows * segments,),
        (_THREADS,),
        (
            view,
            index_map if index_map is not None else np.uint64(0),
            np.int32(inner),
            np.int64(strides[0]),
            np.int64(strides[1]),
            np.int64(strides[2]),
            np.int32(n),
            np.int32(segments),
            np.int32(-(-n // segments)),
            np.float32(threshold),
            np.int32(inclusive),
            np.int32(row_skip),
            np.int32(elem_mod),
            np.int32(elem_skip),
            np.int32(k),
            np.int32(capacity),
            index,
            value,
            found,
        ),
        shared_mem=capacity * 8,
    )
    if segments > 1:  # rank the segments' winners (their reported indices stay the originals)
        merged = value.reshape(rows, segments * k)
        index, value, found = top_k_rows(
            merged,
            k,
            threshold,
            inclusive=inclusive,
            elem_mod=elem_mod,
            elem_skip=elem_skip,
            index_map=index.reshape(rows, segments * k),
        )
    return index.reshape(shape), value.reshape(shape), found.reshape(shape)


def nms_keep(
    boxes: Any,
    counts: Any,
    threshold: float,
    *,
    inclusive: bool = False,
    area_offset: float = 0.0,
    caffe_offset: float = 0.0,
    labels: Any = None,
    max_keep: int | None = None,
    mask_budget: int = 1 << 28,
) -> Any:
    """Greedy NMS keep mask ``[rows, K]`` (bool) for rows of score-sorted candidates.

    ``boxes`` float32 ``[rows, K, 4]`` in sorted corners; ``counts`` int32 ``[rows]``: the
    first ``counts[r]`` candidates of row ``r`` take part. With ``labels`` (int32
    ``[rows, K]``) only equal labels suppress each other; a row stops after ``max_keep``
    keeps. The overlap rule's parameters are :class:`~plugrt.plugins._nms.OverlapRule`'s.
    The suppression masks are made for as many rows at once as fit in ``mask_budget`` bytes.
    """
    cp = gpu_backend().xp
    rows, k = boxes.shape[:2]
    if k > MAX_K:
        raise ValueError(f"nms_keep: at most {MAX_K} candidates per row, got {k}")
    keep = cp.zeros((rows, k), np.bool_)
    if rows == 0 or k == 0:
        return keep
    words = -(-k // 64)
    boxes = cp.ascontiguousarray(boxes, dtype=np.float32)
    counts = cp.ascontiguousarray(counts, dtype=np.int32)
    if labels is not None:
        labels = cp.ascontiguousarray(labels, dtype=np.int32)
    limit = k if max_keep is None else min(k, max_keep)
    # the masks take rows * k * k / 8 bytes: work through the rows in chunks that fit the budget
    chunk = max(1, mask_budget // (k * words * 8))
    mask = cp.empty((min(rows, chunk), k, words), np.uint64)
    for first in range(0, rows, chunk):
        last = min(rows, first + chunk)
        part_counts = counts[first:last]
        _kernel("nms_mask")(
            (last - first, words, words),
            (64,),
            (
                boxes[first:last],
                part_counts,
                labels[first:last] if labels is not None else np.uint64(0),
                np.int32(k),
                np.int32(words),
                np.float32(threshold),
                np.int32(inclusive),
                np.float32(area_offset),
                np.float32(caffe_offset),
                mask,
            ),
        )
        scan_args = (mask, part_counts, np.int32(k), np.int32(words), np.int32(limit), keep[first:last])
        _kernel("nms_scan")((last - first,), (32,), scan_args)
    return keep


def gather_corners(boxes: Any, index: Any, classes: int, share_location: bool) -> Any:
    """Sorted corners ``[B * classes, k, 4]`` (float32) of BatchedNMS's candidates.

    ``boxes``: float32 C-contiguous ``[B, N, L, 4]`` (L = 1 with ``share_location``, else
    ``classes``); ``index`` int32 ``[B * classes, k]``: row ``b * classes + c`` holds boxes
    of image ``b`` (location ``c`` unless shared).
    """
    cp = gpu_backend().xp
    rows, k = index.shape
    out = cp.empty((rows, k, 4), np.float32)
    total = rows * k
    if total:
        num_boxes, locations = boxes.shape[1:3]
        args: tuple[Any, ...] = (boxes, cp.ascontiguousarray(index, dtype=np.int32), np.int32(rows), np.int32(k))
        args += (np.int32(classes), np.int32(num_boxes), np.int32(locations), np.int32(share_location), out)
        _kernel("gather_corners")(((total + 255) // 256,), (256,), args)
    return out


def write_detections(
    best: Any,
    best_score: Any,
    picked: Any,
    index: Any,
    boxes: Any,
    classes: int,
    share_location: bool,
    clip: bool,
    outputs: tuple[Any, Any, Any, Any],
) -> None:
    """Write BatchedNMS's four outputs from the merged ranking, in one kernel.

    ``best``/``best_score``/``picked`` ``[B, W]`` (int32 flat ``class * k + rank``, float32,
    bool) come from ranking the kept candidates of each image; ``index`` int32 ``[B * classes,
    k]`` maps ranks to boxes; ``boxes`` float32 C-contiguous ``[B, N, L, 4]``. ``outputs``:
    num_detections int32 ``[B, 1]`` and boxes/scores/classes (float32 or float16,
    ``[B, keepTopK(, 4)]``), all C-contiguous; rows past the detections are padded.
    """
    num_out, out_boxes, out_scores, out_classes = outputs
    batch, keep_top_k = out_scores.shape
    if batch == 0 or keep_top_k == 0:
        return
    name = "write_detections_f16" if out_scores.dtype == np.float16 else "write_detections_f32"
    k = index.shape[1]
    args: tuple[Any, ...] = (best, best_score, picked, np.int32(best.shape[1]), index, np.int32(k), np.int32(classes))
    args += (boxes,)
    args += (np.int32(boxes.shape[1]), np.int32(boxes.shape[2]), np.int32(share_location), np.int32(clip))
    args += (np.int32(keep_top_k), num_out, out_boxes, out_scores, out_classes)
    _kernel(name)(((keep_top_k + 127) // 128, batch), (128,), args)
