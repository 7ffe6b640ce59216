// Attention pieces for speculative decoding (LongSpec's "hybrid tree attention", paper Appendix C):
// a query attends the committed prefix (no mask: every cached key is visible) and, separately, the tree tokens
// (an ancestor mask); each part returns its log-sum-exp, and the two are merged exactly:
//     out = (e^L1 o1 + e^L2 o2) / (e^L1 + e^L2) = sigmoid(L1 - L2) o1 + (1 - sigmoid(L1 - L2)) o2
// Rows with no visible key in a part have L = -inf and weight 0 in the merge.
//
// Keys/values are read with a stride (floats between consecutive slots) so the same code walks the target's
// KV cache, the draft's ring buffer and tree slots. Softmax is computed online in fixed-size blocks, so the
// scratch memory does not depend on how many keys there are (the draft's memory must not grow with context).
#pragma once

#include <cstddef>
#include <cstdint>

namespace specula::internal {

// One query head q (hd floats) over n keys k[t * stride .. + hd) with values v[t * stride ..], scores scaled by
// `scale`. Keys with mask[t] == 0 are skipped (mask may be null: all visible). Writes the softmax-weighted mean
// of the values to out (hd floats; zeros when no key is visible) and returns the natural-log LSE of the scaled
// scores of the visible keys, or -INFINITY when there are none.
float attend_with_lse(const float *q, int32_t hd, float scale, const float *k, const float *v, size_t stride, int32_t n,
                      const uint8_t *mask, float *out);

// Merges the partial result (o2, lse2) into (o1, lse1) in place; returns the merged LSE.
float merge_attention(float *o1, float lse1, const float *o2, float lse2, int32_t hd);

}  // namespace specula::internal
