// The one interface a backend implements to run the target model for a session: evaluate token batches and
// speculation trees into its own KV cache. Session and verifier are written against this, so the CPU reference
// (backends/cpu/cpu_runner.h), CUDA (backends/cuda/cuda_runner.h) and Vulkan (backends/vulkan/vulkan_runner.h) run
// the same speculative loop. Each runner executes the model's graph (graph/model_graph.h, built by the core) with
// its backend's operations; what only some backends can do is a capability the core asks for (capabilities()).
#pragma once

#include "backend/graph_executor.h"
#include "backend/kv_type.h"
#include "backend/tree_verification.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace specula::internal {

class Model;
struct BatchGroup;

// What a runner can do beyond the interface's guarantees, as ggml's backends answer supports_op: the core asks and
// takes another path where the answer is no.
struct RunnerCapabilities {
    // Whether eval() computes every row as it would alone, whatever the batch (decoding and tree verification always
    // do). A runner whose long prompt batches take a faster, batch-dependent path (CUDA's cuBLAS prefill) says
    // false; the session then evaluates a prompt's last token alone, as a speculative session evaluates it as the
    // next tree's root, so that plain and speculative runs prefill exactly the same batches (docs/cuda.md).
    bool prompt_batches_invariant = true;
    // Whether verify_tree_on_device() may verify a tree on the device (then the session makes a plan for it).
    bool verifies_trees_on_device = false;
};

class TargetRunner {
public:
    virtual ~TargetRunner() = default;

    // Someone who may still read rows this runner keeps (a tree verified on the device leaves its rows here, fetched
    // through tree_logits() when first read). Told once, before the runner's next eval() or eval_tree() overwrites
    // them, so that it brings over what it still needs: the session's logits (session/target_logits.h).
    struct RowsHolder {
        virtual void before_overwrite() = 0;

    protected:
        ~RowsHolder() = default;
    };
    void hold_rows(RowsHolder *holder) { holder_ = holder; }
    void drop_holder(const RowsHolder *holder) {
        if (holder_ == holder) holder_ = nullptr;
    }

    // The backend's name in its registry entry (backend/backend_registry.h): "cpu", "cuda", "vulkan".
    virtual const char *backend() const = 0;
    virtual RunnerCapabilities capabilities() const { return {}; }

    // Evaluates n tokens that occupy KV slots (and positions) [n_past, n_past + n); each attends causally to
    // slots [0, its own]. Writes n_vocab logits for the last token into `logits`, or for every token
    // (n * n_vocab floats) when all_logits. The caller guarantees n_past + n <= n_ctx and valid token ids.
    // Returns false if the cancel flag (set_cancel_flag) was raised between kernel launches / layers: the slots
    // [n_past, n_past + n) then hold partial results and must be evaluated again.
    bool eval(const int32_t *tokens, int32_t n, int32_t n_past, float *logits, bool all_logits) {
        release_rows();
        return evaluate(tokens, n, n_past, logits, all_logits);
    }

    // Evaluates n nodes of a speculation tree. Node i (token tokens[i], RoPE position positions[i]) is written to
    // KV slot n_past + tree_offset + i and attends to every committed slot [0, n_past) plus the tree slots
    // n_past + j (j < tree_offset + n) with mask[i * (tree_offset + n) + j] != 0 (itself and its ancestors).
    // Writes n rows of n_vocab logits, or, with logits == nullptr, keeps the nodes' final hidden states so that
    // tree_logits() computes only the rows a verifier visits. The caller guarantees n_past + tree_offset + n <= n_ctx.
    bool eval_tree(const int32_t *tokens, int32_t n, int32_t n_past, int32_t tree_offset, const int32_t *positions, const uint8_t *mask,
                   float *logits) {
        release_rows();
        return evaluate_tree(tokens, n, n_past, tree_offset, positions, mask, logits);
    }
    // Logits of row i of the last eval_tree(..., nullptr) call (bit-identical to computing all rows).
    virtual void tree_logits(int32_t i, float *logits) = 0;
    // Verifies the tree of the last eval_tree(..., nullptr) call on the backend's device (plan: backend/
    // tree_verification.h), the walk speculative/verifier.cpp does for deterministic children, so that only the
    // accepted nodes and the bonus token come back. False, with nothing changed, when this backend does not (the
    // CPU: its rows are in memory already; capabilities().verifies_trees_on_device) or cannot for this plan; the
    // caller then verifies on the host.
    // Rows stay available through tree_logits() afterwards.
    virtual bool verify_tree_on_device(const TreeSamplingPlan &plan, VerifyOutcome &outcome) {
        (void)plan;
        (void)outcome;
        return false;
    }
    // Commits an accepted tree path: moves the keys/values of tree slots n_past + nodes[i] to slot n_past + i in
    // every layer. nodes must be strictly increasing with nodes[i] >= i (parents precede children).
    virtual void commit_tree_path(int32_t n_past, const int32_t *nodes, int32_t n) = 0;

