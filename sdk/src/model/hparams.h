// Hyperparameters of a decoder-only transformer, read from GGUF metadata with llama.cpp's defaults for absent keys.
#pragma once

#include "gguf/gguf_file.h"

#include <cstdint>
#include <string>

namespace specula::internal {

enum class Architecture { Llama, Qwen2, Qwen3, Gemma2, Gemma3, Phi3, Starcoder2, Qwen2Moe, Qwen3Moe };

// How RoPE pairs dimensions: NORM rotates (x[2i], x[2i+1]) (llama), NEOX rotates (x[i], x[i + d/2]) (qwen2).
enum class RopeType { Norm, Neox };

// Position scaling: none; linear (positions * 1/factor); llama3 (per-frequency factors, see rope_freqs).
enum class RopeScaling { None, Linear, Llama3 };

struct HParams {
    Architecture arch = Architecture::Llama;
    std::string arch_name;
    int32_t n_vocab = 0;
    int32_t n_ctx_train = 0;
    int32_t n_embd = 0;
    int32_t n_layer = 0;
    int32_t n_head = 0;
    int32_t n_head_kv = 0;
    int32_t n_ff = 0;
    int32_t head_dim = 0;      // per-head size of queries and keys/values
    int32_t rope_dim = 0;      // leading dimensions of each head that RoPE rotates
    float rope_freq_base = 10000.0f;
    float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
    RopeType rope_type = RopeType::Norm;
    RopeScaling rope_scaling = RopeScaling::None;
    // llama3 scaling parameters (used only to compute frequency factors when the file has no rope_freqs tensor)
    float rope_scaling_factor = 1.0f;
    float rope_low_freq_factor = 1.0f;
    float rope_high_freq_factor = 4.0f;
    int32_t rope_original_ctx = 8192;  // llama3; phi3: the context the short LongRoPE factors are for
    // A factor on every rotation's cosine and sine (llama.cpp's rope.scaling.attn_factor: phi3's LongRoPE writes
    // sqrt(1 + ln(n_ctx_train / original) / ln(original))). A context shift rotates by a pure rotation.
    float rope_attn_factor = 1.0f;
    float norm_eps = 1e-5f;    // RMSNorm's epsilon, or LayerNorm's (starcoder2: attention.layer_norm_epsilon)
    bool has_qkv_bias = false;
    bool has_qk_norm = false;  // an RMSNorm over each head of the queries and keys before RoPE (qwen3, gemma3)
    bool has_post_norms = false;  // gemma: RMSNorms after attention and after the FFN as well as before
    float attention_scale = 0.0f;  // softmax scale; 0: 1 / sqrt(head_dim)
    // Gemma 2's soft-capping: attention scores and final logits become cap * tanh(x / cap) (0: none).
    float attn_softcap = 0.0f;
    float final_softcap = 0.0f;
    // Sliding-window attention (gemma3: 5 local layers of n_swa keys, then 1 global, repeating; gemma2: local and
    // global alternate; phi3: every layer local): a local layer's query at position p attends to positions
    // (p - n_swa, p]. Gemma's local layers rotate with their own RoPE base and scale and no frequency factors
    // (swa_own_rope); phi3's rotate as the global settings say.
    int32_t n_swa = 0;          // 0: every layer global
    int32_t swa_pattern = 0;    // > 0: layer il is local when il % swa_pattern < swa_pattern - 1; 0: every layer is
    bool swa_own_rope = false;
    float rope_freq_base_swa = 10000.0f;
    float rope_freq_scale_swa = 1.0f;
    // Mixture of experts (Mixtral: llama with expert_count; qwen2moe; qwen3moe): each layer's FFN is n_expert
    // SwiGLU experts of n_ff_exp rows, of which a router picks n_expert_used per token (softmax over all experts,
    // the top n_expert_used, their weights renormalized to sum 1 where expert_weights_norm); qwen2moe adds a shared
    // expert of n_ff_shexp rows gated by a sigmoid. 0 experts: a dense FFN of n_ff rows.
    int32_t n_expert = 0;
    int32_t n_expert_used = 0;
    int32_t n_ff_exp = 0;
    int32_t n_ff_shexp = 0;     // > 0: the shared expert (qwen2moe)
    bool expert_weights_norm = false;

    bool is_swa_layer(int32_t il) const { return n_swa > 0 && (swa_pattern == 0 || il % swa_pattern < swa_pattern - 1); }
    // Whether layer il's keys were rotated with sliding_rope()'s settings rather than the global ones.
    bool rotates_apart(int32_t il) const { return swa_own_rope && is_swa_layer(il); }
    // These hyperparameters with the local layers' RoPE settings (what their Rope operations and a context shift
    // of their keys use).
    HParams sliding_rope() const {
        HParams h = *this;
        h.rope_freq_base = rope_freq_base_swa;
        h.rope_freq_scale = rope_freq_scale_swa;
        h.rope_scaling = rope_freq_scale_swa != 1.0f ? RopeScaling::Linear : RopeScaling::None;
        return h;
    }

    bool is_moe() const { return n_expert > 0; }
    int32_t n_embd_q() const { return n_head * head_dim; }
    int32_t n_embd_kv() const { return n_head_kv * head_dim; }
};

// Reads and checks the hyperparameters. n_vocab is filled later from the tokenizer / embedding shape.
// Throws Error(UNSUPPORTED) for an unknown architecture and Error(FORMAT) for missing or inconsistent keys.
HParams read_hparams(const GgufFile &file);

}  // namespace specula::internal
