// The session sampler's chain and the verifier's walk on the device: what a speculative round needs so that only the
// accepted tokens cross PCIe, not a vocabulary-sized row per visited node (speculative/tree_sampling_plan.h says
// what is computed; sampling/sampler.cpp and speculative/verifier.cpp are the host's reference). Same namespace and
// launch conventions as kernels.h (every pointer is device memory; work is enqueued on `stream`).
#pragma once

#include "kernels.h"

#include <cstdint>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {

// The most candidates a row keeps on the device (top_k above it: the host verifies).
constexpr int32_t kSampleMaxK = 64;

// The chain as flat numbers (sampler.cpp's steps, in its order): penalties, contextual penalty, top-k, then (not
// greedy) top-p, min-p, temperature, normalize.
struct SamplingChain {
    int32_t k = 1;          // candidates kept: greedy 1, else top_k; 1 .. kSampleMaxK and <= n
    bool greedy = true;     // the best candidate, p = 1; no further step
    bool top_p_on = false;  // top_p < 1
    float top_p = 1.0f;
    bool min_p_on = false;  // min_p > 0
    float min_p = 0.0f;
    float temperature = 1.0f;
    bool penalties = false;  // repeat / frequency / presence step
    float repeat = 1.0f, frequency = 0.0f, presence = 0.0f;
    bool contextual = false;  // TokenSwift's contextual penalty
    float theta = 1.0f;
};

// For each of `count` rows of `n` logits (row r at logits + r * row_stride): the chain's final distribution, the
// host's Sampler::distribution() in the host's arithmetic and order. Row r's edited ids are
// edit_ids[edit_first[r] .. edit_first[r + 1]) (distinct, in [0, n)); an edited id's logit x becomes, in order,
//   with chain.penalties and edit_counts[e] > 0:  x = x <= 0 ? x * repeat : x / repeat;  x -= float(count) * frequency + presence
//   with chain.contextual and edit_in_context[e]: x = x < 0 ? x * theta : x / theta
// (each operation rounded to float, no fused multiply-add). Then the best k by (logit descending, lowest id), and
// unless greedy: top-p (normalize; keep the shortest prefix whose double running sum of p reaches top_p), min-p
// (drop logit < max + logf(min_p), order kept), temperature (logit / t), normalize. normalize: max over the items,
// p = expf(logit - max) as float, sum in double in item order, p = float(p / sum).
// Writes cand_n[r] and, for j < cand_n[r], cand_ids[r * kSampleMaxK + j], cand_p[r * kSampleMaxK + j] (greedy: the
// best id, p = 1). A NaN logit ranks as -inf. One block per row; deterministic.
void sample_chain_rows(const float *logits, int32_t count, int32_t n, int64_t row_stride, const int32_t *edit_first, const int32_t *edit_ids,
                       const int32_t *edit_counts, const uint8_t *edit_in_context, SamplingChain chain, int32_t *cand_ids, float *cand_p,
                       int32_t *cand_n, cudaStream_t stream);

// The verifier's walk over a tree whose children are deterministic (speculative/verifier.cpp): node 0 is the root,
// parents[i] < i. At a node of depth d draw y from its candidates (greedy: the first; else Sampler::draw's
// exponential race with keys[d], sampling/race_draw.h: the candidate with the smallest race::arrival, the first of
// equal ones); descend to the child carrying y (siblings carry distinct tokens) or end with y as the bonus token.
// Writes out[0] = m accepted nodes, out[1 .. m] = the nodes root to leaf, out[m + 1] = the bonus. One thread.
void walk_tree(const int32_t *parents, const int32_t *tokens, int32_t n_nodes, const int32_t *cand_ids, const float *cand_p,
               const int32_t *cand_n, const uint64_t *keys, bool greedy, int32_t *out, cudaStream_t stream);

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