    // Context shift (backend/kv_shift.h): drops slots [keep, keep + discard) of every layer and moves slots
    // [keep + discard, n_used) down by discard, keys re-rotated to their new positions. Anything derived from the
    // moved rows (a GPU's host mirror) is invalid afterwards. The caller guarantees keep + discard <= n_used <= n_ctx.
    virtual void shift_kv(int32_t keep, int32_t discard, int32_t n_used) = 0;

    // Cross-session batching (backend/session_batch.h): from now on this runner's forward passes run combined with
    // those of the group's other members; its results do not change. Throws Error(UNSUPPORTED) when this backend
    // does not batch across sessions, Error(INCOMPATIBLE) when the group's batch belongs to another backend or
    // model. leave_batch() goes back to passes of its own.
    virtual void join_batch(BatchGroup &group);
    virtual void leave_batch() {}

    // A flag another thread may raise to stop a forward pass between launches (the session's cancel flag).
    void set_cancel_flag(const std::atomic<bool> *flag) { cancel_ = flag; }

    // An executor for another graph beside the target (backend/graph_executor.h): on this runner's device, stream
    // and threads, its KvStore::Model operations reading this runner's cache in place. The core's graph drafters run
    // on it between the target's passes (LongSpec's layer: nothing of the target's cache goes through the session).
    // Throws Error(UNSUPPORTED) when the backend lacks an operation of the graph.
    virtual std::unique_ptr<GraphExecutor> make_executor(const ExecutorRequest &request) = 0;
    // A runner for an independent draft model on this backend (its device, its threads), or nullptr when this
    // backend cannot hold it (make_draft_model_runner, backend/backend_choice.h, then runs it on the CPU). Throws
    // like a target runner's constructor for a model it refuses.
    virtual std::unique_ptr<TargetRunner> make_draft_runner(std::shared_ptr<const Model> draft, int32_t n_ctx) = 0;

    virtual int32_t n_ctx() const = 0;
    // Bytes of the target's KV cache (on whatever memory the backend keeps it).
    virtual size_t kv_bytes() const = 0;

    // Snapshots (session/session_snapshot.cpp) copy the cache's rows as the backend stores them: kv_type()
    // elements, n_embd_kv per slot. read_kv copies slots [first, first + n) of one layer's keys or values to dst,
    // densely; write_kv copies them back from src. The caller guarantees the range is inside the
    // cache; rows a write replaces are invalid until then for anything derived from them (a GPU's host mirror).
    virtual KvType kv_type() const = 0;
    virtual int32_t kv_row_width() const = 0;  // elements per slot of one layer's K (or V): n_embd_kv
    virtual void read_kv(int32_t layer, KvPart part, int32_t first, int32_t n, void *dst) = 0;
    virtual void write_kv(int32_t layer, KvPart part, int32_t first, int32_t n, const void *src) = 0;

protected:
    // What eval() and eval_tree() do, once the rows' holder has been told.
    virtual bool evaluate(const int32_t *tokens, int32_t n, int32_t n_past, float *logits, bool all_logits) = 0;
    virtual bool evaluate_tree(const int32_t *tokens, int32_t n, int32_t n_past, int32_t tree_offset, const int32_t *positions,
                               const uint8_t *mask, float *logits) = 0;
    // Tells the holder of this runner's rows, if any, that they are about to be overwritten (once).
    void release_rows() {
        if (RowsHolder *h = holder_) {
            holder_ = nullptr;
            h->before_overwrite();
        }
    }
    bool cancelled() const { return cancel_ != nullptr && cancel_->load(std::memory_order_relaxed); }
    const std::atomic<bool> *cancel_flag() const { return cancel_; }

private:
    const std::atomic<bool> *cancel_ = nullptr;
    RowsHolder *holder_ = nullptr;
};

}  // namespace specula::internal
