// The Vulkan runner: the model's graph (graph/model_graph.h) on the Vulkan executor. The architecture is not
// written here; a runner plans each batch's rows (graph/batch_rows.h), slices batches to its buffers (kMaxRows rows)
// and keeps a tree's final states for the rows a verifier visits.
#include "backends/vulkan/vulkan_runner.h"

#include "backend/attention_split.h"
#include "backend/kv_shift.h"
#include "core/log.h"
#include "graph/model_graph.h"
#include "model/model.h"
#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace specula::internal::vulkan {
namespace {

constexpr size_t kMiB = size_t(1) << 20;
std::string mib(size_t bytes) { return std::to_string((bytes + kMiB - 1) / kMiB) + " MiB"; }

}  // namespace

VulkanRunner::VulkanRunner(std::shared_ptr<const Model> model, int32_t n_ctx, std::shared_ptr<Device> device, std::shared_ptr<const Graph> graph)
    : model_(std::move(model)), device_(std::move(device)), n_ctx_(n_ctx) {
    const HParams &hp = model_->hparams();
    require_supported_head_dim(hp.head_dim);
    require(n_ctx > 0, SPECULA_ERR_INVALID_ARGUMENT, "Vulkan: n_ctx must be positive");
    if (!graph) graph = build_model_graph(model_, n_ctx);
    chunk_ = vulkan::attention_chunk(AttentionShape{uint32_t(hp.n_head), uint32_t(hp.n_head_kv), uint32_t(hp.head_dim), 0, 1.0f}, uint32_t(fixed_split_chunk(n_ctx)));

    // Sizes first, so that a device without room is refused, with the sizes, before anything is allocated.
    const size_t dkv = size_t(hp.n_embd_kv()), n_vocab = size_t(hp.n_vocab);
    const size_t kv_layer = size_t(n_ctx) * dkv * 2;
    const size_t kv_total = 2 * size_t(hp.n_layer) * kv_layer;
    const size_t rope_bytes = size_t(n_ctx) * size_t(std::max(1, hp.rope_dim / 2)) * 4;
    VulkanContext sizing;
    sizing.n_ctx = n_ctx;
    sizing.cache_chunk = chunk_;
    const size_t scratch = VulkanExecutor::bytes_needed(*graph, kMaxRows, sizing) + 2 * rope_bytes;
    const size_t session_bytes = kv_total + scratch;
    const size_t weights_bytes = Weights::bytes_needed(*graph);
    const size_t free_b = device_->free_memory();
    const std::string where = "device " + std::to_string(device_->index()) + " (" + device_->name() + ") has " + mib(free_b) + " free of " +
                              mib(device_->total_memory());
    if (session_bytes + weights_bytes > free_b) {
        const std::string detail = "Vulkan: not enough device memory: the KV cache (" + mib(kv_total) + " for n_ctx " + std::to_string(n_ctx) +
                                   ") and scratch need " + mib(session_bytes) + ", the weights " + mib(weights_bytes) + ", and " + where;
        require(session_bytes <= free_b, SPECULA_ERR_OUT_OF_MEMORY, detail);
    }
    const size_t max_range = device_->limits().maxStorageBufferRange;
    const size_t partials = attention_partials_floats(AttentionShape{uint32_t(hp.n_head), uint32_t(hp.n_head_kv), uint32_t(hp.head_dim), chunk_, 1.0f},
                                                      kMaxRows, uint32_t(n_ctx)) * 4;
    require(kv_layer <= max_range && partials <= max_range && size_t(kMaxRows) * n_vocab * 4 <= max_range, SPECULA_ERR_UNSUPPORTED,
            "Vulkan: one layer's KV cache (" + mib(kv_layer) + " for n_ctx " + std::to_string(n_ctx) + ") or the logits of a batch exceed this device's " +
                "largest storage buffer (" + mib(max_range) + ")");

    stream_ = std::make_unique<Stream>(device_);
    weights_ = Weights::get(*model_, *graph, *stream_);
    const auto buf = [&](size_t bytes, const char *what) { return Buffer(device_, std::max<size_t>(bytes, 16), Buffer::Kind::Device, what); };
    for (int32_t il = 0; il < hp.n_layer; ++il) {
        kv_k_.push_back(buf(kv_layer, "the KV cache"));
        kv_v_.push_back(buf(kv_layer, "the KV cache"));
        stream_->fill_zero(kv_k_.back());
        stream_->fill_zero(kv_v_.back());
    }

    // RoPE angles for every position, computed by the core's reference code.
    std::vector<float> cos_t, sin_t;
    rope_table(hp, graph->rope_freq_factors, n_ctx, cos_t, sin_t);
    rope_cos_ = buf(rope_bytes, "RoPE tables");
    rope_sin_ = buf(rope_bytes, "RoPE tables");
    stream_->upload(rope_cos_, 0, cos_t.data(), rope_bytes);
    stream_->upload(rope_sin_, 0, sin_t.data(), rope_bytes);
    stream_->finish();
    exec_ = std::make_unique<VulkanExecutor>(std::move(graph), kMaxRows, context());
}

