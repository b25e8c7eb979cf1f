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

import threading
from typing import Any

import numpy as np

from ..cuda import import_cupy

__all__ = ["MAX_K", "gather_corners", "nms_keep", "top_k_rows", "write_detections"]

#: The largest ``k`` :func:`top_k_rows` sorts in shared memory (and the largest row
#: :func:`nms_keep` takes): TensorRT's NMS plugins cap their candidates at 4096 too.
MAX_K = 4096
_THREADS = 512
_SEGMENT = 32768  # entries per block when a long row is split

_SOURCE = r"""
#include <cuda_fp16.h>
typedef unsigned long long u64;

__device__ __forceinline__ unsigned int order_bits(float v) {
    unsigned int u = __float_as_uint(v);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float from_order_bits(unsigned int b) {
    return __uint_as_float((b & 0x80000000u) ? (b & 0x7fffffffu) : ~b);
}

// Key of entry i of a row: 0 when it is not a candidate, else score bits above ~index.
__device__ __forceinline__ u64 entry_key(
    const float* __restrict__ scores, const int* __restrict__ index_map, long long at,
    int i, float threshold, int inclusive, int elem_mod, int elem_skip)
{
    const float raw = scores[at];
    const float v = raw == 0.f ? 0.f : raw;   // -0 ranks as +0, as on the host
    const unsigned int original = index_map ? (unsigned int)index_map[at] : (unsigned int)i;
    const bool pass = inclusive ? (v >= threshold) : (v > threshold);
    if (!pass || (elem_mod > 0 && (int)(original % (unsigned int)elem_mod) == elem_skip)) return 0ull;
    return ((u64)order_bits(v) << 32) | (u64)(0xffffffffu - original);
}

extern "C" __global__ void top_k_rows(
    const float* __restrict__ scores, const int* __restrict__ index_map,
    int rows_inner, long long outer_stride, long long inner_stride, long long elem_stride,
    int n, int segments, int segment_len,
    float threshold, int inclusive, int row_skip, int elem_mod, int elem_skip,
    int k, int capacity,
    int* __restrict__ out_index, float* __restrict__ out_value, unsigned char* __restrict__ out_found)
{
    extern __shared__ u64 pool[];
    __shared__ unsigned int hist[256];
    __shared__ unsigned int valid_count, slot, want_s;
    __shared__ u64 prefix_s;
    const int tid = threadIdx.x, threads = blockDim.x;
    const int row = blockIdx.x / segments, segment = blockIdx.x % segments;
    const int outer = row / rows_inner, inner = row % rows_inner;
    const long long base = (long long)outer * outer_stride + (long long)inner * inner_stride;
    const int lo = segment * segment_len;
    const int hi = min(n, lo + segment_len);
    const bool row_valid = !(row_skip >= 0 && inner == row_skip);
    const long long out_base = (long long)blockIdx.x * k;
    if (tid == 0) { valid_count = 0; slot = 0; prefix_s = 0ull; }
    __syncthreads();
    unsigned int mine = 0;
    if (row_valid)
        for (int i = lo + tid; i < hi; i += threads)
            mine += entry_key(scores, index_map, base + i * elem_stride, i, threshold, inclusive, elem_mod, elem_skip) != 0ull;
    if (mine) atomicAdd(&valid_count, mine);
    __syncthreads();
    const unsigned int take = min((unsigned int)k, valid_count);
    if (take > 0) {
        if (tid == 0) want_s = take;
        u64 prefix = 0ull, prefix_mask = 0ull;
        for (int shift = 56; shift >= 0; shift -= 8) {
            for (int d = tid; d < 256; d += threads) hist[d] = 0;
            __syncthreads();
            for (int i = lo + tid; i < hi; i += threads) {
                const u64 key = entry_key(scores, index_map, base + i * elem_stride, i, threshold, inclusive, elem_mod, elem_skip);
                if (key != 0ull && (key & prefix_mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
            }
            __syncthreads();
            if (tid == 0) {
                unsigned int want = want_s;
                int d = 255;
                for (; d > 0; --d) {
                    if (hist[d] >= want) break;
                    want -= hist[d];
                }
                want_s = want;
                prefix_s = prefix | ((u64)d << shift);
            }
            __syncthreads();
            prefix = prefix_s;
            prefix_mask |= 0xffull << shift;
        }
        // prefix is now the take-th largest key (keys are unique): gather every key >= it
        for (int i = lo + tid; i < hi; i += threads) {
            const u64 key = entry_key(scores, index_map, base + i * elem_stride, i, threshold, inclusive, elem_mod, elem_skip);
            if (key != 0ull && key >= prefix) pool[atomicAdd(&slot, 1u)] = key;
        }
        for (int j = take + tid; j < capacity; j += threads) pool[j] = 0ull;
        __syncthreads();
        for (int size = 2; size <= capacity; size <<= 1) {      // bitonic sort, descending
            for (int stride = size >> 1; stride > 0; stride >>= 1) {
                for (int t = tid; t < capacity; t += threads) {
                    const int partner = t ^ stride;
                    if (partner > t) {
                        const u64 a = pool[t], b = pool[partner];
                        const bool descending = (t & size) == 0;
                        if (descending ? (a < b) : (a > b)) { pool[t] = b; pool[partner] = a; }
                    }
                }
                __syncthreads();
            }
        }
    }
    for (int j = tid; j < k; j += threads) {
        if ((unsigned int)j < take) {
            const u64 key = pool[j];
            out_index[out_base + j] = (int)(0xffffffffu - (unsigned int)(key & 0xffffffffull));
            out_value[out_base + j] = from_order_bits((unsigned int)(key >> 32));
            out_found[out_base + j] = 1;
        } else {
            out_index[out_base + j] = 0;
            out_value[out_base + j] = __uint_as_float(0xff800000u);
            out_found[out_base + j] = 0;
        }
    }
}

// BatchedNMS: the corners of each (image, class) row's candidates, gathered from the boxes.
extern "C" __global__ void gather_corners(
    const float* __restrict__ boxes, const int* __restrict__ index, int rows, int k, int classes,
    int num_boxes, int locations, int share, float* __restrict__ out)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)rows * k) return;
    const int r = (int)(t / k);
    const int image = r / classes, loc = share ? 0 : r % classes;
    const float* p = boxes + (((long long)image * num_boxes + index[t]) * locations + loc) * 4;
    const float x0 = p[0], y0 = p[1], x1 = p[2], y1 = p[3];
    out[t * 4 + 0] = fminf(x0, x1);
    out[t * 4 + 1] = fminf(y0, y1);
    out[t * 4 + 2] = fmaxf(x0, x1);
    out[t * 4 + 3] = fmaxf(y0, y1);
}

// BatchedNMS: the detections of each image from the merged ranking (best = class * k + rank),
// padded with boxes 0, scores 0, classes -1; num_detections counts the real ones.
#define WRITE_DETECTIONS(NAME, T, CONVERT)                                                          \
extern "C" __global__ void NAME(                                                                    \
    const int* __restrict__ best, const float* __restrict__ best_score,                             \
    const unsigned char* __restrict__ picked, int width, const int* __restrict__ index, int k,      \
    int classes, const float* __restrict__ boxes, int num_boxes, int locations, int share,          \
    int clip, int keep_top_k, int* __restrict__ num_out, T* __restrict__ out_boxes,                 \
    T* __restrict__ out_scores, T* __restrict__ out_classes)                                        \
{                                                                                                   \
    const int image = blockIdx.y;                                                                   \
    const int slot = blockIdx.x * blockDim.x + threadIdx.x;                                         \
    if (slot >= keep_top_k) return;                                                                 \
    const long long o = (long long)image * keep_top_k + slot;                                       \
    const long long at = (long long)image * width + slot;                                           \
    float box[4] = {0.f, 0.f, 0.f, 0.f};                                                            \
    float score = 0.f, label = -1.f;                                                                \
    if (slot < width && picked[at]) {                                                               \
        const int c = best[at] / k, rank = best[at] % k;                                            \
        const int n = index[((long long)image * classes + c) * k + rank];                           \
        const float* p = boxes + (((long long)image * num_boxes + n) * locations + (share ? 0 : c)) * 4; \
        for (int e = 0; e < 4; ++e) box[e] = clip ? fminf(fmaxf(p[e], 0.f), 1.f) : p[e];            \
        score = best_score[at];                                                                     \
        label = (float)c;                                                                           \
    }                                                                                               \
    for (int e = 0; e < 4; ++e) out_boxes[o * 4 + e] = CONVERT(box[e]);                             \
    out_scores[o] = CONVERT(score);                                                                 \
    out_classes[o] = CONVERT(label);                                                                \
    if (slot == 0) {                                                                                \
        int count = 0;                                                                              \
        for (int j = 0; j < width; ++j) count += picked[(long long)image * width + j];              \
        num_out[image] = count;                                                                     \
    }                                                                                               \
}
WRITE_DETECTIONS(write_detections_f32, float, )
WRITE_DETECTIONS(write_detections_f16, __half, __float2half_rn)

// mask[row, i, w] bit t: candidate i suppresses candidate 64 * w + t (a later one).
extern "C" __global__ void nms_mask(
    const float* __restrict__ boxes, const int* __restrict__ counts, const int* __restrict__ labels,
    int k, int words, float threshold, int inclusive, float area_offset, float caffe_offset,
    u64* __restrict__ mask)
{
    __shared__ float other[64][5];
    __shared__ int other_label[64];
    const int row = blockIdx.x, block_row = blockIdx.y, word = blockIdx.z;
    const int count = counts[row];
    const int j0 = word * 64, i = block_row * 64 + threadIdx.x;
    if (j0 >= count || block_row * 64 >= count) return;
    const long long row_base = (long long)row * k;
    {
        const int j = j0 + threadIdx.x;
        if (j < count) {
            const float* b = boxes + (row_base + j) * 4;
            other[threadIdx.x][0] = b[0]; other[threadIdx.x][1] = b[1];
            other[threadIdx.x][2] = b[2]; other[threadIdx.x][3] = b[3];
            const float w = b[2] - b[0] + area_offset, h = b[3] - b[1] + area_offset;
            other[threadIdx.x][4] = (w > 0.f && h > 0.f) ? w * h : 0.f;
            other_label[threadIdx.x] = labels ? labels[row_base + j] : 0;
        }
    }
    __syncthreads();
    if (i >= count) return;
    const float* a = boxes + (row_base + i) * 4;
    const float a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    const float aw = a2 - a0 + area_offset, ah = a3 - a1 + area_offset;
    const float area_a = (aw > 0.f && ah > 0.f) ? aw * ah : 0.f;
    const int label_a = labels ? labels[row_base + i] : 0;
    u64 bits = 0ull;
    const int last = min(64, count - j0);
    for (int t = 0; t < last; ++t) {
        const int j = j0 + t;
        if (j <= i || other_label[t] != label_a) continue;
        float width = fminf(a2, other[t][2]) - fmaxf(a0, other[t][0]);
        float height = fminf(a3, other[t][3]) - fmaxf(a1, other[t][1]);
        if (caffe_offset != 0.f) {
            if (width < 0.f || height < 0.f) { width = 0.f; height = 0.f; }
            width += caffe_offset;
            height += caffe_offset;
        }
        width = fmaxf(width, 0.f);
        height = fmaxf(height, 0.f);
        const float inter = width * height;
        float uni = area_a + other[t][4];
        uni -= inter;
        const float iou = inter / uni;
        if (inclusive ? (iou >= threshold) : (iou > threshold)) bits |= 1ull << t;
    }
    mask[(row_base + i) * words + word] = bits;
}

// One warp per row: walk the candidates best first, keep those no kept candidate suppresses.
extern "C" __global__ void nms_scan(
    const u64* __restrict__ mask, const int* __restrict__ counts, int k, int words, int max_keep,
    unsigned char* __restrict__ keep)
{
    __shared__ u64 tile[64 * 64];
    const int row = blockIdx.x, lane = threadIdx.x;
    const int count = counts[row];
    const long long row_base = (long long)row * k;
    u64 removed0 = 0ull, removed1 = 0ull;     // words lane and lane + 32
    int kept = 0;
    for (int start = 0; start < count && kept < max_keep; start += 64) {
        const int here = min(64, count - start);
        const u64* source = mask + (row_base + start) * words;
        for (int e = lane; e < here * words; e += 32) tile[e] = source[e];
        __syncwarp();
        for (int t = 0; t < here && kept < max_keep; ++t) {
            const int i = start + t, w = i >> 6;
            const u64 mine = (w < 32) ? removed0 : removed1;
            const unsigned int bit = __shfl_sync(0xffffffffu, (unsigned int)((mine >> (i & 63)) & 1ull), w & 31);
            if (!bit) {
                if (lane == 0) keep[row_base + i] = 1;
                ++kept;
                if (lane < words) removed0 |= tile[t * words + lane];
                if (lane + 32 < words) removed1 |= tile[t * words + lane + 32];
            }
        }
        __syncwarp();
    }
}
"""

_LOCK = threading.Lock()
_MODULE: list[Any] = []


def _kernel(name: str) -> Any:
    with _LOCK:
        if not _MODULE:
            cp = import_cupy()
            # no fused multiply-adds: overlap decisions must round exactly as the host's float32 ones
            _MODULE.append(cp.RawModule(code=_SOURCE, options=("--std=c++14", "--fmad=false")))
        return _MODULE[0].get_function(name)


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
    cp = import_cupy()
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
    cp = import_cupy()
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
    cp = import_cupy()
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
