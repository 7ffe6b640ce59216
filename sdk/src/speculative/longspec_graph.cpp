#include "speculative/longspec_graph.h"

#include "model/model.h"
#include "speculative/longspec_draft_file.h"

#include <cmath>

namespace specula::internal {

std::shared_ptr<const Graph> build_longspec_graph(const std::shared_ptr<const LongSpecDraft> &draft, int32_t max_tree_nodes, int32_t n_ctx) {
    auto g = std::make_shared<Graph>();
    const Model &target = draft->target();
    const HParams &hp = target.hparams();
    const LongSpecDraftConfig &cfg = draft->config();
    const LongSpecWeights &w = draft->weights();
    const ModelWeights &tw = target.weights();
    g->name = "longspec";
    g->hp = hp;  // RoPE at the target's settings and real positions
    g->rope_freq_factors = tw.rope_freq_factors_for(hp, n_ctx);  // as the target's keys it cross-attends
    g->attention_scale = 1.0f / std::sqrt(float(hp.head_dim));
    g->n_model_layers = hp.n_layer;
    g->local_kv_slots = cfg.window + 1 + max_tree_nodes;
    g->sources.push_back(WeightSource{&draft->file().bytes(), &draft->backend_cache(), draft});
    g->sources.push_back(WeightSource{&target.file().bytes(), &target.backend_cache(), draft->target_ptr()});

    const TensorId x = g->add_tensor("x", hp.n_embd), xb = g->add_tensor("xb", hp.n_embd);
    const TensorId q = g->add_tensor("q", hp.n_embd_q()), k = g->add_tensor("k", hp.n_embd_kv()), v = g->add_tensor("v", hp.n_embd_kv());
    const TensorId att = g->add_tensor("att", hp.n_embd_q());
    const TensorId gate = g->add_tensor("ffn_gate", cfg.n_ff), up = g->add_tensor("ffn_up", cfg.n_ff);
    g->logits = g->add_tensor("logits", hp.n_vocab);

    // The input is the token's embedding alone, so a committed token's self-attention key/value depend only on
    // (token, position): both stages project them the same way.
    const auto project_kv = [&](GraphBuilder &b) {
        b.embed(x, tw.token_embd);
        b.rmsnorm(xb, x, w.attn_norm, cfg.norm_eps);
        b.matmul(k, xb, w.wk);
        b.matmul(v, xb, w.wv);
        b.add_bias(k, w.bk);
        b.add_bias(v, w.bv);
        b.rope(k, hp.n_head_kv);
    };

    GraphBuilder ring(*g, kRingStage);
    project_kv(ring);
    ring.store_kv(KvStore::Local, 0, k, v);

    GraphBuilder level(*g, kLevelStage);
    project_kv(level);
    level.matmul(q, xb, w.wq);
    level.add_bias(q, w.bq);
    level.rope(q, hp.n_head);
    level.store_kv(KvStore::Local, 0, k, v);  // the nodes' slots (the root is in the ring already)
    level.attention(att, q, KvStore::Local, 0, 0);
    level.matmul(xb, att, w.wo);
    level.add(x, xb);
    // Cross-attention onto the target's committed keys/values of the cross layer (already rotated).
    level.rmsnorm(xb, x, w.cross_norm, cfg.norm_eps);
    level.matmul(q, xb, w.cross_wq);
    level.add_bias(q, w.cross_bq);
    level.rope(q, hp.n_head);
    level.attention(att, q, KvStore::Model, cfg.cross_layer, 1);
    level.matmul(xb, att, w.cross_wo);
    level.add(x, xb);
    // SwiGLU MLP, then the target's LM head without a final norm (as the reference, which trained it that way).
    level.rmsnorm(xb, x, w.ffn_norm, cfg.norm_eps);
    level.matmul(gate, xb, w.ffn_gate);
    level.matmul(up, xb, w.ffn_up);
    level.swiglu(gate, up);
    level.matmul(xb, gate, w.ffn_down);
    level.add(x, xb);
    level.matmul(g->logits, x, tw.output);
    return g;
}

}  // namespace specula::internal
