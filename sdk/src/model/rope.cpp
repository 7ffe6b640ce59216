#include "model/rope.h"

#include <cmath>

namespace specula::internal {

void rope_angles(const HParams &hp, const std::vector<float> &freq_factors, int32_t pos, float *cos_t, float *sin_t) {
    // theta_i = pos * freq_scale * base^(-2i/rope_dim) / factor_i, computed by repeated multiplication as ggml does;
    // cos and sin times the attention factor (ggml's mscale: LongRoPE's).
    const int half = hp.rope_dim / 2;
    const float mscale = hp.rope_attn_factor;
    const float theta_scale = std::pow(hp.rope_freq_base, -2.0f / float(hp.rope_dim));
    float theta = float(pos);
    for (int i = 0; i < half; ++i) {
        const float factor = freq_factors.empty() ? 1.0f : freq_factors[size_t(i)];
        const float t = hp.rope_freq_scale * (theta / factor);
        cos_t[i] = std::cos(t) * mscale;
        sin_t[i] = std::sin(t) * mscale;
        theta *= theta_scale;
    }
}

void rope_table(const HParams &hp, const std::vector<float> &freq_factors, int32_t n_positions, std::vector<float> &cos_t, std::vector<float> &sin_t) {
    const size_t half = size_t(hp.rope_dim / 2 > 1 ? hp.rope_dim / 2 : 1);
    cos_t.assign(size_t(n_positions) * half, 0.0f);
    sin_t.assign(cos_t.size(), 0.0f);
    for (int32_t p = 0; p < n_positions; ++p) rope_angles(hp, freq_factors, p, cos_t.data() + size_t(p) * half, sin_t.data() + size_t(p) * half);
}

bool same_rope_angles(const HParams &a, const std::vector<float> &freq_a, const HParams &b, const std::vector<float> &freq_b) {
    return a.rope_dim == b.rope_dim && a.rope_freq_base == b.rope_freq_base && a.rope_freq_scale == b.rope_freq_scale &&
           a.rope_attn_factor == b.rope_attn_factor && freq_a == freq_b;
}

void rope_rotate(float *x, int n_heads, const HParams &hp, const float *cos_t, const float *sin_t) {
    const int half = hp.rope_dim / 2;
    for (int h = 0; h < n_heads; ++h) {
        float *v = x + int64_t(h) * hp.head_dim;
        for (int i = 0; i < half; ++i) {
            // NORM pairs neighbours (2i, 2i+1); NEOX pairs the two halves (i, i + rope_dim/2).
            const int a = hp.rope_type == RopeType::Norm ? 2 * i : i;
            const int b = hp.rope_type == RopeType::Norm ? 2 * i + 1 : i + half;
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * cos_t[i] - x1 * sin_t[i];
            v[b] = x0 * sin_t[i] + x1 * cos_t[i];
        }
    }
}

}  // namespace specula::internal
