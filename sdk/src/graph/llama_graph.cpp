// The llama family, as llama.cpp's build_llama (qwen2 is the same graph; its Q/K/V biases are optional tensors the
// weights bind, and its NEOX rotation is a RoPE setting):
//   x = embed(tokens)
//   per layer: x += Wo · attention(rope(Wq·norm(x) [+bq]), rope(Wk·norm(x) [+bk]), Wv·norm(x) [+bv]) [+bo]
//              x += Wdown · (silu(Wgate·norm(x)) * Wup·norm(x))
//   hidden = norm(x);  logits = Wout · hidden
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
        b.matmul(q, xb, l.wq);
        b.matmul(k, xb, l.wk);
        b.matmul(v, xb, l.wv);
        b.add_bias(q, l.bq);
        b.add_bias(k, l.bk);
        b.add_bias(v, l.bv);
        b.rope(q, hp.n_head);
        b.rope(k, hp.n_head_kv);
        b.store_kv(KvStore::Model, il, k, v);
        b.attention(att, q, KvStore::Model, il, 0);
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
