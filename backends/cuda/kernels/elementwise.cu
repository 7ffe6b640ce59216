// Row-wise and element-wise kernels of the forward pass (embedding, RMSNorm, RoPE, SwiGLU, biases, residuals,
// KV stores) and the greedy argmax. Each output row is computed by the same code whatever the batch size.
#include "kernels.h"

#include <cfloat>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {
namespace {

unsigned blocks_for(int64_t total, int threads) {
    return unsigned(std::max<int64_t>(1, std::min<int64_t>((total + threads - 1) / threads, 65535 * 8)));
}

__global__ void embed_kernel(const void *__restrict__ table, MatType type, int64_t ld, int64_t cols, const int32_t *__restrict__ tokens,
                             float *__restrict__ out) {
    const int t = blockIdx.x;
    const int64_t base = int64_t(tokens[t]) * ld;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        out[int64_t(t) * cols + c] = type == MatType::F32 ? static_cast<const float *>(table)[base + c]
                                                          : __half2float(static_cast<const __half *>(table)[base + c]);
}

// The norms' row sums: one block per row, each thread's share summed in double, then the block's shares by a fixed
// tree. Every thread gets the total; `partial` may be reused after it returns.
constexpr int kNormThreads = 256;
__device__ double block_sum(double *partial, double share) {
    partial[threadIdx.x] = share;
    __syncthreads();
    for (int s = kNormThreads / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    const double total = partial[0];
    __syncthreads();
    return total;
}

// Squares summed in double, as the CPU reference (and ggml) do.
__global__ void rmsnorm_kernel(const float *__restrict__ x, const float *__restrict__ weight, int32_t d, float eps,
                               float *__restrict__ out) {
    __shared__ double partial[kNormThreads];
    const float *row = x + int64_t(blockIdx.x) * d;
    double sum = 0.0;
    for (int i = threadIdx.x; i < d; i += kNormThreads) sum += double(row[i] * row[i]);
    const float scale = 1.0f / sqrtf(float(block_sum(partial, sum) / double(d)) + eps);
    float *o = out + int64_t(blockIdx.x) * d;
    for (int i = threadIdx.x; i < d; i += kNormThreads) o[i] = (row[i] * scale) * weight[i];
}

// LayerNorm: the mean, then the sum of squared deviations, each in double by the same fixed tree (the CPU's order of
// rounding: deviations as floats, scaled, times the weight).
__global__ void layernorm_kernel(const float *__restrict__ x, const float *__restrict__ weight, int32_t d, float eps,
                                 float *__restrict__ out) {
    __shared__ double partial[kNormThreads];
    const float *row = x + int64_t(blockIdx.x) * d;
    double sum = 0.0;
    for (int i = threadIdx.x; i < d; i += kNormThreads) sum += double(row[i]);
    const float mean = float(block_sum(partial, sum) / double(d));
    double sum2 = 0.0;
    for (int i = threadIdx.x; i < d; i += kNormThreads) {
        const float v = row[i] - mean;
        sum2 += double(v * v);
    }
    const float scale = 1.0f / sqrtf(float(block_sum(partial, sum2) / double(d)) + eps);
    float *o = out + int64_t(blockIdx.x) * d;
    for (int i = threadIdx.x; i < d; i += kNormThreads) o[i] = ((row[i] - mean) * scale) * weight[i];
}

__global__ void add_bias_kernel(float *x, const float *__restrict__ bias, int64_t total, int32_t d) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) x[i] += bias[i % d];
}

__global__ void add_kernel(float *x, const float *__restrict__ y, int64_t total) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) x[i] += y[i];
}

__global__ void swiglu_kernel(float *gate, const float *__restrict__ up, int64_t total) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
        const float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

// The CPU's formulas (backends/cpu/ops.cpp), in the same order of operations.
__global__ void geglu_kernel(float *gate, const float *__restrict__ up, int64_t total) {
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f, kCoefA = 0.044715f;  // ggml's GELU constants
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
        const float x = gate[i];
        gate[i] = 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * x * (1.0f + kCoefA * x * x))) * up[i];
    }
}

