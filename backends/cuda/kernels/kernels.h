// Host-side entry points of the CUDA backend's kernels. Each function enqueues work on `stream` and returns at
// once; sizes are checked by the caller (cuda_runner.cpp). Every pointer is device memory unless named host_*.
//
// Batch invariance is the rule every kernel here keeps: the arithmetic that produces one output row (one token)
// never depends on how many rows share the launch or where the row sits in the batch. A token's logits are then
// bit-identical whether it is decoded alone or verified inside a speculation tree, which is what makes greedy
// speculative decoding on the GPU token-for-token lossless (docs/cuda.md). This is why the GEMMs are our own
// and not cuBLAS: cuBLAS picks different kernels (and split-K) for different batch sizes. (Long prompt batches are
// the exception, through cuBLAS where the batch cannot change a generated token: prefill_gemm.h.)
#pragma once

#include "backends/cuda/cuda_namespace.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

// Kernel launches and dynamic shared memory go through these two macros so that the same sources also build
// for the CPU emulator (backends/cuda/emulation/), which runs the whole backend in CI where there is no GPU.
#ifdef SPECULA_CUDA_EMULATION
#define SPECULA_LAUNCH(kernel, grid, block, smem, stream) ::cuda_emulation::launcher(kernel, dim3(grid), dim3(block), smem, stream)
#define SPECULA_DYNAMIC_SHARED(type, name) type *name = reinterpret_cast<type *>(::cuda_emulation::dynamic_shared())
#else
#define SPECULA_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#define SPECULA_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

