// The llama family, as llama.cpp's build_llama (qwen2, qwen3 and phi3 are the same graph: qwen2's Q/K/V biases are
// tensors the weights bind, qwen3's per-head query and key norms too, phi3's fused Q/K/V and gate/up matrices are
// views of their rows (model/weights.cpp), its windowed attention on every layer and LongRoPE are settings, and the
// NEOX rotation is a RoPE setting):
//   x = embed(tokens)
//   per layer: x += Wo · attention(rope([qnorm] (Wq·norm(x) [+bq])), rope([knorm] (Wk·norm(x) [+bk])), Wv·norm(x) [+bv]) [+bo]
//              x += Wdown · (silu(Wgate·norm(x)) * Wup·norm(x))
//   hidden = norm(x);  logits = Wout · hidden
#include "graph/batch_rows.h"
#include "graph/model_graph.h"

#include "model/model.h"

#include <algorithm>

namespace specula::internal {

void build_llama_graph(const Model &model, Graph &g) {
    const HParams &hp = model.hparams();
    const ModelWeights &w = model.weights();
    const TensorId x = g.add_tensor("x", hp.n_embd), xb = g.add_tensor("xb", hp.n_embd);
    const TensorId q = g.add_tensor("q", hp.n_embd_q()), k = g.add_tensor("k", hp.n_embd_kv()), v = g.add_tensor("v", hp.n_embd_kv());
    const TensorId att = g.add_tensor("att", hp.n_embd_q());
    // qwen3 norms each head of the projections: they are projected into their own tensors first.
    const TensorId q_proj = hp.has_qk_norm ? g.add_tensor("q_proj", hp.n_embd_q()) : q;
    const TensorId k_proj = hp.has_qk_norm ? g.add_tensor("k_proj", hp.n_embd_kv()) : k;
    const TensorId gate = g.add_tensor("ffn_gate", hp.n_ff), up = g.add_tensor("ffn_up", hp.n_ff);
    g.hidden = g.add_tensor("hidden", hp.n_embd);
    g.logits = g.add_tensor("logits", hp.n_vocab);

    GraphBuilder b(g, kBodyStage);
    b.embed(x, w.token_embd);
    for (int32_t il = 0; il < hp.n_layer; ++il) {
        const LayerWeights &l = w.layers[size_t(il)];
        b.layer(il);
        // Attention block.
        b.rmsnorm(xb, x, l.attn_norm, hp.norm_eps);
        b.matmul(q_proj, xb, l.wq);
        b.matmul(k_proj, xb, l.wk);
        b.matmul(v, xb, l.wv);
        b.add_bias(q_proj, l.bq);
        b.add_bias(k_proj, l.bk);
        b.add_bias(v, l.bv);
        if (hp.has_qk_norm) {
            b.rmsnorm_heads(q, q_proj, l.q_norm, hp.norm_eps, hp.n_head);
            b.rmsnorm_heads(k, k_proj, l.k_norm, hp.norm_eps, hp.n_head_kv);
        }
        b.rope(q, hp.n_head);
        b.rope(k, hp.n_head_kv);
        b.store_kv(KvStore::Model, il, k, v);
        // phi3's layers attend to a window of keys, rotated as every other layer's (hparams.h: swa_own_rope false).
        if (hp.is_swa_layer(il)) b.attention_sliding(att, q, il, kSlidingKeys);
        else b.attention(att, q, KvStore::Model, il, 0);
        b.matmul(xb, att, l.wo);
        b.add_bias(xb, l.bo);
        b.add(x, xb);
        // Feed-forward block (SwiGLU).
        b.rmsnorm(xb, x, l.ffn_norm, hp.norm_eps);
        b.matmul(gate, xb, l.ffn_gate);
        b.matmul(up, xb, l.ffn_up);
        b.swiglu(gate, up);
        b.matmul(xb, gate, l.ffn_down);
        b.add(x, xb);
    }
    b.layer(-1);
    b.rmsnorm(g.hidden, x, w.output_norm, hp.norm_eps);

    GraphBuilder head(g, kHeadStage);
    head.matmul(g.logits, g.hidden, w.output);
}

}  // namespace specula::internal
