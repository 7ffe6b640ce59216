#include "weights.h"

#include "formats/type_kernels.h"
#include "core/error.h"
#include "model/rope_scaling.h"
#include "gguf/gguf_file.h"

#include <cmath>
#include <tuple>


namespace specula::internal {
namespace {

std::string shape_text(const TensorInfo &t) {
    std::string s = "[";
    for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.dims[d]);
    return s + "]";
}

// t (its shape checked by the caller) as `rows` rows of `cols` elements, of a type the CPU backend computes with.
WeightView view_of(const TensorInfo &t, const std::string &name, int64_t cols, int64_t rows) {
    require(find_type_kernels(t.type) != nullptr, SPECULA_ERR_UNSUPPORTED,
            "model: tensor '" + name + "' has type " + tensor_type_name(t.type) + ", which the CPU backend does not support yet");
    WeightView w;
    w.data = t.data;
    w.type = t.type;
    w.cols = cols;
    w.rows = rows;
    w.row_bytes = size_t(t.n_bytes / uint64_t(rows));
    return w;
}

// A tensor that must exist with exactly shape {cols} (vector) or {cols, rows} (matrix).
WeightView bind_tensor(const GgufFile &file, const std::string &name, int64_t cols, int64_t rows, bool vector, bool optional = false) {
    const TensorInfo *t = file.find_tensor(name);
    if (t == nullptr) {
        require(optional, SPECULA_ERR_FORMAT, "model: tensor '" + name + "' is missing");
        return {};
    }
    const bool shape_ok = vector ? (t->n_dims == 1 && t->dims[0] == cols)
                                 : (t->n_dims == 2 && t->dims[0] == cols && t->dims[1] == rows);
    require(shape_ok, SPECULA_ERR_FORMAT,
            "model: tensor '" + name + "' has shape " + shape_text(*t) + ", expected [" + std::to_string(cols) +
                (vector ? "" : ", " + std::to_string(rows)) + "]");
    const WeightView w = view_of(*t, name, cols, vector ? 1 : rows);
    // Norm weights and biases are read as plain floats.
    require(!vector || t->type == uint32_t(TensorType::F32), SPECULA_ERR_UNSUPPORTED,
            "model: vector tensor '" + name + "' must be F32, not " + tensor_type_name(t->type));
    return w;
}

// A stacked tensor of n experts' matrices, shape {cols, rows, n} (llama.cpp's ffn_*_exps): one view per expert.
std::vector<WeightView> bind_experts(const GgufFile &file, const std::string &name, int64_t cols, int64_t rows, int32_t n) {
    const TensorInfo *t = file.find_tensor(name);
    require(t != nullptr, SPECULA_ERR_FORMAT, "model: tensor '" + name + "' is missing");
    require(t->n_dims == 3 && t->dims[0] == cols && t->dims[1] == rows && t->dims[2] == n, SPECULA_ERR_FORMAT,
            "model: tensor '" + name + "' has shape " + shape_text(*t) + ", expected [" + std::to_string(cols) + ", " +
                std::to_string(rows) + ", " + std::to_string(n) + "]");
    const WeightView all = view_of(*t, name, cols, rows * n);
    std::vector<WeightView> experts;
    for (int32_t e = 0; e < n; ++e) experts.push_back(all.rows_view(int64_t(e) * rows, rows));
    return experts;
}

// A one-row matrix stored as a vector {cols} (qwen2moe's ffn_gate_inp_shexp), or as {cols, 1}.
WeightView bind_row_matrix(const GgufFile &file, const std::string &name, int64_t cols) {
    const TensorInfo *t = file.find_tensor(name);
    require(t != nullptr, SPECULA_ERR_FORMAT, "model: tensor '" + name + "' is missing");
    require(t->dims[0] == cols && (t->n_dims == 1 || (t->n_dims == 2 && t->dims[1] == 1)), SPECULA_ERR_FORMAT,
            "model: tensor '" + name + "' has shape " + shape_text(*t) + ", expected [" + std::to_string(cols) + "]");
    return view_of(*t, name, cols, 1);
}

}  // namespace

