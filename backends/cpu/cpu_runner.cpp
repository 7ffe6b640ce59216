// The forward pass of the llama family on the CPU, written to be read top to bottom (as llama2.c):
//   x = embed(tokens)
//   per layer: x += Wo · attention(rope(Wq·norm(x) [+bq]), rope(Wk·norm(x) [+bk]), Wv·norm(x) [+bv])
//              x += Wdown · (silu(Wgate·norm(x)) * Wup·norm(x))
//   logits = Wout · norm(x)
// `llama` and `qwen2` are this same pass; qwen2 adds the Q/K/V biases and rotates with NEOX pairing, both taken
// from the hyperparameters. An architecture that differs in structure gets its own file beside this one.
#include "cpu_runner.h"

#include "attention_kernels.h"

#include "backends/cpu/hybrid_attention.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/types/type_kernels.h"
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

CpuRunner::CpuRunner(std::shared_ptr<const Model> model, int32_t n_ctx, int n_threads)
    : model_(std::move(model)),
      kv_(model_->hparams().n_layer, n_ctx, model_->hparams().n_embd_kv()),
      pool_(n_threads) {}

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
    matmul(pool_, model_->weights().output, hidden_.data() + int64_t(i) * d, 1, logits, quant_scratch_);
}

void CpuRunner::read_kv(int32_t layer, int kind, int32_t first, int32_t n, void *dst) {
    const float *src = kind == 0 ? kv_.k(layer, first) : kv_.v(layer, first);
    std::memcpy(dst, src, size_t(n) * size_t(kv_.n_embd_kv()) * sizeof(float));
}

void CpuRunner::write_kv(int32_t layer, int kind, int32_t first, int32_t n, const void *src) {
    float *dst = kind == 0 ? kv_.k(layer, first) : kv_.v(layer, first);
    std::memcpy(dst, src, size_t(n) * size_t(kv_.n_embd_kv()) * sizeof(float));
}

