// Random-weight GGUF models of real model shapes, for speed measurements. A synthetic model has exactly the
// tensors, shapes, tensor types (llama.cpp's quantization mix), hyperparameters and tokenizer of the real model, so
// every kernel, cache and memory-traffic figure measured on it is the real model's; only the text it generates is
// noise. No checkpoint has to be downloaded or converted, and any size can be made on any machine.
//
// Weights are written directly as valid quantized blocks (random quants, small fp16 scales: elements of standard
// deviation ~0.02, norm weights 1), so activations stay finite through every layer. The file is generated while it
// is written (GgufWriter::add_streamed_tensor): an 8B-parameter model never has to fit in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace specula::internal {

struct SyntheticShape {
    std::string name;        // "llama-3.2-1b"
    std::string arch;        // "llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "starcoder2", "qwen2moe", "qwen3moe"
    int32_t n_embd = 0;
    int32_t n_layer = 0;
    int32_t n_head = 0;
    int32_t n_head_kv = 0;
    int32_t n_ff = 0;
    int32_t n_vocab = 0;     // rows of the real model's embedding; 0 = the tokenizer's token count (see write_synthetic_model)
    int32_t n_ctx_train = 0;
    float rope_theta = 10000.0f;
    float norm_eps = 1e-5f;
    bool tied_output = false;  // no output.weight: the LM head is token_embd
    bool qkv_bias = false;     // qwen2's q/k/v biases
    bool output_bias = false;  // a bias on the attention's output projection (optional in llama.cpp's llama)
    bool qk_norm = false;      // qwen3's per-head query and key norms (attn_q_norm / attn_k_norm)
    int32_t key_length = 0;    // the head size when it is not n_embd / n_head (qwen3, gemma3), else 0
    bool post_norms = false;   // gemma: post_attention_norm and post_ffw_norm
    int32_t sliding_window = 0;  // gemma, phi3: attention.sliding_window (the local layers' window; phi3: 0 = none)
    float rope_linear_factor = 0.0f;  // rope.scaling.type linear with this factor (gemma3's global layers); 0 = none
    float attn_softcap = 0.0f;   // gemma2: attn_logit_softcapping
    float final_softcap = 0.0f;  // gemma2: final_logit_softcapping
    // Llama-3.1-style RoPE scaling, stored as llama.cpp's converter stores it (a rope_freqs.weight tensor, no
    // metadata); factor 0 = none.
    float llama3_factor = 0.0f;
    float llama3_low_freq_factor = 1.0f;
    float llama3_high_freq_factor = 4.0f;
    int32_t llama3_original_ctx = 8192;
    // phi3's LongRoPE: rope_factors_short for sessions of up to this many positions, rope_factors_long beyond, and
    // the converter's attention factor; 0 = none (Phi-3-mini-4k).
    int32_t longrope_original_ctx = 0;
    int32_t rope_dim = 0;  // rotated leading dimensions of a head when fewer than all (Phi-4-mini: 96 of 128); 0 = all
    // Mixture of experts (Mixtral: llama; qwen2moe; qwen3moe): n_expert experts of n_ff_exp rows (Mixtral: n_ff), of
    // which n_expert_used run per token; qwen2moe's shared expert of n_ff_shexp rows. 0 experts: a dense FFN.
    int32_t n_expert = 0;
    int32_t n_expert_used = 0;
    int32_t n_ff_exp = 0;
    int32_t n_ff_shexp = 0;

    int32_t head_dim() const { return key_length > 0 ? key_length : n_embd / n_head; }
    int32_t rotated_dims() const { return rope_dim > 0 ? rope_dim : head_dim(); }
};

// The built-in shapes: llama-3.2-1b, llama-3.1-8b, qwen2.5-0.5b, qwen2.5-7b, qwen3-0.6b, qwen3-8b, gemma2-2b,
// gemma2-9b, gemma3-1b, gemma3-4b, phi3-mini, phi3.5-mini, phi4-mini, phi4, starcoder2-3b, starcoder2-7b,
// starcoder2-15b, mixtral-8x7b, qwen1.5-moe-a2.7b, qwen3-30b-a3b, qwen3-coder-30b-a3b (the published configs), tiny-llama, tiny-qwen3 (256 wide, 2 layers), tiny-gemma2 and tiny-gemma3
// (256 wide, windows of 16: local and global layers), tiny-phi3 (a window of 16 on every layer, LongRoPE),
// tiny-phi4 (partial rotation, tied head), tiny-starcoder2, tiny-mixtral, tiny-qwen2moe and tiny-qwen3moe for tests.
const std::vector<SyntheticShape> &synthetic_shapes();
// A built-in shape by name, or nullptr.
const SyntheticShape *find_synthetic_shape(const std::string &name);

