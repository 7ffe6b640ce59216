// The forward pass of the llama family on the CPU, written to be read top to bottom (as llama2.c):
//   x = embed(tokens)
//   per layer: x += Wo · attention(rope(Wq·norm(x) [+bq]), rope(Wk·norm(x) [+bk]), Wv·norm(x) [+bv])
//              x += Wdown · (silu(Wgate·norm(x)) * Wup·norm(x))
//   logits = Wout · norm(x)
// `llama` and `qwen2` are this same pass; qwen2 adds the Q/K/V biases and rotates with NEOX pairing, both taken
// from the hyperparameters. An architecture that differs in structure gets its own file beside this one.
#include "cpu_runner.h"

#include "attention_kernels.h"

#include "backend/kv_shift.h"
#include "backends/cpu/cpu_longspec_drafter.h"
#include "backends/cpu/ops.h"
#include "formats/type_kernels.h"
#include "gguf/tensor_type.h"
#include "model/model.h"

#include <algorithm>
#include <cstring>
#include <cmath>

namespace specula::internal {
namespace {

template <typename T> void ensure(std::vector<T> &v, size_t n) {
    if (v.size() < n) v.resize(n);
}

}  // namespace

CpuRunner::CpuRunner(std::shared_ptr<const Model> model, int32_t n_ctx, int n_threads, KvType kv_type)
    : CpuRunner(std::move(model), n_ctx, std::make_unique<ThreadPool>(n_threads), nullptr, kv_type) {}

CpuRunner::CpuRunner(std::shared_ptr<const Model> model, int32_t n_ctx, ThreadPool &shared_pool, KvType kv_type)
    : CpuRunner(std::move(model), n_ctx, nullptr, &shared_pool, kv_type) {}

CpuRunner::CpuRunner(std::shared_ptr<const Model> model, int32_t n_ctx, std::unique_ptr<ThreadPool> own_pool, ThreadPool *shared_pool,
                     KvType kv_type)
    : model_(std::move(model)),
      weights_(CpuWeights::of(model_)),
      kv_(model_->hparams().n_layer, n_ctx, model_->hparams().n_embd_kv(), kv_type),
      own_pool_(std::move(own_pool)),
      pool_(own_pool_ ? own_pool_.get() : shared_pool),
      queries_(size_t(pool_->size())) {
    for (int t = 0; t < pool_->size(); ++t) block_attention_.emplace_back(model_->hparams().head_dim);  // in place: see BlockAttention
}

std::unique_ptr<Drafter> CpuRunner::make_longspec_drafter(std::shared_ptr<const LongSpecDraft> draft, int32_t max_tree_nodes) {
    return make_cpu_longspec_drafter(std::move(draft), max_tree_nodes, *pool_, kv_);
}

std::unique_ptr<TargetRunner> CpuRunner::make_draft_runner(std::shared_ptr<const Model> draft, int32_t n_ctx) {
    return std::make_unique<CpuRunner>(std::move(draft), n_ctx, *pool_);
}

bool CpuRunner::eval(const int32_t *tokens, int32_t n, int32_t n_past, float *logits, bool all_logits) {
    return forward(tokens, n, n_past, nullptr, logits, all_logits);
}

bool CpuRunner::eval_tree(const int32_t *tokens, int32_t n, int32_t n_past, int32_t tree_offset, const int32_t *positions,
                          const uint8_t *mask, float *logits) {
    const TreeBatch tree{tree_offset, positions, mask};
    return forward(tokens, n, n_past, &tree, logits, true);
}

void CpuRunner::tree_logits(int32_t i, float *logits) {
    const int64_t d = model_->hparams().n_embd;
    matmul(*pool_, weights_->matrix(model_->weights().output), hidden_.data() + int64_t(i) * d, 1, logits, quant_scratch_);
}

void CpuRunner::read_kv(int32_t layer, int kind, int32_t first, int32_t n, void *dst) {
    const uint8_t *src = kind == 0 ? kv_.k_row(layer, first) : kv_.v_row(layer, first);
    std::memcpy(dst, src, size_t(n) * kv_.row_bytes());
}

void CpuRunner::write_kv(int32_t layer, int kind, int32_t first, int32_t n, const void *src) {
    uint8_t *dst = kind == 0 ? kv_.k_row(layer, first) : kv_.v_row(layer, first);
    std::memcpy(dst, src, size_t(n) * kv_.row_bytes());
}

void CpuRunner::commit_tree_path(int32_t n_past, const int32_t *nodes, int32_t n) {
    const size_t bytes = kv_.row_bytes();
    for (int32_t il = 0; il < model_->hparams().n_layer; ++il)
        for (int32_t i = 0; i < n; ++i) {
            if (nodes[i] == i) continue;
            std::memcpy(kv_.k_row(il, n_past + i), kv_.k_row(il, n_past + nodes[i]), bytes);
            std::memcpy(kv_.v_row(il, n_past + i), kv_.v_row(il, n_past + nodes[i]), bytes);
        }
}

void CpuRunner::shift_kv(int32_t keep, int32_t discard, int32_t n_used) {
    shift_kv_rows(*this, model_->hparams(), model_->weights().rope_freq_factors, keep, discard, n_used);
}

// One pass over the layers. Without a tree, token i sits at slot and position n_past + i and attends causally;
// with one, see eval_tree().
bool CpuRunner::forward(const int32_t *tokens, int32_t n, int32_t n_past, const TreeBatch *tree, float *logits, bool all_logits) {
    const HParams &hp = model_->hparams();
    const ModelWeights &w = model_->weights();
    const int64_t d = hp.n_embd, dq = hp.n_embd_q(), dkv = hp.n_embd_kv(), dff = hp.n_ff;
    ensure(x_, size_t(n * d));
    ensure(xb_, size_t(n * std::max(d, dq)));
    ensure(q_, size_t(n * dq));
    ensure(k_, size_t(n * dkv));
    ensure(v_, size_t(n * dkv));
    ensure(att_out_, size_t(n * dq));
    ensure(ffn_gate_, size_t(n * dff));
    ensure(ffn_up_, size_t(n * dff));
    float *x = x_.data(), *xb = xb_.data(), *q = q_.data(), *k = k_.data(), *v = v_.data();
    // Which keys each row sees: causal rows the slots up to their own; tree nodes the prefix and their mask row.
    row_run_.resize(size_t(n));
    for (int32_t i = 0; i < n; ++i) row_run_[size_t(i)] = tree ? n_past : n_past + i + 1;
    if (tree)
        list_tree_keys(n, n_past, *tree);
    else
        row_keys_begin_.assign(size_t(n) + 1, 0);

    for (int32_t i = 0; i < n; ++i) get_row(w.token_embd, tokens[i], x + i * d);

    for (int32_t il = 0; il < hp.n_layer; ++il) {
        if (cancelled()) return false;
        const LayerWeights &l = w.layers[size_t(il)];

        // Attention block.
        for (int32_t i = 0; i < n; ++i) rmsnorm(xb + i * d, x + i * d, l.attn_norm.floats(), d, hp.norm_eps);
        matmul(*pool_, weights_->matrix(l.wq), xb, n, q, quant_scratch_);
        matmul(*pool_, weights_->matrix(l.wk), xb, n, k, quant_scratch_);
        matmul(*pool_, weights_->matrix(l.wv), xb, n, v, quant_scratch_);
        for (int32_t i = 0; i < n; ++i) {
            if (l.bq) add(q + i * dq, l.bq.floats(), dq);
            if (l.bk) add(k + i * dkv, l.bk.floats(), dkv);
            if (l.bv) add(v + i * dkv, l.bv.floats(), dkv);
            const int32_t pos = tree ? tree->positions[i] : n_past + i;
            const int32_t slot = n_past + (tree ? tree->offset : 0) + i;
            rope(q + i * dq, hp.n_head, hp, w.rope_freq_factors, pos);
            rope(k + i * dkv, hp.n_head_kv, hp, w.rope_freq_factors, pos);
            kv_.store(il, slot, k + i * dkv, v + i * dkv);
        }
        attention(il, n, n_past);
        matmul(*pool_, weights_->matrix(l.wo), att_out_.data(), n, xb, quant_scratch_);
        add(x, xb, n * d);

        // Feed-forward block (SwiGLU).
        for (int32_t i = 0; i < n; ++i) rmsnorm(xb + i * d, x + i * d, l.ffn_norm.floats(), d, hp.norm_eps);
        matmul(*pool_, weights_->matrix(l.ffn_gate), xb, n, ffn_gate_.data(), quant_scratch_);
        matmul(*pool_, weights_->matrix(l.ffn_up), xb, n, ffn_up_.data(), quant_scratch_);
        swiglu(ffn_gate_.data(), ffn_up_.data(), n * dff);
        matmul(*pool_, weights_->matrix(l.ffn_down), ffn_gate_.data(), n, xb, quant_scratch_);
        add(x, xb, n * d);
    }

    // Output head, only for the rows whose logits are wanted.
    const int32_t first = all_logits ? 0 : n - 1;
    const int32_t rows = n - first;
    for (int32_t i = first; i < n; ++i) rmsnorm(xb + (i - first) * d, x + i * d, w.output_norm.floats(), d, hp.norm_eps);
    if (logits == nullptr) {  // lazy head: eval_tree() callers ask for rows with tree_logits()
        hidden_.assign(xb, xb + rows * d);
        return true;
    }
    matmul(*pool_, weights_->matrix(w.output), xb, rows, logits, quant_scratch_);
    return true;
}

// The tree slots n_past + j each node sees (its mask row), in slot order, for attention().
void CpuRunner::list_tree_keys(int32_t n, int32_t n_past, const TreeBatch &tree) {
    const int32_t n_tree = tree.offset + n;
    row_keys_.clear();
    row_keys_begin_.resize(size_t(n) + 1);
    for (int32_t i = 0; i < n; ++i) {
        row_keys_begin_[size_t(i)] = int32_t(row_keys_.size());
        const uint8_t *mask = tree.mask + size_t(i) * size_t(n_tree);
        for (int32_t j = 0; j < n_tree; ++j)
            if (mask[j]) row_keys_.push_back(n_past + j);
    }
    row_keys_begin_[size_t(n)] = int32_t(row_keys_.size());
}

// Multi-head attention of the n new rows (block_attention.h): one task per KV head and run of up to kRowsPerTask
// tokens, holding the query heads of that KV head's group, so the prefix blocks are read once per task. The
// rows' keys were listed by forward(); a row's arithmetic does not depend on the task it lands in.
void CpuRunner::attention(int layer, int32_t n, int32_t n_past) {
    const HParams &hp = model_->hparams();
    const int32_t hd = hp.head_dim, dq = hp.n_embd_q(), group = hp.n_head / hp.n_head_kv;
    const float scale = 1.0f / std::sqrt(float(hd));
    constexpr int32_t kRowsPerTask = 16;
    const int32_t chunks = (n + kRowsPerTask - 1) / kRowsPerTask;
    const KvView keys = kv_.keys(layer), values = kv_.values(layer);
    auto task = [&](int64_t t, int thread) {
        const int32_t kv_head = int32_t(t / chunks), i0 = int32_t(t % chunks) * kRowsPerTask, i1 = std::min(n, i0 + kRowsPerTask);
        std::vector<AttentionQuery> &queries = queries_[size_t(thread)];
        queries.clear();
        for (int32_t i = i0; i < i1; ++i)
            for (int32_t g = 0; g < group; ++g) {
                const int64_t h = int64_t(kv_head) * group + g;
                const int32_t b = row_keys_begin_[size_t(i)];
                queries.push_back(AttentionQuery{q_.data() + int64_t(i) * dq + h * hd, att_out_.data() + int64_t(i) * dq + h * hd,
                                                 row_run_[size_t(i)], row_keys_.data() + b, row_keys_begin_[size_t(i) + 1] - b});
            }
        block_attention_[size_t(thread)].run(keys, values, kv_head * hd, scale, queries);
    };
    const int64_t tasks = int64_t(hp.n_head_kv) * chunks;
    const int64_t work = int64_t(hp.n_head) * n * (n_past + n) * hd;  // about: multiply-adds of the scores
    if (work < (int64_t(1) << 16)) {
        for (int64_t t = 0; t < tasks; ++t) task(t, 0);
    } else {
        pool_->run(tasks, task);
    }
}

}  // namespace specula::internal