namespace specula::internal::SPECULA_CUDA_NAMESPACE {

// ---- weights --------------------------------------------------------------------------------------------
// A matrix on the device: `rows` output rows of `cols` inputs, stored row-major with `ld` elements per row
// (ld >= cols, zero-padded). F16 matrices also have rows padded with zeros to a multiple of 16 (`rows_alloc`),
// which is what the tensor-core tiles read.
enum class MatType { F32, F16 };
struct DeviceMatrix {
    MatType type = MatType::F32;
    const void *data = nullptr;
    int64_t rows = 0, cols = 0, ld = 0, rows_alloc = 0;
};

// Y[t][r] = sum_k W[r][k] * X[t][k] for t < n (X: n rows of W.cols floats, Y: n rows of W.rows floats).
// F32 weights: CUDA cores, one warp per (row, 8 tokens), lane-strided sums reduced by a fixed butterfly.
// F16 weights: tensor cores (WMMA 16x16x16, F32 accumulate) on activations rounded to F16; K is cut into fixed
// 512-wide segments whose partial sums are added in segment order. Needs scratch of gemm_scratch_bytes().
size_t gemm_scratch_bytes(const DeviceMatrix &w, int32_t n);
void gemm(const DeviceMatrix &w, const float *x, int32_t n, float *y, void *scratch, cudaStream_t stream);
// out[t][k] = x[t][k] rounded to F16 (round to nearest), for n rows of cols floats: the cuBLAS prefill's activations.
void round_to_half(const float *x, int32_t n, int64_t cols, __half *out, cudaStream_t stream);

// ---- element-wise -------------------------------------------------------------------------------------------
// out[t] = row tokens[t] of the embedding matrix, as floats.
void embed(const DeviceMatrix &table, const int32_t *tokens, int32_t n, float *out, cudaStream_t stream);
// out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight, for n rows of d floats.
void rmsnorm(const float *x, const float *weight, int32_t n, int32_t d, float eps, float *out, cudaStream_t stream);
// out[t] = (x[t] - mean) / sqrt(var + eps) * weight, for n rows of d floats (the CPU's LayerNorm).
void layernorm(const float *x, const float *weight, int32_t n, int32_t d, float eps, float *out, cudaStream_t stream);
// x[i] = gelu(x[i]), ggml's tanh approximation (starcoder2).
void gelu(float *x, int64_t count, cudaStream_t stream);
// x[t] += bias, for n rows of d floats.
void add_bias(float *x, const float *bias, int32_t n, int32_t d, cudaStream_t stream);
// x[i] += y[i], count floats.
void add(float *x, const float *y, int64_t count, cudaStream_t stream);
// gate[i] = silu(gate[i]) * up[i].
void swiglu(float *gate, const float *up, int64_t count, cudaStream_t stream);
// gate[i] = gelu(gate[i]) * up[i], GELU with ggml's tanh approximation (gemma).
void geglu(float *gate, const float *up, int64_t count, cudaStream_t stream);
// x[i] *= factor.
void scale(float *x, float factor, int64_t count, cudaStream_t stream);
// x[i] = cap * tanh(x[i] / cap) (gemma2's final logits).
void soft_cap(float *x, float cap, int64_t count, cudaStream_t stream);
// Rotates the first rope_dim values of each of n_heads heads (head_dim apart) of row t at position positions[t]:
// cos/sin come from a table of rope_dim/2 angles per position (computed on the host as the CPU backend does).
// neox: pair (i, i + rope_dim/2), else (2i, 2i + 1).
void rope(float *x, int32_t n, int32_t n_heads, int32_t head_dim, int32_t rope_dim, bool neox, const int32_t *positions,
          const float *cos_table, const float *sin_table, cudaStream_t stream);
// Writes n rows of k and v (n_embd_kv floats each) as F16 into cache slots first_slot .. first_slot + n - 1.
void store_kv(const float *k, const float *v, int32_t n, int32_t n_embd_kv, __half *k_cache, __half *v_cache,
              int32_t first_slot, cudaStream_t stream);
// In every layer, copies slot `from` to slot `to` (K and V); layer_stride = halves between layers.
void copy_kv_slot(__half *k_cache, __half *v_cache, int32_t n_layer, size_t layer_stride, int32_t n_embd_kv, int32_t from,
                  int32_t to, cudaStream_t stream);
// ---- mixture of experts (graph.h) -------------------------------------------------------------------------------
// route[r] = the k largest of softmax(logits[r]) as k expert indices (floats) then their k weights, renormalized when
// norm (n_expert <= 256).
void route_experts(const float *logits, int32_t n, int32_t n_expert, int32_t k, bool norm, float *route, cudaStream_t stream);
// out[i] = the input of slot slots[i]: row slots[i] / k of src (src_width floats a row), at its own part when per_slot.
void gather_slots(const float *src, int32_t src_width, const int32_t *slots, int32_t n, int32_t k, bool per_slot, int32_t cols, float *out,
                  cudaStream_t stream);
// The part of slot slots[i] in dst (dst_width floats a row, out_rows a slot) = in[i].
void scatter_slots(const float *in, const int32_t *slots, int32_t n, int32_t k, int32_t out_rows, float *dst, int32_t dst_width, cudaStream_t stream);
// out[r] = sum over j in order of route[r]'s weight j * slots[r]'s part j (width floats each).
void mix_experts(const float *slots, const float *route, int32_t n, int32_t k, int32_t width, float *out, cudaStream_t stream);
// x[r] *= sigmoid(gate[r]) (llama.cpp's silu(g) / g).
void sigmoid_gate(float *x, const float *gate, int32_t n, int32_t width, cudaStream_t stream);

// Index of the largest of n values (ties: the lowest index) into *out.
void argmax(const float *values, int32_t n, int32_t *out, cudaStream_t stream);

// ---- attention ----------------------------------------------------------------------------------------------
// The queries of one forward pass: n rows, each with its own key list. Row i sees the committed prefix, cache
// slots [0, n_prefix), followed by its "tail" tail_len[i] slots tail_slots[tail_start[i] ..] (for a decoded
// token: itself; for batch token i: the batch tokens 0..i; for a tree node: its ancestors and itself). Row i's
// logical key j is prefix slot j for j < n_prefix, else its tail entry j - n_prefix: the same list, in the same
// order, a token would see if it were decoded alone with every earlier token committed.
// tail_slots == nullptr means a causal batch: row i's tail is slots n_prefix .. n_prefix + i (key p is slot p).
// tail_len == nullptr means no tails (the prefix part of LongSpec's hybrid attention).
// from != nullptr: a sliding window (gemma's local layers, graph/batch_rows.h): row i sees only its logical keys
// from from[i] on. Logical key p is still prefix slot p below n_prefix; a tree row whose window starts past the
// prefix lists only tail entries, the first at logical position from[i] (its path's positions). Keys keep their
// logical positions, so a row's chunks, and its bits, are those of the same token decoded alone.
struct AttentionRows {
    int32_t n = 0;
    int32_t n_prefix = 0;
    int32_t max_keys = 0;            // max over rows of the logical end of their keys (n_prefix + tail_len[i] without a window)
    const int32_t *tail_start = nullptr;
    const int32_t *tail_len = nullptr;
    const int32_t *tail_slots = nullptr;
    const int32_t *from = nullptr;
    int32_t min_from = 0;            // min over rows of from[i]: the chunks below hold no keys and are not launched
};

struct AttentionShape {
    int32_t n_head = 0, n_head_kv = 0, head_dim = 0;
    int32_t chunk = 0;               // keys per split-K chunk (fixed per session: batch invariance)
    float scale = 0;
    float softcap = 0;               // > 0: scores become softcap * tanh(score / softcap) (gemma2)
};

// Split-K flash attention over each row's logical key list, on tensor cores: chunk c covers logical keys
// [c * chunk, (c+1) * chunk). One block per (chunk, KV head) loads the keys every row reads from the same slot
// (a causal batch: all; a tree: the committed prefix) into shared memory once for all rows and query heads of
// the group, and runs them in WMMA tiles of 16 queries x 16 keys: S = Q K^T and O += P V with F16 operands
// (queries and probabilities rounded to F16) and F32 accumulation, an online softmax per query over 16-key tiles
// in logical order. A tree's tail keys go through the same tile code per row, gathered from the row's slots.
// A query's bits do not depend on the other queries of its tile or on the batch (attention.cu says why).
// Writes per (row, head, chunk) the running max, the sum of exponentials and the unnormalised output
// (partials: attention_partials_floats()). Any chunk size works; a multiple of 16 leaves no part-filled tile.
size_t attention_partials_floats(const AttentionShape &s, int32_t n_rows, int32_t max_keys);
void attention_chunks(const float *q, const __half *k_cache, const __half *v_cache, int32_t n_embd_kv, const AttentionRows &rows,
                      const AttentionShape &s, float *partials, cudaStream_t stream);
// LongSpec's masked tree attention: row i over the tree slots first_tree_slot + j (j < n_tree) with
// mask[i * n_tree + j] != 0, in slot order, as one more partial (max, sum, output) per (row, head).
void attention_tree(const float *q, const __half *k_cache, const __half *v_cache, int32_t n_embd_kv, int32_t n_rows,
                    int32_t first_tree_slot, int32_t n_tree, const uint8_t *mask, const AttentionShape &s, float *tree_partials,
                    cudaStream_t stream);
// Merges each row's chunk partials (and, when tree_partials is not null, its tree partial) by log-sum-exp, in
// chunk order: out[i][h * head_dim ..] = softmax-weighted values; lse (optional) = natural-log normaliser.
void attention_merge(const float *partials, const float *tree_partials, const AttentionRows &rows, const AttentionShape &s,
                     float *out, float *lse, cudaStream_t stream);

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