// The whole-file weight formats offered, named as llama.cpp's llama_ftype (general.file_type).
enum class SyntheticType : int32_t { F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 7, Q4_K_M = 15 };

// "f32", "f16", "q8_0", "q4_0", "q4_k_m" (any case), or nullopt.
std::optional<SyntheticType> parse_synthetic_type(const std::string &name);
// "F32", "F16", "Q8_0", "Q4_0", "Q4_K_M".
const char *synthetic_type_name(SyntheticType type);

// The ggml type llama.cpp's llama-quantize gives a 2-D weight (llama_tensor_get_type, not --pure, no imatrix):
// name is the GGUF tensor name, row_length its ne[0]; layer/n_layer place blk.N tensors; tied: the model has no
// output.weight (token_embd is then also the LM head and quantized like it). Norms and biases are always F32 and
// never pass through here. Throws Error(INVALID_ARGUMENT) where llama.cpp refuses (a row length that no block
// of the chosen type divides).
// n_expert: the model's expert count (llama.cpp gives 8-expert models' attn_k and attn_v Q8_0, and their attn_output
// Q5_K in Q4_K_M); the routers (ffn_gate_inp) stay F32 as the converter writes them.
uint32_t synthetic_weight_type(SyntheticType type, const std::string &name, int64_t row_length, int32_t layer, int32_t n_layer,
                               bool tied, int32_t n_expert = 0);

// One tensor of a synthetic model.
struct SyntheticTensor {
    std::string name;
    int32_t layer = -1;        // N of blk.N, or -1
    uint32_t type = 0;         // ggml type id
    std::vector<int64_t> dims; // ggml order
};

// The tensors llama.cpp's llama / qwen2 graphs read for `shape` with n_layer layers and n_vocab tokens, typed by
// synthetic_weight_type (norms, biases and rope_freqs F32), in the order llama-quantize writes them.
std::vector<SyntheticTensor> synthetic_tensors(const SyntheticShape &shape, int32_t n_layer, int32_t n_vocab, SyntheticType type);

// llama.cpp's converter's rope_freqs for Llama-3.1-style scaling (convert_hf_to_gguf.py, LlamaModel), in the
// float32 arithmetic torch does there: head_dim/2 divisors of the rotation frequencies.
std::vector<float> llama3_rope_freqs(const SyntheticShape &shape);

// A synthetic phi3 shape's LongRoPE factors (rotated_dims()/2 values, or head_dim()/2 where the rotation is full:
// what llama.cpp 2025-02-20 expects): short ones near 1, long ones rising to ctx / original as published factors do.
// Not the published values (those are the models' data); shaped like them.
std::vector<float> longrope_factors(const SyntheticShape &shape, bool long_factors);

// rows x row_length random elements of `type` (F32, F16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K: the types synthetic models are
// made of), row after row into dst, as a synthetic model's weights are (same seed: same bytes). For tests of kernels.
// Throws Error(INTERNAL) for another type.
void random_weight_rows(uint32_t type, int64_t rows, int64_t row_length, uint64_t seed, uint8_t *dst);

struct SyntheticOptions {
    SyntheticType type = SyntheticType::Q8_0;
    uint64_t seed = 1;     // same seed, shape and type: the same file
    int32_t n_layer = 0;   // > 0: this many layers instead of the shape's (quick tests of big shapes)
    std::function<bool(float)> progress;  // fraction of the file written; false cancels (Error CANCELLED)
};

struct SyntheticResult {
    uint64_t file_bytes = 0;
    uint64_t n_params = 0;   // elements of all tensors, as Model::n_params counts them
    int32_t n_vocab = 0;
    int32_t n_layer = 0;
};

// Writes a synthetic model of `shape` to `path`, with the tokenizer of the GGUF at vocab_path (every tokenizer.*
// key is copied; a vocab-only GGUF is enough). n_vocab is the shape's n_vocab when the tokenizer has fewer tokens
// (padded with [PADn] tokens of type UNUSED, as llama.cpp's converter pads Qwen's vocabulary to its embedding
// size), else the tokenizer's count. Throws Error (INVALID_ARGUMENT for a bad shape or option, IO, FORMAT for a
// vocabulary file without tokens, CANCELLED); a partial file is removed.
SyntheticResult write_synthetic_model(const SyntheticShape &shape, const std::string &vocab_path, const std::string &path,
                                      const SyntheticOptions &options);

}  // namespace specula::internal
