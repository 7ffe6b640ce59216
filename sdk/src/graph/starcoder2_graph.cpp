// StarCoder2, as llama.cpp's build_starcoder2 (and transformers' modeling_starcoder2.py): LayerNorms with biases, biases
// on every projection, a GELU MLP without a gate, NEOX RoPE over whole heads:
//   x = embed(tokens)
//   per layer: h = layernorm(x) * w + b
//              x += Wo · attention(rope(Wq·h + bq), rope(Wk·h + bk), Wv·h + bv) + bo
//              h = layernorm(x) * w + b
//              x += Wdown · gelu(Wup·h + b_up) + b_down
//   hidden = layernorm(x) * w + b;  logits = Wout · hidden   (Wout = the embedding table in the 3B and 7B)
#include "graph/model_graph.h"

#include "model/model.h"

namespace specula::internal {

void build_starcoder2_graph(const Model &model, Graph &g) {
    const HParams &hp = model.hparams();
    const ModelWeights &w = model.weights();
    const TensorId x = g.add_tensor("x", hp.n_embd), xb = g.add_tensor("xb", hp.n_embd);
    const TensorId q = g.add_tensor("q", hp.n_embd_q()), k = g.add_tensor("k", hp.n_embd_kv()), v = g.add_tensor("v", hp.n_embd_kv());
    const TensorId att = g.add_tensor("att", hp.n_embd_q());
    const TensorId up = g.add_tensor("ffn_up", hp.n_ff);
    g.hidden = g.add_tensor("hidden", hp.n_embd);
    g.logits = g.add_tensor("logits", hp.n_vocab);

    GraphBuilder b(g, kBodyStage);
    b.embed(x, w.token_embd);
    for (int32_t il = 0; il < hp.n_layer; ++il) {
        const LayerWeights &l = w.layers[size_t(il)];
        b.layer(il);
        // Attention block.
        b.layernorm(xb, x, l.attn_norm, hp.norm_eps);
        b.add_bias(xb, l.attn_norm_b);
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
        // Feed-forward block (GELU).
        b.layernorm(xb, x, l.ffn_norm, hp.norm_eps);
        b.add_bias(xb, l.ffn_norm_b);
        b.matmul(up, xb, l.ffn_up);
        b.add_bias(up, l.ffn_up_b);
        b.gelu(up);
        b.matmul(xb, up, l.ffn_down);
        b.add_bias(xb, l.ffn_down_b);
        b.add(x, xb);
    }
    b.layer(-1);
    b.layernorm(g.hidden, x, w.output_norm, hp.norm_eps);
    b.add_bias(g.hidden, w.output_norm_b);

    GraphBuilder head(g, kHeadStage);
    head.matmul(g.logits, g.hidden, w.output);
}

}  // namespace specula::internal
