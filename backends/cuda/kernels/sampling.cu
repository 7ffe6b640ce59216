// The session sampler's chain and the verifier's walk on the device (sampling.h).
//
// sample_chain_rows: one block of 256 threads per row, the structure of row_topk (topk.cu) ranking the logit itself.
//   1. Edited ids (the row's penalties): their ids are marked in a bitmap over the vocabulary in dynamic shared
//      memory ((n + 31) / 32 words: 32 KiB at n = 262144; past the default 48 KiB the launch opts in to more).
//   2. Each thread keeps its own best k (value descending, then lowest id) by insertion into a sorted local list:
//      first over its strided elements t, t + 256, ... skipping the marked ids, then over the edits t, t + 256, ...
//      of the row's edit list, inserted with their penalized value (the host's formula, each operation rounded
//      with __f*_rn so that nvcc cannot fuse a multiply-add the host does not). Every id is in exactly one list.
//   3. The block merges the 256 sorted lists in k rounds: each round the heads are compared (warp butterfly, then the
//      8 warp winners); the thread whose head carries the winner's id advances (ids are unique in the row, so the id
//      alone names the owner: with edits it is no longer id % 256).
//   4. Thread 0 runs the rest of the chain on the k sorted (logit, id) pairs exactly as the host's Candidates do
//      (top-p, min-p, temperature, normalize; sampler.cpp, sampler_steps.cpp, candidates.cpp), sums in double in
//      item order. expf / logf: on the emulator the host's own, so it matches the host bit for bit; on a GPU the
//      CUDA math library's, which may differ in the last bit.
// The ranking is a strict total order on (value, id), so the result does not depend on how the row is split or on
// the merge order: deterministic, and a row's result is the same in any launch.
//
// walk_tree: one thread walks the tree from the root with each visited node's candidates, as verify_tree's
// deterministic-children branch (Sampler::sample, then DraftTree::find_child).
#include "sampling.h"

#include "block_merge.cuh"
#include "sampling/race_draw.h"

