// The LongSpec draft file: a GGUF holding ONE draft decoder layer and the metadata that binds it to its target.
// It has no embedding and no LM head: the draft uses the target's (shared, frozen).
//
//   general.architecture = "longspec"
//   longspec.target.architecture        string  the target's general.architecture ("llama", "qwen2", "qwen3")
//   longspec.target.block_count         u32     the target's layer count
//   longspec.target.tokenizer_fingerprint string tokenizer_fingerprint() of the target's vocabulary
//   longspec.embedding_length           u32     = target n_embd
//   longspec.feed_forward_length        u32     the draft MLP's width (the reference uses the target's)
//   longspec.attention.head_count       u32     = target n_head
//   longspec.attention.head_count_kv    u32     = target n_head_kv
//   longspec.attention.key_length       u32     = target head_dim
//   longspec.attention.layer_norm_rms_epsilon f32
//   longspec.attention.sliding_window   u32     self-attention window W (512 in the paper)
//   longspec.vocab_size                 u32     = target n_vocab
//   longspec.rope.freq_base             f32     = target's
//   longspec.rope.dimension_count       u32     = target's rope_dim
//   longspec.rope.scaling.type          string  "none" | "linear" | "llama3", = target's
//   longspec.rope.scaling.factor        f32     = target's (1 / freq_scale for linear)
//   longspec.cross_attention.target_layer u32   which target layer's KV cache the cross-attention reads
//                                               (the last one, target.block_count - 1, in LongSpec)
//
// Tensors (ggml order: dims[0] = input/contiguous dimension), D = n_embd, Q = n_head*head_dim,
// KV = n_head_kv*head_dim, F = feed_forward_length:
//   blk.0.attn_norm.weight       [D]        RMSNorm before self-attention
//   blk.0.attn_q.weight [D, Q]   blk.0.attn_q.bias [Q]
//   blk.0.attn_k.weight [D, KV]  blk.0.attn_k.bias [KV]
//   blk.0.attn_v.weight [D, KV]  blk.0.attn_v.bias [KV]
//   blk.0.attn_output.weight     [Q, D]
//   blk.0.cross_attn_norm.weight [D]        RMSNorm before cross-attention (post_self_attention_layernorm)
//   blk.0.cross_attn_q.weight [D, Q]  blk.0.cross_attn_q.bias [Q]
//   blk.0.cross_attn_output.weight    [Q, D]
//   blk.0.ffn_norm.weight        [D]        RMSNorm before the MLP (post_cross_attention_layernorm)
//   blk.0.ffn_gate.weight [D, F]  blk.0.ffn_up.weight [D, F]  blk.0.ffn_down.weight [F, D]
// Norms and biases are F32; matrices may be any type the CPU backend computes with (F32, F16, BF16, Q8_0, ...).
// The reference's cross_attn.k_proj / v_proj are unused at inference and not stored.
#pragma once

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/weights.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace specula::internal {

struct LongSpecDraftConfig {
    int32_t n_embd = 0, n_ff = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_vocab = 0;
    float norm_eps = 1e-5f;
    int32_t window = 512;
    int32_t cross_layer = 0;  // target layer whose KV cache feeds cross-attention
};

struct LongSpecWeights {
    WeightView attn_norm, wq, bq, wk, bk, wv, bv, wo;
    WeightView cross_norm, cross_wq, cross_bq, cross_wo;
    WeightView ffn_norm, ffn_gate, ffn_up, ffn_down;
};

// A loaded draft, bound to the target it was checked against. Immutable; shareable across sessions/threads.
class LongSpecDraft {
public:
    // Loads and validates `path` against `target`. Throws Error(IO / FORMAT) for unreadable or malformed
    // files, Error(INCOMPATIBLE) when the draft was made for another target (architecture, sizes, heads,
    // vocabulary size or tokenizer fingerprint, rope settings), with a message naming the first mismatch.
    static std::shared_ptr<const LongSpecDraft> load(const std::string &path, std::shared_ptr<const Model> target,
                                                     bool use_mmap = true);
    // The same from bytes already in memory (the fuzz targets of tests/fuzz).
    static std::shared_ptr<const LongSpecDraft> load_bytes(FileBytes bytes, std::shared_ptr<const Model> target);

    const LongSpecDraftConfig &config() const { return config_; }
    const LongSpecWeights &weights() const { return weights_; }
    const Model &target() const { return *target_; }
    const std::shared_ptr<const Model> &target_ptr() const { return target_; }
    const GgufFile &file() const { return file_; }
    uint64_t n_params() const { return n_params_; }
    // Data backends derive from the draft's weights and keep while it lives (the CPU's packed matrices).
    const BackendCache &backend_cache() const { return backend_cache_; }
    // XXH3-128 of the whole draft file (model/fingerprint.h), computed on first use.
    const Fingerprint &fingerprint(ThreadPool *pool = nullptr) const {
        return fingerprint_.get(file_.bytes().data(), file_.bytes().size(), pool);
    }

private:
    LongSpecDraft() = default;
    GgufFile file_;
    std::shared_ptr<const Model> target_;
    LongSpecDraftConfig config_;
    LongSpecWeights weights_;
    uint64_t n_params_ = 0;
    LazyFingerprint fingerprint_;
    BackendCache backend_cache_;
};

struct RandomDraftOptions {
    uint64_t seed = 1;
    int32_t window = 512;
    int32_t n_ff = 0;          // 0 = the target's n_ff
    float init_scale = 0.02f;  // matrices ~ N(0, init_scale), biases 0, norms 1
    uint32_t weight_type = 0;  // ggml type for matrices: 0 = F32, 1 = F16
};

// Writes a LongSpec draft for `target` with random (untrained) weights: what the trainer starts from, and
// what the lossless tests use. Throws Error(IO).
void write_random_longspec_draft(const Model &target, const std::string &path, const RandomDraftOptions &options);

}  // namespace specula::internal
