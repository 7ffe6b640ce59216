// Per-row log-softmax top-k on the device: what LongSpec's beam search needs of a level's draft logits, so that only
// the candidates cross PCIe (count x k x 8 bytes) instead of the full rows (count x n_vocab x 4). Same namespace and
// launch conventions as kernels.h (every pointer is device memory; work is enqueued on `stream`).
#pragma once

#include "kernels.h"

#include <cstdint>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {

// The most candidates row_topk keeps per row.
constexpr int32_t kTopkMaxK = 64;

// For each of `count` rows of `n` logits (row r at logits + r * row_stride), with
//   lse = max + float(log(sum over i of exp(double(x[i] - max))))   (max in float, the sum in double)
//   logp[i] = x[i] - lse                                            (in float, as the host's log_softmax)
// writes lse[r] (when lse is not null) and the best k (1 <= k <= kTopkMaxK) pairs (logp, id) at
// out_logp[r * k + j], out_ids[r * k + j], j = 0 .. k - 1: sorted by logp descending, equal logps by the lowest id.
// A NaN ranks as -inf. When k > n the pairs past n are (-inf, -1). One block per row; the result of a row does
// not depend on the others or on the launch (each thread keeps a fixed strided subset, the merge is a strict
// total order), so it is deterministic. The sum's order differs from the host's, so lse may differ from the
// host's in its last bits (never more than ~1e-6 relative).
void row_topk(const float *logits, int32_t count, int32_t n, int64_t row_stride, int32_t k, float *out_logp, int32_t *out_ids, float *lse,
              cudaStream_t stream);

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