void CpuRunner::commit_tree_path(int32_t n_past, const int32_t *nodes, int32_t n) {
    const size_t dkv = size_t(model_->hparams().n_embd_kv());
    for (int32_t il = 0; il < model_->hparams().n_layer; ++il)
        for (int32_t i = 0; i < n; ++i) {
            if (nodes[i] == i) continue;
            std::copy(kv_.k(il, n_past + nodes[i]), kv_.k(il, n_past + nodes[i]) + dkv, kv_.k(il, n_past + i));
            std::copy(kv_.v(il, n_past + nodes[i]), kv_.v(il, n_past + nodes[i]) + dkv, kv_.v(il, n_past + i));
        }
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

    for (int32_t i = 0; i < n; ++i) get_row(w.token_embd, tokens[i], x + i * d);

    for (int32_t il = 0; il < hp.n_layer; ++il) {
        if (cancelled()) return false;
        const LayerWeights &l = w.layers[size_t(il)];

        // Attention block.
        for (int32_t i = 0; i < n; ++i) rmsnorm(xb + i * d, x + i * d, l.attn_norm.floats(), d, hp.norm_eps);
        matmul(pool_, l.wq, xb, n, q, quant_scratch_);
        matmul(pool_, l.wk, xb, n, k, quant_scratch_);
        matmul(pool_, l.wv, xb, n, v, quant_scratch_);
        for (int32_t i = 0; i < n; ++i) {
            if (l.bq) add(q + i * dq, l.bq.floats(), dq);
            if (l.bk) add(k + i * dkv, l.bk.floats(), dkv);
            if (l.bv) add(v + i * dkv, l.bv.floats(), dkv);
            const int32_t pos = tree ? tree->positions[i] : n_past + i;
            const int32_t slot = n_past + (tree ? tree->offset : 0) + i;
            rope(q + i * dq, hp.n_head, hp, w.rope_freq_factors, pos);
            rope(k + i * dkv, hp.n_head_kv, hp, w.rope_freq_factors, pos);
            std::copy(k + i * dkv, k + (i + 1) * dkv, kv_.k(il, slot));
            std::copy(v + i * dkv, v + (i + 1) * dkv, kv_.v(il, slot));
        }
        if (tree && tree_attention_mode_ == TreeAttention::Hybrid)
            hybrid_tree_attention(il, n, n_past, *tree);
        else
            attention(il, n, n_past, tree);
        matmul(pool_, l.wo, att_out_.data(), n, xb, quant_scratch_);
        add(x, xb, n * d);

        // Feed-forward block (SwiGLU).
        for (int32_t i = 0; i < n; ++i) rmsnorm(xb + i * d, x + i * d, l.ffn_norm.floats(), d, hp.norm_eps);
        matmul(pool_, l.ffn_gate, xb, n, ffn_gate_.data(), quant_scratch_);
        matmul(pool_, l.ffn_up, xb, n, ffn_up_.data(), quant_scratch_);
        swiglu(ffn_gate_.data(), ffn_up_.data(), n * dff);
        matmul(pool_, l.ffn_down, ffn_gate_.data(), n, xb, quant_scratch_);
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
    matmul(pool_, w.output, xb, rows, logits, quant_scratch_);
    return true;
}

// Runs head(h, thread) for every query head: on the pool, or inline when the whole attention is too little
// work (about `keys` keys per query) to share out.
void CpuRunner::for_each_head(int32_t n, int32_t keys, const std::function<void(int64_t, int)> &head) {
    const HParams &hp = model_->hparams();
    const int64_t work = int64_t(hp.n_head) * n * keys * hp.head_dim;
    if (work < (int64_t(1) << 16)) {
        for (int64_t h = 0; h < hp.n_head; ++h) head(h, 0);
    } else {
        pool_.run(hp.n_head, head);
    }
}

// Multi-head attention of the n new queries; grouped-query heads share their KV head. Query i sees the slots
// [0, n_past + i] (causal), or with a tree, the prefix [0, n_past) plus the tree slots its mask row marks. The
// tree case is the causal loop over exactly the keys plain decoding would see for that node, in slot (= position)
// order, so both give bit-identical results (TreeAttention::Exact). Each thread has its own score buffer.
void CpuRunner::attention(int layer, int32_t n, int32_t n_past, const TreeBatch *tree) {
    const HParams &hp = model_->hparams();
    const int32_t hd = hp.head_dim, dq = hp.n_embd_q(), group = hp.n_head / hp.n_head_kv;
    const float scale = 1.0f / std::sqrt(float(hd));
    const int32_t n_tree = tree ? tree->offset + n : 0;
    const int32_t max_keys = n_past + (tree ? n_tree : n);
    ensure(scores_, size_t(pool_.size()) * size_t(max_keys));
    // Scores and the weighted sum run per contiguous run of keys (attention_kernels.h): the prefix (and, without a
    // tree, the causal keys) in one call, visible tree slots one by one, always in slot order. The arithmetic per
    // key is f32_vec_dot's, so a node's result does not depend on how many queries share the batch.
    const size_t dkv = size_t(hp.n_embd_kv());
    for_each_head(n, max_keys, [&](int64_t h, int thread) {
        float *scores = scores_.data() + size_t(thread) * size_t(max_keys);
        const int32_t kv_head = int32_t(h) / group;
        const float *k_base = kv_.k(layer, 0) + kv_head * hd, *v_base = kv_.v(layer, 0) + kv_head * hd;
        for (int32_t i = 0; i < n; ++i) {
            const float *qv = q_.data() + int64_t(i) * dq + h * hd;
            const int32_t run = tree ? n_past : n_past + i + 1;  // contiguous visible keys [0, run)
            const uint8_t *mask = tree ? tree->mask + size_t(i) * size_t(n_tree) : nullptr;
            attention_scores(qv, hd, scale, k_base, dkv, run, scores);
            int32_t n_keys = run;
            for (int32_t j = 0; mask && j < n_tree; ++j)
                if (mask[j]) attention_scores(qv, hd, scale, k_base + size_t(n_past + j) * dkv, dkv, 1, scores + n_keys++);
            softmax(scores, n_keys);
            float *out = att_out_.data() + int64_t(i) * dq + h * hd;
            std::fill(out, out + hd, 0.0f);
            accumulate_weighted(out, hd, scores, v_base, dkv, run);
            int32_t key = run;
            for (int32_t j = 0; mask && j < n_tree; ++j)
                if (mask[j]) accumulate_weighted(out, hd, scores + key++, v_base + size_t(n_past + j) * dkv, dkv, 1);
        }
    });
}

// LongSpec's hybrid tree attention (TreeAttention::Hybrid): each query attends the committed prefix (all of it)
// and the tree (its mask row) separately, each with its log-sum-exp, and the two parts are merged exactly.
void CpuRunner::hybrid_tree_attention(int layer, int32_t n, int32_t n_past, const TreeBatch &tree) {
    const HParams &hp = model_->hparams();
    const int32_t hd = hp.head_dim, dq = hp.n_embd_q(), dkv = hp.n_embd_kv(), group = hp.n_head / hp.n_head_kv;
    const float scale = 1.0f / std::sqrt(float(hd));
    const int32_t n_tree = tree.offset + n;
    ensure(scores_, size_t(pool_.size()) * size_t(hd));
    for_each_head(n, n_past + n_tree, [&](int64_t h, int thread) {
        float *tree_out = scores_.data() + size_t(thread) * size_t(hd);
        const int32_t kv_head = int32_t(h) / group;
        const float *k_base = kv_.k(layer, 0) + kv_head * hd, *v_base = kv_.v(layer, 0) + kv_head * hd;
        for (int32_t i = 0; i < n; ++i) {
            const float *qv = q_.data() + int64_t(i) * dq + h * hd;
            float *out = att_out_.data() + int64_t(i) * dq + h * hd;
            const float lse_prefix = attend_with_lse(qv, hd, scale, k_base, v_base, size_t(dkv), n_past, nullptr, out);
            const float lse_tree = attend_with_lse(qv, hd, scale, k_base + size_t(n_past) * dkv, v_base + size_t(n_past) * dkv,
                                                   size_t(dkv), n_tree, tree.mask + size_t(i) * size_t(n_tree), tree_out);
            merge_attention(out, lse_prefix, tree_out, lse_tree, hd);
        }
    });
}

}  // namespace specula::internal
