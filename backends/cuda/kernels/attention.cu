// Attention on the GPU: split-K flash attention on tensor cores over each row's logical key list, LongSpec's
// masked tree attention (CUDA cores), and the log-sum-exp merge of the parts. Partials are (max, sum of exponentials, unnormalised
// output): merging (m1, l1, o1) and (m2, l2, o2) gives m = max(m1, m2), l = l1 e^(m1-m) + l2 e^(m2-m),
// o = o1 e^(m1-m) + o2 e^(m2-m), and the result o / l with log-sum-exp m + log l.
#include "kernels.h"

#include <mma.h>

#include <cmath>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {
namespace {

constexpr int kWarp = 32;
constexpr int kTile = 16;                     // WMMA 16x16x16: 16 queries x 16 keys x 16 dimensions
constexpr int kChunkWarps = 4;
constexpr int kSubKeys = kTile * kChunkWarps;  // keys loaded per block step; in the tail phase, one 16-key tile per warp

__device__ float warp_max(float v) {
    for (int off = kWarp / 2; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}
__device__ float warp_sum(float v) {
    for (int off = kWarp / 2; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// Chunks [first_chunk, chunk_end) of the launch: those below the earliest window's start hold no row's keys.
__host__ __device__ int32_t first_chunk(const AttentionShape &s, const AttentionRows &rows) { return rows.min_from / s.chunk; }
int32_t chunk_count(const AttentionShape &s, const AttentionRows &rows) {
    return std::max(0, (rows.max_keys + s.chunk - 1) / s.chunk - first_chunk(s, rows));
}

// A score as the softmax weighs it: scaled, then soft-capped when the model caps (gemma2: cap * tanh(score / cap),
// in llama.cpp's and the CPU's order).
__device__ __forceinline__ float capped_score(float dot, const AttentionShape &s) {
    const float x = dot * s.scale;
    return s.softcap > 0.0f ? tanhf(x * (1.0f / s.softcap)) * s.softcap : x;
}

// ---- tensor-core split-K attention ----------------------------------------------------------------------
// Shared-memory layout of attention_chunks_kernel. Head dimensions are padded with zeros to a multiple of 16
// (zeros change no dot product); rows of K, V and Q get 8 more halves so that the rows of a tile start in
// different banks. Every region is a multiple of 32 bytes long, as WMMA loads and stores need 256-bit alignment.
struct ChunkLayout {
    int hd16 = 0, ldh = 0;  // padded head_dim; halves per row of K, V and Q in shared memory
    __host__ __device__ explicit ChunkLayout(int head_dim) : hd16((head_dim + kTile - 1) / kTile * kTile), ldh(hd16 + 8) {}
    __host__ __device__ size_t kv_halves() const { return size_t(kSubKeys) * size_t(ldh); }  // each of K and V
    // Per warp: its 16 queries as F16, a 16x16 float tile (scores, then P V), P as F16, and a factor per query.
    __host__ __device__ size_t warp_bytes() const { return size_t(kTile) * ldh * 2 + kTile * kTile * 4 + kTile * kTile * 2 + kTile * 4; }
    __host__ __device__ size_t bytes() const { return 2 * kv_halves() * 2 + size_t(kChunkWarps) * warp_bytes(); }
};

// One warp's scratch in shared memory.
struct WarpScratch {
    __half *q;     // 16 x ldh: the tile's queries, rounded to F16 (the A operand of Q K^T)
    float *s;      // 16 x 16: scores, then one 16-dimension slice of P V
    __half *p;     // 16 x 16: probabilities rounded to F16 (the A operand of P V)
    float *alpha;  // 16: rescale of each query's running output, or -1 when this key tile did not update it
};

__device__ WarpScratch warp_scratch(unsigned char *smem, const ChunkLayout &lay, int warp) {
    unsigned char *base = smem + 2 * lay.kv_halves() * 2 + size_t(warp) * lay.warp_bytes();
    WarpScratch w;
    w.q = reinterpret_cast<__half *>(base);
    w.s = reinterpret_cast<float *>(base + size_t(kTile) * lay.ldh * 2);
    w.p = reinterpret_cast<__half *>(w.s + kTile * kTile);
    w.alpha = reinterpret_cast<float *>(w.p + kTile * kTile);
    return w;
}

// What every step of one block (chunk c, KV head g) needs to know. A "query" is one (row, query head of the
// group): query qi is row qi / group, head g * group + qi % group.
struct ChunkJob {
    AttentionRows rows;
    AttentionShape s;
    ChunkLayout lay;
    int32_t c, g, group, n_chunks, chunk_begin, chunk_end;
    size_t head_offset;  // of KV head g in a cache row
    int32_t dkv;
    float *partials;

    // Row i's keys are the logical positions [row_from, row_keys): prefix slots first, then its tail entries from
    // row_base on (kernels.h: a window that starts past the prefix keeps only tail entries, at their positions).
    __device__ int32_t row_from(int32_t i) const { return rows.from ? rows.from[i] : 0; }
    __device__ int32_t row_base(int32_t i) const { return rows.tail_slots ? max(row_from(i), rows.n_prefix) : rows.n_prefix; }
    __device__ int32_t row_keys(int32_t i) const { return rows.tail_len ? row_base(i) + rows.tail_len[i] : rows.n_prefix; }
    // Row i's keys in [p0, p0 + 16) of this chunk are the tile's columns [visible_lo, visible_hi).
    __device__ int visible_lo(int32_t i, int32_t p0) const { return max(0, min(kTile, row_from(i) - p0)); }
    __device__ int visible_hi(int32_t i, int32_t p0) const {
        return max(visible_lo(i, p0), min(kTile, min(chunk_end, row_keys(i)) - p0));
    }
    // Whether [p0, p0 + 16) is the first tile of this chunk where row i has keys (tiles start at chunk_begin + 16k).
    __device__ bool first_tile(int32_t i, int32_t p0) const {
        return p0 == chunk_begin + (max(chunk_begin, row_from(i)) - chunk_begin) / kTile * kTile;
    }
    // (max, sum, output[head_dim]) of query qi in this chunk.
    __device__ float *partial(int32_t qi) const {
        const int32_t i = qi / group, h = g * group + qi % group;
        return partials + ((size_t(i) * s.n_head + h) * n_chunks + c) * size_t(s.head_dim + 2);
    }
};

// Queries [q0, q1) (at most 16) into w.q as F16, zero rows and columns beyond them (warp-wide).
__device__ void load_query_tile(const WarpScratch &w, const float *__restrict__ q, const ChunkJob &job, int32_t q0, int32_t q1) {
    const int hd = job.s.head_dim, hd16 = job.lay.hd16;
    for (int e = threadIdx.x % kWarp; e < kTile * hd16; e += kWarp) {
        const int r = e / hd16, d = e % hd16;
        const int32_t qi = q0 + r;
        float v = 0.0f;
        if (qi < q1 && d < hd) v = q[(size_t(qi / job.group) * job.s.n_head + job.g * job.group + qi % job.group) * hd + d];
        w.q[r * job.lay.ldh + d] = __float2half_rn(v);
    }
}

// The keys every row reads from the same slot, logical positions [p0, p0 + kSubKeys), into ks / vs (block-wide).
// Positions at or past `valid_end` get zero rows: a zero V row times a zero probability adds exactly nothing,
// where whatever else is in shared memory or in unwritten cache slots might be NaN.
__device__ void load_shared_keys(__half *ks, __half *vs, const __half *__restrict__ k_cache, const __half *__restrict__ v_cache,
                                 const ChunkJob &job, int32_t p0, int32_t valid_end) {
    const int hd = job.s.head_dim, hd16 = job.lay.hd16;
    for (int e = threadIdx.x; e < kSubKeys * hd16; e += blockDim.x) {
        const int key = e / hd16, d = e % hd16;
        const int32_t p = p0 + key;
        __half kv = __float2half_rn(0.0f), vv = kv;
        if (p < valid_end && d < hd) {
            const size_t src = size_t(p) * job.dkv + job.head_offset + d;  // key p is slot p
            kv = k_cache[src];
            vv = v_cache[src];
        }
        ks[key * job.lay.ldh + d] = kv;
        vs[key * job.lay.ldh + d] = vv;
    }
}

// Row i's logical keys [p0, p0 + 16) into a warp's own 16-key tile (warp-wide): prefix slots, then its tail
// slots; zero rows past its last key in this chunk.
__device__ void gather_row_keys(__half *kt, __half *vt, const __half *__restrict__ k_cache, const __half *__restrict__ v_cache,
                                const ChunkJob &job, int32_t i, int32_t p0) {
    const int hd = job.s.head_dim, hd16 = job.lay.hd16;
    const int32_t end = min(job.chunk_end, job.row_keys(i)), n_prefix = job.rows.n_prefix, from = job.row_from(i), base = job.row_base(i);
    const int32_t *tail = job.rows.tail_slots + job.rows.tail_start[i];
    for (int e = threadIdx.x % kWarp; e < kTile * hd16; e += kWarp) {
        const int key = e / hd16, d = e % hd16;
        const int32_t p = p0 + key;
        __half kv = __float2half_rn(0.0f), vv = kv;
        if (p >= from && p < end && d < hd) {
            const int32_t slot = p < n_prefix ? p : tail[p - base];
            const size_t src = size_t(slot) * job.dkv + job.head_offset + d;
            kv = k_cache[src];
            vv = v_cache[src];
        }
        kt[key * job.lay.ldh + d] = kv;
        vt[key * job.lay.ldh + d] = vv;
    }
}

// The one place attention arithmetic happens (warp-wide): queries [q0, q1) (loaded in w.q) against the 16 keys
// at logical positions [p0, p0 + 16) in kt / vt, updating each query's online softmax (max, sum, output) in its
// chunk partial. Batch invariance: a tensor-core output depends only on its A row, B column and C element, so
// a query's scores and its P V are the same bits whichever other queries share the tile; the softmax is per
// query, over its keys in logical order; its invisible keys get P = 0 exactly (against zero or finite V rows),
// and a key tile where it has no key leaves its state untouched. The shared-prefix path and the per-row tail
// path both come here, so the same logical keys give the same bits either way.
__device__ void attend_key_tile(const WarpScratch &w, const __half *kt, const __half *vt, const ChunkJob &job, int32_t q0, int32_t q1,
                                int32_t p0) {
    namespace wmma = nvcuda::wmma;
    const int lane = threadIdx.x % kWarp, ldh = job.lay.ldh, hd = job.s.head_dim;
    const int32_t my_q = q0 + lane;
    const bool mine = lane < kTile && my_q < q1;
    const int lo = mine ? job.visible_lo(my_q / job.group, p0) : 0, hi = mine ? job.visible_hi(my_q / job.group, p0) : 0;
    const int n_vis = hi - lo;
    if (warp_max(float(n_vis)) == 0.0f) return;  // no query of the tile has a key here (uniform across the warp)
    // Whether this is the query's first tile of keys in the chunk (its partial is started, not updated).
    const bool first = n_vis > 0 && job.first_tile(my_q / job.group, p0);

    // S = Q K^T, summed over the head dimension in 16-wide slices, in order.
    wmma::fragment<wmma::accumulator, kTile, kTile, kTile, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int d0 = 0; d0 < job.lay.hd16; d0 += kTile) {
        wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, __half, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, __half, wmma::col_major> b;
        wmma::load_matrix_sync(a, w.q + d0, unsigned(ldh));
        wmma::load_matrix_sync(b, kt + d0, unsigned(ldh));  // K row-major = K^T column-major
        wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(w.s, acc, kTile, wmma::mem_row_major);
    __syncwarp();

    // Online softmax, lane r for query r, keys in logical order. P is rounded to F16 before it is summed, so
    // the sum l and the output P V weigh keys alike. alpha 0 marks a query's first tile (its output is started).
    if (lane < kTile) {
        const __half zero = __float2half_rn(0.0f);
        float alpha = -1.0f;
        if (n_vis > 0) {
            float *part = job.partial(my_q);
            float *scores = w.s + lane * kTile;
            float m_blk = -INFINITY;
            for (int j = lo; j < hi; ++j) {
                scores[j] = capped_score(scores[j], job.s);
                m_blk = fmaxf(m_blk, scores[j]);
            }
            const float m_old = first ? -INFINITY : part[0], l_old = first ? 0.0f : part[1];
            const float m_new = fmaxf(m_old, m_blk);
            float sum = 0.0f;
            for (int j = 0; j < kTile; ++j) {
                const __half pj = j >= lo && j < hi ? __float2half_rn(expf(scores[j] - m_new)) : zero;
                w.p[lane * kTile + j] = pj;
                sum += __half2float(pj);
            }
            alpha = first ? 0.0f : expf(m_old - m_new);
            part[0] = m_new;
            part[1] = l_old * alpha + sum;
        } else {
            for (int j = 0; j < kTile; ++j) w.p[lane * kTile + j] = zero;
        }
        w.alpha[lane] = alpha;
    }
    __syncwarp();

    // O = O * alpha + P V, one 16-dimension slice at a time (P V into a zeroed accumulator, then added in float).
    wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, __half, wmma::row_major> pa;
    wmma::load_matrix_sync(pa, w.p, kTile);
    for (int d0 = 0; d0 < job.lay.hd16; d0 += kTile) {
        wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, __half, wmma::row_major> b;
        wmma::load_matrix_sync(b, vt + d0, unsigned(ldh));
        wmma::fill_fragment(acc, 0.0f);
        wmma::mma_sync(acc, pa, b, acc);
        wmma::store_matrix_sync(w.s, acc, kTile, wmma::mem_row_major);
        __syncwarp();
        for (int e = lane; e < kTile * kTile; e += kWarp) {
            const int r = e / kTile, d = d0 + e % kTile;
            const float alpha = w.alpha[r];
            if (alpha < 0.0f || d >= hd) continue;
            float *o = job.partial(q0 + r) + 2 + d;
            *o = (alpha == 0.0f ? 0.0f : *o * alpha) + w.s[e];
        }
        __syncwarp();
    }
}

// grid (chunks, KV heads), kChunkWarps warps. Chunk c is logical keys [c * chunk, (c+1) * chunk) of every row.
// Phase 1, key tiles every row reads from the same slots (all of them for a causal batch, where key p is slot p;
// for a tree, those wholly inside the committed prefix): loaded once per block, kSubKeys at a time, and run
// against every query of the KV group, 16 queries per WMMA tile. Phase 2, a tree's other key tiles: per row,
// its own keys gathered into the warp's 16-key tile, with the row's query heads alone in the query tile.
__global__ void attention_chunks_kernel(const float *__restrict__ q, const __half *__restrict__ k_cache, const __half *__restrict__ v_cache,
                                        int32_t dkv, AttentionRows rows, AttentionShape s, int32_t n_chunks, float *__restrict__ partials) {
    SPECULA_DYNAMIC_SHARED(unsigned char, smem);
    ChunkJob job{rows, s, ChunkLayout(s.head_dim), int32_t(blockIdx.x), int32_t(blockIdx.y), s.n_head / s.n_head_kv, n_chunks, 0, 0,
                 size_t(blockIdx.y) * size_t(s.head_dim), dkv, partials};
    job.chunk_begin = (first_chunk(s, rows) + job.c) * s.chunk;
    job.chunk_end = min(job.chunk_begin + s.chunk, rows.max_keys);
    const int warp = threadIdx.x / kWarp;
    __half *ks = reinterpret_cast<__half *>(smem);
    __half *vs = ks + job.lay.kv_halves();
    const WarpScratch w = warp_scratch(smem, job.lay, warp);
    const int ldh = job.lay.ldh;

    const bool causal = rows.tail_slots == nullptr;
    // End of the shared key tiles: the whole chunk when causal, else the tiles that lie wholly in the prefix.
    int32_t shared_end = job.chunk_end;
    if (!causal && rows.n_prefix < job.chunk_end)
        shared_end = job.chunk_begin + max(0, rows.n_prefix - job.chunk_begin) / kTile * kTile;
    const int32_t valid_end = causal ? shared_end : min(shared_end, rows.n_prefix);
    const int32_t n_queries = rows.n * job.group, n_tiles = (n_queries + kTile - 1) / kTile;

    int32_t loaded = -1;  // query tile now in w.q
    for (int32_t pb = job.chunk_begin; pb < shared_end; pb += kSubKeys) {
        load_shared_keys(ks, vs, k_cache, v_cache, job, pb, valid_end);
        __syncthreads();
        for (int32_t t = warp; t < n_tiles; t += kChunkWarps) {
            const int32_t q0 = t * kTile, q1 = min(q0 + kTile, n_queries);
            if (loaded != t) {
                load_query_tile(w, q, job, q0, q1);
                loaded = t;
                __syncwarp();
            }
            for (int32_t p0 = pb; p0 < min(pb + kSubKeys, shared_end); p0 += kTile)
                attend_key_tile(w, ks + (p0 - pb) * ldh, vs + (p0 - pb) * ldh, job, q0, q1, p0);
        }
        __syncthreads();  // before ks / vs are reloaded, and before phase 2 reads what phase 1 wrote
    }
    if (causal || shared_end >= job.chunk_end) return;

    __half *kt = ks + warp * kTile * ldh, *vt = vs + warp * kTile * ldh;
    for (int32_t i = warp; i < rows.n; i += kChunkWarps) {
        const int32_t end = min(job.chunk_end, job.row_keys(i));
        // From the tile of its first key past the shared ones (a window may start further on).
        const int32_t start = shared_end + (max(shared_end, job.row_from(i)) - shared_end) / kTile * kTile;
        for (int32_t h0 = 0; h0 < job.group && start < end; h0 += kTile) {
            const int32_t q0 = i * job.group + h0, q1 = i * job.group + min(job.group, h0 + kTile);
            load_query_tile(w, q, job, q0, q1);
            for (int32_t p0 = start; p0 < end; p0 += kTile) {
                gather_row_keys(kt, vt, k_cache, v_cache, job, i, p0);
                __syncwarp();
                attend_key_tile(w, kt, vt, job, q0, q1, p0);
                __syncwarp();  // before the next gather overwrites the tile
            }
        }
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
            score = capped_score(dot, s);
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
    // Row i's chunks: from its window's first (0 without one) to its last key's, counted from the launch's first.
    const int32_t from = rows.from ? rows.from[i] : 0, c_lo = rows.min_from / s.chunk;
    const int32_t base_i = rows.tail_slots ? max(from, rows.n_prefix) : rows.n_prefix;
    const int32_t keys_i = rows.tail_len ? base_i + rows.tail_len[i] : rows.n_prefix;
    const int32_t c0 = from / s.chunk - c_lo, n_c = (keys_i + s.chunk - 1) / s.chunk - c_lo;
    const float *base = partials + (size_t(i) * s.n_head + h) * n_chunks * size_t(hd + 2);
    const float *t = tree ? tree + (size_t(i) * s.n_head + h) * size_t(hd + 2) : nullptr;
    float m = t ? t[0] : -INFINITY;
    for (int32_t c = c0; c < n_c; ++c) m = fmaxf(m, base[size_t(c) * (hd + 2)]);
    float l = 0.0f;
    for (int32_t c = c0; c < n_c; ++c) {
        const float *p = base + size_t(c) * (hd + 2);
        if (p[0] != -INFINITY) l += p[1] * expf(p[0] - m);
    }
    if (t && t[0] != -INFINITY) l += t[1] * expf(t[0] - m);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float o = 0.0f;
        for (int32_t c = c0; c < n_c; ++c) {
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
    return size_t(n_rows) * size_t(s.n_head) * size_t(std::max(1, (max_keys + s.chunk - 1) / s.chunk)) * size_t(s.head_dim + 2);
}

void attention_chunks(const float *q, const __half *k_cache, const __half *v_cache, int32_t n_embd_kv, const AttentionRows &rows,
                      const AttentionShape &s, float *partials, cudaStream_t stream) {
    const int32_t n_chunks = chunk_count(s, rows);
    if (rows.n <= 0 || n_chunks <= 0) return;
    const size_t bytes = ChunkLayout(s.head_dim).bytes();  // 57.25 KiB at head_dim 128, 105.25 KiB at 256
#ifndef SPECULA_CUDA_EMULATION
    // Past the default 48 KB of dynamic shared memory a kernel has to opt in (sm_80: up to 163 KB per block).
    if (bytes > 48 * 1024)
        (void)cudaFuncSetAttribute(attention_chunks_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
#endif
    SPECULA_LAUNCH(attention_chunks_kernel, dim3(unsigned(n_chunks), unsigned(s.n_head_kv)), kChunkWarps * kWarp, bytes, stream)(
        q, k_cache, v_cache, n_embd_kv, rows, s, n_chunks, partials);
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
    const int32_t n_chunks = std::max(1, chunk_count(s, rows));
    const int threads = std::min(256, std::max(32, (s.head_dim + 31) / 32 * 32));
    SPECULA_LAUNCH(attention_merge_kernel, dim3(unsigned(rows.n), unsigned(s.n_head)), threads, 0, stream)(partials, tree_partials, rows, s, n_chunks,
                                                                                               out, lse);
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
