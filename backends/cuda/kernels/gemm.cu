// The GEMMs of the CUDA backend: Y = X W^T for n activation rows. See kernels.h for why they are batch-invariant.
#include "kernels.h"

#include <mma.h>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {
namespace {

constexpr int kWarp = 32;

// ---- F32 weights: CUDA cores -----------------------------------------------------------------------------
// One warp per (output row, tile of up to 8 tokens). Lane l sums k = l, l + 32, ... in order, then a fixed xor
// butterfly adds the 32 lane sums: the order of every output's sum depends only on cols.
constexpr int kF32Tokens = 8;
constexpr int kF32WarpsPerBlock = 8;

__global__ void gemm_f32_kernel(const float *__restrict__ w, int64_t ld, int64_t rows, int64_t cols,
                                const float *__restrict__ x, int32_t n, float *__restrict__ y) {
    const int lane = threadIdx.x % kWarp;
    const int64_t row = int64_t(blockIdx.x) * kF32WarpsPerBlock + threadIdx.x / kWarp;
    const int32_t t0 = int32_t(blockIdx.y) * kF32Tokens;
    if (row >= rows) return;
    const int tn = min(kF32Tokens, n - t0);
    float acc[kF32Tokens];
#pragma unroll
    for (int t = 0; t < kF32Tokens; ++t) acc[t] = 0.0f;
    const float *wr = w + row * ld;
    for (int64_t k = lane; k < cols; k += kWarp) {
        const float wk = wr[k];
#pragma unroll
        for (int t = 0; t < kF32Tokens; ++t)
            if (t < tn) acc[t] += wk * x[int64_t(t0 + t) * cols + k];
    }
    // tn is the same for the whole warp, so stopping at it keeps every lane in the shuffles: a decode step (one
    // token) does 5 of them, not 40.
#pragma unroll
    for (int t = 0; t < kF32Tokens; ++t) {
        if (t >= tn) break;
        float v = acc[t];
        for (int off = kWarp / 2; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0) y[int64_t(t0 + t) * rows + row] = v;
    }
}

// ---- F16 weights: tensor cores ---------------------------------------------------------------------------
// Activations are first rounded to F16 into a [n_pad][ld] buffer (tokens padded to 16 with zero rows, columns
// to ld with zeros). A warp computes 16-row x 16-token output tiles over one 512-wide K segment, up to kTiles
// token tiles per pass so a weight fragment is read once for kTiles * 16 tokens; fragments come straight from
// global memory (the weights are streamed once, there is nothing to reuse from shared memory for small n).
// Segment partial sums go to scratch and a second kernel adds them in segment order.
//
// Every (16-row tile, token tile) accumulates its K steps in ascending order with the same mma instructions
// whatever n is, how many tiles a pass holds or how far the loads run ahead: a row's bits never depend on the
// batch (kernels.h). So the kernel is compiled for 1, 2, 4 and 8 tiles per pass and a batch takes the smallest
// that holds it: decoding keeps few registers and many warps in flight to cover the memory latency of a streamed
// weight matrix, and a 69-node tree reads the weights once (with four tiles per pass, as before, twice). Weight fragments are loaded
// kLoadsAhead K steps ahead of their use: the first measurement on an H100 (8B F16, decode at 27% of the
// memory bandwidth, 17.9 ms a step) showed a loop of one load in flight per warp.
using namespace nvcuda;
constexpr int kTile = 16;
constexpr int kSegment = 512;
constexpr int kLoadsAhead = 4;
constexpr int kF16WarpsPerBlock = 4;

__global__ void to_half_padded_kernel(const float *__restrict__ x, int32_t n, int64_t cols, int32_t n_pad, int64_t ld,
                                      __half *__restrict__ out) {
    const int64_t total = int64_t(n_pad) * ld;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t t = i / ld, k = i % ld;
        out[i] = (t < n && k < cols) ? __float2half_rn(x[t * cols + k]) : __float2half_rn(0.0f);
    }
}

