// Each graph operation (graph/graph.h) as the CUDA kernels of kernels.h, in the order the graph lists them, on one
// stream. Nothing here waits for the device except upload_rows (before it rewrites its pinned staging) and the
// GraphExecutor calls that bring results back.
#include "backends/cuda/cuda_executor.h"

#include "backend/attention_split.h"
#include "backends/cuda/graph_replay.h"
#include "backends/cuda/kernels/topk.h"
#include "core/error.h"
#include "graph/expert_slots.h"
#include "model/rope.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {
namespace {

constexpr size_t kIntsBytes = size_t(1) << 20;  // row data: enough that a decode step never allocates (graph capture)

AttentionShape shape_of(const Graph &g, int32_t chunk, float softcap = 0.0f) {
    AttentionShape s;
    s.n_head = g.hp.n_head;
    s.n_head_kv = g.hp.n_head_kv;
    s.head_dim = g.hp.head_dim;
    s.scale = g.attention_scale;
    s.chunk = chunk;
    s.softcap = softcap;
    return s;
}

void upload_table(const std::vector<float> &t, DeviceBuffer &buffer) {
    buffer = DeviceBuffer(t.size() * 4);
    check(cudaMemcpy(buffer.as(), t.data(), t.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy (RoPE table)");
}

size_t partials_bytes(const Graph &g, int32_t rows, const CudaContext &ctx, int32_t local_chunk) {
    size_t floats = 0;
    const size_t by_length = size_t(rows) * size_t(g.hp.n_head) * size_t(kMaxLengthChunks + 1) * size_t(g.hp.head_dim + 2);
    for (const std::vector<Op> &stage : g.stages)
        for (const Op &op : stage) {
            if (op.kind != OpKind::Attention) continue;
            const bool model = op.store == KvStore::Model;
            const int32_t slots = model ? ctx.n_ctx : g.local_kv_slots;
            floats = std::max({floats, by_length, attention_partials_floats(shape_of(g, model ? ctx.cache_chunk : local_chunk), rows, slots)});
        }
    return floats * 4;
}

size_t gemm_bytes(const Graph &g, int32_t rows) {
    size_t bytes = 256;
    for (const Graph::WeightUse &u : g.weights())
        if (u.matrix) bytes = std::max(bytes, gemm_scratch_bytes(DeviceUploads::layout(*u.w), rows));
    return bytes;
}

}  // namespace

bool CudaExecutor::supports(const Op &op) {
    switch (op.kind) {
    case OpKind::Embed:
    case OpKind::RmsNorm:
    case OpKind::MatMul:
    case OpKind::AddBias:
    case OpKind::StoreKv:
    case OpKind::SwiGlu:
    case OpKind::Add:
    case OpKind::Rope:
    case OpKind::Attention:
    case OpKind::GeGlu:
    case OpKind::Scale:
    case OpKind::SoftCap:
    case OpKind::LayerNorm:
    case OpKind::Gelu: return true;
    case OpKind::Route:
    case OpKind::ExpertMatMul:
    case OpKind::MixExperts:
    case OpKind::SigmoidGate: return true;
    }
    return false;
}

bool CudaExecutor::replayable(const Graph &graph) {
    for (const std::vector<Op> &stage : graph.stages)
        for (const Op &op : stage)
            if (op.kind == OpKind::ExpertMatMul) return false;
    return true;
}

size_t CudaExecutor::bytes_needed(const Graph &g, int32_t max_rows, const CudaContext &ctx) {
    const int32_t local_chunk = fixed_split_chunk(std::max(1, g.local_kv_slots));
    return g.activation_bytes(max_rows) + gemm_bytes(g, max_rows) + partials_bytes(g, max_rows, ctx, local_chunk) +
           size_t(max_rows) * size_t(g.hp.n_head) * size_t(g.hp.head_dim + 2) * 4 + kIntsBytes +
           2 * size_t(g.local_kv_slots) * size_t(g.hp.n_embd_kv()) * 2 + expert_scratch_bytes(g, max_rows);
}

CudaExecutor::CudaExecutor(std::shared_ptr<const Graph> graph, int32_t max_rows, const CudaContext &context)
    : graph_(std::move(graph)), ctx_(context), max_rows_(max_rows) {
    const Graph &g = *graph_;
    require(g.hp.head_dim <= 256, SPECULA_ERR_UNSUPPORTED, "CUDA: head_dim " + std::to_string(g.hp.head_dim) + " > 256 is not supported");
    for (const std::vector<Op> &stage : g.stages)
        for (const Op &op : stage)
            require(supports(op), SPECULA_ERR_UNSUPPORTED, std::string("CUDA: the operation '") + op_kind_name(op.kind) + "' is not implemented");
    check(cudaSetDevice(ctx_.device), "cudaSetDevice");
    if (const char *env = std::getenv("SPECULA_CUDA_DEVICE_TOPK")) device_topk_ = std::strcmp(env, "0") != 0;

    // Weights: the runner's model holds the target's; anything else (a draft's layer) is copied here, once.
    matrices_ = per_op<DeviceMatrix>(g, [&](const Op &op) {
        if (op.weight == nullptr || !*op.weight || !reads_matrix(op)) return DeviceMatrix{};
        const DeviceMatrix *shared = ctx_.weights ? ctx_.weights->matrix(*op.weight) : nullptr;
        return shared ? *shared : own_.matrix(*op.weight);
    });
    vectors_ = per_op<const float *>(g, [&](const Op &op) -> const float * {
        if (op.weight == nullptr || !*op.weight || reads_matrix(op)) return nullptr;
        const float *shared = ctx_.weights ? ctx_.weights->floats(*op.weight) : nullptr;
        return shared ? shared : own_.floats(*op.weight);
    });

    expert_matrices_ = per_op<std::vector<DeviceMatrix>>(g, [&](const Op &op) {
        std::vector<DeviceMatrix> experts;
        for (int32_t e = 0; e < op.n_experts; ++e) {
            const DeviceMatrix *shared = ctx_.weights ? ctx_.weights->matrix(op.experts[e]) : nullptr;
            experts.push_back(shared ? *shared : own_.matrix(op.experts[e]));
        }
        return experts;
    });
    if (const ExpertShape shape = expert_shape(g); shape.top_k > 0) {
        // One expert's gathered inputs and outputs (at most max_rows slots: a row picks an expert once).
        const size_t floats = size_t(max_rows_) * size_t(shape.widest), slots = size_t(max_rows_) * size_t(shape.top_k);
        moe_in_ = DeviceBuffer(floats * 4);
        moe_out_ = DeviceBuffer(floats * 4);
        moe_slots_ = DeviceBuffer(slots * 4);
        host_route_.reserve(slots * 2 * 4);
        host_slots_.reserve(slots * 4);
        moe_start_.reserve(size_t(shape.n_experts) + 1);
        ctx_.graphs = false;  // its stages read routes back mid-stage: never captured (replayable())
    }
    for (const GraphTensor &t : g.tensors) {
        tensors_.emplace_back(size_t(max_rows_) * size_t(t.width) * 4);
        widths_.push_back(t.width);
    }
    if (g.local_kv_slots > 0) {
        local_chunk_ = fixed_split_chunk(g.local_kv_slots);
        const size_t bytes = size_t(g.local_kv_slots) * size_t(g.hp.n_embd_kv()) * 2;
        local_k_ = DeviceBuffer(bytes);
        local_v_ = DeviceBuffer(bytes);
        check(cudaMemset(local_k_.as(), 0, bytes), "cudaMemset");
        check(cudaMemset(local_v_.as(), 0, bytes), "cudaMemset");
    }
    // RoPE: the runner's tables when the graph rotates as the runner's model does (LongSpec's layer), else its own.
    if (ctx_.rope_hp == nullptr || !same_rope_angles(g.hp, g.rope_freq_factors, *ctx_.rope_hp, *ctx_.rope_freq_factors)) {
        std::vector<float> cos_t, sin_t;
        rope_table(g.hp, g.rope_freq_factors, ctx_.n_ctx, cos_t, sin_t);
        upload_table(cos_t, rope_cos_);
        upload_table(sin_t, rope_sin_);
        ctx_.rope_cos = rope_cos_.as<float>();
        ctx_.rope_sin = rope_sin_.as<float>();
    }
    // Sliding-window layers rotate with their own settings (gemma3: base 1e4 and no scaling), without frequency factors.
    if (g.sliding_rope) {
        std::vector<float> cos_t, sin_t;
        rope_table(g.hp_sliding, {}, ctx_.n_ctx, cos_t, sin_t);
        upload_table(cos_t, sliding_cos_);
        upload_table(sin_t, sliding_sin_);
    }
    gemm_scratch_ = DeviceBuffer(gemm_bytes(g, max_rows_));
    partials_ = DeviceBuffer(std::max<size_t>(partials_bytes(g, max_rows_, ctx_, local_chunk_), 16));
    tree_partials_ = DeviceBuffer(size_t(max_rows_) * size_t(g.hp.n_head) * size_t(g.hp.head_dim + 2) * 4);
    ints_capacity_ = kIntsBytes;
    ints_ = DeviceBuffer(ints_capacity_);
    host_ints_.reserve(ints_capacity_);
    if (g.logits >= 0) {
        topk_ = DeviceBuffer(size_t(max_rows_) * size_t(kTopkMaxK) * 8);
        host_out_bytes_ = std::max(size_t(max_rows_) * size_t(widths_[size_t(g.logits)]) * 4, topk_.bytes());
        host_out_.reserve(host_out_bytes_);
    }
}

CudaExecutor::~CudaExecutor() {
    cudaSetDevice(ctx_.device);
    for (auto &[key, exec] : replays_)
        if (exec != nullptr) cudaGraphExecDestroy(exec);
    (void)cudaGetLastError();
}

size_t CudaExecutor::device_bytes() const {
    size_t total = 0;
    for (const DeviceBuffer &t : tensors_) total += t.bytes();
    for (const DeviceBuffer *b : {&local_k_, &local_v_, &rope_cos_, &rope_sin_, &sliding_cos_, &sliding_sin_, &gemm_scratch_, &partials_, &tree_partials_, &ints_, &mask_, &topk_}) total += b->bytes();
    return total;
}

size_t CudaExecutor::allocated_bytes() const { return device_bytes() + own_.bytes() + ints_capacity_ + host_out_bytes_; }

void CudaExecutor::upload_rows(const BatchRows &rows, bool capturing) {
    const size_t bytes = rows.ints.size() * sizeof(int32_t);
    require(rows.n <= max_rows_, SPECULA_ERR_INTERNAL, "CUDA: a batch larger than the executor was made for");
    if (!capturing) check(cudaStreamSynchronize(ctx_.stream), "forward pass");  // the pinned staging is about to be rewritten
    if (bytes > ints_capacity_) {
        require(!capturing, SPECULA_ERR_INTERNAL, "CUDA: row data outgrew its buffer during a capture");
        // Grown buffers move: drop the recorded graphs that point at the old one.
        for (auto &[key, exec] : replays_)
            if (exec != nullptr) cudaGraphExecDestroy(exec);
        replays_.clear();
        ints_capacity_ = std::max(bytes, 2 * ints_capacity_);
        ints_ = DeviceBuffer(ints_capacity_);
        host_ints_.reserve(ints_capacity_);
    }
    std::memcpy(host_ints_.as(), rows.ints.data(), bytes);
    check(cudaMemcpyAsync(ints_.as(), host_ints_.as(), bytes, cudaMemcpyHostToDevice, ctx_.stream), "cudaMemcpyAsync (rows)");
    if (rows.mask != nullptr) {
        // Only LongSpec's split form of tree attention reads it (TreeAttention::Hybrid, never captured).
        const size_t mask_bytes = size_t(rows.n) * size_t(rows.mask_width);
        if (mask_.bytes() < mask_bytes) mask_ = DeviceBuffer(mask_bytes);
        host_mask_.reserve(mask_bytes);
        std::memcpy(host_mask_.as(), rows.mask, mask_bytes);
        check(cudaMemcpyAsync(mask_.as(), host_mask_.as(), mask_bytes, cudaMemcpyHostToDevice, ctx_.stream), "cudaMemcpyAsync (mask)");
    }
}

bool CudaExecutor::enqueue(int32_t stage, const BatchRows &rows, int32_t first, int32_t count, const Enqueue &how) {
    const Graph &g = *graph_;
    cudaStream_t st = ctx_.stream;
    const int32_t *d_ints = ints_.as<int32_t>();
    const int32_t *d_tokens = d_ints + first, *d_positions = d_ints + rows.n + first;
    const bool neox = g.hp.rope_type == RopeType::Neox;
    const size_t dkv = size_t(g.hp.n_embd_kv());
    const std::vector<Op> &ops = g.stages[size_t(stage)];
    // Long causal batches (a prompt) multiply through cuBLAS; decoded tokens and trees never do (prefill_gemm.h).
    const bool cublas = how.cublas != nullptr && count >= PrefillGemm::kMinRows;
    int32_t block = -2;
    for (size_t o = 0; o < ops.size(); ++o) {
        const Op &op = ops[o];
        if (op.block != block) {
            block = op.block;
            if (how.cancel != nullptr && how.cancel->load(std::memory_order_relaxed)) return false;
        }
        const int32_t w = op.dst >= 0 ? widths_[size_t(op.dst)] : 0;
        switch (op.kind) {
        case OpKind::Embed: embed(matrices_[size_t(stage)][o], d_tokens, count, row(op.dst, first), st); break;
        case OpKind::RmsNorm: {  // a row of n_heads parts is n_heads rows of one part each
            const int32_t parts = std::max(1, op.n_heads);
            rmsnorm(row(op.src, first), vectors_[size_t(stage)][o], count * parts, w / parts, op.eps, row(op.dst, first), st);
            break;
        }
        case OpKind::MatMul:
            if (cublas) how.cublas->gemm(matrices_[size_t(stage)][o], row(op.src, first), count, row(op.dst, first), gemm_scratch_.as(), st);
            else gemm(matrices_[size_t(stage)][o], row(op.src, first), count, row(op.dst, first), gemm_scratch_.as(), st);
            break;
        case OpKind::AddBias: add_bias(row(op.dst, first), vectors_[size_t(stage)][o], count, w, st); break;
        case OpKind::Rope:
            if (op.sliding)
                rope(row(op.dst, first), count, op.n_heads, g.hp.head_dim, g.hp_sliding.rope_dim, neox, d_positions, sliding_cos_.as<float>(),
                     sliding_sin_.as<float>(), st);
            else
                rope(row(op.dst, first), count, op.n_heads, g.hp.head_dim, g.hp.rope_dim, neox, d_positions, ctx_.rope_cos, ctx_.rope_sin, st);
            break;
        case OpKind::StoreKv: {
            __half *kc = op.store == KvStore::Model ? ctx_.kv_k + size_t(op.kv_layer) * size_t(ctx_.n_ctx) * dkv : local_k_.as<__half>();
            __half *vc = op.store == KvStore::Model ? ctx_.kv_v + size_t(op.kv_layer) * size_t(ctx_.n_ctx) * dkv : local_v_.as<__half>();
            for (const StoreRun &s : rows.stores) {
                const int32_t r0 = std::max(first, s.row), r1 = std::min(first + count, s.row + s.count);
                if (r0 < r1) store_kv(row(op.src, r0), row(op.src2, r0), r1 - r0, int32_t(dkv), kc, vc, s.slot + (r0 - s.row), st);
            }
            break;
        }
        case OpKind::Attention: attention(op, rows, first, count, how); break;
        case OpKind::SwiGlu: swiglu(row(op.dst, first), row(op.src, first), int64_t(count) * w, st); break;
        case OpKind::Add: add(row(op.dst, first), row(op.src, first), int64_t(count) * w, st); break;
        case OpKind::GeGlu: geglu(row(op.dst, first), row(op.src, first), int64_t(count) * w, st); break;
        case OpKind::Scale: scale(row(op.dst, first), op.value, int64_t(count) * w, st); break;
        case OpKind::SoftCap: soft_cap(row(op.dst, first), op.value, int64_t(count) * w, st); break;
        case OpKind::LayerNorm: layernorm(row(op.src, first), vectors_[size_t(stage)][o], count, w, op.eps, row(op.dst, first), st); break;
        case OpKind::Gelu: gelu(row(op.dst, first), int64_t(count) * w, st); break;
        case OpKind::Route: route_experts(row(op.src, first), count, widths_[size_t(op.src)], op.top_k, op.norm_weights, row(op.dst, first), st); break;
        case OpKind::ExpertMatMul: expert_matmul(op, expert_matrices_[size_t(stage)][o], first, count); break;
        case OpKind::MixExperts: mix_experts(row(op.src, first), row(op.src2, first), count, op.top_k, w, row(op.dst, first), st); break;
        case OpKind::SigmoidGate: sigmoid_gate(row(op.dst, first), row(op.src, first), count, w, st); break;
        }
    }
    return true;
}

// Split-K attention over each row's key list (kernels.h: AttentionRows), merged by log-sum-exp in chunk order.
void CudaExecutor::attention(const Op &op, const BatchRows &rows, int32_t first, int32_t count, const Enqueue &how) {
    const Graph &g = *graph_;
    cudaStream_t st = ctx_.stream;
    const KeyList &list = rows.lists[size_t(op.keys)];
    const int32_t dkv = g.hp.n_embd_kv();
    const bool model = op.store == KvStore::Model;
    const __half *kc = model ? ctx_.kv_k + size_t(op.kv_layer) * size_t(ctx_.n_ctx) * size_t(dkv) : local_k_.as<__half>();
    const __half *vc = model ? ctx_.kv_v + size_t(op.kv_layer) * size_t(ctx_.n_ctx) * size_t(dkv) : local_v_.as<__half>();
    const int32_t chunk = !list.invariant ? length_split_chunk(list.max_keys) : model ? ctx_.cache_chunk : local_chunk_;
    const AttentionShape shape = shape_of(g, chunk, op.value);
    const int32_t *d_ints = ints_.as<int32_t>();
    AttentionRows ar;
    ar.n = count;
    ar.n_prefix = list.n_prefix;
    ar.max_keys = list.max_keys;
    if (list.tails) {
        ar.tail_start = d_ints + list.start_at + first;
        ar.tail_len = d_ints + list.len_at + first;
        ar.tail_slots = list.causal ? nullptr : d_ints + list.slots_at;
    }
    if (list.window > 0) {
        // A windowed row's keys keep their logical positions (kernels.h): the launch covers the chunks from the
        // earliest window's start to the furthest row's last key.
        ar.from = d_ints + list.from_at + first;
        ar.min_from = INT32_MAX;
        ar.max_keys = 0;
        for (int32_t i = first; i < first + count; ++i) {
            ar.min_from = std::min(ar.min_from, rows.run_from(list, i));
            ar.max_keys = std::max(ar.max_keys, rows.key_end(list, i));
        }
    }
    float *q = row(op.src, first), *out = row(op.dst, first);
    // LongSpec's split tree attention reads the whole mask: not a window's keys.
    const bool hybrid = how.tree_attention == TreeAttention::Hybrid && model && rows.mask != nullptr && list.tails && !list.causal && list.window == 0;
    if (hybrid) {
        AttentionRows prefix = ar;
        prefix.max_keys = list.n_prefix;
        prefix.tail_start = prefix.tail_len = prefix.tail_slots = nullptr;
        attention_chunks(q, kc, vc, dkv, prefix, shape, partials_.as<float>(), st);
        attention_tree(q, kc, vc, dkv, count, rows.first_tree_slot, rows.mask_width, mask_.as<uint8_t>() + size_t(first) * size_t(rows.mask_width), shape,
                       tree_partials_.as<float>(), st);
        attention_merge(partials_.as<float>(), tree_partials_.as<float>(), prefix, shape, out, nullptr, st);
        return;
    }
    attention_chunks(q, kc, vc, dkv, ar, shape, partials_.as<float>(), st);
    attention_merge(partials_.as<float>(), nullptr, ar, shape, out, nullptr, st);
}

// The routes come back to the host (one wait per expert operation: such a graph is never captured), which sorts the
// batch's slots by expert, then each selected expert multiplies its gathered slots once: gather, the batch-invariant
// gemm, scatter. A slot's arithmetic is gemm's for one row wherever it lands, so grouping changes no bit.
void CudaExecutor::expert_matmul(const Op &op, const std::vector<DeviceMatrix> &experts, int32_t first, int32_t count) {
    cudaStream_t st = ctx_.stream;
    const int32_t k = op.top_k, n_experts = op.n_experts, slots = count * k;
    const int32_t cols = int32_t(op.experts[0].cols), out_rows = int32_t(op.experts[0].rows);
    const int32_t src_width = widths_[size_t(op.src)], dst_width = widths_[size_t(op.dst)];
    const bool per_slot = src_width == k * cols;
    float *route = host_route_.as<float>();
    check(cudaMemcpyAsync(route, row(op.src2, first), size_t(slots) * 2 * 4, cudaMemcpyDeviceToHost, st), "cudaMemcpyAsync (routes)");
    check(cudaStreamSynchronize(st), "expert routes");
    int32_t *grouped = host_slots_.as<int32_t>();
    group_slots_by_expert(route, count, k, n_experts, moe_start_, grouped);
    int32_t *d_slots = moe_slots_.as<int32_t>();
    check(cudaMemcpyAsync(d_slots, grouped, size_t(slots) * 4, cudaMemcpyHostToDevice, st), "cudaMemcpyAsync (expert slots)");
    for (int32_t e = 0; e < n_experts; ++e) {
        const int32_t a = moe_start_[size_t(e)], n = moe_start_[size_t(e) + 1] - a;
        if (n == 0) continue;
        gather_slots(row(op.src, first), src_width, d_slots + a, n, k, per_slot, cols, moe_in_.as<float>(), st);
        gemm(experts[size_t(e)], moe_in_.as<float>(), n, moe_out_.as<float>(), gemm_scratch_.as(), st);
        scatter_slots(moe_out_.as<float>(), d_slots + a, n, k, out_rows, row(op.dst, first), dst_width, st);
    }
}

void CudaExecutor::enqueue_stage(int32_t stage, const BatchRows &rows, int32_t k, bool replay) {
    const auto body = [&] {
        enqueue(stage, rows, 0, rows.n, Enqueue{});
        if (k > 0) {
            const size_t pairs = size_t(rows.n) * size_t(k);
            float *d_logp = topk_.as<float>();
            int32_t *d_ids = reinterpret_cast<int32_t *>(d_logp + pairs);
            const int32_t n_vocab = widths_[size_t(graph_->logits)];
            row_topk(row(graph_->logits, 0), rows.n, n_vocab, n_vocab, k, d_logp, d_ids, nullptr, ctx_.stream);
        }
    };
    if (!replay || !ctx_.graphs) {
        body();
        return;
    }
    // What can change the recorded graph's topology: no key/value stored (a root-only level), a key list without
    // keys (an empty target prefix: no attention chunks), the top-k. One instantiated graph per such topology;
    // the row count and the lists' lengths change only kernel arguments and grid sizes, which an update accepts.
    bool empty_list = false;
    for (const KeyList &l : rows.lists) empty_list = empty_list || l.max_keys == 0;
    const uint32_t key = uint32_t(stage) << 3 | (rows.stores.empty() ? 1u : 0u) | (empty_list ? 2u : 0u) | (k > 0 ? 4u : 0u);
    launch_as_graph(ctx_.stream, replays_[key], body);
}

void CudaExecutor::run(int32_t stage, const BatchRows &rows, float *logits, bool replay) {
    check(cudaSetDevice(ctx_.device), "cudaSetDevice");
    upload_rows(rows, false);
    enqueue_stage(stage, rows, 0, replay);
    if (logits == nullptr) return;  // the next upload waits for the stream
    const size_t bytes = size_t(rows.n) * size_t(widths_[size_t(graph_->logits)]) * 4;
    check(cudaMemcpyAsync(host_out_.as(), row(graph_->logits, 0), bytes, cudaMemcpyDeviceToHost, ctx_.stream), "cudaMemcpyAsync (logits)");
    check(cudaStreamSynchronize(ctx_.stream), "graph stage");
    std::memcpy(logits, host_out_.as(), bytes);
}

bool CudaExecutor::run_top_k(int32_t stage, const BatchRows &rows, int32_t k, float *logp, int32_t *ids, bool replay) {
    if (!device_topk_ || k < 1 || k > kTopkMaxK || graph_->logits < 0) return false;
    check(cudaSetDevice(ctx_.device), "cudaSetDevice");
    upload_rows(rows, false);
    enqueue_stage(stage, rows, k, replay);
    const size_t pairs = size_t(rows.n) * size_t(k);
    check(cudaMemcpyAsync(host_out_.as(), topk_.as(), pairs * 8, cudaMemcpyDeviceToHost, ctx_.stream), "cudaMemcpyAsync (candidates)");
    check(cudaStreamSynchronize(ctx_.stream), "graph stage");
    std::memcpy(logp, host_out_.as(), pairs * 4);
    std::memcpy(ids, static_cast<const char *>(host_out_.as()) + pairs * 4, pairs * 4);
    return true;
}

// The store's F16 rows are copied through the stream (snapshots are rare: no pinned staging).
void CudaExecutor::read_local_kv(KvPart part, int32_t first, int32_t n, void *dst) {
    const size_t row = size_t(graph_->hp.n_embd_kv()) * 2;
    check(cudaSetDevice(ctx_.device), "cudaSetDevice");
    check(cudaStreamSynchronize(ctx_.stream), "store read");
    const uint8_t *src = (part == KvPart::Keys ? local_k_ : local_v_).as<uint8_t>() + size_t(first) * row;
    check(cudaMemcpy(dst, src, size_t(n) * row, cudaMemcpyDeviceToHost), "cudaMemcpy (store)");
}

void CudaExecutor::write_local_kv(KvPart part, int32_t first, int32_t n, const void *src) {
    const size_t row = size_t(graph_->hp.n_embd_kv()) * 2;
    check(cudaSetDevice(ctx_.device), "cudaSetDevice");
    check(cudaStreamSynchronize(ctx_.stream), "store write");
    uint8_t *dst = (part == KvPart::Keys ? local_k_ : local_v_).as<uint8_t>() + size_t(first) * row;
    check(cudaMemcpy(dst, src, size_t(n) * row, cudaMemcpyHostToDevice), "cudaMemcpy (store)");
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
