// The Vulkan backend's graph executor (backend/graph_executor.h): a graph's tensors as device buffers sized once for
// the most rows a batch has, each operation as the compute shaders of vulkan_ops.h recorded on the stream of the
// runner it serves. The Vulkan runner executes the target's graph with it (vulkan_runner.cpp); the executors it
// makes for other graphs (LongSpec's layer) read its F16 cache and RoPE tables in place.
#pragma once

#include "backend/graph_executor.h"
#include "backends/vulkan/vulkan_ops.h"

#include <atomic>
#include <memory>
#include <vector>

namespace specula::internal::vulkan {

// How tree nodes attend to the runner's cache: Exact (default), each node's keys in position order through the same
// shader as decoding (bit-identical to decoding its path), or Hybrid, LongSpec's split form (prefix once, masked
// tree part, log-sum-exp merge; equal to Exact up to rounding).
enum class TreeAttention { Exact, Hybrid };

// What the runner lends its executors: its stream, its cache (per layer), its RoPE tables, its weights.
struct VulkanContext {
    Stream *stream = nullptr;
    const std::vector<Buffer> *kv_k = nullptr, *kv_v = nullptr;  // per layer: [n_ctx][n_embd_kv] F16
    int32_t n_ctx = 0;
    const Buffer *rope_cos = nullptr, *rope_sin = nullptr;       // [n_ctx][rope_dim / 2], the angles of rope_hp's settings
    const HParams *rope_hp = nullptr;
    const std::vector<float> *rope_freq_factors = nullptr;
    uint32_t cache_chunk = 64;  // keys per split-K chunk over the cache (fixed for the session: batch invariance)
    std::shared_ptr<const Weights> weights;  // the runner's model on the device (shared, not copied)
};

class VulkanExecutor final : public GraphExecutor {
public:
    // Throws Error(UNSUPPORTED) for an operation this backend lacks, Error(OUT_OF_MEMORY) naming the buffer.
    VulkanExecutor(std::shared_ptr<const Graph> graph, int32_t max_rows, const VulkanContext &context);

    static bool supports(const Op &op);
    // Device bytes the executor will allocate for a graph, before it does.
    static size_t bytes_needed(const Graph &graph, int32_t max_rows, const VulkanContext &context);

    // ---- for the runner: record without submitting ----
    void upload_rows(const BatchRows &rows);
    struct Enqueue {
        TreeAttention tree_attention = TreeAttention::Exact;
        const std::atomic<bool> *cancel = nullptr;  // checked between layers
        bool submit_per_layer = false;  // submit each layer of a long batch, so that a cancel lands within a layer
    };
    // Records stage `stage` over rows [first, first + count) of the uploaded batch. False when cancelled (the work
    // recorded so far has finished).
    bool enqueue(int32_t stage, const BatchRows &rows, int32_t first, int32_t count, const Enqueue &how);
    View row(TensorId t, uint32_t r) const { return View{&tensors_[size_t(t)], r * uint32_t(widths_[size_t(t)])}; }
    const Buffer &buffer(TensorId t) const { return tensors_[size_t(t)]; }
    View rows_view() const { return View{&ints_, 0}; }  // the uploaded row data
    const Graph &graph() const { return *graph_; }
    size_t device_bytes() const;

    // ---- GraphExecutor ----
    void run(int32_t stage, const BatchRows &rows, float *logits, bool replay) override;
    KvType local_kv_type() const override { return KvType::F16; }
    void read_local_kv(KvPart part, int32_t first, int32_t n, void *dst) override;
    void write_local_kv(KvPart part, int32_t first, int32_t n, const void *src) override;
    size_t allocated_bytes() const override { return device_bytes() + own_.bytes(); }

private:
    void attention(const Op &op, const BatchRows &rows, uint32_t first, uint32_t count, const Enqueue &how);
    void expert_matmul(const Op &op, const std::vector<Matrix> &experts, uint32_t first, uint32_t count);
    void ensure(Buffer &b, size_t bytes, const char *what);

    std::shared_ptr<const Graph> graph_;
    VulkanContext ctx_;
    int32_t max_rows_;
    Uploads own_;  // the graph's weights the runner's model does not hold (a draft's layer)
    PerOp<Matrix> matrices_;
    PerOp<const Buffer *> vectors_;
    PerOp<std::vector<Matrix>> expert_matrices_;  // ExpertMatMul: one matrix per expert
    std::vector<Buffer> tensors_;
    std::vector<int32_t> widths_;
    Buffer local_k_, local_v_;  // [local_kv_slots][n_embd_kv] F16
    Buffer rope_cos_, rope_sin_;  // the graph's own RoPE tables, when its settings are not the runner's
    Buffer sliding_cos_, sliding_sin_;  // the sliding-window layers' RoPE tables (Graph::hp_sliding), when it has any
    uint32_t local_chunk_ = 64;
    Buffer partials_, tree_partials_, ints_, mask_;
    // ExpertMatMul: the routes come back to the host (a submit and wait), which groups the batch's slots by expert
    // and sends the grouping down; each selected expert then multiplies its gathered slots once.
    Buffer moe_slots_, moe_in_, moe_out_;
    std::vector<float> host_route_;
    std::vector<int32_t> host_slots_, moe_start_;
};

}  // namespace specula::internal::vulkan