// grid: x = row tiles / kF16WarpsPerBlock, y = K segments. partial[seg][t][r] for t < n (the padded tokens' rows
// are neither written nor read), r < rows_alloc. The segment's length is a multiple of 16 (ld is).
template <int kTiles>
__global__ void gemm_f16_kernel(const __half *__restrict__ w, int64_t ld, int64_t rows_alloc, const __half *__restrict__ xh,
                                int32_t n, int32_t n_pad, float *__restrict__ partial) {
    __shared__ __align__(32) float tile[kF16WarpsPerBlock][kTile * kTile];  // WMMA stores need 256-bit alignment
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int64_t r0 = (int64_t(blockIdx.x) * kF16WarpsPerBlock + warp) * kTile;
    if (r0 >= rows_alloc) return;
    const int seg = blockIdx.y;
    const int64_t k_begin = int64_t(seg) * kSegment, k_end = min(k_begin + kSegment, ld);
    const int n_tiles = n_pad / kTile;
    float *out = partial + int64_t(seg) * n_pad * rows_alloc;
    const __half *wr = w + r0 * ld;
    for (int tt0 = 0; tt0 < n_tiles; tt0 += kTiles) {
        const int tiles = min(kTiles, n_tiles - tt0);
        wmma::fragment<wmma::accumulator, kTile, kTile, kTile, float> acc[kTiles];
#pragma unroll
        for (int j = 0; j < kTiles; ++j) wmma::fill_fragment(acc[j], 0.0f);
        for (int64_t k0 = k_begin; k0 < k_end; k0 += kLoadsAhead * kTile) {
            const int steps = int(min(int64_t(kLoadsAhead), (k_end - k0) / kTile));
            wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, __half, wmma::row_major> a[kLoadsAhead];
#pragma unroll
            for (int u = 0; u < kLoadsAhead; ++u)
                if (u < steps) wmma::load_matrix_sync(a[u], wr + k0 + u * kTile, unsigned(ld));
#pragma unroll
            for (int u = 0; u < kLoadsAhead; ++u) {
                if (u >= steps) continue;
                const int64_t k = k0 + u * kTile;
#pragma unroll
                for (int j = 0; j < kTiles; ++j) {
                    if (j < tiles) {
                        wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, __half, wmma::col_major> b;
                        wmma::load_matrix_sync(b, xh + int64_t(tt0 + j) * kTile * ld + k, unsigned(ld));
                        wmma::mma_sync(acc[j], a[u], b, acc[j]);
                    }
                }
            }
        }
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
            if (j >= tiles) continue;
            // tile[i][c] = output row r0 + i, token (tt0 + j) * 16 + c
            wmma::store_matrix_sync(tile[warp], acc[j], kTile, wmma::mem_row_major);
            __syncwarp();
            const int64_t t_base = int64_t(tt0 + j) * kTile;
            const int cols = int(min(int64_t(kTile), int64_t(n) - t_base));  // the tile's real tokens
            for (int e = lane; e < kTile * cols; e += kWarp) {
                const int c = e / kTile, i = e % kTile;  // consecutive lanes write consecutive rows of one token
                out[(t_base + c) * rows_alloc + r0 + i] = tile[warp][i * kTile + c];
            }
            __syncwarp();
        }
    }
}

// y[t][r] = sum over segments s, in order, of partial[s][t][r].
__global__ void sum_segments_kernel(const float *__restrict__ partial, int32_t n_segments, int32_t n, int32_t n_pad,
                                    int64_t rows, int64_t rows_alloc, float *__restrict__ y) {
    const int64_t total = int64_t(n) * rows;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t t = i / rows, r = i % rows;
        float v = partial[t * rows_alloc + r];
        for (int s = 1; s < n_segments; ++s) v += partial[(int64_t(s) * n_pad + t) * rows_alloc + r];
        y[i] = v;
    }
}

