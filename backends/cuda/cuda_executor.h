// The CUDA backend's graph executor (backend/graph_executor.h): a graph's tensors as device buffers sized once for
// the most rows a batch has, each operation as the batch-invariant kernels of kernels/ enqueued on the stream of
// the runner it serves. The CUDA runner executes the target's graph with it (cuda_runner.cpp: batches sliced to its
// buffers, a decode step replayed as a CUDA graph, long prompts through cuBLAS); the executors it makes for other
// graphs (LongSpec's layer) read its F16 cache and RoPE tables in place and replay their repeated stages as CUDA
// graphs, with a level's rows ranked on the device (kernels/topk.cu) so only its candidates come back.
#pragma once

#include "backends/cuda/cuda_namespace.h"

#include "backend/graph_executor.h"
#include "backends/cuda/device_buffer.h"
#include "backends/cuda/device_weights.h"
#include "backends/cuda/prefill_gemm.h"

#include <atomic>
#include <map>
#include <memory>
#include <vector>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {

// How tree nodes attend to the runner's cache. Exact (default): each node's keys in position order through the
// same kernel as decoding, so its logits are bit-identical to decoding its path (lossless greedy speculation).
// Hybrid: LongSpec's split form (paper Appendix C): the committed prefix once for all nodes, the masked tree part
// apart, merged by log-sum-exp; equal to Exact up to float rounding (a benchmark's comparison).
enum class TreeAttention { Exact, Hybrid };

// What the runner lends its executors: its device and stream, its cache (KvStore::Model), its RoPE tables.
struct CudaContext {
    int device = 0;
    cudaStream_t stream = nullptr;
    __half *kv_k = nullptr, *kv_v = nullptr;  // [n_layer][n_ctx][n_embd_kv] F16
    int32_t n_ctx = 0;
    const float *rope_cos = nullptr, *rope_sin = nullptr;  // [n_ctx][rope_dim / 2], the angles of rope_hp's settings
    const HParams *rope_hp = nullptr;
    const std::vector<float> *rope_freq_factors = nullptr;
    int32_t cache_chunk = 64;  // keys per split-K chunk over the cache (fixed for the session: batch invariance)
    bool graphs = true;        // replay repeated stages as CUDA graphs
    std::shared_ptr<const DeviceWeights> weights;  // the runner's model on the device (shared, not copied)
};

class CudaExecutor final : public GraphExecutor {
public:
    // Throws Error(UNSUPPORTED) for a graph operation this backend lacks, Error(OUT_OF_MEMORY) with the sizes.
    CudaExecutor(std::shared_ptr<const Graph> graph, int32_t max_rows, const CudaContext &context);
    ~CudaExecutor() override;

    // Whether the kernels implement the operation (the registry's supports_op).
    static bool supports(const Op &op);
    // Whether the graph's stages may be captured as CUDA graphs: not with experts (the host groups each batch's rows
    // by the experts they chose, which it reads back mid-stage).
    static bool replayable(const Graph &graph);
    // Device bytes the executor will allocate for a graph (tensors, scratch, its own store), before it does.
    static size_t bytes_needed(const Graph &graph, int32_t max_rows, const CudaContext &context);

    // ---- for the runner: enqueue without waiting ----
    // Copies the batch's row data to the device through pinned staging (waiting for the stream first unless
    // `capturing`: the staging is about to be rewritten; inside a capture the copy becomes a graph node).
    void upload_rows(const BatchRows &rows, bool capturing);
    struct Enqueue {
        const PrefillGemm *cublas = nullptr;  // multiply batches of PrefillGemm::kMinRows rows or more through it
        TreeAttention tree_attention = TreeAttention::Exact;
        const std::atomic<bool> *cancel = nullptr;  // checked between layers (never while capturing)
    };
    // Enqueues stage `stage` over rows [first, first + count) of the uploaded batch. False when cancelled.
    bool enqueue(int32_t stage, const BatchRows &rows, int32_t first, int32_t count, const Enqueue &how);
    float *row(TensorId t, int32_t r) const { return tensors_[size_t(t)].as<float>() + size_t(r) * size_t(widths_[size_t(t)]); }
    const Graph &graph() const { return *graph_; }
    int32_t max_rows() const { return max_rows_; }
    size_t device_bytes() const;

    // ---- GraphExecutor ----
    void run(int32_t stage, const BatchRows &rows, float *logits, bool replay) override;
    bool run_top_k(int32_t stage, const BatchRows &rows, int32_t k, float *logp, int32_t *ids, bool replay) override;
    KvType local_kv_type() const override { return KvType::F16; }
    void read_local_kv(KvPart part, int32_t first, int32_t n, void *dst) override;
    void write_local_kv(KvPart part, int32_t first, int32_t n, const void *src) override;
    size_t allocated_bytes() const override;

private:
    // Enqueues the stage (and, for k > 0, the rows' top-k), captured and replayed as a graph when asked for.
    void enqueue_stage(int32_t stage, const BatchRows &rows, int32_t k, bool replay);
    void attention(const Op &op, const BatchRows &rows, int32_t first, int32_t count, const Enqueue &how);
    void expert_matmul(const Op &op, const std::vector<DeviceMatrix> &experts, int32_t first, int32_t count);

    std::shared_ptr<const Graph> graph_;
    CudaContext ctx_;
    int32_t max_rows_;
    DeviceUploads own_;  // the graph's weights the runner's model does not hold (a draft's layer)
    // Per stage and op: the resolved weight (a matrix, or a vector's device pointer).
    PerOp<DeviceMatrix> matrices_;
    PerOp<const float *> vectors_;
    PerOp<std::vector<DeviceMatrix>> expert_matrices_;  // ExpertMatMul: one matrix per expert
    std::vector<DeviceBuffer> tensors_;
    std::vector<int32_t> widths_;
    DeviceBuffer local_k_, local_v_;  // [local_kv_slots][n_embd_kv] F16
    DeviceBuffer rope_cos_, rope_sin_;  // the graph's own RoPE tables, when its settings are not the runner's
    DeviceBuffer sliding_cos_, sliding_sin_;  // the sliding-window layers' RoPE tables (Graph::hp_sliding), when it has any
    int32_t local_chunk_ = 64;
    DeviceBuffer gemm_scratch_, partials_, tree_partials_, ints_, mask_, topk_;
    PinnedBuffer host_ints_, host_mask_, host_out_;
    // ExpertMatMul: the routes come back to the host, which groups the batch's slots by expert (as ggml's
    // mul_mat_id), sends the grouping down, and multiplies each selected expert once over its gathered slots.
    DeviceBuffer moe_slots_, moe_in_, moe_out_;
    PinnedBuffer host_route_, host_slots_;
    std::vector<int32_t> moe_start_;
    size_t ints_capacity_ = 0, host_out_bytes_ = 0;
    bool device_topk_ = true;  // SPECULA_CUDA_DEVICE_TOPK=0: rows come back whole
    std::map<uint32_t, cudaGraphExec_t> replays_;  // by stage and topology (enqueue_stage's key)
};

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
