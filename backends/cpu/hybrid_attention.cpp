#include "hybrid_attention.h"

#include "attention_kernels.h"

#include <algorithm>
#include <cmath>

namespace specula::internal {

float attend_with_lse(const float *q, int32_t hd, float scale, const float *k, const float *v, size_t stride, int32_t n,
                      const uint8_t *mask, float *out) {
    constexpr int32_t kBlock = 64;
    float scores[kBlock];
    float m = -INFINITY;  // running max of the scaled scores
    double l = 0.0;       // running sum of exp(score - m)
    std::fill(out, out + hd, 0.0f);
    for (int32_t t0 = 0; t0 < n; t0 += kBlock) {
        const int32_t t1 = std::min(n, t0 + kBlock);
        attention_scores(q, hd, scale, k + size_t(t0) * stride, stride, t1 - t0, scores);
        float block_max = -INFINITY;
        for (int32_t t = t0; t < t1; ++t) {
            if (mask && !mask[t]) scores[t - t0] = -INFINITY;
            block_max = std::max(block_max, scores[t - t0]);
        }
        if (block_max == -INFINITY) continue;
        if (block_max > m) {
            // Rescale what was accumulated under the old maximum.
            const float r = m == -INFINITY ? 0.0f : std::exp(m - block_max);
            for (int32_t j = 0; j < hd; ++j) out[j] *= r;
            l *= r;
            m = block_max;
        }
        for (int32_t t = t0; t < t1; ++t) {
            // Masked keys weigh exactly 0 (exp(-inf)): adding 0 * v leaves out unchanged.
            const float w = scores[t - t0] == -INFINITY ? 0.0f : std::exp(scores[t - t0] - m);
            l += w;
            scores[t - t0] = w;
        }
        accumulate_weighted(out, hd, scores, v + size_t(t0) * stride, stride, t1 - t0);
    }
    if (l == 0.0) return -INFINITY;
    const float inv = float(1.0 / l);
    for (int32_t j = 0; j < hd; ++j) out[j] *= inv;
    return m + float(std::log(l));
}

float merge_attention(float *o1, float lse1, const float *o2, float lse2, int32_t hd) {
    if (lse2 == -INFINITY) return lse1;
    if (lse1 == -INFINITY) {
        std::copy(o2, o2 + hd, o1);
        return lse2;
    }
    // w = sigmoid(lse1 - lse2), computed without overflow on either side.
    const float d = lse1 - lse2;
    const float w = d >= 0 ? 1.0f / (1.0f + std::exp(-d)) : std::exp(d) / (1.0f + std::exp(d));
    for (int32_t j = 0; j < hd; ++j) o1[j] = w * o1[j] + (1.0f - w) * o2[j];
    return std::max(lse1, lse2) + std::log1p(std::exp(-std::fabs(d)));
}

}  // namespace specula::internal