int32_t padded_tokens(int32_t n) { return (n + kTile - 1) / kTile * kTile; }
int32_t segments(const DeviceMatrix &w) { return int32_t((w.ld + kSegment - 1) / kSegment); }
unsigned grid_for(int64_t total, int threads) { return unsigned(std::min<int64_t>((total + threads - 1) / threads, 65535 * 4)); }

}  // namespace

size_t gemm_scratch_bytes(const DeviceMatrix &w, int32_t n) {
    if (w.type == MatType::F32) return 0;
    const size_t n_pad = size_t(padded_tokens(n));
    const size_t halves = n_pad * size_t(w.ld);
    const size_t aligned = (halves * sizeof(__half) + 255) / 256 * 256;
    return aligned + size_t(segments(w)) * n_pad * size_t(w.rows_alloc) * sizeof(float);
}

void round_to_half(const float *x, int32_t n, int64_t cols, __half *out, cudaStream_t stream) {
    if (n <= 0) return;
    const int64_t halves = int64_t(n) * cols;
    SPECULA_LAUNCH(to_half_padded_kernel, grid_for(halves, 256), 256, 0, stream)(x, n, cols, n, cols, out);
}

void gemm(const DeviceMatrix &w, const float *x, int32_t n, float *y, void *scratch, cudaStream_t stream) {
    if (n <= 0) return;
    if (w.type == MatType::F32) {
        const dim3 grid(unsigned((w.rows + kF32WarpsPerBlock - 1) / kF32WarpsPerBlock), unsigned((n + kF32Tokens - 1) / kF32Tokens));
        SPECULA_LAUNCH(gemm_f32_kernel, grid, kF32WarpsPerBlock * kWarp, 0, stream)(static_cast<const float *>(w.data), w.ld, w.rows, w.cols, x,
                                                                         n, y);
        return;
    }
    const int32_t n_pad = padded_tokens(n), n_seg = segments(w);
    __half *xh = static_cast<__half *>(scratch);
    const size_t halves = size_t(n_pad) * size_t(w.ld);
    float *partial = reinterpret_cast<float *>(static_cast<char *>(scratch) + (halves * sizeof(__half) + 255) / 256 * 256);
    SPECULA_LAUNCH(to_half_padded_kernel, grid_for(int64_t(halves), 256), 256, 0, stream)(x, n, w.cols, n_pad, w.ld, xh);
    const dim3 grid(unsigned((w.rows_alloc / kTile + kF16WarpsPerBlock - 1) / kF16WarpsPerBlock), unsigned(n_seg));
    const __half *wh = static_cast<const __half *>(w.data);
    // As many token tiles per pass as the batch fills (up to 8), so the weights are read once up to 128 tokens.
    const int32_t n_tiles = n_pad / kTile;
    if (n_tiles == 1)
        SPECULA_LAUNCH(gemm_f16_kernel<1>, grid, kF16WarpsPerBlock * kWarp, 0, stream)(wh, w.ld, w.rows_alloc, xh, n, n_pad, partial);
    else if (n_tiles == 2)
        SPECULA_LAUNCH(gemm_f16_kernel<2>, grid, kF16WarpsPerBlock * kWarp, 0, stream)(wh, w.ld, w.rows_alloc, xh, n, n_pad, partial);
    else if (n_tiles <= 4)
        SPECULA_LAUNCH(gemm_f16_kernel<4>, grid, kF16WarpsPerBlock * kWarp, 0, stream)(wh, w.ld, w.rows_alloc, xh, n, n_pad, partial);
    else
        SPECULA_LAUNCH(gemm_f16_kernel<8>, grid, kF16WarpsPerBlock * kWarp, 0, stream)(wh, w.ld, w.rows_alloc, xh, n, n_pad, partial);
    SPECULA_LAUNCH(sum_segments_kernel, grid_for(int64_t(n) * w.rows, 256), 256, 0, stream)(partial, n_seg, n, n_pad, w.rows, w.rows_alloc, y);
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
