#include "backends/vulkan/vulkan_ops.h"

#include <algorithm>
#include <string>

namespace specula::internal::vulkan {
namespace {

// Workgroup counts above 65535 (the guaranteed limit per dimension) spill into y.
void split_groups(uint64_t groups, uint32_t &gx, uint32_t &gy) {
    gx = uint32_t(std::min<uint64_t>(groups, 65535));
    gy = uint32_t((groups + gx - 1) / std::max<uint32_t>(gx, 1));
}

struct ElementwisePush {
    uint32_t count, op, d, x_off, y_off;
    float value;
};

// shaders/add.comp's operations: 0 add, 1 bias, 2 SwiGLU, 3 GeGLU, 4 scale, 5 soft-cap, 6 GELU.
void elementwise(Stream &s, uint32_t op, View x, View y, uint32_t count, uint32_t d, float value = 0.0f) {
    if (count == 0) return;
    const Kernel &k = s.device().kernel("add", 2, sizeof(ElementwisePush));
    uint32_t gx, gy;
    split_groups((uint64_t(count) + 255) / 256, gx, gy);
    s.dispatch(k, {x.buffer, y.buffer}, ElementwisePush{count, op, d, x.offset, y.offset, value}, gx, gy);
}

uint32_t chunk_count(const AttentionShape &a, uint32_t max_keys) { return (max_keys + a.chunk - 1) / a.chunk; }
// The chunks a dispatch covers: from the earliest window's (0 without windows) to the furthest key's.
uint32_t chunk_count(const AttentionShape &a, const AttentionRows &rows) {
    const uint32_t first = rows.has_from ? rows.min_from / a.chunk : 0u, end = chunk_count(a, rows.max_keys);
    return end > first ? end - first : 0u;
}

}  // namespace

void matmul(Stream &s, const Matrix &w, View x, uint32_t x_stride, uint32_t n, View y, uint32_t y_stride) {
    if (n == 0 || w.rows == 0) return;
    struct Push {
        uint32_t rows, cols, n, row_stride, w_off, x_off, x_stride, y_off, y_stride;
    };
    const Kernel &k = s.device().kernel((std::string("matmul_") + w.suffix).c_str(), 3, sizeof(Push));
    uint32_t gx, gy;
    split_groups((uint64_t(w.rows) + 15) / 16, gx, gy);  // 16 rows per workgroup (shaders/matmul.comp)
    s.dispatch(k, {w.buffer, x.buffer, y.buffer}, Push{w.rows, w.cols, n, w.row_stride, 0, x.offset, x_stride, y.offset, y_stride}, gx, gy);
}

void embed(Stream &s, const Matrix &table, View tokens, uint32_t n, View out) {
    struct Push {
        uint32_t cols, row_stride, w_off, tok_off, out_off;
    };
    const Kernel &k = s.device().kernel((std::string("embed_") + table.suffix).c_str(), 3, sizeof(Push));
    s.dispatch(k, {table.buffer, tokens.buffer, out.buffer}, Push{table.cols, table.row_stride, 0, tokens.offset, out.offset}, n);
}

namespace {

// shaders/rmsnorm.comp and layernorm.comp take the same bindings and push constants: one workgroup per row.
void row_norm(Stream &s, const char *shader, View x, View weight, uint32_t n, uint32_t d, float eps, View out) {
    struct Push {
        uint32_t d;
        float eps;
        uint32_t x_off, w_off, out_off;
    };
    const Kernel &k = s.device().kernel(shader, 3, sizeof(Push));
    s.dispatch(k, {x.buffer, weight.buffer, out.buffer}, Push{d, eps, x.offset, weight.offset, out.offset}, n);
}

}  // namespace

void rmsnorm(Stream &s, View x, View weight, uint32_t n, uint32_t d, float eps, View out) { row_norm(s, "rmsnorm", x, weight, n, d, eps, out); }

void layernorm(Stream &s, View x, View weight, uint32_t n, uint32_t d, float eps, View out) { row_norm(s, "layernorm", x, weight, n, d, eps, out); }

void add(Stream &s, View x, View y, uint32_t count) { elementwise(s, 0, x, y, count, 1); }
void add_bias(Stream &s, View x, View bias, uint32_t n, uint32_t d) {
    if (bias.buffer != nullptr) elementwise(s, 1, x, bias, n * d, d);
}
void swiglu(Stream &s, View gate, View up, uint32_t count) { elementwise(s, 2, gate, up, count, 1); }
void geglu(Stream &s, View gate, View up, uint32_t count) { elementwise(s, 3, gate, up, count, 1); }
void scale(Stream &s, View x, float factor, uint32_t count) { elementwise(s, 4, x, x, count, 1, factor); }
void soft_cap(Stream &s, View x, float cap, uint32_t count) { elementwise(s, 5, x, x, count, 1, cap); }
void gelu(Stream &s, View x, uint32_t count) { elementwise(s, 6, x, x, count, 1); }

void rope(Stream &s, View x, uint32_t n, uint32_t n_heads, uint32_t head_dim, uint32_t rope_dim, bool neox, View positions, const Buffer &cos_t,
          const Buffer &sin_t) {
    if (n == 0 || rope_dim < 2) return;
    struct Push {
        uint32_t n_heads, head_dim, rope_dim, neox, x_off, pos_off;
    };
    const Kernel &k = s.device().kernel("rope", 4, sizeof(Push));
    s.dispatch(k, {x.buffer, positions.buffer, &cos_t, &sin_t}, Push{n_heads, head_dim, rope_dim, neox ? 1u : 0u, x.offset, positions.offset}, n,
               n_heads);
}

void store_kv(Stream &s, View k, View v, uint32_t n_values, const Buffer &k_cache, const Buffer &v_cache, uint32_t dst_offset) {
    if (n_values == 0) return;
    struct Push {
        uint32_t count, src_off, dst_off;
    };
    require(k.offset == v.offset, SPECULA_ERR_INTERNAL, "Vulkan: store_kv takes k and v at the same offset");
    const Kernel &kk = s.device().kernel("store_kv", 4, sizeof(Push));
    uint32_t gx, gy;
    split_groups((uint64_t(n_values) + 255) / 256, gx, gy);
    s.dispatch(kk, {k.buffer, v.buffer, &k_cache, &v_cache}, Push{n_values, k.offset, dst_offset}, gx, gy);
}

void route_experts(Stream &s, View logits, uint32_t n, uint32_t n_expert, uint32_t k, bool norm, View route) {
    if (n == 0) return;
    struct Push {
        uint32_t n, n_expert, k, norm, x_off, r_off;
    };
    const Kernel &kr = s.device().kernel("route", 2, sizeof(Push));
    s.dispatch(kr, {logits.buffer, route.buffer}, Push{n, n_expert, k, norm ? 1u : 0u, logits.offset, route.offset}, (n + 63) / 64);
}

namespace {

struct ExpertsPush {
    uint32_t count, op, w, k, per_slot, width, dst_off, src_off, ints_off, route_off;
};

// shaders/experts.comp's operations: 0 gather, 1 scatter, 2 mix, 3 sigmoid gate. Unused bindings get dst's buffer.
void experts_op(Stream &s, uint32_t op, View dst, View src, View ints, View route, uint32_t count, uint32_t w, uint32_t k, bool per_slot,
                uint32_t width) {
    if (count == 0) return;
    const Kernel &kk = s.device().kernel("experts", 4, sizeof(ExpertsPush));
    uint32_t gx, gy;
    split_groups((uint64_t(count) + 255) / 256, gx, gy);
    s.dispatch(kk, {dst.buffer, src.buffer, ints.buffer ? ints.buffer : dst.buffer, route.buffer ? route.buffer : dst.buffer},
               ExpertsPush{count, op, w, k, per_slot ? 1u : 0u, width, dst.offset, src.offset, ints.offset, route.offset}, gx, gy);
}

}  // namespace

void gather_slots(Stream &s, View src, uint32_t src_width, View slots, uint32_t n, uint32_t k, bool per_slot, uint32_t cols, View out) {
    experts_op(s, 0, out, src, slots, View{}, n * cols, cols, k, per_slot, src_width);
}

void scatter_slots(Stream &s, View in, View slots, uint32_t n, uint32_t k, uint32_t out_rows, View dst, uint32_t dst_width) {
    experts_op(s, 1, dst, in, slots, View{}, n * out_rows, out_rows, k, false, dst_width);
}

void mix_experts(Stream &s, View slots, View route, uint32_t n, uint32_t k, uint32_t width, View out) {
    experts_op(s, 2, out, slots, View{}, route, n * width, width, k, false, 0);
}

void sigmoid_gate(Stream &s, View x, View gate, uint32_t n, uint32_t width) { experts_op(s, 3, x, gate, View{}, View{}, n * width, width, 1, false, 0); }

void copy_slots(Stream &s, const Buffer &k_cache, const Buffer &v_cache, View moves, uint32_t n, uint32_t dkv) {
    if (n == 0) return;
    struct Push {
        uint32_t n, dkv, moves_off;
    };
    const Kernel &k = s.device().kernel("copy_slots", 3, sizeof(Push));
    s.dispatch(k, {&k_cache, &v_cache, moves.buffer}, Push{n, dkv, moves.offset}, 1);
}

namespace {

// Mesa's llvmpipe (lavapipe) counts the iterations of every loop a shader invocation runs, all loops together, and
// leaves each loop once 65535 have run (LP_MAX_TGSI_LOOP_ITERATIONS): a workgroup with more work than that
// computes part of it and reports nothing. Loops with a constant trip count are unrolled and not counted. Our
// estimate of attention_chunks.comp's count (each term: one loop of the shader whose bound is a push constant) is
// kept under half the limit, for the estimate's error; the kernel test runs a workgroup at the bound on lavapipe.
constexpr uint64_t kLoopBudget = 32768;
uint32_t attention_sub(const AttentionShape &a) { return std::min<uint32_t>(64, 2048 / a.head_dim); }
// Per sub-block: the shared K/V load (sub * head_dim / 4 vec4 over 64 threads, plus its exit), then per query its
// dot products (head_dim / 4), its V sum (sub keys), and the loop's own test.
uint64_t per_sub_block_fixed(const AttentionShape &a) { return uint64_t(attention_sub(a)) * a.head_dim / 256 + 2; }
uint64_t per_query(const AttentionShape &a) { return uint64_t(a.head_dim) / 4 + attention_sub(a) + 8; }
uint64_t per_row(const AttentionShape &a) { return uint64_t(a.n_head / a.n_head_kv) * per_query(a); }

}  // namespace

uint32_t attention_chunk(const AttentionShape &a, uint32_t wanted) {
    const uint64_t sub_blocks = kLoopBudget / (per_sub_block_fixed(a) + per_row(a));
    const uint64_t cap = std::max<uint64_t>(64, sub_blocks * attention_sub(a) / 64 * 64);
    return uint32_t(std::min<uint64_t>(wanted, cap));
}

void require_supported_head_dim(int32_t head_dim) {
    require(head_dim > 0 && head_dim <= 256 && head_dim % 4 == 0, SPECULA_ERR_UNSUPPORTED,
            "Vulkan: head_dim " + std::to_string(head_dim) + " is not supported (at most 256, a multiple of 4)");
}

uint32_t attention_rows_per_workgroup(const AttentionShape &a) {
    const uint64_t sub_blocks = (uint64_t(a.chunk) + attention_sub(a) - 1) / attention_sub(a);
    const uint64_t per_block = kLoopBudget / std::max<uint64_t>(1, sub_blocks);
    const uint64_t rows = per_block > per_sub_block_fixed(a) ? (per_block - per_sub_block_fixed(a)) / per_row(a) : 0;
    return uint32_t(std::clamp<uint64_t>(rows, 1, 1u << 16));
}

size_t attention_partials_floats(const AttentionShape &a, uint32_t n_rows, uint32_t max_keys) {
    return size_t(n_rows) * a.n_head * std::max<size_t>(1, chunk_count(a, max_keys)) * (a.head_dim + 2);
}

void attention_chunks(Stream &s, View q, const Buffer &k_cache, const Buffer &v_cache, uint32_t dkv, const AttentionRows &rows,
                      const AttentionShape &a, const Buffer &partials) {
    const uint32_t n_chunks = chunk_count(a, rows);
    if (rows.n == 0 || n_chunks == 0) return;
    struct Push {
        uint32_t n_rows, n_prefix, max_keys, n_head, n_head_kv, head_dim, chunk, n_chunks, sub;
        uint32_t causal, has_tail, tail_start_off, tail_len_off, tail_slots_off, q_off, dkv;
        float scale;
        uint32_t has_from, from_off, min_from;
        float softcap;
        uint32_t rows_per_group;
    };
    const Kernel &k = s.device().kernel("attention_chunks", 5, sizeof(Push));
    const uint32_t sub = attention_sub(a);
    require(a.head_dim % 4 == 0 && a.head_dim <= 256, SPECULA_ERR_INTERNAL, "Vulkan: attention takes heads of a multiple of 4, at most 256");
    require(a.chunk == attention_chunk(a, a.chunk), SPECULA_ERR_INTERNAL, "Vulkan: an attention chunk past the loop budget");
    const uint32_t per_group = attention_rows_per_workgroup(a);
    const uint32_t base = rows.ints.offset;
    const Buffer *ints = rows.ints.buffer ? rows.ints.buffer : &partials;  // no tails: the binding is never read
    s.dispatch(k, {q.buffer, &k_cache, &v_cache, ints, &partials},
               Push{rows.n, rows.n_prefix, rows.max_keys, a.n_head, a.n_head_kv, a.head_dim, a.chunk, n_chunks, sub, rows.causal ? 1u : 0u,
                    rows.has_tail ? 1u : 0u, base + rows.tail_start, base + rows.tail_len, base + rows.tail_slots, q.offset, dkv, a.scale,
                    rows.has_from ? 1u : 0u, base + rows.from, rows.has_from ? rows.min_from : 0u, a.softcap, per_group},
               n_chunks, a.n_head_kv, (rows.n + per_group - 1) / per_group);
}

void attention_tree(Stream &s, View q, const Buffer &k_cache, const Buffer &v_cache, uint32_t dkv, uint32_t n_rows, uint32_t first_slot,
                    uint32_t n_tree, const Buffer &mask, const AttentionShape &a, const Buffer &tree_partials) {
    if (n_rows == 0) return;
    struct Push {
        uint32_t n_head, n_head_kv, head_dim, first_slot, n_tree, dkv, q_off;
        float scale, softcap;
    };
    const Kernel &k = s.device().kernel("attention_tree", 5, sizeof(Push));
    s.dispatch(k, {q.buffer, &k_cache, &v_cache, &mask, &tree_partials},
               Push{a.n_head, a.n_head_kv, a.head_dim, first_slot, n_tree, dkv, q.offset, a.scale, a.softcap}, n_rows, a.n_head);
}

void attention_merge(Stream &s, const Buffer &partials, const Buffer *tree_partials, const AttentionRows &rows, const AttentionShape &a, View out) {
    if (rows.n == 0) return;
    struct Push {
        uint32_t n_prefix, n_head, head_dim, chunk, n_chunks, has_tail, tail_len_off, has_tree, out_off;
        uint32_t causal, has_from, from_off, min_from;
    };
    const Kernel &k = s.device().kernel("attention_merge", 4, sizeof(Push));
    const uint32_t n_chunks = std::max<uint32_t>(1, chunk_count(a, rows));
    // Without a tree part, the partials stand in for the unused binding (has_tree = 0: never read).
    const Buffer *tree = tree_partials ? tree_partials : &partials;
    const Buffer *ints = rows.ints.buffer ? rows.ints.buffer : &partials;
    s.dispatch(k, {&partials, tree, ints, out.buffer},
               Push{rows.n_prefix, a.n_head, a.head_dim, a.chunk, n_chunks, rows.has_tail ? 1u : 0u, rows.ints.offset + rows.tail_len,
                    tree_partials ? 1u : 0u, out.offset, rows.causal ? 1u : 0u, rows.has_from ? 1u : 0u, rows.ints.offset + rows.from,
                    rows.has_from ? rows.min_from : 0u},
               rows.n, a.n_head);
}

}  // namespace specula::internal::vulkan
