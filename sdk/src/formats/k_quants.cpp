// The K-quants (ggml's super-blocks of 256 values): Q4_K, Q5_K and Q6_K weights, and Q8_K, the type their
// activations are quantized to for dot products (as ggml's vec_dot_type). Scalar reference kernels: each block
// is first unpacked into plain integers and sub-block scales, and both dequantization and the dot product read
// that form, so there is one place that knows each bit layout (ggml-common.h / ggml-quants.c).
#include "k_quants.h"

#include "half.h"
#include "rounding.h"
#include "type_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace specula::internal {

// ggml's get_scale_min_k4: the j-th six-bit scale and minimum of a Q4_K/Q5_K block.
void scale_min_k4(int j, const uint8_t *q, int32_t &scale, int32_t &min) {
    if (j < 4) {
        scale = q[j] & 63;
        min = q[j + 4] & 63;
    } else {
        scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

void unpack(const BlockQ4_K &b, KBlockInts &u) {
    u.group = 32;
    u.d = half_to_float_lookup(b.d);
    u.dmin = half_to_float_lookup(b.dmin);
    for (int j = 0; j < 8; ++j) scale_min_k4(j, b.scales, u.scale[j], u.min[j]);
    // Each 32 bytes of qs hold two sub-blocks: low nibbles first, then high nibbles.
    for (int chunk = 0; chunk < 4; ++chunk)
        for (int l = 0; l < 32; ++l) {
            u.q[chunk * 64 + l] = int8_t(b.qs[chunk * 32 + l] & 0xF);
            u.q[chunk * 64 + 32 + l] = int8_t(b.qs[chunk * 32 + l] >> 4);
        }
}

void unpack(const BlockQ5_K &b, KBlockInts &u) {
    u.group = 32;
    u.d = half_to_float_lookup(b.d);
    u.dmin = half_to_float_lookup(b.dmin);
    for (int j = 0; j < 8; ++j) scale_min_k4(j, b.scales, u.scale[j], u.min[j]);
    for (int chunk = 0; chunk < 4; ++chunk)
        for (int l = 0; l < 32; ++l) {
            const int lo_bit = 2 * chunk, hi_bit = 2 * chunk + 1;  // which bit of qh[l] is each value's fifth bit
            u.q[chunk * 64 + l] = int8_t((b.qs[chunk * 32 + l] & 0xF) | (((b.qh[l] >> lo_bit) & 1) << 4));
            u.q[chunk * 64 + 32 + l] = int8_t((b.qs[chunk * 32 + l] >> 4) | (((b.qh[l] >> hi_bit) & 1) << 4));
        }
}

void unpack(const BlockQ6_K &b, KBlockInts &u) {
    u.group = 16;
    u.d = half_to_float_lookup(b.d);
    u.dmin = 0.0f;
    for (int j = 0; j < 16; ++j) {
        u.scale[j] = b.scales[j];
        u.min[j] = 0;
    }
    // Two halves of 128 values; in each, ql[0..63] and qh[0..31] give four runs of 32 values.
    for (int half = 0; half < 2; ++half) {
        const uint8_t *ql = b.ql + half * 64;
        const uint8_t *qh = b.qh + half * 32;
        int8_t *q = u.q + half * 128;
        for (int l = 0; l < 32; ++l) {
            q[l + 0] = int8_t(((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
            q[l + 32] = int8_t(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            q[l + 64] = int8_t(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            q[l + 96] = int8_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

namespace {

template <typename Block> void k_to_float(const void *src, float *dst, int64_t n) {
    const Block *blocks = static_cast<const Block *>(src);
    KBlockInts u;
    for (int64_t b = 0; b < n / QK_K; ++b) {
        unpack(blocks[b], u);
        for (int i = 0; i < QK_K; ++i) {
            const int s = i / u.group;
            dst[b * QK_K + i] = u.d * float(u.scale[s]) * float(u.q[i]) - u.dmin * float(u.min[s]);
        }
    }
}

// Dot of a K-quant row with Q8_K activations: d_w * d_x * sum_s scale_s * (q . q8)_s - dmin_w * d_x * sum_s min_s * sum(q8)_s
template <typename Block> float k_vec_dot(int64_t n, const void *row, const void *x) {
    const Block *w = static_cast<const Block *>(row);
    const BlockQ8_K *a = static_cast<const BlockQ8_K *>(x);
    KBlockInts u;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK_K; ++b) {
        unpack(w[b], u);
        int32_t scaled = 0, mins = 0;
        for (int s = 0; s < QK_K / u.group; ++s) {
            int32_t dot = 0, act_sum = 0;
            for (int l = s * u.group; l < (s + 1) * u.group; ++l) {
                dot += int32_t(u.q[l]) * int32_t(a[b].qs[l]);
                act_sum += a[b].qs[l];
            }
            scaled += u.scale[s] * dot;
            mins += u.min[s] * act_sum;
        }
        sum += u.d * a[b].d * float(scaled) - u.dmin * a[b].d * float(mins);
    }
    return sum;
}

void q8_k_to_float(const void *src, float *dst, int64_t n) {
    const BlockQ8_K *blocks = static_cast<const BlockQ8_K *>(src);
    for (int64_t b = 0; b < n / QK_K; ++b)
        for (int i = 0; i < QK_K; ++i) dst[b * QK_K + i] = blocks[b].d * float(blocks[b].qs[i]);
}

// ggml's quantize_row_q8_K_ref: the scale comes from the signed value of largest magnitude, rounding to nearest even.
void q8_k_from_float(const float *src, void *dst, int64_t n) {
    BlockQ8_K *blocks = static_cast<BlockQ8_K *>(dst);
    for (int64_t b = 0; b < n / QK_K; ++b) {
        const float *x = src + b * QK_K;
        BlockQ8_K &y = blocks[b];
        float amax = 0.0f, max = 0.0f;
        for (int i = 0; i < QK_K; ++i)
            if (std::fabs(x[i]) > amax) {
                amax = std::fabs(x[i]);
                max = x[i];
            }
        if (amax == 0.0f) {
            std::memset(&y, 0, sizeof y);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int i = 0; i < QK_K; ++i) y.qs[i] = int8_t(std::min(127, round_to_int32(iscale * x[i])));
        for (int g = 0; g < QK_K / 16; ++g) {
            int sum = 0;
            for (int i = 0; i < 16; ++i) sum += y.qs[g * 16 + i];
            y.bsums[g] = int16_t(sum);
        }
        y.d = 1.0f / iscale;
    }
}

float q8_k_vec_dot(int64_t n, const void *row, const void *x) {
    const BlockQ8_K *a = static_cast<const BlockQ8_K *>(row);
    const BlockQ8_K *b = static_cast<const BlockQ8_K *>(x);
    float sum = 0.0f;
    for (int64_t k = 0; k < n / QK_K; ++k) {
        int32_t dot = 0;
        for (int i = 0; i < QK_K; ++i) dot += int32_t(a[k].qs[i]) * int32_t(b[k].qs[i]);
        sum += a[k].d * b[k].d * float(dot);
    }
    return sum;
}

}  // namespace

extern const TypeKernels kQ8_KKernels = {15, QK_K, sizeof(BlockQ8_K), 15, q8_k_to_float, q8_k_from_float, q8_k_vec_dot};
extern const TypeKernels kQ4_KKernels = {12, QK_K, sizeof(BlockQ4_K), 15, k_to_float<BlockQ4_K>, nullptr, k_vec_dot<BlockQ4_K>};
extern const TypeKernels kQ5_KKernels = {13, QK_K, sizeof(BlockQ5_K), 15, k_to_float<BlockQ5_K>, nullptr, k_vec_dot<BlockQ5_K>};
extern const TypeKernels kQ6_KKernels = {14, QK_K, sizeof(BlockQ6_K), 15, k_to_float<BlockQ6_K>, nullptr, k_vec_dot<BlockQ6_K>};

}  // namespace specula::internal
