#include "hparams.h"

#include "core/error.h"

#include <cmath>

namespace specula::internal {
namespace {

int32_t required_int(const GgufFile &file, const std::string &key, int64_t lo, int64_t hi) {
    const auto v = file.get_int(key);
    require(v.has_value(), SPECULA_ERR_FORMAT, "model: required metadata '" + key + "' is missing");
    require(*v >= lo && *v <= hi, SPECULA_ERR_FORMAT,
            "model: metadata '" + key + "' = " + std::to_string(*v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return int32_t(*v);
}

int32_t optional_int(const GgufFile &file, const std::string &key, int32_t fallback, int64_t lo, int64_t hi) {
    return file.find(key) ? required_int(file, key, lo, hi) : fallback;
}

float optional_float(const GgufFile &file, const std::string &key, float fallback) {
    const auto v = file.get_float(key);
    return v ? float(*v) : fallback;
}

// Mixture-of-experts keys, as llama.cpp reads them: expert_count and expert_used_count for every architecture
// (llama with experts is Mixtral), expert_feed_forward_length (qwen2moe: optional, default n_ff / n_expert_used;
// qwen3moe: required), expert_shared_feed_forward_length (qwen2moe: optional, default n_ff). The top experts'
// weights are renormalized in Mixtral and qwen3moe (llama.cpp's norm_w; transformers' norm_topk_prob), not in
// qwen2moe.
void read_experts(const GgufFile &file, HParams &hp) {
    const std::string a = hp.arch_name + ".";
    constexpr int32_t kMaxExperts = 256;  // llama.cpp's LLAMA_MAX_EXPERTS
    hp.n_expert = optional_int(file, a + "expert_count", 0, 0, kMaxExperts);
    hp.n_expert_used = optional_int(file, a + "expert_used_count", 0, 0, kMaxExperts);
    const bool moe_arch = hp.arch == Architecture::Qwen2Moe || hp.arch == Architecture::Qwen3Moe;
    if (moe_arch) require(hp.n_expert > 0 && hp.n_expert_used > 0, SPECULA_ERR_FORMAT,
                          "model: " + hp.arch_name + " needs expert_count and expert_used_count > 0");
    if (hp.n_expert == 0) {
        require(hp.n_expert_used == 0, SPECULA_ERR_FORMAT, "model: expert_used_count > 0 without experts");
        return;
    }
    require(hp.arch == Architecture::Llama || moe_arch, SPECULA_ERR_UNSUPPORTED,
            "model: experts in a " + hp.arch_name + " model are not supported (llama, qwen2moe and qwen3moe have them)");
    require(hp.n_expert_used >= 1 && hp.n_expert_used <= hp.n_expert, SPECULA_ERR_FORMAT,
            "model: expert_used_count " + std::to_string(hp.n_expert_used) + " is outside [1, expert_count = " + std::to_string(hp.n_expert) + "]");
    constexpr int64_t kBig = int64_t(1) << 24;
    if (hp.arch == Architecture::Llama) hp.n_ff_exp = hp.n_ff;
    else if (hp.arch == Architecture::Qwen3Moe) hp.n_ff_exp = required_int(file, a + "expert_feed_forward_length", 1, kBig);
    else hp.n_ff_exp = optional_int(file, a + "expert_feed_forward_length", 0, 0, kBig);
    if (hp.n_ff_exp == 0) hp.n_ff_exp = hp.n_ff / hp.n_expert_used;  // qwen2moe: 0 or absent
    require(hp.n_ff_exp >= 1, SPECULA_ERR_FORMAT, "model: the experts' feed-forward length is 0");
    if (hp.arch == Architecture::Qwen2Moe) {
        hp.n_ff_shexp = optional_int(file, a + "expert_shared_feed_forward_length", 0, 0, kBig);
        if (hp.n_ff_shexp == 0) hp.n_ff_shexp = hp.n_ff;
    }
    hp.expert_weights_norm = hp.arch != Architecture::Qwen2Moe;
}

}  // namespace

HParams read_hparams(const GgufFile &file) {
    HParams hp;
    const auto arch = file.get_string("general.architecture");
    require(arch.has_value(), SPECULA_ERR_FORMAT, "model: metadata 'general.architecture' is missing");
    hp.arch_name = *arch;
    if (hp.arch_name == "llama") {
        hp.arch = Architecture::Llama;
        hp.rope_type = RopeType::Norm;
    } else if (hp.arch_name == "qwen2") {
        hp.arch = Architecture::Qwen2;
        hp.rope_type = RopeType::Neox;
        hp.has_qkv_bias = true;
    } else if (hp.arch_name == "qwen3") {
        hp.arch = Architecture::Qwen3;
        hp.rope_type = RopeType::Neox;
        hp.has_qk_norm = true;
    } else if (hp.arch_name == "gemma2") {
        hp.arch = Architecture::Gemma2;
        hp.rope_type = RopeType::Neox;
        hp.has_post_norms = true;
    } else if (hp.arch_name == "gemma3") {
        hp.arch = Architecture::Gemma3;
        hp.rope_type = RopeType::Neox;
        hp.has_qk_norm = true;
        hp.has_post_norms = true;
    } else if (hp.arch_name == "phi3") {
        hp.arch = Architecture::Phi3;
        hp.rope_type = RopeType::Neox;
    } else if (hp.arch_name == "qwen2moe") {
        hp.arch = Architecture::Qwen2Moe;
        hp.rope_type = RopeType::Neox;
        hp.has_qkv_bias = true;
    } else if (hp.arch_name == "qwen3moe") {
        hp.arch = Architecture::Qwen3Moe;
        hp.rope_type = RopeType::Neox;
        hp.has_qk_norm = true;
    } else if (hp.arch_name == "starcoder2") {
        hp.arch = Architecture::Starcoder2;
        hp.rope_type = RopeType::Neox;
        hp.has_qkv_bias = true;
    } else {
        throw Error(SPECULA_ERR_UNSUPPORTED,
                    "model: architecture '" + hp.arch_name + "' is not supported (supported: llama, qwen2, qwen3, gemma2, gemma3, phi3, starcoder2, qwen2moe, qwen3moe)");
    }
    const std::string a = hp.arch_name + ".";
    constexpr int64_t kBig = int64_t(1) << 24;
    hp.n_embd = required_int(file, a + "embedding_length", 1, kBig);
    hp.n_layer = required_int(file, a + "block_count", 1, 4096);
    hp.n_ff = required_int(file, a + "feed_forward_length", 1, kBig);
    hp.n_head = required_int(file, a + "attention.head_count", 1, 4096);
    hp.n_head_kv = optional_int(file, a + "attention.head_count_kv", hp.n_head, 1, 4096);
    hp.n_ctx_train = optional_int(file, a + "context_length", 2048, 1, int64_t(1) << 30);
    require(hp.n_head % hp.n_head_kv == 0, SPECULA_ERR_FORMAT,
            "model: head_count " + std::to_string(hp.n_head) + " is not a multiple of head_count_kv " + std::to_string(hp.n_head_kv));
    require(hp.n_embd % hp.n_head == 0 || file.find(a + "attention.key_length"), SPECULA_ERR_FORMAT,
            "model: embedding_length is not a multiple of head_count");
    hp.head_dim = optional_int(file, a + "attention.key_length", hp.n_embd / hp.n_head, 1, 2048);
    require(hp.head_dim >= 2 && hp.head_dim <= 2048, SPECULA_ERR_UNSUPPORTED, "model: head size " + std::to_string(hp.head_dim) + " is outside [2, 2048]");
    const int32_t value_dim = optional_int(file, a + "attention.value_length", hp.head_dim, 1, 65536);
    require(value_dim == hp.head_dim, SPECULA_ERR_UNSUPPORTED, "model: key_length != value_length is not supported");
    hp.rope_dim = optional_int(file, a + "rope.dimension_count", hp.head_dim, 2, hp.head_dim);
    require(hp.rope_dim % 2 == 0, SPECULA_ERR_FORMAT, "model: rope.dimension_count must be even");
    hp.rope_freq_base = optional_float(file, a + "rope.freq_base", 10000.0f);
    require(hp.rope_freq_base > 0, SPECULA_ERR_FORMAT, "model: rope.freq_base must be positive");
    // starcoder2's norms are LayerNorms: llama.cpp requires their epsilon.
    if (hp.arch == Architecture::Starcoder2) require(file.find(a + "attention.layer_norm_epsilon") != nullptr, SPECULA_ERR_FORMAT,
                                                   "model: required metadata '" + a + "attention.layer_norm_epsilon' is missing");
    hp.norm_eps = optional_float(file, a + (hp.arch == Architecture::Starcoder2 ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon"), 1e-5f);
    require(hp.norm_eps >= 0 && hp.norm_eps < 1, SPECULA_ERR_FORMAT, "model: layer_norm_rms_epsilon out of range");

    // RoPE scaling, as llama.cpp reads it: rope.scaling.type (none/linear/llama3/yarn), rope.scaling.factor,
    // and the older rope.scale_linear.
    const std::string scaling = file.get_string(a + "rope.scaling.type").value_or("");
    float factor = optional_float(file, a + "rope.scaling.factor", 0.0f);
    if (factor == 0.0f) factor = optional_float(file, a + "rope.scale_linear", 0.0f);
    if (scaling == "linear" || (scaling.empty() && factor > 0.0f && factor != 1.0f)) {
        require(factor > 0.0f, SPECULA_ERR_FORMAT, "model: linear rope scaling needs a positive factor");
        hp.rope_scaling = RopeScaling::Linear;
        hp.rope_freq_scale = 1.0f / factor;
    } else if (scaling == "llama3") {
        hp.rope_scaling = RopeScaling::Llama3;
        hp.rope_scaling_factor = factor > 0.0f ? factor : 8.0f;
        hp.rope_low_freq_factor = optional_float(file, a + "rope.scaling.low_freq_factor", 1.0f);
        hp.rope_high_freq_factor = optional_float(file, a + "rope.scaling.high_freq_factor", 4.0f);
        hp.rope_original_ctx = optional_int(file, a + "rope.scaling.original_context_length", 8192, 1, int64_t(1) << 30);
    } else if (!scaling.empty() && scaling != "none") {
        throw Error(SPECULA_ERR_UNSUPPORTED, "model: rope scaling type '" + scaling + "' is not supported");
    }
    // As llama.cpp, for every architecture (its yarn_attn_factor is multiplied by it).
    hp.rope_attn_factor = optional_float(file, a + "rope.scaling.attn_factor", 1.0f);
    require(hp.rope_attn_factor > 0 && hp.rope_attn_factor < 16, SPECULA_ERR_FORMAT, "model: rope.scaling.attn_factor must be in (0, 16)");
    if (hp.arch == Architecture::Gemma2) {
        // As llama.cpp 2025-02-20 reads Gemma 2 (llama-model.cpp, LLM_ARCH_GEMMA2): a window of 4096 unless the
        // file says otherwise, local and global layers alternating (even layers local) with the same RoPE, the
        // soft-caps from the file (defaults 50 and 30), and Q scaled by head_dim^-1/2, or (n_embd / n_head)^-1/2
        // for the 27B (46 layers).
        hp.n_swa = optional_int(file, a + "attention.sliding_window", 4096, 1, int64_t(1) << 30);
        hp.swa_pattern = 2;
        hp.swa_own_rope = true;
        hp.rope_freq_base_swa = hp.rope_freq_base;
        hp.rope_freq_scale_swa = hp.rope_freq_scale;
        hp.attn_softcap = optional_float(file, a + "attn_logit_softcapping", 50.0f);
        hp.final_softcap = optional_float(file, a + "final_logit_softcapping", 30.0f);
        require(hp.attn_softcap >= 0 && hp.final_softcap >= 0, SPECULA_ERR_FORMAT, "model: gemma2 soft-capping values must not be negative");
        hp.attention_scale = 1.0f / std::sqrt(float(hp.n_layer == 46 ? hp.n_embd / hp.n_head : hp.head_dim));
        require(hp.rope_scaling != RopeScaling::Llama3, SPECULA_ERR_UNSUPPORTED, "model: gemma2 with llama3 RoPE scaling is not supported");
    }
    if (hp.arch == Architecture::Gemma3) {
        // As llama.cpp reads Gemma 3 (llama-model.cpp, LLM_ARCH_GEMMA3): the window from the file, the pattern (5
        // local : 1 global) and the local layers' RoPE (base 10000, no scaling: the file's rope.* keys are the
        // global layers') fixed by the architecture; the softmax scale is query_pre_attn_scalar^-1/2, which
        // transformers' configs set to head_dim except for the 27B (62 layers: n_embd / n_head).
        hp.n_swa = required_int(file, a + "attention.sliding_window", 1, int64_t(1) << 30);
        hp.swa_pattern = 6;
        hp.swa_own_rope = true;
        hp.rope_freq_base_swa = 10000.0f;
        hp.rope_freq_scale_swa = 1.0f;
        hp.attention_scale = 1.0f / std::sqrt(float(hp.n_layer == 62 ? hp.n_embd / hp.n_head : hp.head_dim));
        require(hp.rope_scaling != RopeScaling::Llama3, SPECULA_ERR_UNSUPPORTED, "model: gemma3 with llama3 RoPE scaling is not supported");
    }
    if (hp.arch == Architecture::Starcoder2) {
        // As llama.cpp 2025-02-20 (LLM_ARCH_STARCODER2): LayerNorms with biases, biases on every projection, a GELU
        // MLP without a gate, NEOX RoPE over whole heads; no sliding window (its configs' 4096 is not read).
        require(hp.rope_dim == hp.head_dim, SPECULA_ERR_FORMAT, "model: starcoder2 rotates whole heads (rope.dimension_count = head size)");
        require(hp.rope_scaling != RopeScaling::Llama3, SPECULA_ERR_UNSUPPORTED, "model: starcoder2 with llama3 RoPE scaling is not supported");
    }
    if (hp.arch == Architecture::Phi3) {
        // As llama.cpp 2025-02-20 reads Phi-3 (llama-model.cpp, LLM_ARCH_PHI3): every layer attends to a window of
        // attention.sliding_window keys (0 in Phi-4's files: none), with defaults for files converted before the
        // key existed (Phi-3-mini/medium-4k: 2047; Phi-3-mini-128k: 262144; Phi-3-medium-128k: 131072). LongRoPE:
        // the short factors up to rope.scaling.original_context_length (default: the trained context), the long
        // ones past it (model/weights.h), and the attention factor on every rotation.
        require(file.find(a + "attention.key_length") == nullptr || hp.head_dim == hp.n_embd / hp.n_head, SPECULA_ERR_FORMAT,
                "model: phi3's head size must be embedding_length / head_count");
        if ((hp.n_layer == 32 || hp.n_layer == 40) && hp.n_ctx_train == 4096) hp.n_swa = 2047;
        else if (hp.n_layer == 32 && hp.n_head_kv == 32 && hp.n_ctx_train == 131072) hp.n_swa = 262144;
        else if (hp.n_layer == 40 && hp.n_ctx_train == 131072) hp.n_swa = 131072;
        require(file.find(a + "attention.sliding_window") != nullptr || hp.n_swa > 0, SPECULA_ERR_FORMAT,
                "model: phi3 metadata 'attention.sliding_window' is missing");
        hp.n_swa = optional_int(file, a + "attention.sliding_window", hp.n_swa, 0, int64_t(1) << 30);
        hp.swa_pattern = 0;  // every layer
        hp.rope_original_ctx = optional_int(file, a + "rope.scaling.original_context_length", hp.n_ctx_train, 1, int64_t(1) << 30);
        require(hp.rope_scaling != RopeScaling::Llama3, SPECULA_ERR_UNSUPPORTED, "model: phi3 with llama3 RoPE scaling is not supported");
    }
    read_experts(file, hp);
    return hp;
}

}  // namespace specula::internal
