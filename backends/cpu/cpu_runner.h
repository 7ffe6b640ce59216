// Runs a model's forward pass on the CPU for one session: owns the KV cache, the thread pool and all scratch
// memory, so evaluating tokens allocates nothing once the largest batch has been seen.
#pragma once

#include "backends/cpu/kv_cache.h"
#include "backends/cpu/thread_pool.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace specula::internal {

class Model;

class CpuRunner {
public:
    CpuRunner(std::shared_ptr<const Model> model, int32_t n_ctx, int n_threads);

    // Evaluates n tokens that occupy KV slots (and positions) [n_past, n_past + n); each attends causally to
    // slots [0, its own]. Writes n_vocab logits for the last token into `logits`, or for every token
    // (n * n_vocab floats) when all_logits. The caller guarantees n_past + n <= n_ctx and valid token ids.
    void eval(const int32_t *tokens, int32_t n, int32_t n_past, float *logits, bool all_logits);

    // Evaluates n nodes of a speculation tree with hybrid tree attention. Node i (token tokens[i], RoPE
    // position positions[i]) is written to KV slot n_past + tree_offset + i and attends to every committed slot
    // [0, n_past) plus the tree slots n_past + j (j < tree_offset + n) with mask[i * (tree_offset + n) + j] != 0
    // (itself and its ancestors). Tree slots [n_past, n_past + tree_offset) hold earlier levels of the same tree.
    // Writes n rows of n_vocab logits, or, with logits == nullptr, keeps the nodes' final hidden states so that
    // tree_logits() computes only the rows a verifier visits (the LM head is most of a node's cost for large
    // vocabularies). The caller guarantees n_past + tree_offset + n <= n_ctx.
    void eval_tree(const int32_t *tokens, int32_t n, int32_t n_past, int32_t tree_offset, const int32_t *positions,
                   const uint8_t *mask, float *logits);
    // Logits of row i of the last eval_tree(..., nullptr) call (bit-identical to computing all rows).
    void tree_logits(int32_t i, float *logits);
    // Commits an accepted tree path: moves the keys/values of tree slots n_past + nodes[i] to slot n_past + i in
    // every layer. nodes must be strictly increasing with nodes[i] >= i (parents precede children).
    void commit_tree_path(int32_t n_past, const int32_t *nodes, int32_t n);

    // How eval_tree() attends. Exact (default): each node's softmax runs over the committed prefix and then its
    // ancestors, in position order, with the same arithmetic as eval() -- so a token's logits are bit-identical
    // whether it is verified in a tree or decoded alone. Greedy speculative decoding is only token-for-token
    // lossless with that property: quantized targets (Q8_0 activations) amplify the last-bit differences of a
    // reordered softmax into flipped near-ties. Hybrid: LongSpec's split form (paper Appendix C), prefix part and
    // masked tree part each with its log-sum-exp, merged; equal to Exact up to float rounding (tested), and the
    // form the GPU backends use.
    enum class TreeAttention { Exact, Hybrid };
    void set_tree_attention(TreeAttention mode) { tree_attention_mode_ = mode; }

    // The cache itself, for drafters that read the target's keys/values (LongSpec's cross-attention).
    const KvCache &kv() const { return kv_; }
    // The runner's threads, shared with drafters that run between its forward passes.
    ThreadPool &pool() { return pool_; }

    int32_t n_ctx() const { return kv_.n_ctx(); }
    int n_threads() const { return pool_.size(); }
    size_t kv_bytes() const { return kv_.bytes(); }

private:
    struct TreeBatch {
        int32_t offset;
        const int32_t *positions;
        const uint8_t *mask;
    };
    void forward(const int32_t *tokens, int32_t n, int32_t n_past, const TreeBatch *tree, float *logits, bool all_logits);
    void attention(int layer, int32_t n, int32_t n_past, const TreeBatch *tree);
    void hybrid_tree_attention(int layer, int32_t n, int32_t n_past, const TreeBatch &tree);
    void for_each_head(int32_t n, int32_t keys, const std::function<void(int64_t, int)> &head);

    std::shared_ptr<const Model> model_;
    TreeAttention tree_attention_mode_ = TreeAttention::Exact;
    KvCache kv_;
    ThreadPool pool_;
    // Scratch, sized for the largest batch seen so far.
    std::vector<float> hidden_;  // final normed rows kept by eval_tree(..., nullptr)
    std::vector<float> x_, xb_, q_, k_, v_, att_out_, ffn_gate_, ffn_up_, scores_;
    std::vector<uint8_t> quant_scratch_;
};

}  // namespace specula::internal
