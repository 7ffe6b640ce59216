// The CPU reference operators. Plain loops, F32 accumulation, arithmetic ordered like ggml's CPU backend so
// that results agree with llama.cpp to float rounding. Every other backend is tested against these.
#pragma once

#include "backends/cpu/cpu_weights.h"
#include "core/thread_pool.h"
#include "model/hparams.h"
#include "model/rope.h"
#include "model/weights.h"

#include <cstdint>
#include <vector>

namespace specula::internal {

// out = x / sqrt(mean(x^2) + eps) * weight, for one row of n values.
void rmsnorm(float *out, const float *x, const float *weight, int64_t n, float eps);

// Rotary embedding of one row holding n_heads heads of head_dim values at absolute position `pos`. Only the
// first hp.rope_dim values of each head rotate. freq_factors (rope_dim/2 values) may be empty.
void rope(float *x, int n_heads, const HParams &hp, const std::vector<float> &freq_factors, int32_t pos);
// (rope_angles and rope_rotate, the pieces it is made of, are the core's: model/rope.h.)

// gate = silu(gate) * up, element-wise.
void swiglu(float *gate, const float *up, int64_t n);
// out = (x - mean(x)) / sqrt(var(x) + eps) * weight over n values (ggml's norm and mul: sums in double).
void layernorm(float *out, const float *x, const float *weight, int64_t n, float eps);
// x[i] = gelu(x[i]), the tanh approximation as ggml's CPU computes it: x and the result rounded to F16 (its table)
// between -10 and 10 (starcoder2's MLP; gemma's geglu keeps the exact formula, which its references were made with).
void gelu(float *x, int64_t n);
// gate[i] = gelu(gate[i]) * up[i], GELU with the tanh approximation in ggml's form (gemma's GeGLU).
void geglu(float *gate, const float *up, int64_t n);
// x[i] *= factor.
void scale(float *x, float factor, int64_t n);
// x[i] = cap * tanh(x[i] * (1 / cap)) (gemma2's soft-capping, in llama.cpp's order: scale, tanh, scale).
void softcap(float *x, float cap, int64_t n);

void add(float *x, const float *y, int64_t n);

// Mixture of experts (graph.h's Route, MixExperts, SigmoidGate), in ggml's arithmetic:
// route = the k largest of softmax(logits[0..n)) as k expert indices (floats) then their k weights, renormalized
// to sum 1 when norm; n <= 256.
void route_experts(float *route, const float *logits, int32_t n, int32_t k, bool norm);
// out[i] = sum over j < k, in order, of route's weight j * slots[j * n + i].
void mix_experts(float *out, const float *slots, const float *route, int32_t k, int64_t n);
// x[i] *= sigmoid(g), the sigmoid as llama.cpp's qwen2moe computes it (silu(g) / g).
void sigmoid_gate(float *x, float g, int64_t n);

// Y[m][r] = dot(W row r, X[m]) for m < n_rows_x, r < W.rows. X rows have W.cols floats, Y rows W.rows floats.
// Activations are first converted to the weight type's dot type (scratch holds them), as ggml does. The packed
// SIMD kernel runs when m has a packed copy (cpu_weights.h) and the active level a kernel for it; otherwise the
// scalar reference kernels read the mapped bytes.
void matmul(ThreadPool &pool, const CpuMatrix &m, const float *x, int64_t n_rows_x, float *y, std::vector<uint8_t> &scratch);

// Dequantizes row `r` of W into out (W.cols floats): an embedding lookup.
void get_row(const WeightView &w, int64_t r, float *out);

}  // namespace specula::internal