#include <climits>
#include <cmath>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {
namespace {

constexpr int kSampleThreads = 256;
constexpr int kSampleWarps = kSampleThreads / 32;
constexpr size_t kDefaultSharedBytes = 48 * 1024;  // dynamic shared memory a kernel gets without opting in

// Inserts (v, id) into the sorted list lv/li of cnt <= k entries (keeping the best k).
__device__ __forceinline__ void insert_best(float *lv, int32_t *li, int &cnt, int32_t k, float v, int32_t id) {
    if (cnt == k && !ranks_before(v, id, lv[k - 1], li[k - 1])) return;
    int j = cnt < k ? cnt++ : k - 1;
    while (j > 0 && ranks_before(v, id, lv[j - 1], li[j - 1])) {
        lv[j] = lv[j - 1];
        li[j] = li[j - 1];
        --j;
    }
    lv[j] = v;
    li[j] = id;
}

// The penalties of an edited logit, as sampler_steps.cpp's Penalties then ContextualPenalty (one id at a time: the
// host applies the first step to every candidate before the second, which is the same per id).
__device__ __forceinline__ float penalized(float x, const SamplingChain &c, int32_t count, bool in_context) {
    if (c.penalties && count > 0) {
        x = x <= 0.0f ? __fmul_rn(x, c.repeat) : __fdiv_rn(x, c.repeat);
        x = __fsub_rn(x, __fadd_rn(__fmul_rn(float(count), c.frequency), c.presence));
    }
    if (c.contextual && in_context) x = x < 0.0f ? __fmul_rn(x, c.theta) : __fdiv_rn(x, c.theta);
    return x;
}

// Candidates::normalize over items [0, cnt).
__device__ void normalize(const float *logit, float *p, int cnt) {
    float mx = -INFINITY;
    for (int i = 0; i < cnt; ++i)
        if (mx < logit[i]) mx = logit[i];  // std::max(mx, x)
    double sum = 0.0;
    for (int i = 0; i < cnt; ++i) {
        p[i] = expf(__fsub_rn(logit[i], mx));
        sum += double(p[i]);
    }
    for (int i = 0; i < cnt; ++i) p[i] = float(double(p[i]) / sum);
}

__global__ void sample_chain_kernel(const float *__restrict__ logits, int32_t n, int64_t row_stride, const int32_t *__restrict__ edit_first,
                                    const int32_t *__restrict__ edit_ids, const int32_t *__restrict__ edit_counts,
                                    const uint8_t *__restrict__ edit_in_context, SamplingChain chain, int32_t *__restrict__ cand_ids,
                                    float *__restrict__ cand_p, int32_t *__restrict__ cand_n) {
    SPECULA_DYNAMIC_SHARED(unsigned, edited);  // bit i: id i is edited (only when the launch has edits)
    __shared__ float warp_v[kSampleWarps];
    __shared__ int32_t warp_i[kSampleWarps];
    __shared__ float top_v[kSampleMaxK], top_p[kSampleMaxK];
    __shared__ int32_t top_i[kSampleMaxK];
    const int t = threadIdx.x;
    const int32_t k = chain.k;
    const int64_t r = blockIdx.x;
    const float *row = logits + r * row_stride;

    // 1. The row's edits: none when the chain has no penalty (they would change nothing) or the caller passed none.
    int32_t e_begin = 0, e_end = 0;
    if ((chain.penalties || chain.contextual) && edit_first != nullptr) {
        e_begin = edit_first[r];
        e_end = edit_first[r + 1];
    }
    const bool has_edits = e_end > e_begin;  // uniform over the block
    if (has_edits) {
        const int32_t words = (n + 31) / 32;
        for (int32_t w = t; w < words; w += kSampleThreads) edited[w] = 0u;
        __syncthreads();
        for (int32_t e = e_begin + t; e < e_end; e += kSampleThreads) {
            const int32_t id = edit_ids[e];
            // An id outside the row changes nothing (as the host's penalty on an id that is not a candidate).
            if (id >= 0 && id < n) atomicOr(&edited[id >> 5], 1u << (id & 31));
        }
        __syncthreads();
    }

    // 2. This thread's best k: its strided ids (increasing), then its share of the edits with their new values.
    float lv[kSampleMaxK];
    int32_t li[kSampleMaxK];
    int cnt = 0;
    for (int32_t i = t; i < n; i += kSampleThreads) {
        if (has_edits && ((edited[i >> 5] >> (i & 31)) & 1u)) continue;
        float v = row[i];
        if (v != v) v = -INFINITY;
        insert_best(lv, li, cnt, k, v, i);
    }
    if (has_edits)
        for (int32_t e = e_begin + t; e < e_end; e += kSampleThreads) {
            const int32_t id = edit_ids[e];
            if (id < 0 || id >= n) continue;
            float v = penalized(row[id], chain, edit_counts[e], edit_in_context[e] != 0);
            if (v != v) v = -INFINITY;
            insert_best(lv, li, cnt, k, v, id);
        }

    // 3. The block's merge: k rounds of "best head". k <= n, so every round finds a real item.
    int head = 0;
    for (int32_t j = 0; j < k; ++j) {
        float bv = head < cnt ? lv[head] : -INFINITY;
        int32_t bi = head < cnt ? li[head] : INT32_MAX;  // an empty list ranks after every item, -inf included
        block_best_head<kSampleWarps>(bv, bi, warp_v, warp_i);
        if (head < cnt && li[head] == bi) ++head;  // ids are unique in the row: this thread held the winner
        if (t == 0) {
            top_v[j] = bv;
            top_i[j] = bi;
        }
        __syncthreads();  // warp_v / warp_i are rewritten next round
    }
    if (t != 0) return;

    // 4. The rest of the chain, on the k items sorted as the host's keep_top leaves them.
    int32_t *out_ids = cand_ids + r * kSampleMaxK;
    float *out_p = cand_p + r * kSampleMaxK;
    if (chain.greedy) {
        out_ids[0] = top_i[0];
        out_p[0] = 1.0f;
        cand_n[r] = 1;
        return;
    }
    int m = k;
    if (chain.top_p_on) {
        normalize(top_v, top_p, m);
        double mass = 0.0;
        for (int i = 0; i < m; ++i) {
            mass += double(top_p[i]);
            if (mass >= double(chain.top_p)) {
                m = i + 1;
                break;
            }
        }
    }
    if (chain.min_p_on) {
        float mx = -INFINITY;
        for (int i = 0; i < m; ++i)
            if (mx < top_v[i]) mx = top_v[i];
        const float threshold = __fadd_rn(mx, logf(chain.min_p));
        int kept = 0;
        for (int i = 0; i < m; ++i)
            if (!(top_v[i] < threshold)) {
                top_v[kept] = top_v[i];
                top_i[kept] = top_i[i];
                ++kept;
            }
        m = kept;
    }
    for (int i = 0; i < m; ++i) top_v[i] = __fdiv_rn(top_v[i], chain.temperature);
    normalize(top_v, top_p, m);
    for (int i = 0; i < m; ++i) {
        out_ids[i] = top_i[i];
        out_p[i] = top_p[i];
    }
    cand_n[r] = m;
}

__global__ void walk_tree_kernel(const int32_t *__restrict__ parents, const int32_t *__restrict__ tokens, int32_t n_nodes,
                                 const int32_t *__restrict__ cand_ids, const float *__restrict__ cand_p, const int32_t *__restrict__ cand_n,
                                 const uint64_t *__restrict__ keys, bool greedy, int32_t *__restrict__ out) {
    int32_t node = 0, m = 0;  // m accepted nodes so far = the depth of `node`, the index of its key
    for (;;) {
        const int32_t *ids = cand_ids + int64_t(node) * kSampleMaxK;
        const float *p = cand_p + int64_t(node) * kSampleMaxK;
        const int32_t nc = cand_n[node];
        int32_t y = -1;
        if (nc > 0) {
            if (greedy) {
                y = ids[0];
            } else {
                // Sampler::draw: the exponential race keyed by this depth's key (log: on the emulator the host's
                // own; on a GPU the CUDA math library's, which may differ in the last bit).
                const uint64_t key = keys[m];
                double best = INFINITY;
                y = ids[0];
                for (int32_t j = 0; j < nc; ++j) {
                    const double t = race::arrival(key, ids[j], p[j]);
                    if (t < best) {
                        best = t;
                        y = ids[j];
                    }
                }
            }
        }
        int32_t child = -1;  // DraftTree::find_child: siblings carry distinct tokens
        for (int32_t c = node + 1; c < n_nodes; ++c)
            if (parents[c] == node && tokens[c] == y) {
                child = c;
                break;
            }
        if (child < 0) {
            out[m + 1] = y;
            break;
        }
        out[++m] = child;
        node = child;
    }
    out[0] = m;
}

}  // namespace

