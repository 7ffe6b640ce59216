// The Gemma family, as llama.cpp's build_gemma2 / build_gemma3 (and transformers' modeling_gemma2.py / _gemma3.py):
//   x = embed(tokens) * sqrt(n_embd)
//   per layer: x += postnorm(Wo · attention(rope([qnorm] (Wq·norm(x))), rope([knorm] (Wk·norm(x))), Wv·norm(x)))
//              x += postnorm(Wdown · (gelu(Wgate·norm(x)) * Wup·norm(x)))
//   hidden = norm(x);  logits = [softcap] (Wout · hidden)   (Wout = the embedding table: Gemma ties them)
// Gemma's RMSNorm multiplies by (1 + w); GGUF files store w + 1 (llama.cpp's converter adds it), so these are the
// plain rms_norm of every other architecture. gemma3: per-head Q/K norms, five local layers attending to a sliding
// window of n_swa positions with RoPE base 10000, then one global layer with the file's RoPE base and scaling.
// gemma2: no Q/K norms, local (even) and global (odd) layers alternating with one RoPE, attention scores and final
// logits soft-capped (cap * tanh(x / cap)). The variations are hparams.h's.
#include "graph/batch_rows.h"
#include "graph/model_graph.h"

#include "model/model.h"

#include <cmath>

namespace specula::internal {

void build_gemma_graph(const Model &model, Graph &g) {
    const HParams &hp = model.hparams();
    const ModelWeights &w = model.weights();
    const TensorId x = g.add_tensor("x", hp.n_embd), xb = g.add_tensor("xb", hp.n_embd);
    const TensorId q = g.add_tensor("q", hp.n_embd_q()), k = g.add_tensor("k", hp.n_embd_kv()), v = g.add_tensor("v", hp.n_embd_kv());
    // With Q/K norms (gemma3) the projections get their own tensors, normed into q and k.
    const TensorId q_proj = hp.has_qk_norm ? g.add_tensor("q_proj", hp.n_embd_q()) : q;
    const TensorId k_proj = hp.has_qk_norm ? g.add_tensor("k_proj", hp.n_embd_kv()) : k;
    const TensorId att = g.add_tensor("att", hp.n_embd_q());
    const TensorId gate = g.add_tensor("ffn_gate", hp.n_ff), up = g.add_tensor("ffn_up", hp.n_ff);
    const TensorId post = g.add_tensor("post", hp.n_embd);
    g.hidden = g.add_tensor("hidden", hp.n_embd);
    g.logits = g.add_tensor("logits", hp.n_vocab);

    GraphBuilder b(g, kBodyStage);
    b.embed(x, w.token_embd);
    b.scale(x, std::sqrt(float(hp.n_embd)));
    for (int32_t il = 0; il < hp.n_layer; ++il) {
        const LayerWeights &l = w.layers[size_t(il)];
        const bool sliding = hp.is_swa_layer(il);
        b.layer(il);
        // Attention block.
        b.rmsnorm(xb, x, l.attn_norm, hp.norm_eps);
        b.matmul(q_proj, xb, l.wq);
        b.matmul(k_proj, xb, l.wk);
        b.matmul(v, xb, l.wv);
        if (hp.has_qk_norm) {
            b.rmsnorm_heads(q, q_proj, l.q_norm, hp.norm_eps, hp.n_head);
            b.rmsnorm_heads(k, k_proj, l.k_norm, hp.norm_eps, hp.n_head_kv);
        }
        if (sliding) {
            b.rope_sliding(q, hp.n_head);
            b.rope_sliding(k, hp.n_head_kv);
        } else {
            b.rope(q, hp.n_head);
            b.rope(k, hp.n_head_kv);
        }
        b.store_kv(KvStore::Model, il, k, v);
        if (sliding) b.attention_sliding(att, q, il, kSlidingKeys, hp.attn_softcap);
        else b.attention(att, q, KvStore::Model, il, 0, hp.attn_softcap);
        b.matmul(xb, att, l.wo);
        b.rmsnorm(post, xb, l.attn_post_norm, hp.norm_eps);
        b.add(x, post);
        // Feed-forward block (GeGLU).
        b.rmsnorm(xb, x, l.ffn_norm, hp.norm_eps);
        b.matmul(gate, xb, l.ffn_gate);
        b.matmul(up, xb, l.ffn_up);
        b.geglu(gate, up);
        b.matmul(xb, gate, l.ffn_down);
        b.rmsnorm(post, xb, l.ffn_post_norm, hp.norm_eps);
        b.add(x, post);
    }
    b.layer(-1);
    b.rmsnorm(g.hidden, x, w.output_norm, hp.norm_eps);

    GraphBuilder head(g, kHeadStage);
    head.matmul(g.logits, g.hidden, w.output);
    if (hp.final_softcap > 0) head.softcap(g.logits, hp.final_softcap);
}

}  // namespace specula::internal
