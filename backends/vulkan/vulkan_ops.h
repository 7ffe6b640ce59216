// The forward pass's operations on a Vulkan stream, one function per shader (shaders/*.comp), in the shape of
// the CUDA backend's kernels.h. Buffers are whole Vulkan buffers; offsets count elements (floats, halves or ints)
// so that any row of a buffer can be addressed without descriptor offset alignment.
//
// Batch invariance is the rule every shader keeps: the arithmetic that produces one output row (one token) never
// depends on how many rows share the dispatch, so a tree node's logits are bit-identical to decoding its path
// and greedy speculative decoding on Vulkan is token-for-token lossless (docs/vulkan.md).
#pragma once

#include "backends/vulkan/vulkan_stream.h"
#include "backends/vulkan/vulkan_weights.h"

namespace specula::internal::vulkan {

// A buffer and an element offset into it.
struct View {
    const Buffer *buffer = nullptr;
    uint32_t offset = 0;
    View at(uint32_t more) const { return View{buffer, offset + more}; }
};

// y[t * y_stride + r] = sum_k W[r][k] * x[t * x_stride + k], t < n.
void matmul(Stream &s, const Matrix &w, View x, uint32_t x_stride, uint32_t n, View y, uint32_t y_stride);
inline void matmul(Stream &s, const Matrix &w, View x, uint32_t n, View y) { matmul(s, w, x, w.cols, n, y, w.rows); }
// out[t] = row tokens[t] of `table`, as floats.
void embed(Stream &s, const Matrix &table, View tokens, uint32_t n, View out);
void rmsnorm(Stream &s, View x, View weight, uint32_t n, uint32_t d, float eps, View out);
void add(Stream &s, View x, View y, uint32_t count);               // x += y
void add_bias(Stream &s, View x, View bias, uint32_t n, uint32_t d);  // x[t] += bias
void swiglu(Stream &s, View gate, View up, uint32_t count);        // gate = silu(gate) * up
void layernorm(Stream &s, View x, View weight, uint32_t n, uint32_t d, float eps, View out);  // the CPU's LayerNorm
void gelu(Stream &s, View x, uint32_t count);                       // x = gelu(x) (ggml's tanh approximation)
void geglu(Stream &s, View gate, View up, uint32_t count);         // gate = gelu(gate) * up (ggml's tanh approximation)
void scale(Stream &s, View x, float factor, uint32_t count);       // x *= factor
void soft_cap(Stream &s, View x, float cap, uint32_t count);       // x = cap * tanh(x / cap)
void rope(Stream &s, View x, uint32_t n, uint32_t n_heads, uint32_t head_dim, uint32_t rope_dim, bool neox, View positions, const Buffer &cos_t,
          const Buffer &sin_t);
// Writes n_values floats of k and v as F16 into the caches at element dst_offset.
void store_kv(Stream &s, View k, View v, uint32_t n_values, const Buffer &k_cache, const Buffer &v_cache, uint32_t dst_offset);
// Mixture of experts (the CUDA backend's kernels.h says what each does): the route of n rows of router logits;
// gather the inputs of slots `slots` (n of them, cols floats each) from rows of src_width floats; scatter n outputs of
// out_rows floats to their slots in rows of dst_width floats; mix n rows' k slots of width floats by their weights;
// scale n rows of width floats by sigmoid(gate[r]).
void route_experts(Stream &s, View logits, uint32_t n, uint32_t n_expert, uint32_t k, bool norm, View route);
void gather_slots(Stream &s, View src, uint32_t src_width, View slots, uint32_t n, uint32_t k, bool per_slot, uint32_t cols, View out);
void scatter_slots(Stream &s, View in, View slots, uint32_t n, uint32_t k, uint32_t out_rows, View dst, uint32_t dst_width);
void mix_experts(Stream &s, View slots, View route, uint32_t n, uint32_t k, uint32_t width, View out);
void sigmoid_gate(Stream &s, View x, View gate, uint32_t n, uint32_t width);
// For each pair (from, to) of `moves` (n pairs) in order: slot from -> slot to in one layer's caches.
void copy_slots(Stream &s, const Buffer &k_cache, const Buffer &v_cache, View moves, uint32_t n, uint32_t dkv);

// The queries of one pass (as the CUDA backend's AttentionRows): n rows; row i sees prefix slots [0, n_prefix)
// then its tail (tail_len[i] slots from tail_slots[tail_start[i]]); no tail_slots: a causal batch (row i's tail
// is slots n_prefix .. n_prefix + i); no tail_len: no tails. has_from: a sliding window, row i's keys start at
// logical position from[i] (the CUDA backend's AttentionRows says how); max_keys is then the furthest row's end
// and min_from the earliest start.
struct AttentionRows {
    uint32_t n = 0, n_prefix = 0, max_keys = 0;
    bool has_tail = false, causal = false, has_from = false;
    View ints;  // the buffer holding the int arrays below (offsets in ints)
    uint32_t tail_start = 0, tail_len = 0, tail_slots = 0, from = 0;
    uint32_t min_from = 0;
};
struct AttentionShape {
    uint32_t n_head = 0, n_head_kv = 0, head_dim = 0, chunk = 0;
    float scale = 0;
    float softcap = 0;  // > 0: scores become softcap * tanh(score / softcap) (gemma2)
};
// Floats of partials for n rows over at most max_keys keys.
size_t attention_partials_floats(const AttentionShape &a, uint32_t n_rows, uint32_t max_keys);
// attention_chunks.comp's work per workgroup is bounded (llvmpipe, the CPU Vulkan driver, silently ends every loop
// of a shader invocation once 65535 iterations have run in all): the largest chunk, at most `wanted`, whose one
// row's queries fit the budget (a multiple of 64, or `wanted`), and the rows one workgroup takes for a chunk.
uint32_t attention_chunk(const AttentionShape &a, uint32_t wanted);
// UNSUPPORTED unless the attention shaders take heads of head_dim (at most 256, a multiple of 4: vec4 dot products).
void require_supported_head_dim(int32_t head_dim);
uint32_t attention_rows_per_workgroup(const AttentionShape &a);
void attention_chunks(Stream &s, View q, const Buffer &k_cache, const Buffer &v_cache, uint32_t dkv, const AttentionRows &rows,
                      const AttentionShape &a, const Buffer &partials);
// LongSpec's masked tree part: row i over tree slots first_slot + j (j < n_tree) where mask[i * n_tree + j] != 0.
void attention_tree(Stream &s, View q, const Buffer &k_cache, const Buffer &v_cache, uint32_t dkv, uint32_t n_rows, uint32_t first_slot,
                    uint32_t n_tree, const Buffer &mask, const AttentionShape &a, const Buffer &tree_partials);
void attention_merge(Stream &s, const Buffer &partials, const Buffer *tree_partials, const AttentionRows &rows, const AttentionShape &a, View out);

}  // namespace specula::internal::vulkan
