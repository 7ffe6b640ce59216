// The llama family, as llama.cpp's build_llama (qwen2, qwen3 and phi3 are the same graph: qwen2's Q/K/V biases are
// tensors the weights bind, qwen3's per-head query and key norms too, phi3's fused Q/K/V and gate/up matrices are
// views of their rows (model/weights.cpp), its windowed attention on every layer and LongRoPE are settings, and the
// NEOX rotation is a RoPE setting):
//   x = embed(tokens)
//   per layer: x += Wo · attention(rope([qnorm] (Wq·norm(x) [+bq])), rope([knorm] (Wk·norm(x) [+bk])), Wv·norm(x) [+bv]) [+bo]
//              x += Wdown · (silu(Wgate·norm(x)) * Wup·norm(x))
//   (mixture of experts: Mixtral, qwen2moe, qwen3moe, as llama.cpp's build_moe_ffn)
//              h = norm(x);  route = top_k(softmax(Wrouter·h))   (weights renormalized but in qwen2moe)
//              x += sum_j w_j · Wdown[e_j] · (silu(Wgate[e_j]·h) * Wup[e_j]·h)
//                   [+ sigmoid(wshared·h) · Wdown_s · (silu(Wgate_s·h) * Wup_s·h)]   (qwen2moe's shared expert)
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
    const bool moe = hp.is_moe(), shared = hp.n_ff_shexp > 0;
    const int32_t top_k = hp.n_expert_used;
    const TensorId gate = moe ? -1 : g.add_tensor("ffn_gate", hp.n_ff), up = moe ? -1 : g.add_tensor("ffn_up", hp.n_ff);
    const TensorId router = moe ? g.add_tensor("ffn_moe_logits", hp.n_expert) : -1;
    const TensorId route = moe ? g.add_tensor("ffn_moe_route", 2 * top_k) : -1;
    const TensorId exp_gate = moe ? g.add_tensor("ffn_moe_gate", top_k * hp.n_ff_exp) : -1;
    const TensorId exp_up = moe ? g.add_tensor("ffn_moe_up", top_k * hp.n_ff_exp) : -1;
    const TensorId exp_down = moe ? g.add_tensor("ffn_moe_down", top_k * hp.n_embd) : -1;
    const TensorId moe_out = moe ? g.add_tensor("ffn_moe_out", hp.n_embd) : -1;
    const TensorId sh_gate_inp = shared ? g.add_tensor("ffn_shexp_gate_inp", 1) : -1;
    const TensorId sh_gate = shared ? g.add_tensor("ffn_shexp_gate", hp.n_ff_shexp) : -1;
    const TensorId sh_up = shared ? g.add_tensor("ffn_shexp_up", hp.n_ff_shexp) : -1;
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
        b.rmsnorm(xb, x, l.ffn_norm, hp.norm_eps);
        if (moe) {
            // Mixture of experts: the route, then each row's top_k experts (SwiGLU), mixed by their weights.
            b.matmul(router, xb, l.ffn_gate_inp);
            b.route(route, router, top_k, hp.expert_weights_norm);
            b.expert_matmul(exp_gate, xb, route, l.ffn_gate_exps, top_k);
            b.expert_matmul(exp_up, xb, route, l.ffn_up_exps, top_k);
            b.swiglu(exp_gate, exp_up);
            b.expert_matmul(exp_down, exp_gate, route, l.ffn_down_exps, top_k);
            b.mix_experts(moe_out, exp_down, route, top_k);
            if (shared) {  // qwen2moe's shared expert, gated by sigmoid(wshared · h)
                b.matmul(sh_gate_inp, xb, l.ffn_gate_inp_shexp);
                b.matmul(sh_gate, xb, l.ffn_gate_shexp);
                b.matmul(sh_up, xb, l.ffn_up_shexp);
                b.swiglu(sh_gate, sh_up);
                b.matmul(xb, sh_gate, l.ffn_down_shexp);
                b.sigmoid_gate(xb, sh_gate_inp);
                b.add(moe_out, xb);
            }
            b.add(x, moe_out);
            continue;
        }
        // Feed-forward block (SwiGLU).
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
