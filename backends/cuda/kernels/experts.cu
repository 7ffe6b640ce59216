// The mixture-of-experts kernels (graph.h: route, expert_mat_mul's gather and scatter, mix_experts, sigmoid_gate),
// in the CPU reference's order of operations (backends/cpu/ops.cpp). A row's results depend only on that row.
#include "kernels.h"

namespace specula::internal::SPECULA_CUDA_NAMESPACE {
namespace {

unsigned blocks_for(int64_t total, int threads) {
    return unsigned(std::max<int64_t>(1, std::min<int64_t>((total + threads - 1) / threads, 65535 * 8)));
}

// One thread per row: the softmax (exponentials summed in double, scaled by the float of 1 / sum), the k largest
// by repeated selection (ties: the lower index), their probabilities, renormalized when norm (sum in double).
__global__ void route_kernel(const float *__restrict__ logits, int32_t n, int32_t n_expert, int32_t k, bool norm, float *__restrict__ route) {
    const int32_t r = int32_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const float *x = logits + int64_t(r) * n_expert;
    float *out = route + int64_t(r) * 2 * k;
    float mx = -INFINITY;
    for (int32_t i = 0; i < n_expert; ++i) mx = fmaxf(mx, x[i]);
    double sum = 0.0;
    for (int32_t i = 0; i < n_expert; ++i) sum += double(expf(x[i] - mx));
    const float inv = float(1.0 / sum);
    uint32_t taken[8] = {};  // n_expert <= 256 (hparams.cpp)
    double total = 0.0;
    for (int32_t j = 0; j < k; ++j) {
        int32_t best = -1;
        float best_p = 0.0f;
        for (int32_t i = 0; i < n_expert; ++i) {
            if (taken[i / 32] & (1u << (i % 32))) continue;
            const float p = expf(x[i] - mx) * inv;
            if (best < 0 || p > best_p) best = i, best_p = p;
        }
        taken[best / 32] |= 1u << (best % 32);
        out[j] = float(best);
        out[k + j] = best_p;
        total += double(best_p);
    }
    if (norm) {
        const float t = float(total);
        for (int32_t j = 0; j < k; ++j) out[k + j] = out[k + j] / t;
    }
}

// out[i] = the input of slot slots[i] (row slot / k; its own part when per_slot), cols floats.
__global__ void gather_slots_kernel(const float *__restrict__ src, int32_t src_width, const int32_t *__restrict__ slots, int32_t n, int32_t k,
                                    bool per_slot, int32_t cols, float *__restrict__ out) {
    const int64_t total = int64_t(n) * cols;
    for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
        const int32_t i = int32_t(e / cols), c = int32_t(e % cols), s = slots[i];
        out[e] = src[int64_t(s / k) * src_width + (per_slot ? int64_t(s % k) * cols : 0) + c];
    }
}

// dst's part of slot slots[i] = in[i], out_rows floats.
__global__ void scatter_slots_kernel(const float *__restrict__ in, const int32_t *__restrict__ slots, int32_t n, int32_t k, int32_t out_rows,
                                     float *__restrict__ dst, int32_t dst_width) {
    const int64_t total = int64_t(n) * out_rows;
    for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
        const int32_t i = int32_t(e / out_rows), c = int32_t(e % out_rows), s = slots[i];
        dst[int64_t(s / k) * dst_width + int64_t(s % k) * out_rows + c] = in[e];
    }
}

// out[r][c] = slot 0 times its weight, then each next slot's product added in order.
__global__ void mix_experts_kernel(const float *__restrict__ slots, const float *__restrict__ route, int32_t n, int32_t k, int32_t width,
                                   float *__restrict__ out) {
    const int64_t total = int64_t(n) * width;
    for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
        const int32_t r = int32_t(e / width), c = int32_t(e % width);
        const float *s = slots + int64_t(r) * k * width + c, *w = route + int64_t(r) * 2 * k + k;
        float v = s[0] * w[0];
        for (int32_t j = 1; j < k; ++j) v += s[int64_t(j) * width] * w[j];
        out[e] = v;
    }
}

__global__ void sigmoid_gate_kernel(float *x, const float *__restrict__ gate, int32_t n, int32_t width) {
    const int64_t total = int64_t(n) * width;
    for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
        const float g = gate[e / width];
        x[e] *= g / (1.0f + expf(-g)) / g;  // llama.cpp's silu(g) / g
    }
}

}  // namespace

void route_experts(const float *logits, int32_t n, int32_t n_expert, int32_t k, bool norm, float *route, cudaStream_t stream) {
    if (n > 0) SPECULA_LAUNCH(route_kernel, unsigned((n + 63) / 64), 64, 0, stream)(logits, n, n_expert, k, norm, route);
}

void gather_slots(const float *src, int32_t src_width, const int32_t *slots, int32_t n, int32_t k, bool per_slot, int32_t cols, float *out,
                  cudaStream_t stream) {
    if (n > 0) SPECULA_LAUNCH(gather_slots_kernel, blocks_for(int64_t(n) * cols, 256), 256, 0, stream)(src, src_width, slots, n, k, per_slot, cols, out);
}

void scatter_slots(const float *in, const int32_t *slots, int32_t n, int32_t k, int32_t out_rows, float *dst, int32_t dst_width, cudaStream_t stream) {
    if (n > 0) SPECULA_LAUNCH(scatter_slots_kernel, blocks_for(int64_t(n) * out_rows, 256), 256, 0, stream)(in, slots, n, k, out_rows, dst, dst_width);
}

void mix_experts(const float *slots, const float *route, int32_t n, int32_t k, int32_t width, float *out, cudaStream_t stream) {
    if (n > 0) SPECULA_LAUNCH(mix_experts_kernel, blocks_for(int64_t(n) * width, 256), 256, 0, stream)(slots, route, n, k, width, out);
}

void sigmoid_gate(float *x, const float *gate, int32_t n, int32_t width, cudaStream_t stream) {
    if (n > 0) SPECULA_LAUNCH(sigmoid_gate_kernel, blocks_for(int64_t(n) * width, 256), 256, 0, stream)(x, gate, n, width);
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