VulkanContext VulkanRunner::context() const {
    VulkanContext c;
    c.stream = stream_.get();
    c.kv_k = &kv_k_;
    c.kv_v = &kv_v_;
    c.n_ctx = n_ctx_;
    c.rope_cos = &rope_cos_;
    c.rope_sin = &rope_sin_;
    c.rope_hp = &model_->hparams();
    c.rope_freq_factors = &model_->weights().rope_freq_factors_for(model_->hparams(), n_ctx_);
    c.cache_chunk = chunk_;
    c.weights = weights_;
    return c;
}

std::unique_ptr<GraphExecutor> VulkanRunner::make_executor(const ExecutorRequest &request) {
    return std::make_unique<VulkanExecutor>(request.graph, request.max_rows, context());
}

VulkanRunner::~VulkanRunner() {
    try {
        if (stream_) stream_->finish();
    } catch (...) {
    }
}

int32_t VulkanRunner::kv_width() const { return model_->hparams().n_embd_kv(); }

size_t VulkanRunner::kv_bytes() const {
    size_t total = 0;
    for (const Buffer &b : kv_k_) total += b.bytes();
    for (const Buffer &b : kv_v_) total += b.bytes();
    return total;
}

size_t VulkanRunner::session_device_bytes() const {
    size_t total = kv_bytes() + exec_->device_bytes();
    for (const Buffer *b : {&rope_cos_, &rope_sin_, &hidden_}) total += b->bytes();
    return total;
}

bool VulkanRunner::evaluate(const int32_t *tokens, int32_t n, int32_t n_past, float *logits, bool all_logits) {
    return forward(tokens, n, n_past, nullptr, Output::HostLogits, logits, all_logits);
}

bool VulkanRunner::evaluate_tree(const int32_t *tokens, int32_t n, int32_t n_past, int32_t tree_offset, const int32_t *positions, const uint8_t *mask,
                             float *logits) {
    const TreeBatch tree{tree_offset, positions, mask, tree_offset + n};
    return forward(tokens, n, n_past, &tree, logits ? Output::HostLogits : Output::KeepHidden, logits, true);
}

bool VulkanRunner::forward(const int32_t *tokens, int32_t n, int32_t n_past, const TreeBatch *tree, Output output, float *logits, bool all_logits) {
    const int32_t n_vocab = model_->hparams().n_vocab;
    if (n <= 0) return true;
    if (output == Output::KeepHidden) {
        const size_t bytes = size_t(n) * size_t(model_->hparams().n_embd) * 4;
        if (hidden_.bytes() < bytes) {
            stream_->finish();
            hidden_ = Buffer(device_, std::max(bytes, 2 * hidden_.bytes()), Buffer::Kind::Device, "tree hidden states");
        }
        hidden_rows_ = n;
    }
    for (int32_t a = 0; a < n; a += kMaxRows) {
        const int32_t m = std::min(kMaxRows, n - a);
        const bool last = a + m == n;
        TreeBatch sub{};
        if (tree) sub = TreeBatch{tree->offset + a, tree->positions + a, tree->mask + size_t(a) * size_t(tree->mask_stride), tree->mask_stride};
        float *dst = nullptr;
        if (output == Output::HostLogits) dst = all_logits ? logits + size_t(a) * size_t(n_vocab) : (last ? logits : nullptr);
        const Output out = last || all_logits ? output : Output::None;
        // A causal batch continues at slot n_past + a; a tree keeps n_past and moves its offset.
        if (!enqueue_batch(tokens + a, m, tree ? n_past : n_past + a, tree ? &sub : nullptr, a, out, all_logits, dst)) return false;
        stream_->finish();
    }
    return true;
}

