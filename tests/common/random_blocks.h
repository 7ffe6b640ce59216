// Random weight matrices in ggml's block formats, for the packed-kernel tests and bench_kernels: random quant bytes,
// with every fp16 scale field replaced by a finite random scale (random bytes there could be NaN or infinite).
// Header-only; internal types only (formats/).
#pragma once

#include "formats/half.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace test_blocks {

struct TypeCase {
    const char *name;
    uint32_t type;  // ggml type id
    int block;      // elements per block
    int type_size;  // bytes per block
};

// Every type the packed kernels cover.
inline constexpr TypeCase kPackedTypes[] = {{"Q8_0", 8, 32, 34},    {"Q4_0", 2, 32, 18}, {"Q4_K", 12, 256, 144}, {"Q5_K", 13, 256, 176},
                                            {"Q6_K", 14, 256, 210}, {"F32", 0, 1, 4},    {"F16", 1, 1, 2},       {"BF16", 30, 1, 2}};

// rows x cols weights of type c (cols a multiple of c.block). extreme: quant bytes only 0x80 or 0x7F, the largest
// magnitudes every type can hold (sums near their limits).
inline std::vector<uint8_t> random_matrix(const TypeCase &c, int64_t rows, int64_t cols, std::mt19937 &rng, bool extreme) {
    using specula::internal::float_to_bf16;
    using specula::internal::float_to_half;
    const int64_t blocks = rows * (cols / c.block);
    std::vector<uint8_t> data(size_t(blocks) * size_t(c.type_size));
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
    for (uint8_t &b : data) b = uint8_t(extreme ? (byte(rng) < 128 ? 0x80 : 0x7F) : byte(rng));
    for (int64_t b = 0; b < blocks; ++b) {
        uint8_t *blk = data.data() + size_t(b) * size_t(c.type_size);
        auto set_half = [&](size_t offset) {
            const uint16_t h = float_to_half(scale(rng));
            std::memcpy(blk + offset, &h, 2);
        };
        switch (c.type) {
        case 0: {  // F32: random finite values (random bytes could be NaN)
            const float f = scale(rng) * 50.0f;
            std::memcpy(blk, &f, 4);
            break;
        }
        case 1: set_half(0); break;
        case 30: {
            const uint16_t h = float_to_bf16(scale(rng) * 50.0f);
            std::memcpy(blk, &h, 2);
            break;
        }
        case 8:
        case 2: set_half(0); break;                // d first
        case 12:
        case 13: set_half(0), set_half(2); break;  // d, dmin
        case 14: set_half(208); break;             // d last
        }
    }
    return data;
}

}  // namespace test_blocks
