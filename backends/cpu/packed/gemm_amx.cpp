// Q8_0 verification batches on Intel AMX (compiled with -mamx-tile -mamx-int8 and the AVX-512 flags). For 16
// activations at a time, one TDPBSUD multiplies a 16 x 32 tile of int8 activations (one Q8_0 block of each) by
// the packed 8 x 64 weight tile of the same block (16 rows x 32 weights, in exactly the VNNI layout the packer
// writes), giving the 16 x 16 exact integer block sums that the AVX-512 kernel computes with 128 VPDPBUSDs. The
// float arithmetic that follows is the AVX-512 kernel's, so results stay bit-identical to the scalar reference;
// batches that are not a multiple of 16 finish on the AVX-512 kernel. Only <immintrin.h> and plain structs here
// (see packed_gemm.h).
#include "packed_gemm.h"

#include "gguf/tensor_type.h"  // an enum and declarations only: safe here

#if defined(__x86_64__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers (see gemm_avx512.cpp)
#include <immintrin.h>

#include <cstring>

namespace specula::internal {
namespace {

struct alignas(64) TileConfig {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};

// Two blocks in flight: tmm0/tmm3 hold the 16 x 16 int32 block sums (activation x weight row) of blocks k and
// k + 1, tmm1/tmm4 their 16 activations x 32 int8, tmm2/tmm5 their weight tiles (8 rows of 16 weight rows x 4 bytes).
void configure_tiles() {
    TileConfig cfg;
    cfg.rows[0] = cfg.rows[3] = 16, cfg.colsb[0] = cfg.colsb[3] = 64;
    cfg.rows[1] = cfg.rows[4] = 16, cfg.colsb[1] = cfg.colsb[4] = 32;
    cfg.rows[2] = cfg.rows[5] = 8, cfg.colsb[2] = cfg.colsb[5] = 64;
    asm volatile("" ::: "memory");  // the intrinsic's asm does not tell the compiler it reads all of cfg
    _tile_loadconfig(&cfg);
}

// Decoding's prefetch distance (gemm_avx512.cpp): the weight tiles stream from memory once per batch.
inline void prefetch_block(const uint8_t *p) {
    for (int line = 0; line < 8; ++line) _mm_prefetch(reinterpret_cast<const char *>(p + 4096 + line * 64), _MM_HINT_T0);
}

// acc[m] = fma(float(isum), d_w * d_x, acc[m]) for the 16 activations of one block, as tile_q8_0 does.
inline void accumulate_block(__m512 (&acc)[16], const int32_t (*sums)[16], const uint16_t *dw, const uint8_t *xq, size_t row_bytes,
                             const int32_t *xsums, int64_t sums_per_row, int64_t k) {
    const __m512 dwv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(dw + k * 16)));
#pragma GCC unroll 16
    for (int m = 0; m < 16; ++m) {
        const ActQ8_0 &b = reinterpret_cast<const ActQ8_0 *>(xq + size_t(m) * row_bytes)[k];
        const __m512i isum = _mm512_sub_epi32(_mm512_load_si512(sums[m]), _mm512_set1_epi32(128 * xsums[m * sums_per_row + k]));
        const __m512 dprod = _mm512_mul_ps(dwv, _mm512_set1_ps(_cvtsh_ss(b.d)));
        acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), dprod, acc[m]);
    }
}

void q8_0_tile16(const PackedView &w, int64_t g, const PackedActs &x, int64_t m0, float *y, int64_t ldy) {
    const int64_t kb = w.cols / 32;
    const uint8_t *grp = w.data + size_t(g) * w.group_bytes;
    const uint16_t *dw = reinterpret_cast<const uint16_t *>(grp + w.region[0]);
    const uint8_t *qs = grp + w.region[1];
    const uint8_t *xq = x.xq + size_t(m0) * x.row_bytes;
    const int32_t *xsums = x.block_sums + m0 * x.sums_per_row;
    const long stride = long(x.row_bytes);
    alignas(64) int32_t sums0[16][16], sums1[16][16];
    __m512 acc[16];
    for (int m = 0; m < 16; ++m) acc[m] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 2 <= kb; k += 2) {
        prefetch_block(qs + k * 512);
        prefetch_block(qs + k * 512 + 512);
        _tile_zero(0);
        _tile_zero(3);
        _tile_loadd(1, xq + size_t(k) * sizeof(ActQ8_0) + 2, stride);
        _tile_loadd(2, qs + k * 512, 64);
        _tile_loadd(4, xq + size_t(k + 1) * sizeof(ActQ8_0) + 2, stride);
        _tile_loadd(5, qs + (k + 1) * 512, 64);
        _tile_dpbsud(0, 1, 2);  // sum over the block of x (signed) * (w + 128) (unsigned)
        _tile_dpbsud(3, 4, 5);
        _tile_stored(0, sums0, 64);
        _tile_stored(3, sums1, 64);
        accumulate_block(acc, sums0, dw, xq, x.row_bytes, xsums, x.sums_per_row, k);
        accumulate_block(acc, sums1, dw, xq, x.row_bytes, xsums, x.sums_per_row, k + 1);
    }
    if (k < kb) {
        _tile_zero(0);
        _tile_loadd(1, xq + size_t(k) * sizeof(ActQ8_0) + 2, stride);
        _tile_loadd(2, qs + k * 512, 64);
        _tile_dpbsud(0, 1, 2);
        _tile_stored(0, sums0, 64);
        accumulate_block(acc, sums0, dw, xq, x.row_bytes, xsums, x.sums_per_row, k);
    }
    const int64_t valid = w.rows - g * 16 < 16 ? w.rows - g * 16 : 16;
    for (int m = 0; m < 16; ++m) {
        float *dst = y + (m0 + m) * ldy + g * 16;
        if (valid == 16) _mm512_storeu_ps(dst, acc[m]);
        else _mm512_mask_storeu_ps(dst, __mmask16((1u << valid) - 1), acc[m]);
    }
}

void gemm_q8_0(const PackedView &w, int64_t group_begin, int64_t group_end, const PackedActs &x, float *y, int64_t ldy) {
    const int64_t n16 = x.n / 16 * 16;
    if (n16 > 0) {
        configure_tiles();
        for (int64_t g = group_begin; g < group_end; ++g)
            for (int64_t m0 = 0; m0 < n16; m0 += 16) q8_0_tile16(w, g, x, m0, y, ldy);
        _tile_release();  // no tile state left for the OS to save at every context switch
    }
    if (n16 < x.n) {
        PackedActs rest = x;
        rest.xq += size_t(n16) * x.row_bytes;
        rest.block_sums += n16 * x.sums_per_row;
        rest.n -= n16;
        packed_gemm_avx512(uint32_t(TensorType::Q8_0))(w, group_begin, group_end, rest, y + n16 * ldy, ldy);
    }
}

}  // namespace

PackedGemmFn packed_gemm_amx(uint32_t type) {
    switch (type) {
    case uint32_t(TensorType::Q8_0): return gemm_q8_0;
    }
    return packed_gemm_avx512(type);  // types without an AMX kernel run on AVX-512
}

}  // namespace specula::internal

#else  // not x86-64

namespace specula::internal {
PackedGemmFn packed_gemm_amx(uint32_t) { return nullptr; }
}  // namespace specula::internal

#endif
