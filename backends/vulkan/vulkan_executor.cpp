// Each graph operation (graph/graph.h) as a compute dispatch of vulkan_ops.h, in the order the graph lists them,
// recorded on the runner's stream (every command waits for the ones before it).
#include "backends/vulkan/vulkan_executor.h"

#include "backend/attention_split.h"
#include "core/error.h"
#include "graph/expert_slots.h"
#include "model/rope.h"

#include <algorithm>
#include <climits>

namespace specula::internal::vulkan {
namespace {


// chunk: the keys per split-K chunk wanted, bounded by attention_chunk (vulkan_ops.h: the shader's loop budget).
AttentionShape shape_of(const Graph &g, uint32_t chunk, float softcap = 0.0f) {
    AttentionShape s;
    s.softcap = softcap;
    s.n_head = uint32_t(g.hp.n_head);
    s.n_head_kv = uint32_t(g.hp.n_head_kv);
    s.head_dim = uint32_t(g.hp.head_dim);
    s.scale = g.attention_scale;
    s.chunk = attention_chunk(s, chunk);
    return s;
}

size_t partials_bytes(const Graph &g, int32_t rows, const VulkanContext &ctx, uint32_t local_chunk) {
    size_t floats = 16;
    // A length-split list has at most kMaxLengthChunks chunks, more where the loop budget bounds its chunk.
    const int32_t slots_max = std::max(ctx.n_ctx, g.local_kv_slots);
    const uint32_t largest_chunk = shape_of(g, UINT32_MAX).chunk;
    const size_t length_chunks = std::max<size_t>(kMaxLengthChunks + 1, size_t(slots_max) / largest_chunk + 2);
    const size_t by_length = size_t(rows) * size_t(g.hp.n_head) * length_chunks * size_t(g.hp.head_dim + 2);
    for (const std::vector<Op> &stage : g.stages)
        for (const Op &op : stage) {
            if (op.kind != OpKind::Attention) continue;
            const bool model = op.store == KvStore::Model;
            const int32_t slots = model ? ctx.n_ctx : g.local_kv_slots;
            floats = std::max({floats, by_length,
                               attention_partials_floats(shape_of(g, model ? ctx.cache_chunk : local_chunk), uint32_t(rows), uint32_t(slots))});
        }
    return floats * 4;
}

}  // namespace

bool VulkanExecutor::supports(const Op &op) {
    switch (op.kind) {
    case OpKind::Embed:
    case OpKind::RmsNorm:
    case OpKind::MatMul:
    case OpKind::AddBias:
    case OpKind::StoreKv:
    case OpKind::SwiGlu:
    case OpKind::Add:
    case OpKind::Rope:
    case OpKind::GeGlu:
    case OpKind::Scale:
    case OpKind::SoftCap:
    case OpKind::LayerNorm:
    case OpKind::Gelu:
    case OpKind::Attention: return true;
    case OpKind::Route:
    case OpKind::ExpertMatMul:
    case OpKind::MixExperts:
    case OpKind::SigmoidGate: return true;
    }
    return false;
}

size_t VulkanExecutor::bytes_needed(const Graph &g, int32_t max_rows, const VulkanContext &ctx) {
    const uint32_t local_chunk = shape_of(g, uint32_t(fixed_split_chunk(std::max(1, g.local_kv_slots)))).chunk;
    return g.activation_bytes(max_rows) + partials_bytes(g, max_rows, ctx, local_chunk) +
           size_t(max_rows) * size_t(g.hp.n_head) * size_t(g.hp.head_dim + 2) * 4 + 2 * (size_t(64) << 10) +
           2 * size_t(g.local_kv_slots) * size_t(g.hp.n_embd_kv()) * 2 + expert_scratch_bytes(g, max_rows);
}

VulkanExecutor::VulkanExecutor(std::shared_ptr<const Graph> graph, int32_t max_rows, const VulkanContext &context)
    : graph_(std::move(graph)), ctx_(context), max_rows_(max_rows), own_(*context.stream) {
    const Graph &g = *graph_;
    require_supported_head_dim(g.hp.head_dim);
    for (const std::vector<Op> &stage : g.stages)
        for (const Op &op : stage)
            require(supports(op), SPECULA_ERR_UNSUPPORTED, std::string("Vulkan: the operation '") + op_kind_name(op.kind) + "' is not implemented");
    const std::shared_ptr<Device> &dev = ctx_.stream->shared_device();
    const auto buf = [&](size_t bytes, const char *what) { return Buffer(dev, std::max<size_t>(bytes, 16), Buffer::Kind::Device, what); };

    // Weights: the runner's model holds the target's; anything else (a draft's layer) is uploaded here, once.
    matrices_ = per_op<Matrix>(g, [&](const Op &op) {
        if (op.weight == nullptr || !*op.weight || !reads_matrix(op)) return Matrix{};
        const Matrix *shared = ctx_.weights ? ctx_.weights->matrix(*op.weight) : nullptr;
        return shared ? *shared : own_.matrix(*op.weight);
    });
    vectors_ = per_op<const Buffer *>(g, [&](const Op &op) -> const Buffer * {
        if (op.weight == nullptr || !*op.weight || reads_matrix(op)) return nullptr;
        const Buffer *shared = ctx_.weights ? ctx_.weights->floats(*op.weight) : nullptr;
        return shared ? shared : own_.floats(*op.weight);
    });
    expert_matrices_ = per_op<std::vector<Matrix>>(g, [&](const Op &op) {
        std::vector<Matrix> experts;
        for (int32_t e = 0; e < op.n_experts; ++e) {
            const Matrix *shared = ctx_.weights ? ctx_.weights->matrix(op.experts[e]) : nullptr;
            experts.push_back(shared ? *shared : own_.matrix(op.experts[e]));
        }
        return experts;
    });
    if (const ExpertShape shape = expert_shape(g); shape.top_k > 0) {
        // One expert's gathered inputs and outputs (at most max_rows slots: a row picks an expert once).
        const size_t floats = size_t(max_rows_) * size_t(shape.widest), slots = size_t(max_rows_) * size_t(shape.top_k);
        moe_in_ = buf(floats * 4, "expert scratch");
        moe_out_ = buf(floats * 4, "expert scratch");
        moe_slots_ = buf(slots * 4, "expert scratch");
        host_route_.reserve(slots * 2);
        host_slots_.reserve(slots);
        moe_start_.reserve(size_t(shape.n_experts) + 1);
    }
    for (const GraphTensor &t : g.tensors) {
        tensors_.push_back(buf(size_t(max_rows_) * size_t(t.width) * 4, "graph tensors"));
        widths_.push_back(t.width);
    }
    if (g.local_kv_slots > 0) {
        local_chunk_ = shape_of(g, uint32_t(fixed_split_chunk(g.local_kv_slots))).chunk;
        local_k_ = buf(size_t(g.local_kv_slots) * size_t(g.hp.n_embd_kv()) * 2, "the graph's key/value store");
        local_v_ = buf(local_k_.bytes(), "the graph's key/value store");
        ctx_.stream->fill_zero(local_k_);
        ctx_.stream->fill_zero(local_v_);
    }
    // RoPE: the runner's tables when the graph rotates as the runner's model does (LongSpec's layer), else its own.
    if (ctx_.rope_hp == nullptr || !same_rope_angles(g.hp, g.rope_freq_factors, *ctx_.rope_hp, *ctx_.rope_freq_factors)) {
        std::vector<float> cos_t, sin_t;
        rope_table(g.hp, g.rope_freq_factors, ctx_.n_ctx, cos_t, sin_t);
        rope_cos_ = buf(cos_t.size() * 4, "RoPE tables");
        rope_sin_ = buf(sin_t.size() * 4, "RoPE tables");
        ctx_.stream->upload(rope_cos_, 0, cos_t.data(), cos_t.size() * 4);
        ctx_.stream->upload(rope_sin_, 0, sin_t.data(), sin_t.size() * 4);
        ctx_.rope_cos = &rope_cos_;
        ctx_.rope_sin = &rope_sin_;
    }
    // Sliding-window layers rotate with their own settings (gemma3: base 1e4 and no scaling), without frequency factors.
    if (g.sliding_rope) {
        std::vector<float> cos_t, sin_t;
        rope_table(g.hp_sliding, {}, ctx_.n_ctx, cos_t, sin_t);
        sliding_cos_ = buf(cos_t.size() * 4, "RoPE tables");
        sliding_sin_ = buf(sin_t.size() * 4, "RoPE tables");
        ctx_.stream->upload(sliding_cos_, 0, cos_t.data(), cos_t.size() * 4);
        ctx_.stream->upload(sliding_sin_, 0, sin_t.data(), sin_t.size() * 4);
    }
    partials_ = buf(partials_bytes(g, max_rows_, ctx_, local_chunk_), "attention partials");
    tree_partials_ = buf(size_t(max_rows_) * size_t(g.hp.n_head) * (size_t(g.hp.head_dim) + 2) * 4, "attention partials");
    ints_ = buf(size_t(64) << 10, "row data");
    mask_ = buf(size_t(64) << 10, "tree mask");
    ctx_.stream->finish();
}

size_t VulkanExecutor::device_bytes() const {
    size_t total = 0;
    for (const Buffer &t : tensors_) total += t.bytes();
    for (const Buffer *b : {&local_k_, &local_v_, &rope_cos_, &rope_sin_, &sliding_cos_, &sliding_sin_, &partials_, &tree_partials_, &ints_, &mask_}) total += b->bytes();
    return total;
}

// Makes `b` at least `bytes` (waiting for recorded work first: it may read the old buffer).
void VulkanExecutor::ensure(Buffer &b, size_t bytes, const char *what) {
    if (b.bytes() >= bytes) return;
    ctx_.stream->finish();
    b = Buffer(ctx_.stream->shared_device(), std::max(bytes, 2 * b.bytes()), Buffer::Kind::Device, what);
}

void VulkanExecutor::upload_rows(const BatchRows &rows) {
    require(rows.n <= max_rows_, SPECULA_ERR_INTERNAL, "Vulkan: a batch larger than the executor was made for");
    ensure(ints_, rows.ints.size() * 4, "row data");
    ctx_.stream->upload(ints_, 0, rows.ints.data(), rows.ints.size() * 4);
    if (rows.mask != nullptr) {  // only LongSpec's split form of tree attention reads it
        const size_t mask_bytes = size_t(rows.n) * size_t(rows.mask_width);
        ensure(mask_, mask_bytes, "tree mask");
        ctx_.stream->upload(mask_, 0, rows.mask, mask_bytes);
    }
}

bool VulkanExecutor::enqueue(int32_t stage, const BatchRows &rows, int32_t first, int32_t count, const Enqueue &how) {
    const Graph &g = *graph_;
    Stream &st = *ctx_.stream;
    const uint32_t F = uint32_t(first), C = uint32_t(count), dkv = uint32_t(g.hp.n_embd_kv());
    const View tokens{&ints_, F}, positions{&ints_, uint32_t(rows.n) + F};
    const bool neox = g.hp.rope_type == RopeType::Neox;
    const std::vector<Op> &ops = g.stages[size_t(stage)];
    int32_t block = -2;
    for (size_t o = 0; o < ops.size(); ++o) {
        const Op &op = ops[o];
        if (op.block != block) {
            // A long batch is submitted layer by layer, so that a cancel stops it within a layer.
            if (how.submit_per_layer && block >= 0) st.finish();
            block = op.block;
            if (how.cancel != nullptr && how.cancel->load(std::memory_order_relaxed)) {
                st.finish();
                return false;
            }
        }
        const uint32_t w = op.dst >= 0 ? uint32_t(widths_[size_t(op.dst)]) : 0;
        switch (op.kind) {
        case OpKind::Embed: embed(st, matrices_[size_t(stage)][o], tokens, C, row(op.dst, F)); break;
        case OpKind::RmsNorm: {  // a row of n_heads parts is n_heads rows of one part each
            const uint32_t parts = uint32_t(std::max(1, op.n_heads));
            rmsnorm(st, row(op.src, F), View{vectors_[size_t(stage)][o], 0}, C * parts, w / parts, op.eps, row(op.dst, F));
            break;
        }
        case OpKind::MatMul: matmul(st, matrices_[size_t(stage)][o], row(op.src, F), C, row(op.dst, F)); break;
        case OpKind::AddBias: add_bias(st, row(op.dst, F), View{vectors_[size_t(stage)][o], 0}, C, w); break;
        case OpKind::Rope:
            if (op.sliding)
                rope(st, row(op.dst, F), C, uint32_t(op.n_heads), uint32_t(g.hp.head_dim), uint32_t(g.hp_sliding.rope_dim), neox, positions,
                     sliding_cos_, sliding_sin_);
            else
                rope(st, row(op.dst, F), C, uint32_t(op.n_heads), uint32_t(g.hp.head_dim), uint32_t(g.hp.rope_dim), neox, positions, *ctx_.rope_cos,
                     *ctx_.rope_sin);
            break;
        case OpKind::StoreKv: {
            const bool model = op.store == KvStore::Model;
            const Buffer &kc = model ? (*ctx_.kv_k)[size_t(op.kv_layer)] : local_k_;
            const Buffer &vc = model ? (*ctx_.kv_v)[size_t(op.kv_layer)] : local_v_;
            for (const StoreRun &s : rows.stores) {
                const int32_t r0 = std::max(first, s.row), r1 = std::min(first + count, s.row + s.count);
                if (r0 < r1)
                    store_kv(st, row(op.src, uint32_t(r0)), row(op.src2, uint32_t(r0)), uint32_t(r1 - r0) * dkv, kc, vc,
                             uint32_t(s.slot + (r0 - s.row)) * dkv);
            }
            break;
        }
        case OpKind::Attention: attention(op, rows, F, C, how); break;
        case OpKind::SwiGlu: swiglu(st, row(op.dst, F), row(op.src, F), C * w); break;
        case OpKind::Add: add(st, row(op.dst, F), row(op.src, F), C * w); break;
        case OpKind::GeGlu: geglu(st, row(op.dst, F), row(op.src, F), C * w); break;
        case OpKind::Scale: scale(st, row(op.dst, F), op.value, C * w); break;
        case OpKind::SoftCap: soft_cap(st, row(op.dst, F), op.value, C * w); break;
        case OpKind::LayerNorm: layernorm(st, row(op.src, F), View{vectors_[size_t(stage)][o], 0}, C, w, op.eps, row(op.dst, F)); break;
        case OpKind::Gelu: gelu(st, row(op.dst, F), C * w); break;
        case OpKind::Route: route_experts(st, row(op.src, F), C, uint32_t(widths_[size_t(op.src)]), uint32_t(op.top_k), op.norm_weights, row(op.dst, F)); break;
        case OpKind::ExpertMatMul: expert_matmul(op, expert_matrices_[size_t(stage)][o], F, C); break;
        case OpKind::MixExperts: mix_experts(st, row(op.src, F), row(op.src2, F), C, uint32_t(op.top_k), w, row(op.dst, F)); break;
        case OpKind::SigmoidGate: sigmoid_gate(st, row(op.dst, F), row(op.src, F), C, w); break;
        }
    }
    return true;
}

// The routes come back to the host (the recorded work is submitted and waited for), which sorts the batch's slots by
// expert; then each selected expert multiplies its gathered slots once: gather, matmul, scatter. A slot's arithmetic
// is matmul's for one row wherever it lands, so grouping changes no bit.
void VulkanExecutor::expert_matmul(const Op &op, const std::vector<Matrix> &experts, uint32_t first, uint32_t count) {
    Stream &st = *ctx_.stream;
    const uint32_t k = uint32_t(op.top_k), n_experts = uint32_t(op.n_experts), slots = count * k;
    const uint32_t cols = uint32_t(op.experts[0].cols), out_rows = uint32_t(op.experts[0].rows);
    const uint32_t src_width = uint32_t(widths_[size_t(op.src)]), dst_width = uint32_t(widths_[size_t(op.dst)]);
    const bool per_slot = src_width == k * cols;
    host_route_.resize(size_t(slots) * 2);
    const View route = row(op.src2, first);
    st.download(*route.buffer, size_t(route.offset) * 4, host_route_.data(), host_route_.size() * 4);
    st.finish();
    host_slots_.resize(slots);
    group_slots_by_expert(host_route_.data(), int32_t(count), int32_t(k), int32_t(n_experts), moe_start_, host_slots_.data());
    st.upload(moe_slots_, 0, host_slots_.data(), size_t(slots) * 4);
    for (uint32_t e = 0; e < n_experts; ++e) {
        const uint32_t a = uint32_t(moe_start_[e]), n = uint32_t(moe_start_[e + 1]) - a;
        if (n == 0) continue;
        gather_slots(st, row(op.src, first), src_width, View{&moe_slots_, a}, n, k, per_slot, cols, View{&moe_in_, 0});
        matmul(st, experts[e], View{&moe_in_, 0}, n, View{&moe_out_, 0});
        scatter_slots(st, View{&moe_out_, 0}, View{&moe_slots_, a}, n, k, out_rows, row(op.dst, first), dst_width);
    }
}

// Split-K attention over each row's key list (vulkan_ops.h: AttentionRows), merged by log-sum-exp in chunk order.
void VulkanExecutor::attention(const Op &op, const BatchRows &rows, uint32_t first, uint32_t count, const Enqueue &how) {
    const Graph &g = *graph_;
    Stream &st = *ctx_.stream;
    const KeyList &list = rows.lists[size_t(op.keys)];
    const uint32_t dkv = uint32_t(g.hp.n_embd_kv());
    const bool model = op.store == KvStore::Model;
    const Buffer &kc = model ? (*ctx_.kv_k)[size_t(op.kv_layer)] : local_k_;
    const Buffer &vc = model ? (*ctx_.kv_v)[size_t(op.kv_layer)] : local_v_;
    const uint32_t chunk = !list.invariant ? uint32_t(length_split_chunk(list.max_keys)) : model ? ctx_.cache_chunk : local_chunk_;
    const AttentionShape shape = shape_of(g, chunk, op.value);
    AttentionRows ar;
    ar.n = count;
    ar.n_prefix = uint32_t(list.n_prefix);
    ar.max_keys = uint32_t(list.max_keys);
    ar.has_tail = list.tails;
    ar.causal = list.causal;
    ar.ints = View{&ints_, 0};
    ar.tail_start = uint32_t(list.start_at) + first;
    ar.tail_len = uint32_t(list.len_at) + first;
    ar.tail_slots = uint32_t(list.slots_at);
    if (list.window > 0) {
        // A windowed row's keys keep their logical positions: the dispatch covers the chunks from the earliest
        // window's start to the furthest row's last key.
        ar.has_from = true;
        ar.from = uint32_t(list.from_at) + first;
        ar.min_from = UINT32_MAX;
        ar.max_keys = 0;
        for (int32_t i = int32_t(first); i < int32_t(first + count); ++i) {
            ar.min_from = std::min(ar.min_from, uint32_t(rows.run_from(list, i)));
            ar.max_keys = std::max(ar.max_keys, uint32_t(rows.key_end(list, i)));
        }
    }
    const View q = row(op.src, first), out = row(op.dst, first);
    // LongSpec's split tree attention reads the whole mask: not a window's keys.
    const bool hybrid = how.tree_attention == TreeAttention::Hybrid && model && rows.mask != nullptr && list.tails && !list.causal && list.window == 0;
    if (hybrid) {
        require(first == 0, SPECULA_ERR_INTERNAL, "Vulkan: the split form of tree attention runs over a whole batch");
        AttentionRows prefix = ar;
        prefix.max_keys = uint32_t(list.n_prefix);
        prefix.has_tail = false;
        prefix.causal = false;
        attention_chunks(st, q, kc, vc, dkv, prefix, shape, partials_);
        attention_tree(st, q, kc, vc, dkv, count, uint32_t(rows.first_tree_slot), uint32_t(rows.mask_width), mask_, shape, tree_partials_);
        attention_merge(st, partials_, &tree_partials_, prefix, shape, out);
        return;
    }
    attention_chunks(st, q, kc, vc, dkv, ar, shape, partials_);
    attention_merge(st, partials_, nullptr, ar, shape, out);
}

void VulkanExecutor::run(int32_t stage, const BatchRows &rows, float *logits, bool replay) {
    (void)replay;
    upload_rows(rows);
    enqueue(stage, rows, 0, rows.n, Enqueue{});
    if (logits != nullptr)
        ctx_.stream->download(tensors_[size_t(graph_->logits)], 0, logits, size_t(rows.n) * size_t(widths_[size_t(graph_->logits)]) * 4);
    ctx_.stream->finish();  // the next batch rewrites the row data
}

void VulkanExecutor::read_local_kv(KvPart part, int32_t first, int32_t n, void *dst) {
    const size_t row_bytes = size_t(graph_->hp.n_embd_kv()) * 2;
    ctx_.stream->download(part == KvPart::Keys ? local_k_ : local_v_, size_t(first) * row_bytes, dst, size_t(n) * row_bytes);
    ctx_.stream->finish();
}

void VulkanExecutor::write_local_kv(KvPart part, int32_t first, int32_t n, const void *src) {
    const size_t row_bytes = size_t(graph_->hp.n_embd_kv()) * 2;
    ctx_.stream->upload(part == KvPart::Keys ? local_k_ : local_v_, size_t(first) * row_bytes, src, size_t(n) * row_bytes);
    ctx_.stream->finish();
}

}  // namespace specula::internal::vulkan
