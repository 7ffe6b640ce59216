// Runs the target on one CUDA device for one session: the model's graph (graph/model_graph.h) through the CUDA
// executor (cuda_executor.h), as kernels on one stream. Weights are shared per (model, device) (device_weights.h);
// the KV cache (F16), the RoPE tables and every scratch buffer are allocated once here, so decoding allocates
// nothing and a decode step can be replayed as a CUDA graph.
#pragma once

#include "backends/cuda/cuda_namespace.h"

#include "backend/target_runner.h"
#include "backends/cuda/device_buffer.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/device_weights.h"
#include "backends/cuda/prefill_gemm.h"

#include <memory>
#include <optional>
#include <vector>

namespace specula::internal {
class Model;
}

namespace specula::internal::SPECULA_CUDA_NAMESPACE {

class CudaRunner final : public TargetRunner {
public:
    // Throws Error(OUT_OF_MEMORY) (with the sizes) when the device cannot hold weights + cache + scratch,
    // Error(UNSUPPORTED) for shapes the kernels do not handle (head_dim > 256), Error(INTERNAL) for CUDA errors.
    // graph: the model's graph (null: built here from the model).
    CudaRunner(std::shared_ptr<const Model> model, int32_t n_ctx, int device, std::shared_ptr<const Graph> graph = nullptr);
    ~CudaRunner() override;

    const char *backend() const override { return "cuda"; }
    // Causal batches of PrefillGemm::kMinRows rows or more multiply through cuBLAS (when it is there): not
    // batch-invariant. Trees are verified on the device (verify_tree_on_device) unless turned off.
    RunnerCapabilities capabilities() const override { return RunnerCapabilities{prefill_ == nullptr, device_verify_}; }
    void tree_logits(int32_t i, float *logits) override;
    // The session sampler's chain and the verifier's walk on the device (kernels/sampling.h): the tree's rows stay
    // here, (accepted nodes + bonus) come back. Greedy, or top_k in 1 .. 64 (else the host verifies). On unless
    // SPECULA_CUDA_DEVICE_VERIFY=0 or set_device_verify(false).
    bool verify_tree_on_device(const TreeSamplingPlan &plan, VerifyOutcome &outcome) override;
    void set_device_verify(bool on) { device_verify_ = on; }
    int64_t device_verifications() const { return device_verifications_; }  // rounds verified here so far
    void commit_tree_path(int32_t n_past, const int32_t *nodes, int32_t n) override;
    // Through the host (read_kv / write_kv): a shift moves a window once per thousands of tokens.
    void shift_kv(int32_t keep, int32_t discard, int32_t n_used) override;
    // How trees attend (cuda_executor.h: TreeAttention): Exact by default, Hybrid for comparisons.
    void set_tree_attention(TreeAttention mode) { tree_attention_ = mode; }
    // An executor on this device and stream, reading this runner's cache and RoPE tables in place.
    std::unique_ptr<GraphExecutor> make_executor(const ExecutorRequest &request) override;
    // A CudaRunner for the draft model on the same device, or nullptr when the device cannot hold it (then the
    // session runs the draft model on the CPU).
    std::unique_ptr<TargetRunner> make_draft_runner(std::shared_ptr<const Model> draft, int32_t n_ctx) override;
    int32_t n_ctx() const override { return n_ctx_; }
    size_t kv_bytes() const override { return kv_k_.bytes() + kv_v_.bytes(); }
    KvType kv_type() const override { return KvType::F16; }
    int32_t kv_row_width() const override { return kv_width(); }
    void read_kv(int32_t layer, KvPart part, int32_t first, int32_t n, void *dst) override;
    void write_kv(int32_t layer, KvPart part, int32_t first, int32_t n, const void *src) override;

