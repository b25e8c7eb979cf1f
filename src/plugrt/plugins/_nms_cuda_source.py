"""The CUDA C++ source of the NMS plugins' kernels (compiled by :mod:`plugrt.plugins._nms_cuda`).

``top_k_rows``: per-row top-k by a radix select over unique 64-bit keys, then a bitonic sort
in shared memory. ``gather_corners`` and ``write_detections_f32/_f16``: BatchedNMS's gather of
candidate corners and its output writer. ``nms_mask`` and ``nms_scan``: greedy NMS as
suppression bit masks, then one warp per row walking them. The overlap arithmetic must stay
:class:`plugrt.plugins._nms.OverlapRule`'s, compiled without fused multiply-adds.
"""

__all__ = ["SOURCE"]

SOURCE = r"""
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
