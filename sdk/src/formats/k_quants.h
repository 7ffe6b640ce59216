// The K-quant super-block layouts (ggml-common.h) and their unpacking into plain integers. Shared by the scalar
// reference kernels (k_quants.cpp) and the SIMD weight packer (backends/cpu/packed/), so that one place knows
// each bit layout.
#pragma once

#include <cstdint>

namespace specula::internal {

constexpr int QK_K = 256;

struct BlockQ8_K {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];  // sums of each group of 16 qs (used by the types with minimums)
};
static_assert(sizeof(BlockQ8_K) == 292, "ggml block_q8_K is 292 bytes");

struct BlockQ4_K {
    uint16_t d, dmin;
    uint8_t scales[12];  // 8 six-bit scales and 8 six-bit minimums, packed
    uint8_t qs[QK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "ggml block_q4_K is 144 bytes");

struct BlockQ5_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[QK_K / 8];  // fifth bits
    uint8_t qs[QK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176, "ggml block_q5_K is 176 bytes");

struct BlockQ6_K {
    uint8_t ql[QK_K / 2];      // low 4 bits
    uint8_t qh[QK_K / 4];      // high 2 bits
    int8_t scales[QK_K / 16];  // one scale per 16 values
    uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210, "ggml block_q6_K is 210 bytes");

// A super-block unpacked: value i is d * scale[i / group] * q[i] - dmin * min[i / group].
struct KBlockInts {
    int8_t q[QK_K];
    int32_t scale[16];
    int32_t min[16];
    int group;  // values per scale: 32 (Q4_K, Q5_K) or 16 (Q6_K)
    float d, dmin;
};

// ggml's get_scale_min_k4: the j-th six-bit scale and minimum of a Q4_K/Q5_K block.
void scale_min_k4(int j, const uint8_t *q, int32_t &scale, int32_t &min);
void unpack(const BlockQ4_K &b, KBlockInts &u);
void unpack(const BlockQ5_K &b, KBlockInts &u);
void unpack(const BlockQ6_K &b, KBlockInts &u);  // q holds the stored 6-bit value minus 32

}  // namespace specula::internal
