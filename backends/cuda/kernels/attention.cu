// Attention on the GPU: split-K flash-decoding over each row's logical key list, LongSpec's masked tree
// attention, and the log-sum-exp merge of the parts. Partials are (max, sum of exponentials, unnormalised
// output): merging (m1, l1, o1) and (m2, l2, o2) gives m = max(m1, m2), l = l1 e^(m1-m) + l2 e^(m2-m),
// o = o1 e^(m1-m) + o2 e^(m2-m), and the result o / l with log-sum-exp m + log l.
#include "kernels.h"

#include <cmath>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {
namespace {

constexpr int kWarp = 32;
constexpr int kChunkWarps = 8;

__device__ float warp_max(float v) {
    for (int off = kWarp / 2; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}
__device__ float warp_sum(float v) {
    for (int off = kWarp / 2; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

int sub_block(int head_dim) { return head_dim <= 128 ? 64 : 32; }
int padded_dim(int head_dim) { return head_dim + 2; }  // odd word stride: lanes reading different rows miss bank conflicts
int32_t chunk_count(const AttentionShape &s, int32_t max_keys) { return (max_keys + s.chunk - 1) / s.chunk; }

// grid (chunks, KV heads). Dynamic shared memory: K and V of up to `sub` prefix keys, then per warp the query
// (head_dim floats) and the sub-block's probabilities (sub floats).
__global__ void attention_chunks_kernel(const float *__restrict__ q, const __half *__restrict__ k_cache, const __half *__restrict__ v_cache,
                                        int32_t dkv, AttentionRows rows, AttentionShape s, int32_t sub, int32_t n_chunks,
                                        float *__restrict__ partials) {
    SPECULA_DYNAMIC_SHARED(unsigned char, smem);
    const int hd = s.head_dim, hp = hd + 2;
    __half *ks = reinterpret_cast<__half *>(smem);
    __half *vs = ks + sub * hp;
    float *qs_all = reinterpret_cast<float *>(vs + sub * hp);  // 2 * sub * hp halves: an even count, float-aligned
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    float *qs = qs_all + warp * (hd + sub);
    float *ps = qs + hd;

    const int32_t c = blockIdx.x, g = blockIdx.y, group = s.n_head / s.n_head_kv;
    const int32_t chunk_begin = c * s.chunk;
    const int32_t chunk_end = min(chunk_begin + s.chunk, rows.max_keys);
    const int32_t n_queries = rows.n * group;
    const size_t head_offset = size_t(g) * hd;

    for (int32_t p0 = chunk_begin; p0 < chunk_end; p0 += sub) {
        const int32_t p1 = min(p0 + sub, chunk_end);
        // Keys every row reads from the same slot: the committed prefix, or all of them for a causal batch (no
        // tail_slots: the tail of row i is the batch's slots n_prefix .. n_prefix + i, so key p is slot p).
        const bool causal = rows.tail_slots == nullptr;
        const int32_t shared_keys = causal ? p1 - p0 : max(0, min(p1, rows.n_prefix) - p0);
        for (int e = threadIdx.x; e < shared_keys * hd; e += blockDim.x) {
            const int key = e / hd, d = e % hd;
            const size_t src = size_t(p0 + key) * dkv + head_offset + d;
            ks[key * hp + d] = k_cache[src];
            vs[key * hp + d] = v_cache[src];
        }
        __syncthreads();
        for (int32_t qi = warp; qi < n_queries; qi += kChunkWarps) {
            const int32_t i = qi / group, h = g * group + qi % group;
            const int32_t keys_i = rows.n_prefix + (rows.tail_len ? rows.tail_len[i] : 0);
            if (p0 >= keys_i) continue;
            const int32_t n_keys = min(p1, keys_i) - p0;
            const int32_t *tail = causal ? nullptr : rows.tail_slots + rows.tail_start[i];
            for (int d = lane; d < hd; d += kWarp) qs[d] = q[(size_t(i) * s.n_head + h) * hd + d];
            __syncwarp();
            // Scores: lane j takes keys j and j + 32 of the sub-block; each dot product runs d = 0 .. hd-1 in order.
            float score[2] = {-INFINITY, -INFINITY};
            for (int r = 0; r < 2; ++r) {
                const int j = lane + r * kWarp;
                if (j >= n_keys) continue;
                const int32_t p = p0 + j;
                const __half *kr = (causal || p < rows.n_prefix) ? ks + j * hp : k_cache + size_t(tail[p - rows.n_prefix]) * dkv + head_offset;
                float dot = 0.0f;
                for (int d = 0; d < hd; ++d) dot += qs[d] * __half2float(kr[d]);
                score[r] = dot * s.scale;
            }
            float *part = partials + ((size_t(i) * s.n_head + h) * n_chunks + c) * size_t(hd + 2);
            const bool first = p0 == chunk_begin;
            const float m_old = first ? -INFINITY : part[0];
            const float l_old = first ? 0.0f : part[1];
            const float m_new = fmaxf(m_old, warp_max(fmaxf(score[0], score[1])));
            float sum = 0.0f;
            for (int r = 0; r < 2; ++r) {
                const int j = lane + r * kWarp;
                const float pj = j < n_keys ? expf(score[r] - m_new) : 0.0f;
                if (j < sub) ps[j] = pj;
                sum += pj;
            }
            sum = warp_sum(sum);
            const float alpha = first ? 0.0f : expf(m_old - m_new);
            __syncwarp();
            for (int d = lane; d < hd; d += kWarp) {
                float acc = 0.0f;
                for (int j = 0; j < n_keys; ++j) {
                    const int32_t p = p0 + j;
                    const __half *vr = (causal || p < rows.n_prefix) ? vs + j * hp : v_cache + size_t(tail[p - rows.n_prefix]) * dkv + head_offset;
                    acc += ps[j] * __half2float(vr[d]);
                }
                part[2 + d] = (first ? 0.0f : part[2 + d] * alpha) + acc;
            }
            __syncwarp();
            if (lane == 0) {
                part[0] = m_new;
                part[1] = l_old * alpha + sum;
            }
            __syncwarp();
        }
        __syncthreads();
    }
}

// grid (rows, heads), one warp: row i over the tree slots its mask row marks, 32 keys at a time.
__global__ void attention_tree_kernel(const float *__restrict__ q, const __half *__restrict__ k_cache, const __half *__restrict__ v_cache,
                                      int32_t dkv, int32_t first_slot, int32_t n_tree, const uint8_t *__restrict__ mask, AttentionShape s,
                                      float *__restrict__ out) {
    SPECULA_DYNAMIC_SHARED(float, tree_smem);
    const int hd = s.head_dim, lane = threadIdx.x;
    const int32_t i = blockIdx.x, h = blockIdx.y, g = h / (s.n_head / s.n_head_kv);
    float *qs = tree_smem, *ps = tree_smem + hd;
    for (int d = lane; d < hd; d += kWarp) qs[d] = q[(size_t(i) * s.n_head + h) * hd + d];
    __syncwarp();
    const size_t head_offset = size_t(g) * hd;
    const uint8_t *mrow = mask + size_t(i) * n_tree;
    float m = -INFINITY, l = 0.0f;
    float *o = out + (size_t(i) * s.n_head + h) * size_t(hd + 2);
    for (int d = lane; d < hd; d += kWarp) o[2 + d] = 0.0f;
    for (int32_t j0 = 0; j0 < n_tree; j0 += kWarp) {
        const int32_t j = j0 + lane;
        float score = -INFINITY;
        const bool visible = j < n_tree && mrow[j] != 0;
        if (visible) {
            const __half *kr = k_cache + size_t(first_slot + j) * dkv + head_offset;
            float dot = 0.0f;
            for (int d = 0; d < hd; ++d) dot += qs[d] * __half2float(kr[d]);
            score = dot * s.scale;
        }
        const float m_blk = warp_max(score);
        if (m_blk == -INFINITY) continue;  // nothing visible in these 32 slots (uniform across the warp)
        const float m_new = fmaxf(m, m_blk);
        const float pj = visible ? expf(score - m_new) : 0.0f;
        ps[lane] = pj;
        const float sum = warp_sum(pj);
        const float alpha = m == -INFINITY ? 0.0f : expf(m - m_new);
        __syncwarp();
        const int32_t n_keys = min(kWarp, n_tree - j0);
        for (int d = lane; d < hd; d += kWarp) {
            float acc = 0.0f;
            for (int jj = 0; jj < n_keys; ++jj)
                if (ps[jj] != 0.0f) acc += ps[jj] * __half2float(v_cache[size_t(first_slot + j0 + jj) * dkv + head_offset + d]);
            o[2 + d] = o[2 + d] * alpha + acc;
        }
        __syncwarp();
        l = l * alpha + sum;
        m = m_new;
    }
    if (lane == 0) {
        o[0] = m;
        o[1] = l;
    }
}

// grid (rows, heads); threads over head_dim.
__global__ void attention_merge_kernel(const float *__restrict__ partials, const float *__restrict__ tree, AttentionRows rows,
                                       AttentionShape s, int32_t n_chunks, float *__restrict__ out, float *__restrict__ lse) {
    const int hd = s.head_dim;
    const int32_t i = blockIdx.x, h = blockIdx.y;
    const int32_t keys_i = rows.n_prefix + (rows.tail_len ? rows.tail_len[i] : 0);
    const int32_t n_c = (keys_i + s.chunk - 1) / s.chunk;
    const float *base = partials + (size_t(i) * s.n_head + h) * n_chunks * size_t(hd + 2);
    const float *t = tree ? tree + (size_t(i) * s.n_head + h) * size_t(hd + 2) : nullptr;
    float m = t ? t[0] : -INFINITY;
    for (int32_t c = 0; c < n_c; ++c) m = fmaxf(m, base[size_t(c) * (hd + 2)]);
    float l = 0.0f;
    for (int32_t c = 0; c < n_c; ++c) {
        const float *p = base + size_t(c) * (hd + 2);
        if (p[0] != -INFINITY) l += p[1] * expf(p[0] - m);
    }
    if (t && t[0] != -INFINITY) l += t[1] * expf(t[0] - m);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float o = 0.0f;
        for (int32_t c = 0; c < n_c; ++c) {
            const float *p = base + size_t(c) * (hd + 2);
            if (p[0] != -INFINITY) o += p[2 + d] * expf(p[0] - m);
        }
        if (t && t[0] != -INFINITY) o += t[2 + d] * expf(t[0] - m);
        out[(size_t(i) * s.n_head + h) * hd + d] = o * inv;
    }
    if (lse && threadIdx.x == 0) lse[size_t(i) * s.n_head + h] = l > 0.0f ? m + logf(l) : -INFINITY;
}

}  // namespace

size_t attention_partials_floats(const AttentionShape &s, int32_t n_rows, int32_t max_keys) {
    return size_t(n_rows) * size_t(s.n_head) * size_t(std::max(1, chunk_count(s, max_keys))) * size_t(s.head_dim + 2);
}

void attention_chunks(const float *q, const __half *k_cache, const __half *v_cache, int32_t n_embd_kv, const AttentionRows &rows,
                      const AttentionShape &s, float *partials, cudaStream_t stream) {
    const int32_t n_chunks = chunk_count(s, rows.max_keys);
    if (rows.n <= 0 || n_chunks <= 0) return;
    const int sub = sub_block(s.head_dim), hp = padded_dim(s.head_dim);
    const size_t halves = size_t(2 * sub * hp);
    const size_t bytes = halves * sizeof(__half) + size_t(kChunkWarps) * size_t(s.head_dim + sub) * sizeof(float);
    SPECULA_LAUNCH(attention_chunks_kernel, dim3(unsigned(n_chunks), unsigned(s.n_head_kv)), kChunkWarps * kWarp, bytes, stream)(
        q, k_cache, v_cache, n_embd_kv, rows, s, sub, n_chunks, partials);
}

void attention_tree(const float *q, const __half *k_cache, const __half *v_cache, int32_t n_embd_kv, int32_t n_rows, int32_t first_tree_slot,
                    int32_t n_tree, const uint8_t *mask, const AttentionShape &s, float *tree_partials, cudaStream_t stream) {
    if (n_rows <= 0) return;
    const size_t bytes = size_t(s.head_dim + kWarp) * sizeof(float);
    SPECULA_LAUNCH(attention_tree_kernel, dim3(unsigned(n_rows), unsigned(s.n_head)), kWarp, bytes, stream)(q, k_cache, v_cache, n_embd_kv, first_tree_slot,
                                                                                               n_tree, mask, s, tree_partials);
}

void attention_merge(const float *partials, const float *tree_partials, const AttentionRows &rows, const AttentionShape &s, float *out,
                     float *lse, cudaStream_t stream) {
    if (rows.n <= 0) return;
    const int32_t n_chunks = std::max(1, chunk_count(s, rows.max_keys));
    const int threads = std::min(256, std::max(32, (s.head_dim + 31) / 32 * 32));
    SPECULA_LAUNCH(attention_merge_kernel, dim3(unsigned(rows.n), unsigned(s.n_head)), threads, 0, stream)(partials, tree_partials, rows, s, n_chunks,
                                                                                               out, lse);
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
