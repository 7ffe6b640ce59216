// Emulated <mma.h> (WMMA, 16x16x16 tiles only): a fragment holds its whole tile, and only lane 0 of the warp loads,
// multiplies and stores it (the other lanes' calls do nothing), which is what the warp-wide operations amount to.
// mma_sync sums the 16 products of each output in k order, in float.
#pragma once
#include "cuda_emulation.h"

#include <type_traits>

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the emulator has 16x16x16 tiles only");
    float v[16 * 16];  // [row][col] of the tile (A: m x k, B: k x n, accumulator: m x n)
};

inline bool lane0() { return threadIdx.x % 32 == 0; }

template <typename Layout, typename Use> void load_matrix_sync(fragment<Use, 16, 16, 16, __half, Layout> &f, const __half *p, unsigned ldm) {
    if (!lane0()) return;
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c)
            f.v[r * 16 + c] = __half2float(std::is_same_v<Layout, row_major> ? p[size_t(r) * ldm + c] : p[size_t(c) * ldm + r]);
}

template <typename T> void fill_fragment(fragment<accumulator, 16, 16, 16, T> &f, T value) {
    for (float &x : f.v) x = float(value);
}

template <typename LA, typename LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, __half, LA> &a,
              const fragment<matrix_b, 16, 16, 16, __half, LB> &b, const fragment<accumulator, 16, 16, 16, float> &c) {
    if (!lane0()) return;
    float out[16 * 16];
    for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 16; ++n) {
            float s = c.v[m * 16 + n];
            for (int k = 0; k < 16; ++k) s += a.v[m * 16 + k] * b.v[k * 16 + n];
            out[m * 16 + n] = s;
        }
    std::memcpy(d.v, out, sizeof out);
}

inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ldm, layout_t layout) {
    if (!lane0()) return;
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) (layout == mem_row_major ? p[size_t(r) * ldm + c] : p[size_t(c) * ldm + r]) = f.v[r * 16 + c];
}

}  // namespace nvcuda::wmma