// The CPU's GELU (ggml's F16 table): x and the result rounded to F16 between -10 and 10.
__global__ void gelu_kernel(float *x, int64_t total) {
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f, kCoefA = 0.044715f;  // ggml's GELU constants
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
        float v = x[i];
        if (v <= -10.0f) {
            x[i] = 0.0f;
        } else if (v < 10.0f) {
            v = __half2float(__float2half_rn(v));
            x[i] = __half2float(__float2half_rn(0.5f * v * (1.0f + tanhf(kSqrt2OverPi * v * (1.0f + kCoefA * v * v)))));
        }
    }
}

__global__ void scale_kernel(float *x, float factor, int64_t total) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) x[i] *= factor;
}

__global__ void soft_cap_kernel(float *x, float cap, int64_t total) {
    const float inv = 1.0f / cap;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) x[i] = tanhf(x[i] * inv) * cap;
}

// grid: (rows, heads); threads over the rope_dim / 2 rotated pairs.
__global__ void rope_kernel(float *x, int32_t n_heads, int32_t head_dim, int32_t rope_dim, bool neox, const int32_t *__restrict__ positions,
                            const float *__restrict__ cos_table, const float *__restrict__ sin_table) {
    const int32_t t = blockIdx.x, h = blockIdx.y, half_dim = rope_dim / 2;
    float *v = x + (int64_t(t) * n_heads + h) * head_dim;
    const int64_t table = int64_t(positions[t]) * half_dim;
    for (int i = threadIdx.x; i < half_dim; i += blockDim.x) {
        const int a = neox ? i : 2 * i, b = neox ? i + half_dim : 2 * i + 1;
        const float c = cos_table[table + i], s = sin_table[table + i];
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
    }
}

__global__ void store_kv_kernel(const float *__restrict__ k, const float *__restrict__ v, int64_t total, __half *__restrict__ k_out,
                                __half *__restrict__ v_out) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
        k_out[i] = __float2half_rn(k[i]);
        v_out[i] = __float2half_rn(v[i]);
    }
}

// grid: layers; copies one slot's K and V rows.
__global__ void copy_slot_kernel(__half *k, __half *v, size_t layer_stride, int32_t dkv, int32_t from, int32_t to) {
    const size_t base = size_t(blockIdx.x) * layer_stride;
    for (int i = threadIdx.x; i < dkv; i += blockDim.x) {
        k[base + size_t(to) * dkv + i] = k[base + size_t(from) * dkv + i];
        v[base + size_t(to) * dkv + i] = v[base + size_t(from) * dkv + i];
    }
}