void sample_chain_rows(const float *logits, int32_t count, int32_t n, int64_t row_stride, const int32_t *edit_first, const int32_t *edit_ids,
                       const int32_t *edit_counts, const uint8_t *edit_in_context, SamplingChain chain, int32_t *cand_ids, float *cand_p,
                       int32_t *cand_n, cudaStream_t stream) {
    if (count <= 0 || n <= 0) return;
    // Callers check; never keep more than a row has or than the output's kSampleMaxK slots.
    if (chain.k > kSampleMaxK) chain.k = kSampleMaxK;
    if (chain.k > n) chain.k = n;
    if (chain.k < 1) chain.k = 1;
    const bool edits = (chain.penalties || chain.contextual) && edit_first != nullptr;
    const size_t bytes = edits ? size_t((n + 31) / 32) * sizeof(unsigned) : 0;
#ifndef SPECULA_CUDA_EMULATION
    // Past the default 48 KiB (n > 393216) a kernel has to opt in (sm_80: up to 163 KiB per block, sm_90: 227 KiB).
    if (bytes > kDefaultSharedBytes)
        (void)cudaFuncSetAttribute(sample_chain_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
#else
    (void)kDefaultSharedBytes;
#endif
    SPECULA_LAUNCH(sample_chain_kernel, count, kSampleThreads, bytes, stream)(logits, n, row_stride, edit_first, edit_ids, edit_counts,
                                                                                edit_in_context, chain, cand_ids, cand_p, cand_n);
}

void walk_tree(const int32_t *parents, const int32_t *tokens, int32_t n_nodes, const int32_t *cand_ids, const float *cand_p,
               const int32_t *cand_n, const uint64_t *keys, bool greedy, int32_t *out, cudaStream_t stream) {
    if (n_nodes <= 0) return;
    SPECULA_LAUNCH(walk_tree_kernel, 1, 1, 0, stream)(parents, tokens, n_nodes, cand_ids, cand_p, cand_n, keys, greedy, out);
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