ModelWeights bind_weights(const GgufFile &file, HParams &hp) {
    ModelWeights w;
    const TensorInfo *embd = file.find_tensor("token_embd.weight");
    require(embd != nullptr, SPECULA_ERR_FORMAT, "model: tensor 'token_embd.weight' is missing");
    require(embd->n_dims == 2 && embd->dims[0] == hp.n_embd, SPECULA_ERR_FORMAT,
            "model: tensor 'token_embd.weight' has shape " + shape_text(*embd) + ", expected [" + std::to_string(hp.n_embd) + ", n_vocab]");
    require(embd->dims[1] <= (int64_t(1) << 24), SPECULA_ERR_FORMAT, "model: vocabulary of " + std::to_string(embd->dims[1]) + " tokens is absurd");
    hp.n_vocab = int32_t(embd->dims[1]);

    w.token_embd = bind_tensor(file, "token_embd.weight", hp.n_embd, hp.n_vocab, false);
    w.output_norm = bind_tensor(file, "output_norm.weight", hp.n_embd, 1, true);
    const bool starcoder2 = hp.arch == Architecture::Starcoder2;
    if (starcoder2) w.output_norm_b = bind_tensor(file, "output_norm.bias", hp.n_embd, 1, true);
    w.output = bind_tensor(file, "output.weight", hp.n_embd, hp.n_vocab, false, /*optional=*/true);
    if (!w.output) {
        w.output = w.token_embd;
        w.tied_output = true;
    }

    if (const TensorInfo *rf = file.find_tensor("rope_freqs.weight")) {
        require(rf->type == uint32_t(TensorType::F32) && rf->n_dims == 1 && rf->dims[0] == hp.rope_dim / 2, SPECULA_ERR_FORMAT,
                "model: tensor 'rope_freqs.weight' must be F32 of shape [" + std::to_string(hp.rope_dim / 2) + "]");
        const float *f = reinterpret_cast<const float *>(rf->data);
        w.rope_freq_factors.assign(f, f + hp.rope_dim / 2);
        hp.rope_scaling = RopeScaling::Llama3;
    } else if (hp.rope_scaling == RopeScaling::Llama3) {
        w.rope_freq_factors = llama3_rope_freq_factors(hp);
    }
    if (hp.arch == Architecture::Phi3) {
        // LongRoPE's factors, both or neither (Phi-3-mini-4k has none). Converters write head_dim/2 (llama.cpp
        // 2025-02) or rope_dim/2 (later, for partial rotation: Phi-4-mini) values; RoPE reads the first rope_dim/2.
        const TensorInfo *lf = file.find_tensor("rope_factors_long.weight"), *sf = file.find_tensor("rope_factors_short.weight");
        require((lf == nullptr) == (sf == nullptr), SPECULA_ERR_FORMAT, "model: phi3 needs both rope_factors_long and rope_factors_short, or neither");
        for (const auto &[t, out, name] : {std::tuple{lf, &w.rope_freq_factors_long, "rope_factors_long"}, std::tuple{sf, &w.rope_freq_factors, "rope_factors_short"}}) {
            if (t == nullptr) continue;
            require(t->type == uint32_t(TensorType::F32) && t->n_dims == 1 && (t->dims[0] == hp.rope_dim / 2 || t->dims[0] == hp.head_dim / 2),
                    SPECULA_ERR_FORMAT, std::string("model: tensor '") + name + ".weight' must be F32 of shape [" + std::to_string(hp.rope_dim / 2) + "]");
            const float *f = reinterpret_cast<const float *>(t->data);
            for (int32_t i = 0; i < hp.rope_dim / 2; ++i)
                require(std::isfinite(f[i]) && f[i] > 0, SPECULA_ERR_FORMAT, std::string("model: tensor '") + name + ".weight' holds a factor <= 0 or not finite");
            out->assign(f, f + hp.rope_dim / 2);
        }
    }

    const int64_t q = hp.n_embd_q(), kv = hp.n_embd_kv();
    for (int32_t il = 0; il < hp.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        LayerWeights l;
        l.attn_norm = bind_tensor(file, p + "attn_norm.weight", hp.n_embd, 1, true);
        if (starcoder2) {  // LayerNorm biases, and biases on the output projection and both MLP matrices (required)
            l.attn_norm_b = bind_tensor(file, p + "attn_norm.bias", hp.n_embd, 1, true);
            l.ffn_norm_b = bind_tensor(file, p + "ffn_norm.bias", hp.n_embd, 1, true);
            l.ffn_up_b = bind_tensor(file, p + "ffn_up.bias", hp.n_ff, 1, true);
            l.ffn_down_b = bind_tensor(file, p + "ffn_down.bias", hp.n_embd, 1, true);
        }
        // phi3 fuses Q, K and V into one matrix (attn_qkv: Q's rows, then K's, then V's): three views of its rows.
        const WeightView qkv = hp.arch == Architecture::Phi3 ? bind_tensor(file, p + "attn_qkv.weight", hp.n_embd, q + 2 * kv, false, true) : WeightView{};
        if (qkv) {
            l.wq = qkv.rows_view(0, q);
            l.wk = qkv.rows_view(q, kv);
            l.wv = qkv.rows_view(q + kv, kv);
        } else {
            l.wq = bind_tensor(file, p + "attn_q.weight", hp.n_embd, q, false);
            l.wk = bind_tensor(file, p + "attn_k.weight", hp.n_embd, kv, false);
            l.wv = bind_tensor(file, p + "attn_v.weight", hp.n_embd, kv, false);
        }
        l.wo = bind_tensor(file, p + "attn_output.weight", q, hp.n_embd, false);
        // Biases: qwen2's Q/K/V ones are required; llama's Q/K/V and output ones are optional (as llama.cpp binds
        // them: some llama-architecture conversions carry them). The graph adds each bias a layer has.
        l.bq = bind_tensor(file, p + "attn_q.bias", q, 1, true, !hp.has_qkv_bias);
        l.bk = bind_tensor(file, p + "attn_k.bias", kv, 1, true, !hp.has_qkv_bias);
        l.bv = bind_tensor(file, p + "attn_v.bias", kv, 1, true, !hp.has_qkv_bias);
        l.bo = bind_tensor(file, p + "attn_output.bias", hp.n_embd, 1, true, !starcoder2);
        if (hp.has_qk_norm) {
            l.q_norm = bind_tensor(file, p + "attn_q_norm.weight", hp.head_dim, 1, true);
            l.k_norm = bind_tensor(file, p + "attn_k_norm.weight", hp.head_dim, 1, true);
        }
        l.ffn_norm = bind_tensor(file, p + "ffn_norm.weight", hp.n_embd, 1, true);
        if (hp.has_post_norms) {  // llama.cpp's names; Gemma's (1 + w) norm weights are stored with the 1 added
            l.attn_post_norm = bind_tensor(file, p + "post_attention_norm.weight", hp.n_embd, 1, true);
            l.ffn_post_norm = bind_tensor(file, p + "post_ffw_norm.weight", hp.n_embd, 1, true);
        }
        if (hp.is_moe()) {
            // As llama.cpp's llama (Mixtral), qwen2moe and qwen3moe: the router, the stacked experts, and qwen2moe's
            // shared expert with its gate.
            const int32_t n = hp.n_expert;
            l.ffn_gate_inp = bind_tensor(file, p + "ffn_gate_inp.weight", hp.n_embd, n, false);
            l.ffn_gate_exps = bind_experts(file, p + "ffn_gate_exps.weight", hp.n_embd, hp.n_ff_exp, n);
            l.ffn_up_exps = bind_experts(file, p + "ffn_up_exps.weight", hp.n_embd, hp.n_ff_exp, n);
            l.ffn_down_exps = bind_experts(file, p + "ffn_down_exps.weight", hp.n_ff_exp, hp.n_embd, n);
            if (hp.n_ff_shexp > 0) {
                l.ffn_gate_inp_shexp = bind_row_matrix(file, p + "ffn_gate_inp_shexp.weight", hp.n_embd);
                l.ffn_gate_shexp = bind_tensor(file, p + "ffn_gate_shexp.weight", hp.n_embd, hp.n_ff_shexp, false);
                l.ffn_up_shexp = bind_tensor(file, p + "ffn_up_shexp.weight", hp.n_embd, hp.n_ff_shexp, false);
                l.ffn_down_shexp = bind_tensor(file, p + "ffn_down_shexp.weight", hp.n_ff_shexp, hp.n_embd, false);
            }
        } else if (hp.arch == Architecture::Phi3) {
            // ffn_up holds the gate's rows, then the up projection's (llama.cpp's LLM_FFN_SWIGLU splits it in halves).
            const WeightView gate_up = bind_tensor(file, p + "ffn_up.weight", hp.n_embd, 2 * int64_t(hp.n_ff), false);
            l.ffn_gate = gate_up.rows_view(0, hp.n_ff);
            l.ffn_up = gate_up.rows_view(hp.n_ff, hp.n_ff);
        } else {
            if (!starcoder2) l.ffn_gate = bind_tensor(file, p + "ffn_gate.weight", hp.n_embd, hp.n_ff, false);
            l.ffn_up = bind_tensor(file, p + "ffn_up.weight", hp.n_embd, hp.n_ff, false);
        }
        if (!hp.is_moe()) l.ffn_down = bind_tensor(file, p + "ffn_down.weight", hp.n_ff, hp.n_embd, false);
        w.layers.push_back(l);
    }
    return w;
}

}  // namespace specula::internal
