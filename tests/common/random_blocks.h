// Random weight matrices in ggml's block formats, for the packed-kernel tests and bench_kernels: random quant bytes,
// with every fp16 scale field replaced by a finite random scale (random bytes there could be NaN or infinite); and
// activation rows converted for the packed kernels as matmul converts them. Header-only; internal types only.
#pragma once

#include "backends/cpu/packed/packed_matrix.h"
#include "formats/half.h"
#include "formats/type_kernels.h"
#include "gguf/tensor_type.h"

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

// n activation rows of `cols` floats converted to the dot type of weight type `weight_type` by the scalar from_float,
// with the Q8_0 block sums the packed kernels read (what matmul gives them, backends/cpu/ops.cpp).
struct ConvertedActs {
    std::vector<uint8_t> xq;
    std::vector<int32_t> sums;
    size_t row_bytes = 0;
    int64_t n = 0, cols = 0;

    specula::internal::PackedActs acts() const {
        specula::internal::PackedActs a;
        a.xq = xq.data();
        a.row_bytes = row_bytes;
        a.block_sums = sums.data();
        a.sums_per_row = cols / 32;
        a.n = n;
        return a;
    }
    const uint8_t *row(int64_t m) const { return xq.data() + size_t(m) * row_bytes; }
};

inline ConvertedActs convert_acts(uint32_t weight_type, const float *x, int64_t n, int64_t cols) {
    using namespace specula::internal;
    const TypeKernels &kx = *find_type_kernels(find_type_kernels(weight_type)->dot_type);
    ConvertedActs c;
    c.row_bytes = type_row_bytes(kx, cols);
    c.n = n;
    c.cols = cols;
    c.xq.resize(c.row_bytes * size_t(n));
    c.sums.resize(size_t(n) * size_t(cols / 32));
    for (int64_t m = 0; m < n; ++m) {
        kx.from_float(x + m * cols, c.xq.data() + size_t(m) * c.row_bytes, cols);
        if (kx.type == uint32_t(TensorType::Q8_0)) q8_0_block_sums(c.row(m), cols, c.sums.data() + m * (cols / 32));
    }
    return c;
}

}  // namespace test_blocks
