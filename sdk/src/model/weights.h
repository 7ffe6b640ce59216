// Views of a model's weight tensors inside the mapped GGUF bytes (no copies). A matrix view follows ggml:
// `cols` (ne0) is the contiguous input dimension, `rows` (ne1) the output dimension, so y = W x computes
// one dot product per row.
#pragma once

#include "model/hparams.h"

#include <cstdint>
#include <vector>

namespace specula::internal {

struct WeightView {
    const uint8_t *data = nullptr;
    uint32_t type = 0;      // ggml type id
    int64_t cols = 0;       // ne0
    int64_t rows = 1;       // ne1
    size_t row_bytes = 0;

    explicit operator bool() const { return data != nullptr; }
    const uint8_t *row(int64_t r) const { return data + size_t(r) * row_bytes; }
    // Rows [first, first + count) as a matrix of their own (phi3's fused Q/K/V and gate/up projections).
    WeightView rows_view(int64_t first, int64_t count) const {
        WeightView w = *this;
        w.data = row(first);
        w.rows = count;
        return w;
    }
    // The data as floats: for F32 tensors (norms, biases), which binding guarantees where it is used.
    const float *floats() const { return reinterpret_cast<const float *>(data); }
};

struct LayerWeights {
    WeightView attn_norm;
    WeightView attn_norm_b, ffn_norm_b;  // starcoder2: the LayerNorms' biases
    WeightView wq, wk, wv, wo;
    WeightView bq, bk, bv;  // qwen2's; optional in llama
    WeightView bo;          // optional (llama)
    WeightView q_norm, k_norm;  // qwen3, gemma3: RMSNorm weights of one head (head_dim)
    WeightView attn_post_norm;  // gemma: the RMSNorm of the attention's output, before the residual add
    WeightView ffn_norm;
    WeightView ffn_post_norm;   // gemma: the RMSNorm of the FFN's output, before the residual add
    WeightView ffn_gate, ffn_up, ffn_down;  // ffn_gate absent in starcoder2 (a GELU MLP)
    WeightView ffn_up_b, ffn_down_b;        // starcoder2
    // Mixture of experts (hparams.h): the router's matrix (n_embd -> n_expert logits), and each expert's gate, up
    // and down matrices as views into the stacked 3-D tensors (expert e's rows are the e-th slab); qwen2moe's shared
    // expert and the one-row matrix of its sigmoid gate.
    WeightView ffn_gate_inp;
    std::vector<WeightView> ffn_gate_exps, ffn_up_exps, ffn_down_exps;
    WeightView ffn_gate_inp_shexp, ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp;
};

struct ModelWeights {
    WeightView token_embd;
    WeightView output_norm;
    WeightView output_norm_b;  // starcoder2: the final LayerNorm's bias
    WeightView output;       // == token_embd when the output is tied
    bool tied_output = false;
    std::vector<float> rope_freq_factors;  // empty, or rope_dim/2 divisors of the rotation frequencies (llama3;
                                           // phi3: LongRoPE's short factors)
    std::vector<float> rope_freq_factors_long;  // phi3: LongRoPE's long factors, or empty
    std::vector<LayerWeights> layers;

    // The frequency factors of a session of n_ctx positions: LongRoPE's long ones when n_ctx exceeds the context the
    // short ones are for (llama.cpp's choice, by the context per sequence), else rope_freq_factors.
    const std::vector<float> &rope_freq_factors_for(const HParams &hp, int32_t n_ctx) const {
        return !rope_freq_factors_long.empty() && n_ctx > hp.rope_original_ctx ? rope_freq_factors_long : rope_freq_factors;
    }
};

class GgufFile;

// Binds every tensor the architecture needs, checking names, shapes and that the CPU backend can compute with
// each type. Throws Error(FORMAT) for a missing or misshapen tensor, Error(UNSUPPORTED) for a type it cannot use.
ModelWeights bind_weights(const GgufFile &file, HParams &hp);

}  // namespace specula::internal
