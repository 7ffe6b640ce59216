// The interface between the CPU backend and its SIMD matrix kernels: plain structs and function pointers only,
// because the kernels live in translation units compiled for AVX2 or AVX-512 and must share no inline code
// (templates, std:: containers) with the baseline build -- the linker could otherwise keep an AVX-512 copy of a
// shared inline function and run it on a CPU without AVX-512.
//
// A packed matrix stores its rows in groups of kPackRows = 16 (the last group padded with zero rows). Within a
// group, each quantized block of the 16 rows is stored interleaved, four bytes of row 0, four bytes of row 1, ...,
// so that one 64-byte vector holds four consecutive weights of each of the 16 rows. A dot-product instruction
// (VPDPBUSD, or PMADDUBSW + PMADDWD on AVX2) against four activation bytes broadcast to every lane then yields
// one partial sum per row: no horizontal reductions, and every lane accumulates exactly the integers the scalar
// reference kernel accumulates for its row. The float arithmetic that follows (block scales, the running sum)
// is done lane-wise in the scalar kernel's order, so the packed kernels are bit-identical to the references.
#pragma once

#include <cstddef>
#include <cstdint>

namespace specula::internal {

constexpr int kPackRows = 16;

// Q4_K is stored super-block by super-block, each one contiguous stream of bytes for the 16 rows (one stream to
// prefetch): d and dmin (fp16), the eight sub-block scales ([sub][row] bytes), the minimums in pairs
// ([pair][row][2] bytes, the layout VPDPWSSD/PMADDWD read after widening to 16 bits), then the quants.
constexpr size_t kQ4KSuperBytes = 2368, kQ4KDmin = 32, kQ4KScales = 64, kQ4KMins = 192, kQ4KQuants = 320;
// Q5_K: Q4_K's super-block followed by the fifth bits, one vector per four quant vectors: bits 2j and 2j + 1 of a
// byte are the fifth bits of the low and the high nibble's weights at the same byte of quant vector 4v + j, so the
// super-block is the file's size plus 2% (as Q4_K's), and its kernels are Q4_K's with a shift, an AND and an OR
// per nibble. (One vector per quant vector, two bits a byte, read 55% more bytes than the file's Q5_K: decoding
// phi3's Q5_K attention matrices ran at two thirds of the memory's speed.)
constexpr size_t kQ5KHigh = kQ4KSuperBytes, kQ5KSuperBytes = kQ4KSuperBytes + 8 * 64;

// The activations' blocks as the kernels read them: ggml's block_q8_0 (Q8_0 and Q4_0 weights) and block_q8_K
// (the K-quants). Plain structs, safe to share between the instruction-set levels' files.
struct ActQ8_0 {
    uint16_t d;  // fp16 scale
    int8_t qs[32];
};
struct ActQ8_K {
    float d;
    int8_t qs[256];
    int16_t bsums[16];  // sums of each 16 values
};
static_assert(sizeof(ActQ8_0) == 34 && sizeof(ActQ8_K) == 292, "ggml activation block sizes");

struct PackedView {
    const uint8_t *data = nullptr;  // n_groups * group_bytes bytes, 64-byte aligned
    uint32_t type = 0;              // ggml type id of the source weights
    int64_t rows = 0, cols = 0;
    int64_t n_groups = 0;
    size_t group_bytes = 0;
    size_t region[6] = {};  // byte offsets, within a group, of the type's regions (scales, mins, quants)
};

// Activation rows already converted to the weight type's dot type (Q8_0 or Q8_K blocks), exactly as the scalar
// path converts them. block_sums holds, for Q8_0 activations, the sum of each block's 32 int8 values (row m's
// sums start at block_sums + m * sums_per_row); Q8_K blocks carry their own sums.
struct PackedActs {
    const uint8_t *xq = nullptr;
    size_t row_bytes = 0;
    const int32_t *block_sums = nullptr;
    int64_t sums_per_row = 0;
    int64_t n = 0;
};

// Computes y[m * ldy + r] = dot(row r, activation m) for every activation m < x.n and every row r of groups
// [group_begin, group_end).
using PackedGemmFn = void (*)(const PackedView &w, int64_t group_begin, int64_t group_end, const PackedActs &x, float *y,
                              int64_t ldy);

// Converts one activation row of `cols` floats to the dot type `dot_type` (Q8_0 or Q8_K), byte for byte what the
// scalar from_float of formats/ writes; for Q8_0 also each block's sum of its 32 int8 values into block_sums
// (q8_0_block_sums) unless it is nullptr.
using PackedConvertFn = void (*)(const float *x, int64_t cols, uint8_t *xq, int32_t *block_sums);

// The kernel for a source type at one instruction-set level, or nullptr (defined in gemm_avx2.cpp / gemm_avx512.cpp).
PackedGemmFn packed_gemm_avx2(uint32_t type);
PackedGemmFn packed_gemm_avx512(uint32_t type);
PackedGemmFn packed_gemm_amx(uint32_t type);  // AMX for batches of 16 activations, else the AVX-512 kernel
// The vector conversion to a dot type at one level, or nullptr (convert_avx2.cpp / convert_avx512.cpp).
PackedConvertFn packed_convert_avx2(uint32_t dot_type);
PackedConvertFn packed_convert_avx512(uint32_t dot_type);

}  // namespace specula::internal
