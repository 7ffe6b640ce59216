#include "ops.h"

#include "backends/cpu/packed/packed_matrix.h"
#include "formats/half.h"
#include "formats/type_kernels.h"
#include "gguf/tensor_type.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace specula::internal {

void rmsnorm(float *out, const float *x, const float *weight, int64_t n, float eps) {
    double sum = 0.0;  // ggml sums squares in double
    for (int64_t i = 0; i < n; ++i) sum += double(x[i] * x[i]);
    const float scale = 1.0f / std::sqrt(float(sum / double(n)) + eps);
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
}

void layernorm(float *out, const float *x, const float *weight, int64_t n, float eps) {
    // ggml_norm: the mean and the sum of squared deviations in double, the deviations stored as floats, then
    // scaled; ggml_mul by the weight after.
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += double(x[i]);
    const float mean = float(sum / double(n));
    double sum2 = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i] - mean;
        out[i] = v;
        sum2 += double(v * v);
    }
    const float scale = 1.0f / std::sqrt(float(sum2 / double(n)) + eps);
    for (int64_t i = 0; i < n; ++i) out[i] = (out[i] * scale) * weight[i];
}

void gelu(float *x, int64_t n) {
    // ggml's CPU GELU (GGML_GELU_FP16): 0 at or below -10, x at or above 10, else a table over every F16 value of
    // the F16-rounded result, so x and gelu(x) are both rounded to F16 as llama.cpp's are. Without it the synthetic
    // starcoder2's quantized references are 1.6% away (the rounding moves the next quantization of activations).
    static const std::vector<uint16_t> table = [] {
        constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f, kCoefA = 0.044715f;  // ggml's GELU constants
        std::vector<uint16_t> t(65536);
        for (uint32_t h = 0; h < 65536; ++h) {
            const float v = half_to_float(uint16_t(h));
            t[h] = float_to_half(0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * v * (1.0f + kCoefA * v * v))));
        }
        return t;
    }();
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        x[i] = v <= -10.0f ? 0.0f : v >= 10.0f ? v : half_to_float(table[float_to_half(v)]);
    }
}

void rope(float *x, int n_heads, const HParams &hp, const std::vector<float> &freq_factors, int32_t pos) {
    float cos_t[1024], sin_t[1024];  // rope_dim <= head_dim <= 2048 is checked at load
    rope_angles(hp, freq_factors, pos, cos_t, sin_t);
    rope_rotate(x, n_heads, hp, cos_t, sin_t);
}

void swiglu(float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void geglu(float *gate, const float *up, int64_t n) {
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f, kCoefA = 0.044715f;  // ggml's GELU constants
    for (int64_t i = 0; i < n; ++i) {
        const float x = gate[i];
        gate[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x))) * up[i];
    }
}

