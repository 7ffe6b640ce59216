// The CPU runner: the model's graph (graph/model_graph.h: llama and qwen2 today) on the CPU executor, whose
// operations are the reference operators of ops.h. The architecture is not written here: a runner plans the
// batch's rows (graph/batch_rows.h), runs the body over all of them and the output head over the rows whose logits
// are wanted.
#include "cpu_runner.h"

#include "backend/kv_shift.h"
#include "core/error.h"
#include "graph/model_graph.h"
#include "model/model.h"

#include <cstring>

namespace specula::internal {

CpuRunner::CpuRunner(std::shared_ptr<const Model> model, int32_t n_ctx, int n_threads, KvType kv_type, std::shared_ptr<const Graph> graph)
    : CpuRunner(std::move(model), n_ctx, std::make_unique<ThreadPool>(n_threads), nullptr, kv_type, std::move(graph)) {}

CpuRunner::CpuRunner(std::shared_ptr<const Model> model, int32_t n_ctx, ThreadPool &shared_pool, KvType kv_type, std::shared_ptr<const Graph> graph)
    : CpuRunner(std::move(model), n_ctx, nullptr, &shared_pool, kv_type, std::move(graph)) {}

CpuRunner::CpuRunner(std::shared_ptr<const Model> model, int32_t n_ctx, std::unique_ptr<ThreadPool> own_pool, ThreadPool *shared_pool,
                     KvType kv_type, std::shared_ptr<const Graph> graph)
    : model_(std::move(model)),
      kv_(model_->hparams().n_layer, n_ctx, model_->hparams().n_embd_kv(), kv_type, model_->hparams().head_dim),
      own_pool_(std::move(own_pool)),
      pool_(own_pool_ ? own_pool_.get() : shared_pool) {
    exec_ = std::make_unique<CpuExecutor>(graph ? std::move(graph) : build_model_graph(model_, n_ctx), 0, *pool_, &kv_);
}

std::unique_ptr<GraphExecutor> CpuRunner::make_executor(const ExecutorRequest &request) {
    return std::make_unique<CpuExecutor>(request.graph, request.max_rows, *pool_, &kv_);
}

std::unique_ptr<TargetRunner> CpuRunner::make_draft_runner(std::shared_ptr<const Model> draft, int32_t n_ctx) {
    return std::make_unique<CpuRunner>(std::move(draft), n_ctx, *pool_);
}

bool CpuRunner::evaluate(const int32_t *tokens, int32_t n, int32_t n_past, float *logits, bool all_logits) {
    plan_causal_rows(rows_, tokens, n, n_past, exec_->graph().sliding_window);
    return forward(all_logits ? 0 : n - 1, logits);
}

bool CpuRunner::evaluate_tree(const int32_t *tokens, int32_t n, int32_t n_past, int32_t tree_offset, const int32_t *positions,
                          const uint8_t *mask, float *logits) {
    plan_tree_rows(rows_, tokens, n, n_past, tree_offset, positions, mask, tree_offset + n, exec_->graph().sliding_window);
    // Without logits the nodes' normed states stay in the graph's hidden rows: tree_logits() computes the rows a
    // verifier visits.
    return forward(0, logits);
}

CpuRunner::~CpuRunner() { leave_batch(); }

void CpuRunner::join_batch(BatchGroup &group) {
    std::lock_guard<std::mutex> lock(group.mutex);
    require(group.model.get() == model_.get(), SPECULA_ERR_INCOMPATIBLE, "batch: the session's model is not the batch's model");
    if (!group.batch) {
        group.batch = std::make_shared<CpuSessionBatch>(model_, exec_->graph_ptr(), group.n_threads);
        group.backend = "cpu";
    }
    auto *cpu = dynamic_cast<CpuSessionBatch *>(group.batch.get());
    require(cpu != nullptr, SPECULA_ERR_INCOMPATIBLE, "batch: the batch's sessions run on the " + group.backend + " backend, this one on the CPU");
    require(cpu->compatible(model_.get(), exec_->graph()), SPECULA_ERR_INCOMPATIBLE,
            "batch: the session's context length rotates positions differently from the batch's sessions (RoPE factors)");
    leave_batch();
    batch_ = std::shared_ptr<CpuSessionBatch>(group.batch, cpu);
}

void CpuRunner::leave_batch() {
    if (batch_) batch_->leave(this);
    batch_.reset();
}

bool CpuRunner::forward(int32_t first, float *logits) {
    if (batch_) {
        // The body and the wanted rows' head in the group's next pass; a lazy tree's final states come back to
        // exec_'s hidden rows, where tree_logits() reads them.
        if (cancelled()) return false;
        CpuSessionBatch::CpuRequest r;
        r.member = this;
        r.rows = rows_.n;
        r.batch = &rows_;
        r.kv = &kv_;
        r.first = first;
        r.logits = logits;
        r.hidden_to = exec_.get();
        batch_->forward(r);
        return true;
    }
    if (!exec_->run_rows(kBodyStage, rows_, 0, rows_.n, cancel_flag())) return false;
    if (logits != nullptr) head(first, rows_.n - first, logits);
    return true;
}

// The output head over rows [first, first + count), computed straight into the caller's logits.
void CpuRunner::head(int32_t first, int32_t count, float *logits) {
    const TensorId out = exec_->graph().logits;
    exec_->bind(out, logits, first);
    exec_->run_rows(kHeadStage, rows_, first, count);
    exec_->unbind(out);
}

void CpuRunner::tree_logits(int32_t i, float *logits) { head(i, 1, logits); }

void CpuRunner::read_kv(int32_t layer, KvPart part, int32_t first, int32_t n, void *dst) {
    kv_.read_rows(layer, part, first, n, dst);
}

void CpuRunner::write_kv(int32_t layer, KvPart part, int32_t first, int32_t n, const void *src) {
    kv_.write_rows(layer, part, first, n, src);
}

void CpuRunner::commit_tree_path(int32_t n_past, const int32_t *nodes, int32_t n) {
    for (int32_t il = 0; il < model_->hparams().n_layer; ++il)
        for (int32_t i = 0; i < n; ++i)
            if (nodes[i] != i) kv_.copy_slot(il, n_past + i, n_past + nodes[i]);
}

void CpuRunner::shift_kv(int32_t keep, int32_t discard, int32_t n_used) {
    shift_kv_rows(*this, model_->hparams(), exec_->graph().rope_freq_factors, keep, discard, n_used);
}

}  // namespace specula::internal