bool VulkanRunner::enqueue_batch(const int32_t *tokens, int32_t m, int32_t n_past, const TreeBatch *tree, int32_t first_row, Output output,
                                 bool all_logits, float *logits) {
    const HParams &hp = model_->hparams();
    Stream &st = *stream_;
    const uint32_t d = uint32_t(hp.n_embd), n_vocab = uint32_t(hp.n_vocab), M = uint32_t(m);
    const int32_t window = exec_->graph().sliding_window;
    if (tree) plan_tree_rows(rows_, tokens, m, n_past, tree->offset, tree->positions, tree->mask, tree->mask_stride, window);
    else plan_causal_rows(rows_, tokens, m, n_past, window);
    if (tree_attention_ != TreeAttention::Hybrid) rows_.mask = nullptr;  // only the split form reads it
    exec_->upload_rows(rows_);
    VulkanExecutor::Enqueue how;
    how.tree_attention = tree_attention_;
    how.cancel = cancel_flag();
    how.submit_per_layer = m > 1;
    if (!exec_->enqueue(kBodyStage, rows_, 0, m, how)) return false;

    // Output head: all rows, or the last one.
    if (output == Output::None) return true;
    const Graph &g = exec_->graph();
    const uint32_t first = all_logits || output == Output::KeepHidden ? 0 : M - 1;
    const uint32_t out_rows = M - first;
    if (output == Output::KeepHidden) {
        st.copy(exec_->buffer(g.hidden), 0, hidden_, size_t(first_row) * d * 4, size_t(out_rows) * d * 4);
        return true;
    }
    exec_->enqueue(kHeadStage, rows_, int32_t(first), int32_t(out_rows), VulkanExecutor::Enqueue{});
    st.download(exec_->buffer(g.logits), size_t(first) * n_vocab * 4, logits, size_t(out_rows) * n_vocab * 4);
    return true;
}

void VulkanRunner::tree_logits(int32_t i, float *logits) {
    require(i >= 0 && i < hidden_rows_, SPECULA_ERR_INTERNAL, "Vulkan: tree_logits row out of range");
    const HParams &hp = model_->hparams();
    const Graph &g = exec_->graph();
    stream_->copy(hidden_, size_t(i) * size_t(hp.n_embd) * 4, exec_->buffer(g.hidden), 0, size_t(hp.n_embd) * 4);
    exec_->enqueue(kHeadStage, rows_, 0, 1, VulkanExecutor::Enqueue{});
    stream_->download(exec_->buffer(g.logits), 0, logits, size_t(hp.n_vocab) * 4);
    stream_->finish();
}

void VulkanRunner::commit_tree_path(int32_t n_past, const int32_t *nodes, int32_t n) {
    if (n <= 0) return;
    std::vector<int32_t> moves;
    // In path order: a later move may read a slot an earlier one left, never one it wrote (nodes[i] >= i).
    for (int32_t i = 0; i < n; ++i)
        if (nodes[i] != i) {
            moves.push_back(n_past + nodes[i]);
            moves.push_back(n_past + i);
        }
    if (moves.empty()) return;
    // The moves go through the executor's row data buffer (no batch is in flight between rounds).
    BatchRows &staging = rows_;
    staging.reset(0);
    staging.ints = moves;
    exec_->upload_rows(staging);
    for (size_t il = 0; il < kv_k_.size(); ++il)
        copy_slots(*stream_, kv_k_[il], kv_v_[il], exec_->rows_view(), uint32_t(moves.size() / 2), uint32_t(kv_width()));
    stream_->finish();
}

void VulkanRunner::shift_kv(int32_t keep, int32_t discard, int32_t n_used) {
    shift_kv_rows(*this, model_->hparams(), model_->weights().rope_freq_factors_for(model_->hparams(), n_ctx_), keep, discard, n_used);
}

void VulkanRunner::read_kv(int32_t layer, KvPart part, int32_t first, int32_t n, void *dst) {
    const size_t row = size_t(kv_width()) * 2;
    stream_->download((part == KvPart::Keys ? kv_k_ : kv_v_)[size_t(layer)], size_t(first) * row, dst, size_t(n) * row);
    stream_->finish();
}

void VulkanRunner::write_kv(int32_t layer, KvPart part, int32_t first, int32_t n, const void *src) {
    const size_t row = size_t(kv_width()) * 2;
    stream_->upload((part == KvPart::Keys ? kv_k_ : kv_v_)[size_t(layer)], size_t(first) * row, src, size_t(n) * row);
    stream_->finish();
}

std::unique_ptr<TargetRunner> VulkanRunner::make_draft_runner(std::shared_ptr<const Model> draft, int32_t n_ctx) {
    try {
        return std::make_unique<VulkanRunner>(std::move(draft), n_ctx, device_);
    } catch (const Error &e) {
        if (e.status() != SPECULA_ERR_OUT_OF_MEMORY && e.status() != SPECULA_ERR_UNSUPPORTED) throw;
        log(SPECULA_LOG_INFO, "Vulkan: the draft model runs on the CPU (%s)", e.what());
        return nullptr;
    }
}

}  // namespace specula::internal::vulkan