void route_experts(float *route, const float *logits, int32_t n, int32_t k, bool norm) {
    // ggml_soft_max: the exponentials of x - max as floats, summed in double, scaled by the float of 1 / sum.
    float p[256];
    float max = -INFINITY;
    for (int32_t i = 0; i < n; ++i) max = std::max(max, logits[i]);
    double sum = 0.0;
    for (int32_t i = 0; i < n; ++i) {
        p[i] = std::exp(logits[i] - max);
        sum += double(p[i]);
    }
    const float inv = float(1.0 / sum);
    for (int32_t i = 0; i < n; ++i) p[i] *= inv;
    // ggml_top_k (argsort descending): the largest first; ties (equal floats) keep the lower index first.
    int32_t order[256];
    for (int32_t i = 0; i < n; ++i) order[i] = i;
    std::partial_sort(order, order + k, order + n, [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    double total = 0.0;  // ggml_sum_rows sums in double and stores a float
    for (int32_t j = 0; j < k; ++j) {
        route[j] = float(order[j]);
        route[k + j] = p[order[j]];
        total += double(route[k + j]);
    }
    if (norm) {
        const float t = float(total);
        for (int32_t j = 0; j < k; ++j) route[k + j] = route[k + j] / t;
    }
}

void mix_experts(float *out, const float *slots, const float *route, int32_t k, int64_t n) {
    const float *w = route + k;
    for (int64_t i = 0; i < n; ++i) out[i] = slots[i] * w[0];
    for (int32_t j = 1; j < k; ++j)
        for (int64_t i = 0; i < n; ++i) out[i] += slots[int64_t(j) * n + i] * w[j];
}

void sigmoid_gate(float *x, float g, int64_t n) {
    const float s = g / (1.0f + std::exp(-g)) / g;  // llama.cpp: ggml_div(ggml_silu(g), g)
    for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void scale(float *x, float factor, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

void softcap(float *x, float cap, int64_t n) {
    const float inv = 1.0f / cap;
    for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] * inv) * cap;
}

void add(float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

namespace {

// The packed path: the SIMD kernel over groups of 16 weight rows. x holds the converted activations.
void matmul_packed(ThreadPool &pool, const WeightView &w, const PackedMatrix &packed, PackedGemmFn gemm, const PackedActs &x, float *y) {
    const PackedView &v = packed.view();
    // About sixteen tasks per thread, each at least ~64K multiply-adds: with tasks claimed dynamically, the last
    // one to finish leaves the other threads idle for at most 1/16 of their share (four per thread cost ~10% of
    // decode speed on two threads).
    const int64_t min_groups = ((int64_t(1) << 16) / std::max<int64_t>(1, w.cols * x.n) + kPackRows - 1) / kPackRows;
    const int64_t per_task = std::max({int64_t(1), v.n_groups / (int64_t(pool.size()) * 16), min_groups});
    const int64_t n_tasks = (v.n_groups + per_task - 1) / per_task;
    pool.run(n_tasks, [&](int64_t task, int) { gemm(v, task * per_task, std::min(v.n_groups, (task + 1) * per_task), x, y, w.rows); });
}

}  // namespace

void matmul(ThreadPool &pool, const CpuMatrix &m, const float *x, int64_t n_rows_x, float *y, std::vector<uint8_t> &scratch) {
    const WeightView &w = *m.w;
    const TypeKernels &kw = *find_type_kernels(w.type);
    const TypeKernels &kx = *find_type_kernels(kw.dot_type);
    const size_t x_row_bytes = type_row_bytes(kx, w.cols);
    PackedGemmFn gemm = m.packed != nullptr ? packed_gemm(w.type, active_cpu_isa()) : nullptr;

    // Convert the activations to the dot type, plus, for the packed kernels on Q8_0 activations, each block's sum
    // of int8 values (they undo the weights' +128 offset). Rows are independent, so a batch converts in parallel.
    // Beside the packed kernels the conversion is vectorized too (the same bytes: packed_gemm.h).
    const bool block_sums = gemm != nullptr && kw.dot_type == uint32_t(TensorType::Q8_0);
    const PackedConvertFn convert = gemm != nullptr ? packed_convert(kw.dot_type, active_cpu_isa()) : nullptr;
    const size_t sums_offset = (x_row_bytes * size_t(n_rows_x) + 3) & ~size_t(3);
    const int64_t sums_per_row = block_sums ? w.cols / 32 : 0;
    const size_t need = sums_offset + size_t(n_rows_x) * size_t(sums_per_row) * sizeof(int32_t);
    if (scratch.size() < need) scratch.resize(need);
    int32_t *sums = reinterpret_cast<int32_t *>(scratch.data() + sums_offset);
    auto convert_row = [&](int64_t m, int) {
        uint8_t *xq = scratch.data() + size_t(m) * x_row_bytes;
        if (convert != nullptr) {
            convert(x + m * w.cols, w.cols, xq, block_sums ? sums + m * sums_per_row : nullptr);
            return;
        }
        kx.from_float(x + m * w.cols, xq, w.cols);
        if (block_sums) q8_0_block_sums(xq, w.cols, sums + m * sums_per_row);
    };
    if (n_rows_x > 1) pool.run(n_rows_x, convert_row);
    else convert_row(0, 0);

    if (gemm != nullptr) {
        PackedActs acts;
        acts.xq = scratch.data();
        acts.row_bytes = x_row_bytes;
        acts.block_sums = block_sums ? sums : nullptr;
        acts.sums_per_row = sums_per_row;
        acts.n = n_rows_x;
        matmul_packed(pool, w, *m.packed, gemm, acts, y);
        return;
    }

    // Tasks are blocks of weight rows: each weight row is read once per call, whatever n_rows_x is. About four
    // blocks per thread balance uneven progress without paying for many task claims, and each block holds at
    // least ~64K multiply-adds, below which waking another thread costs more than it saves.
    const int64_t min_rows = (int64_t(1) << 16) / std::max<int64_t>(1, w.cols * n_rows_x);
    const int64_t kRowsPerTask = std::max({int64_t(16), w.rows / (int64_t(pool.size()) * 4), min_rows});
    const int64_t n_tasks = (w.rows + kRowsPerTask - 1) / kRowsPerTask;
    const uint8_t *xq = scratch.data();
    pool.run(n_tasks, [&](int64_t task, int) {
        const int64_t r_end = std::min(w.rows, (task + 1) * kRowsPerTask);
        for (int64_t r = task * kRowsPerTask; r < r_end; ++r) {
            const uint8_t *row = w.row(r);
            for (int64_t m = 0; m < n_rows_x; ++m) y[m * w.rows + r] = kw.vec_dot(w.cols, row, xq + size_t(m) * x_row_bytes);
        }
    });
}

void get_row(const WeightView &w, int64_t r, float *out) { find_type_kernels(w.type)->to_float(w.row(r), out, w.cols); }

}  // namespace specula::internal