    // Greedy decoding without copying logits to the host: evaluates like eval() and writes the argmax of the
    // last token's logits (ties: lowest id) to *next. For benchmarks and tools.
    bool eval_argmax(const int32_t *tokens, int32_t n, int32_t n_past, int32_t *next);
    // Device bytes this session holds (cache + scratch; the shared weights not counted) and the weights' bytes.
    size_t session_device_bytes() const;
    size_t weight_bytes() const { return weights_->bytes(); }
    // Whether decode steps run as CUDA graphs (on by default; SPECULA_CUDA_GRAPHS=0 turns them off).
    bool graphs_enabled() const { return use_graphs_; }
    int32_t attention_chunk() const { return chunk_; }
    // The cuBLAS library long prompt batches go through ("libcublas.so.13", "emulator"), or why none (prefill_note()).
    const char *prefill_library() const { return prefill_ ? prefill_->library().c_str() : nullptr; }
    const std::string &prefill_note() const { return prefill_note_; }

    cudaStream_t stream() const { return stream_; }
    int device() const { return device_; }

protected:
    // TargetRunner::eval / eval_tree (see there).
    bool evaluate(const int32_t *tokens, int32_t n, int32_t n_past, float *logits, bool all_logits) override;
    bool evaluate_tree(const int32_t *tokens, int32_t n, int32_t n_past, int32_t tree_offset, const int32_t *positions,
                   const uint8_t *mask, float *logits) override;

private:
    struct TreeBatch {
        int32_t offset;
        const int32_t *positions;
        const uint8_t *mask;
        int32_t mask_stride;  // bytes between mask rows: the whole tree's width (offset + its rows)
    };
    // What a batch leaves behind: logits in host_logits_, normed rows in hidden_ (tree verification), the
    // argmax of the last row in argmax_, or nothing (an earlier slice of a long batch).
    enum class Output { HostLogits, KeepHidden, Argmax, None };
    bool forward(const int32_t *tokens, int32_t n, int32_t n_past, const TreeBatch *tree, Output output, float *logits, bool all_logits);
    // One batch of at most kMaxRows rows, enqueued on the stream (no synchronisation).
    bool enqueue_batch(const int32_t *tokens, int32_t n, int32_t n_past, const TreeBatch *tree, int32_t first_row, Output output,
                       bool all_logits, bool capturing);

    int32_t kv_width() const;
    CudaContext context() const;
    static constexpr int32_t kMaxRows = 256;

    std::shared_ptr<const Model> model_;
    int device_;
    int32_t n_ctx_;
    std::shared_ptr<const DeviceWeights> weights_;
    TreeAttention tree_attention_ = TreeAttention::Exact;
    int32_t chunk_ = 64;
    cudaStream_t stream_ = nullptr;
    bool use_graphs_ = true;
    cudaGraphExec_t decode_graph_ = nullptr;
    std::unique_ptr<PrefillGemm> prefill_;  // null: every batch on our kernels
    std::string prefill_note_;

    DeviceBuffer kv_k_, kv_v_;             // [n_layer][n_ctx][n_embd_kv] F16
    DeviceBuffer rope_cos_, rope_sin_;     // [n_ctx][rope_dim / 2]
    std::unique_ptr<CudaExecutor> exec_;   // the model's graph over at most kMaxRows rows
    BatchRows rows_;                       // the batch being enqueued
    DeviceBuffer argmax_;
    DeviceBuffer hidden_;                  // final normed rows kept by eval_tree(..., nullptr), the whole tree's
    int32_t hidden_rows_ = 0;
    int32_t device_logit_rows_ = 0;       // rows of the last tree whose logits the executor's logits hold (0: per row)
    PinnedBuffer host_logits_;
    // Device verification: the plan's arrays (one upload), the rows' candidates, the walk's result.
    bool device_verify_ = true;
    int64_t device_verifications_ = 0;
    DeviceBuffer verify_in_, verify_cands_, verify_out_;
    PinnedBuffer host_verify_in_, host_verify_out_;
    std::vector<uint8_t> verify_image_;
};

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
