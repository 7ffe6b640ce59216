// Runs the target on one Vulkan device for one session: the model's graph (graph/model_graph.h) through the Vulkan
// executor (vulkan_executor.h), as compute dispatches recorded into one command buffer. Weights are shared per
// (model, device) (vulkan_weights.h); the KV cache (F16, one buffer per layer and kind), the RoPE tables and the
// scratch buffers are allocated once here, after checking that they fit.
#pragma once

#include "backend/target_runner.h"
#include "backends/vulkan/vulkan_executor.h"
#include "backends/vulkan/vulkan_ops.h"
#include "graph/batch_rows.h"

#include <memory>
#include <vector>

namespace specula::internal {
class Model;
}

namespace specula::internal::vulkan {

class VulkanRunner final : public TargetRunner {
public:
    // Throws Error(OUT_OF_MEMORY) with the sizes when the device cannot hold weights + cache + scratch,
    // Error(UNSUPPORTED) for shapes the shaders do not handle (head_dim > 256), Error(INTERNAL) for Vulkan errors.
    // graph: the model's graph (null: built here from the model).
    VulkanRunner(std::shared_ptr<const Model> model, int32_t n_ctx, std::shared_ptr<Device> device, std::shared_ptr<const Graph> graph = nullptr);
    ~VulkanRunner() override;

    const char *backend() const override { return "vulkan"; }
    void tree_logits(int32_t i, float *logits) override;
    void commit_tree_path(int32_t n_past, const int32_t *nodes, int32_t n) override;
    // Through the host (read_kv / write_kv), as on CUDA: a shift moves a window once per thousands of tokens.
    void shift_kv(int32_t keep, int32_t discard, int32_t n_used) override;
    // How trees attend (vulkan_executor.h: TreeAttention): Exact by default, Hybrid for comparisons.
    void set_tree_attention(TreeAttention mode) { tree_attention_ = mode; }
    // An executor on this device and stream, reading this runner's cache and RoPE tables in place.
    std::unique_ptr<GraphExecutor> make_executor(const ExecutorRequest &request) override;
    // A VulkanRunner for the draft model on the same device, or nullptr when the device cannot hold it.
    std::unique_ptr<TargetRunner> make_draft_runner(std::shared_ptr<const Model> draft, int32_t n_ctx) override;
    int32_t n_ctx() const override { return n_ctx_; }
    size_t kv_bytes() const override;
    KvType kv_type() const override { return KvType::F16; }
    int32_t kv_row_width() const override { return kv_width(); }
    void read_kv(int32_t layer, KvPart part, int32_t first, int32_t n, void *dst) override;
    void write_kv(int32_t layer, KvPart part, int32_t first, int32_t n, const void *src) override;

    // Device bytes this session holds (cache + scratch; the shared weights not counted) and the weights' bytes.
    size_t session_device_bytes() const;
    size_t weight_bytes() const { return weights_->bytes(); }
    int32_t attention_chunk() const { return int32_t(chunk_); }

protected:
    // TargetRunner::eval / eval_tree (see there).
    bool evaluate(const int32_t *tokens, int32_t n, int32_t n_past, float *logits, bool all_logits) override;
    bool evaluate_tree(const int32_t *tokens, int32_t n, int32_t n_past, int32_t tree_offset, const int32_t *positions, const uint8_t *mask,
                   float *logits) override;

private:
    struct TreeBatch {
        int32_t offset;
        const int32_t *positions;
        const uint8_t *mask;
        int32_t mask_stride;  // bytes between mask rows: the whole tree's width (offset + its rows)
    };
    enum class Output { HostLogits, KeepHidden, None };
    bool forward(const int32_t *tokens, int32_t n, int32_t n_past, const TreeBatch *tree, Output output, float *logits, bool all_logits);
    // One batch of at most kMaxRows rows; logits (when not null) receives its rows' logits after finish().
    bool enqueue_batch(const int32_t *tokens, int32_t m, int32_t n_past, const TreeBatch *tree, int32_t first_row, Output output, bool all_logits,
                       float *logits);
    VulkanContext context() const;

    int32_t kv_width() const;
    static constexpr int32_t kMaxRows = 256;

    std::shared_ptr<const Model> model_;
    std::shared_ptr<Device> device_;
    int32_t n_ctx_;
    std::unique_ptr<Stream> stream_;
    std::shared_ptr<const Weights> weights_;
    TreeAttention tree_attention_ = TreeAttention::Exact;
    uint32_t chunk_ = 64;

    std::vector<Buffer> kv_k_, kv_v_;   // per layer: [n_ctx][n_embd_kv] F16
    Buffer rope_cos_, rope_sin_;        // [n_ctx][rope_dim / 2]
    std::unique_ptr<VulkanExecutor> exec_;  // the model's graph over at most kMaxRows rows
    BatchRows rows_;
    Buffer hidden_;                     // final normed rows kept by eval_tree(..., nullptr), the whole tree's
    int32_t hidden_rows_ = 0;
};

}  // namespace specula::internal::vulkan