constexpr int kArgmaxThreads = 1024;
__global__ void argmax_kernel(const float *__restrict__ values, int32_t n, int32_t *out) {
    __shared__ float best_v[kArgmaxThreads];
    __shared__ int32_t best_i[kArgmaxThreads];
    float bv = -FLT_MAX;
    int32_t bi = n;  // n: nothing seen (every logit is -inf or NaN); replaced below by index 0
    for (int32_t i = threadIdx.x; i < n; i += kArgmaxThreads) {
        const float x = values[i];
        if (x > bv || (bi == n && x == bv)) {
            bv = x;
            bi = i;
        }
    }
    best_v[threadIdx.x] = bv;
    best_i[threadIdx.x] = bi;
    __syncthreads();
    for (int s = kArgmaxThreads / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) {
            const float ov = best_v[threadIdx.x + s];
            const int32_t oi = best_i[threadIdx.x + s];
            if (ov > best_v[threadIdx.x] || (ov == best_v[threadIdx.x] && oi < best_i[threadIdx.x])) {
                best_v[threadIdx.x] = ov;
                best_i[threadIdx.x] = oi;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = best_i[0] < n ? best_i[0] : 0;
}

}  // namespace

void embed(const DeviceMatrix &table, const int32_t *tokens, int32_t n, float *out, cudaStream_t stream) {
    if (n > 0) SPECULA_LAUNCH(embed_kernel, n, 256, 0, stream)(table.data, table.type, table.ld, table.cols, tokens, out);
}

void rmsnorm(const float *x, const float *weight, int32_t n, int32_t d, float eps, float *out, cudaStream_t stream) {
    if (n > 0) SPECULA_LAUNCH(rmsnorm_kernel, n, kNormThreads, 0, stream)(x, weight, d, eps, out);
}

void add_bias(float *x, const float *bias, int32_t n, int32_t d, cudaStream_t stream) {
    const int64_t total = int64_t(n) * d;
    if (total > 0) SPECULA_LAUNCH(add_bias_kernel, blocks_for(total, 256), 256, 0, stream)(x, bias, total, d);
}

void add(float *x, const float *y, int64_t count, cudaStream_t stream) {
    if (count > 0) SPECULA_LAUNCH(add_kernel, blocks_for(count, 256), 256, 0, stream)(x, y, count);
}

void swiglu(float *gate, const float *up, int64_t count, cudaStream_t stream) {
    if (count > 0) SPECULA_LAUNCH(swiglu_kernel, blocks_for(count, 256), 256, 0, stream)(gate, up, count);
}

void layernorm(const float *x, const float *weight, int32_t n, int32_t d, float eps, float *out, cudaStream_t stream) {
    if (n > 0) SPECULA_LAUNCH(layernorm_kernel, n, kNormThreads, 0, stream)(x, weight, d, eps, out);
}

void gelu(float *x, int64_t count, cudaStream_t stream) {
    if (count > 0) SPECULA_LAUNCH(gelu_kernel, blocks_for(count, 256), 256, 0, stream)(x, count);
}

void geglu(float *gate, const float *up, int64_t count, cudaStream_t stream) {
    if (count > 0) SPECULA_LAUNCH(geglu_kernel, blocks_for(count, 256), 256, 0, stream)(gate, up, count);
}

void scale(float *x, float factor, int64_t count, cudaStream_t stream) {
    if (count > 0) SPECULA_LAUNCH(scale_kernel, blocks_for(count, 256), 256, 0, stream)(x, factor, count);
}

void soft_cap(float *x, float cap, int64_t count, cudaStream_t stream) {
    if (count > 0) SPECULA_LAUNCH(soft_cap_kernel, blocks_for(count, 256), 256, 0, stream)(x, cap, count);
}

void rope(float *x, int32_t n, int32_t n_heads, int32_t head_dim, int32_t rope_dim, bool neox, const int32_t *positions,
          const float *cos_table, const float *sin_table, cudaStream_t stream) {
    if (n <= 0 || rope_dim < 2) return;
    const int threads = std::min(128, std::max(32, rope_dim / 2));
    SPECULA_LAUNCH(rope_kernel, dim3(unsigned(n), unsigned(n_heads)), threads, 0, stream)(x, n_heads, head_dim, rope_dim, neox, positions, cos_table,
                                                                               sin_table);
}

void store_kv(const float *k, const float *v, int32_t n, int32_t n_embd_kv, __half *k_cache, __half *v_cache, int32_t first_slot,
              cudaStream_t stream) {
    const int64_t total = int64_t(n) * n_embd_kv;
    if (total <= 0) return;
    const size_t offset = size_t(first_slot) * size_t(n_embd_kv);
    SPECULA_LAUNCH(store_kv_kernel, blocks_for(total, 256), 256, 0, stream)(k, v, total, k_cache + offset, v_cache + offset);
}

void copy_kv_slot(__half *k_cache, __half *v_cache, int32_t n_layer, size_t layer_stride, int32_t n_embd_kv, int32_t from, int32_t to,
                  cudaStream_t stream) {
    if (from != to && n_layer > 0)
        SPECULA_LAUNCH(copy_slot_kernel, unsigned(n_layer), 256, 0, stream)(k_cache, v_cache, layer_stride, n_embd_kv, from, to);
}

void argmax(const float *values, int32_t n, int32_t *out, cudaStream_t stream) {
    SPECULA_LAUNCH(argmax_kernel, 1, kArgmaxThreads, 0, stream)(values, n, out);
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
