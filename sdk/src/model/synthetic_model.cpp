#include "synthetic_model.h"

#include "formats/half.h"
#include "core/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>

namespace specula::internal {
namespace {

// Element standard deviation of every random weight matrix: the usual initialisation scale of these models, small
// enough that the residual stream grows by O(1) per layer (finite logits after any number of layers).
constexpr double kWeightStd = 0.02;

// GGUF quantization version llama.cpp writes with quantized files (GGML_QNT_VERSION).
constexpr uint32_t kQuantizationVersion = 2;

// llama_token_type LLAMA_TOKEN_TYPE_UNUSED, what the converter gives its [PADn] tokens.
constexpr int64_t kTokenTypeUnused = 5;

[[noreturn]] void invalid(const std::string &message) { throw Error(SPECULA_ERR_INVALID_ARGUMENT, "synthetic model: " + message); }

// --- random numbers -------------------------------------------------------------------------------------

// splitmix64's finalizer: a bijective 64-bit mix, used to derive independent seeds.
uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// splitmix64: 8 random bytes per call for about a nanosecond, which keeps generating an 8 GB model well below the
// time it takes to write it. Same seed, same sequence on every platform.
class Rng {
public:
    explicit Rng(uint64_t seed) : state_(seed) {}
    uint64_t next() { return mix64(state_ += 0x9E3779B97F4A7C15ull); }
    // Uniform in [-1, 1), from 24 bits (exact in a float).
    float symmetric() { return float(int32_t(next() >> 40) - (1 << 23)) * 0x1.0p-23f; }
    // Uniform in [lo, hi).
    float uniform(float lo, float hi) { return lo + (hi - lo) * float(next() >> 40) * 0x1.0p-24f; }
    void bytes(uint8_t *dst, size_t n) {
        for (; n >= 8; n -= 8, dst += 8) {
            const uint64_t v = next();
            std::memcpy(dst, &v, 8);
        }
        if (n > 0) {
            const uint64_t v = next();
            std::memcpy(dst, &v, n);
        }
    }

private:
    uint64_t state_;
};

uint64_t fnv1a(const std::string &s) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (const unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
    return h;
}

// --- random blocks --------------------------------------------------------------------------------------
// Each generator writes whole blocks whose dequantized elements have standard deviation ~kWeightStd and mean ~0.
// Scales get a +-25% jitter per block so that no two blocks are alike (as in real weights).

void put_half(uint8_t *dst, float v) {
    const uint16_t h = float_to_half(v);
    std::memcpy(dst, &h, 2);
}

float jitter(Rng &rng) { return rng.uniform(0.75f, 1.25f); }

// Q8_0 (34 bytes: fp16 d, 32 x int8). Quants are uniform on [-127, 127] (std 73.6): -128 is left out because
// ggml's quantizer never produces it and SIMD kernels that take |q| with a sign trick (AVX2 sign_epi8) would
// overflow on it.
void random_q8_0(Rng &rng, uint8_t *block) {
    put_half(block, float(kWeightStd / 73.6) * jitter(rng));
    rng.bytes(block + 2, 32);
    for (int i = 0; i < 32; ++i)
        if (block[2 + i] == 0x80) block[2 + i] = 0x81;
}

// Q4_0 (18 bytes: fp16 d, 16 bytes of nibbles): value (q - 8) * d, q uniform on [0, 15] (std of q - 8: 4.61).
void random_q4_0(Rng &rng, uint8_t *block) {
    put_half(block, float(kWeightStd / 4.61) * jitter(rng));
    rng.bytes(block + 2, 16);
}

// Q4_K (144 bytes: fp16 d, fp16 dmin, 12 bytes of packed 6-bit scales and mins, 128 bytes of nibbles): value
// d * sc * q - dmin * m per 32-element sub-block. With m = sc and dmin = 7.5 d each sub-block has mean zero
// (q averages 7.5), and sc in [32, 63] keeps the scales in the upper half of their 6 bits as ggml's make_qkx2 does.
void random_q4_k(Rng &rng, uint8_t *block) {
    const float d = float(kWeightStd / (4.61 * 48.0)) * jitter(rng);
    put_half(block, d);
    put_half(block + 2, 7.5f * half_to_float(float_to_half(d)));
    uint8_t sc[8];
    for (uint8_t &s : sc) s = uint8_t(32 + (rng.next() >> 59));
    // The inverse of ggml's get_scale_min_k4: sub-blocks 0-3 in the low 6 bits of bytes 0-7, sub-blocks 4-7 split
    // into a low nibble (bytes 8-11) and two high bits (the top of bytes 0-7).
    uint8_t *q = block + 4;
    std::memset(q, 0, 12);
    for (int j = 0; j < 4; ++j) {
        q[j] = sc[j] & 63;
        q[j + 4] = sc[j] & 63;  // the min, equal to the scale
    }
    for (int j = 4; j < 8; ++j) {
        q[j + 4] = uint8_t((sc[j] & 0xF) | ((sc[j] & 0xF) << 4));
        q[j - 4] |= uint8_t((sc[j] >> 4) << 6);
        q[j] |= uint8_t((sc[j] >> 4) << 6);
    }
    rng.bytes(block + 16, 128);
}

// Q5_K (176 bytes: fp16 d, fp16 dmin, 12 bytes of scales and mins as Q4_K's, 32 bytes of fifth bits, 128 bytes of
// nibbles): value d * sc * q - dmin * m, q uniform on [0, 31] (mean 15.5, std 9.23), m = sc and dmin = 15.5 d.
// llama.cpp's Q4_K_M gives it to fused Q/K/V matrices (phi3).
void random_q5_k(Rng &rng, uint8_t *block) {
    random_q4_k(rng, block);  // scales, mins and nibbles laid out as Q4_K's (then moved past the fifth bits)
    std::memmove(block + 48, block + 16, 128);
    rng.bytes(block + 16, 32);
    const float d = float(kWeightStd / (9.23 * 48.0)) * jitter(rng);
    put_half(block, d);
    put_half(block + 2, 15.5f * half_to_float(float_to_half(d)));
}

// Q6_K (210 bytes: 128 bytes of low nibbles, 64 bytes of high 2-bit pairs, 16 x int8 scales, fp16 d): value
// d * scale * (q - 32) per 16-element group, q uniform on [0, 63] (std of q - 32: 18.5). Scales in [64, 127], as
// ggml's quantizer spreads them over the int8 range.
void random_q6_k(Rng &rng, uint8_t *block) {
    rng.bytes(block, 192);
    for (int j = 0; j < 16; ++j) block[192 + j] = uint8_t(64 + (rng.next() >> 58));
    put_half(block + 208, float(kWeightStd / (18.5 * 96.0)) * jitter(rng));
}

// One row of row_length random elements of `type`.
void random_row(uint32_t type, int64_t row_length, Rng &rng, uint8_t *dst) {
    const float a = float(kWeightStd * std::sqrt(3.0));  // uniform on [-a, a) has standard deviation kWeightStd
    switch (TensorType(type)) {
    case TensorType::F32:
        for (int64_t i = 0; i < row_length; ++i) {
            const float v = a * rng.symmetric();
            std::memcpy(dst + 4 * i, &v, 4);
        }
        return;
    case TensorType::F16: {
        // 16 random bits pick one of 65536 evenly spaced values of [-a, a), converted once: float_to_half per
        // element would make F16 files the slowest to generate by far.
        static const std::vector<uint16_t> table = [a] {
            std::vector<uint16_t> t(65536);
            for (int i = 0; i < 65536; ++i) t[size_t(i)] = float_to_half(a * float(2 * i + 1 - 65536) / 65536.0f);
            return t;
        }();
        for (int64_t i = 0; i < row_length; i += 4) {
            const uint64_t bits = rng.next();
            for (int64_t j = 0; j < 4 && i + j < row_length; ++j) {
                const uint16_t h = table[size_t((bits >> (16 * j)) & 0xFFFF)];
                std::memcpy(dst + 2 * (i + j), &h, 2);
            }
        }
        return;
    }
    case TensorType::Q8_0:
        for (int64_t b = 0; b < row_length / 32; ++b) random_q8_0(rng, dst + 34 * b);
        return;
    case TensorType::Q4_0:
        for (int64_t b = 0; b < row_length / 32; ++b) random_q4_0(rng, dst + 18 * b);
        return;
    case TensorType::Q4_K:
        for (int64_t b = 0; b < row_length / 256; ++b) random_q4_k(rng, dst + 144 * b);
        return;
    case TensorType::Q5_K:
        for (int64_t b = 0; b < row_length / 256; ++b) random_q5_k(rng, dst + 176 * b);
        return;
    case TensorType::Q6_K:
        for (int64_t b = 0; b < row_length / 256; ++b) random_q6_k(rng, dst + 210 * b);
        return;
    default: break;
    }
    throw Error(SPECULA_ERR_INTERNAL, std::string("synthetic model: no random generator for ") + tensor_type_name(type));
}

// --- tensor types ---------------------------------------------------------------------------------------

uint32_t block_size(TensorType t) { return tensor_type_layout(uint32_t(t))->block_size; }

// llama.cpp's use_more_bits: the first and last eighth of the layers, and every third layer in between, get the
// larger type in the _M mixes.
bool use_more_bits(int32_t i, int32_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

void check_shape(const SyntheticShape &s, int32_t n_layer) {
    if (s.arch != "llama" && s.arch != "qwen2" && s.arch != "qwen3" && s.arch != "gemma2" && s.arch != "gemma3" && s.arch != "phi3" &&
        s.arch != "starcoder2" && s.arch != "qwen2moe" && s.arch != "qwen3moe")
        invalid("architecture '" + s.arch + "' is not llama, qwen2, qwen3, gemma2, gemma3, phi3, starcoder2, qwen2moe or qwen3moe");
    const bool moe_arch = s.arch == "qwen2moe" || s.arch == "qwen3moe";
    if (s.n_expert < 0 || s.n_expert > 256 || s.n_expert_used < 0 || s.n_expert_used > s.n_expert || (s.n_expert > 0) != (s.n_expert_used > 0) ||
        (moe_arch && s.n_expert == 0) || (s.n_expert > 0 && s.arch != "llama" && !moe_arch) || s.n_ff_exp < 0 || s.n_ff_shexp < 0 ||
        (s.n_ff_shexp > 0 && s.arch != "qwen2moe"))
        invalid("shape '" + s.name + "': experts need 1 <= used <= count <= 256, on llama, qwen2moe or qwen3moe (a shared expert: qwen2moe)");
    if (s.n_embd <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 || s.n_ff <= 0 || s.n_vocab < 0 || s.n_ctx_train <= 0)
        invalid("shape '" + s.name + "' has a size <= 0");
    if (n_layer < 1 || n_layer > 4096) invalid("layer count " + std::to_string(n_layer) + " is outside [1, 4096]");
    if (s.key_length <= 0 && s.n_embd % s.n_head != 0)
        invalid("n_embd " + std::to_string(s.n_embd) + " is not a multiple of n_head " + std::to_string(s.n_head));
    if (s.n_head % s.n_head_kv != 0) invalid("n_head is not a multiple of n_head_kv");
    if (s.head_dim() % 2 != 0) invalid("the head size must be even (RoPE rotates pairs)");
    if (!(s.rope_theta > 0) || !(s.norm_eps >= 0 && s.norm_eps < 1) || !(s.llama3_factor >= 0))
        invalid("rope theta, rms epsilon or llama3 factor out of range");
    if ((s.arch == "gemma2" || s.arch == "gemma3") && s.sliding_window <= 0) invalid("a gemma shape needs a sliding window");
    if (s.rope_dim < 0 || s.rope_dim > s.head_dim() || s.rope_dim % 2 != 0) invalid("rope_dim must be even and at most the head size");
    if (s.arch == "phi3" && (s.key_length > 0 || s.sliding_window < 0 || s.longrope_original_ctx < 0 || s.longrope_original_ctx > s.n_ctx_train))
        invalid("a phi3 shape has heads of n_embd / n_head, a window >= 0 and LongRoPE's original context within the trained one");
}

// The arrays a tokenizer has one entry per token of, padded from n_tokens to n_vocab entries as
// convert_hf_to_gguf.py pads: "[PADi]" tokens of type UNUSED (score -10000 where the vocabulary has scores).
Value padded(const std::string &key, const Value &v, size_t n_tokens, size_t n_vocab) {
    if (v.type != ValueType::ARRAY || v.items.size() != n_tokens || n_vocab == n_tokens) return v;
    Value out = v;
    Value item;
    item.type = v.element_type;
    if (key == "tokenizer.ggml.tokens" && v.element_type == ValueType::STRING) {
        for (size_t i = n_tokens; i < n_vocab; ++i) out.items.push_back(value_string("[PAD" + std::to_string(i) + "]"));
    } else if (key == "tokenizer.ggml.token_type" && item.is_integer()) {
        item.u = uint64_t(kTokenTypeUnused);
        item.i = kTokenTypeUnused;
        out.items.resize(n_vocab, item);
    } else if (key == "tokenizer.ggml.scores" && (v.element_type == ValueType::FLOAT32 || v.element_type == ValueType::FLOAT64)) {
        item.f = -10000.0;
        out.items.resize(n_vocab, item);
    }
    return out;
}

// What a tensor holds: random values, ones (norm weights), or the llama3 frequency factors.
enum class Fill { Random, Ones, NearOne, RopeFreqs, LongRopeShort, LongRopeLong, Router };

Fill fill_of(const std::string &name, const std::string &arch) {
    // starcoder2's LayerNorm weights vary around one (tests tell them from no weight; other shapes keep their bytes).
    if (arch == "starcoder2" && name.find("norm.weight") != std::string::npos) return Fill::NearOne;
    if (name == "rope_freqs.weight") return Fill::RopeFreqs;
    // A router of the weights' spread would give near-uniform probabilities, whose near-ties between the k-th and
    // the next expert flip with any rounding difference (two implementations then pick other experts); trained
    // routers are peaked. Logits of standard deviation ~4 set a row's top experts apart by margins far above rounding.
    if (name.find("ffn_gate_inp.weight") != std::string::npos) return Fill::Router;
    if (name == "rope_factors_short.weight") return Fill::LongRopeShort;
    if (name == "rope_factors_long.weight") return Fill::LongRopeLong;
    // The per-head query/key norms vary around one, so that a test tells them apart (and from no norm weight).
    if (name.find("attn_q_norm.weight") != std::string::npos || name.find("attn_k_norm.weight") != std::string::npos) return Fill::NearOne;
    if (name.find("post_attention_norm.weight") != std::string::npos || name.find("post_ffw_norm.weight") != std::string::npos) return Fill::NearOne;
    if (name.find("norm.weight") != std::string::npos) return Fill::Ones;
    return Fill::Random;
}

}  // namespace

void random_weight_rows(uint32_t type, int64_t rows, int64_t row_length, uint64_t seed, uint8_t *dst) {
    const TensorTypeLayout *layout = tensor_type_layout(type);
    require(layout != nullptr && row_length % layout->block_size == 0, SPECULA_ERR_INTERNAL, "synthetic model: a row does not fit the type's blocks");
    const size_t row_bytes = size_t(row_length / layout->block_size) * layout->type_size;
    Rng rng(mix64(seed));
    for (int64_t r = 0; r < rows; ++r) random_row(type, row_length, rng, dst + size_t(r) * row_bytes);
}

const std::vector<SyntheticShape> &synthetic_shapes() {
    // From each model's published config.json (hidden_size, num_hidden_layers, num_attention_heads,
    // num_key_value_heads, intermediate_size, vocab_size, max_position_embeddings, rope_theta, rms_norm_eps,
    // tie_word_embeddings, rope_scaling). Qwen2.5's embeddings have more rows than its tokenizer has tokens
    // (151936 / 152064 vs 151665 + specials); the converter pads, and so do we.
    static const std::vector<SyntheticShape> shapes = [] {
        std::vector<SyntheticShape> v;
        SyntheticShape s;
        s = {};
        s.name = "llama-3.2-1b", s.arch = "llama", s.n_embd = 2048, s.n_layer = 16, s.n_head = 32, s.n_head_kv = 8, s.n_ff = 8192;
        s.n_vocab = 128256, s.n_ctx_train = 131072, s.rope_theta = 500000.0f, s.norm_eps = 1e-5f, s.tied_output = true;
        s.llama3_factor = 32.0f;
        v.push_back(s);
        s = {};
        s.name = "llama-3.1-8b", s.arch = "llama", s.n_embd = 4096, s.n_layer = 32, s.n_head = 32, s.n_head_kv = 8, s.n_ff = 14336;
        s.n_vocab = 128256, s.n_ctx_train = 131072, s.rope_theta = 500000.0f, s.norm_eps = 1e-5f, s.tied_output = false;
        s.llama3_factor = 8.0f;
        v.push_back(s);
        s = {};
        s.name = "qwen2.5-0.5b", s.arch = "qwen2", s.n_embd = 896, s.n_layer = 24, s.n_head = 14, s.n_head_kv = 2, s.n_ff = 4864;
        s.n_vocab = 151936, s.n_ctx_train = 32768, s.rope_theta = 1000000.0f, s.norm_eps = 1e-6f, s.tied_output = true, s.qkv_bias = true;
        v.push_back(s);
        s = {};
        s.name = "qwen2.5-7b", s.arch = "qwen2", s.n_embd = 3584, s.n_layer = 28, s.n_head = 28, s.n_head_kv = 4, s.n_ff = 18944;
        s.n_vocab = 152064, s.n_ctx_train = 32768, s.rope_theta = 1000000.0f, s.norm_eps = 1e-6f, s.tied_output = false, s.qkv_bias = true;
        v.push_back(s);
        s = {};
        s.name = "qwen3-0.6b", s.arch = "qwen3", s.n_embd = 1024, s.n_layer = 28, s.n_head = 16, s.n_head_kv = 8, s.n_ff = 3072;
        s.key_length = 128, s.qk_norm = true;
        s.n_vocab = 151936, s.n_ctx_train = 40960, s.rope_theta = 1000000.0f, s.norm_eps = 1e-6f, s.tied_output = true;
        v.push_back(s);
        s = {};
        s.name = "qwen3-8b", s.arch = "qwen3", s.n_embd = 4096, s.n_layer = 36, s.n_head = 32, s.n_head_kv = 8, s.n_ff = 12288;
        s.key_length = 128, s.qk_norm = true;
        s.n_vocab = 151936, s.n_ctx_train = 40960, s.rope_theta = 1000000.0f, s.norm_eps = 1e-6f, s.tied_output = false;
        v.push_back(s);
        // Gemma 2: local (window 4096) and global layers alternating, soft-capped scores (50) and logits (30), heads
        // of 256, tied head, 256,000 embedding rows.
        s = {};
        s.name = "gemma2-2b", s.arch = "gemma2", s.n_embd = 2304, s.n_layer = 26, s.n_head = 8, s.n_head_kv = 4, s.n_ff = 9216;
        s.key_length = 256, s.post_norms = true, s.sliding_window = 4096, s.attn_softcap = 50.0f, s.final_softcap = 30.0f;
        s.n_vocab = 256000, s.n_ctx_train = 8192, s.rope_theta = 10000.0f, s.norm_eps = 1e-6f, s.tied_output = true;
        v.push_back(s);
        s = {};
        s.name = "gemma2-9b", s.arch = "gemma2", s.n_embd = 3584, s.n_layer = 42, s.n_head = 16, s.n_head_kv = 8, s.n_ff = 14336;
        s.key_length = 256, s.post_norms = true, s.sliding_window = 4096, s.attn_softcap = 50.0f, s.final_softcap = 30.0f;
        s.n_vocab = 256000, s.n_ctx_train = 8192, s.rope_theta = 10000.0f, s.norm_eps = 1e-6f, s.tied_output = true;
        v.push_back(s);
        // Gemma 3 (text): heads of 256, 5 local layers (window 512 / 1024, RoPE base 10000) per global one (base
        // 1e6; linear scaling x8 from 4B up), tied head, 262,144 embedding rows.
        s = {};
        s.name = "gemma3-1b", s.arch = "gemma3", s.n_embd = 1152, s.n_layer = 26, s.n_head = 4, s.n_head_kv = 1, s.n_ff = 6912;
        s.key_length = 256, s.qk_norm = true, s.post_norms = true, s.sliding_window = 512;
        s.n_vocab = 262144, s.n_ctx_train = 32768, s.rope_theta = 1000000.0f, s.norm_eps = 1e-6f, s.tied_output = true;
        v.push_back(s);
        s = {};
        s.name = "gemma3-4b", s.arch = "gemma3", s.n_embd = 2560, s.n_layer = 34, s.n_head = 8, s.n_head_kv = 4, s.n_ff = 10240;
        s.key_length = 256, s.qk_norm = true, s.post_norms = true, s.sliding_window = 1024, s.rope_linear_factor = 8.0f;
        s.n_vocab = 262208, s.n_ctx_train = 131072, s.rope_theta = 1000000.0f, s.norm_eps = 1e-6f, s.tied_output = true;
        v.push_back(s);
        // Phi-3 / Phi-4 (phi3 in GGUF): Q/K/V in one matrix, gate and up in one, NEOX RoPE; Phi-3-mini-4k attends to
        // windows of 2047 keys on every layer, Phi-3.5-mini and Phi-4-mini scale RoPE with LongRoPE past 4096
        // positions (their window of 262144 never binds), Phi-4-mini rotates 96 of its 128 head dimensions, ties its
        // head and has GQA; Phi-4 (14B) has no window (0) and no LongRoPE.
        s = {};
        s.name = "phi3-mini", s.arch = "phi3", s.n_embd = 3072, s.n_layer = 32, s.n_head = 32, s.n_head_kv = 32, s.n_ff = 8192;
        s.sliding_window = 2047, s.n_vocab = 32064, s.n_ctx_train = 4096, s.rope_theta = 10000.0f, s.norm_eps = 1e-5f;
        v.push_back(s);
        s = {};
        s.name = "phi3.5-mini", s.arch = "phi3", s.n_embd = 3072, s.n_layer = 32, s.n_head = 32, s.n_head_kv = 32, s.n_ff = 8192;
        s.sliding_window = 262144, s.longrope_original_ctx = 4096;
        s.n_vocab = 32064, s.n_ctx_train = 131072, s.rope_theta = 10000.0f, s.norm_eps = 1e-5f;
        v.push_back(s);
        s = {};
        s.name = "phi4-mini", s.arch = "phi3", s.n_embd = 3072, s.n_layer = 32, s.n_head = 24, s.n_head_kv = 8, s.n_ff = 8192;
        s.sliding_window = 262144, s.longrope_original_ctx = 4096, s.rope_dim = 96, s.tied_output = true;
        s.n_vocab = 200064, s.n_ctx_train = 131072, s.rope_theta = 10000.0f, s.norm_eps = 1e-5f;
        v.push_back(s);
        s = {};
        s.name = "phi4", s.arch = "phi3", s.n_embd = 5120, s.n_layer = 40, s.n_head = 40, s.n_head_kv = 10, s.n_ff = 17920;
        s.sliding_window = 0, s.n_vocab = 100352, s.n_ctx_train = 16384, s.rope_theta = 250000.0f, s.norm_eps = 1e-5f;
        v.push_back(s);
        // StarCoder2 (FIM code models): LayerNorms and biases everywhere, a GELU MLP, GQA, NEOX RoPE; the 3B and 7B tie
        // their head (3.03B and 7.17B parameters, as their model cards count), the 15B does not. Their configs' sliding
        // window of 4096 is not read by llama.cpp, nor here.
        s = {};
        s.name = "starcoder2-3b", s.arch = "starcoder2", s.n_embd = 3072, s.n_layer = 30, s.n_head = 24, s.n_head_kv = 2, s.n_ff = 12288;
        s.n_vocab = 49152, s.n_ctx_train = 16384, s.rope_theta = 999999.4420358813f, s.norm_eps = 1e-5f, s.tied_output = true;
        v.push_back(s);
        s = {};
        s.name = "starcoder2-7b", s.arch = "starcoder2", s.n_embd = 4608, s.n_layer = 32, s.n_head = 36, s.n_head_kv = 4, s.n_ff = 18432;
        s.n_vocab = 49152, s.n_ctx_train = 16384, s.rope_theta = 1000000.0f, s.norm_eps = 1e-5f, s.tied_output = true;
        v.push_back(s);
        s = {};
        s.name = "starcoder2-15b", s.arch = "starcoder2", s.n_embd = 6144, s.n_layer = 40, s.n_head = 48, s.n_head_kv = 4, s.n_ff = 24576;
        s.n_vocab = 49152, s.n_ctx_train = 16384, s.rope_theta = 100000.0f, s.norm_eps = 1e-5f, s.tied_output = false;
        v.push_back(s);
        // Not a real model: small enough for unit tests (256 is one K-quant super-block, so every type applies),
        // with GQA, llama3 scaling and an untied head to exercise the same paths as the big shapes.
        s = {};
        s.name = "tiny-llama", s.arch = "llama", s.n_embd = 256, s.n_layer = 2, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 512;
        s.n_vocab = 0, s.n_ctx_train = 2048, s.rope_theta = 10000.0f, s.norm_eps = 1e-5f, s.tied_output = false;
        s.llama3_factor = 8.0f;
        v.push_back(s);
        // qwen3's graph small: heads of 128 wider than n_embd / n_head (as every Qwen3), tied head, per-head norms.
        s = {};
        s.name = "tiny-qwen3", s.arch = "qwen3", s.n_embd = 256, s.n_layer = 2, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 512;
        s.key_length = 128, s.qk_norm = true;
        s.n_vocab = 0, s.n_ctx_train = 4096, s.rope_theta = 1000000.0f, s.norm_eps = 1e-6f, s.tied_output = true;
        v.push_back(s);
        // qwen2's graph small: Q/K/V biases, NEOX RoPE, GQA, a tied head (as Qwen2.5 0.5B-3B).
        s = {};
        s.name = "tiny-qwen2", s.arch = "qwen2", s.n_embd = 256, s.n_layer = 2, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 512;
        s.n_vocab = 0, s.n_ctx_train = 4096, s.rope_theta = 1000000.0f, s.norm_eps = 1e-6f, s.tied_output = true, s.qkv_bias = true;
        v.push_back(s);
        // gemma2's graph small: 4 layers alternating local (a window of 16) and global, with caps small enough that
        // random weights reach them (Gemma 2's 50 and 30 would leave tanh in its linear range here).
        s = {};
        s.name = "tiny-gemma2", s.arch = "gemma2", s.n_embd = 256, s.n_layer = 4, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 512;
        s.key_length = 128, s.post_norms = true, s.sliding_window = 16, s.attn_softcap = 0.15f, s.final_softcap = 0.5f;
        s.n_vocab = 0, s.n_ctx_train = 4096, s.rope_theta = 10000.0f, s.norm_eps = 1e-6f, s.tied_output = true;
        v.push_back(s);
        // gemma3's graph small: 8 layers (5 local, 1 global, 2 local) with a window of 16 positions, so that short
        // tests cross it; linear RoPE scaling on the global layer as from Gemma 3 4B up.
        s = {};
        s.name = "tiny-gemma3", s.arch = "gemma3", s.n_embd = 256, s.n_layer = 8, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 512;
        s.key_length = 128, s.qk_norm = true, s.post_norms = true, s.sliding_window = 16, s.rope_linear_factor = 8.0f;
        s.n_vocab = 0, s.n_ctx_train = 4096, s.rope_theta = 1000000.0f, s.norm_eps = 1e-6f, s.tied_output = true;
        v.push_back(s);
        // phi3's graph small: a window of 16 keys on every layer, GQA, LongRoPE past 512 positions (the short factors
        // below, the long ones above, as the session's context decides), an untied head.
        s = {};
        s.name = "tiny-phi3", s.arch = "phi3", s.n_embd = 256, s.n_layer = 4, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 512;
        s.sliding_window = 16, s.longrope_original_ctx = 512;
        s.n_vocab = 0, s.n_ctx_train = 4096, s.rope_theta = 10000.0f, s.norm_eps = 1e-5f;
        v.push_back(s);
        // Phi-4-mini's variations small: 48 of 64 head dimensions rotated, a tied head, no window, LongRoPE.
        s = {};
        s.name = "tiny-phi4", s.arch = "phi3", s.n_embd = 256, s.n_layer = 2, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 512;
        s.sliding_window = 0, s.longrope_original_ctx = 512, s.rope_dim = 48, s.tied_output = true;
        s.n_vocab = 0, s.n_ctx_train = 4096, s.rope_theta = 10000.0f, s.norm_eps = 1e-5f;
        v.push_back(s);
        // starcoder2's graph small: LayerNorms (weights around one) and biases, a GELU MLP, GQA, an untied head.
        s = {};
        s.name = "tiny-starcoder2", s.arch = "starcoder2", s.n_embd = 256, s.n_layer = 3, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 512;
        s.n_vocab = 0, s.n_ctx_train = 4096, s.rope_theta = 100000.0f, s.norm_eps = 1e-5f, s.tied_output = false;
        v.push_back(s);
        // Mixture of experts (the published configs): Mixtral 8x7B (llama with 8 experts, 2 a token); Qwen1.5-MoE-A2.7B
        // (qwen2moe: 60 experts of 1408 rows, 4 a token, a shared expert of 5632); Qwen3-30B-A3B and
        // Qwen3-Coder-30B-A3B (qwen3moe: 128 experts of 768 rows, 8 a token, heads of 128, untied).
        s = {};
        s.name = "mixtral-8x7b", s.arch = "llama", s.n_embd = 4096, s.n_layer = 32, s.n_head = 32, s.n_head_kv = 8, s.n_ff = 14336;
        s.n_vocab = 32000, s.n_ctx_train = 32768, s.rope_theta = 1000000.0f, s.norm_eps = 1e-5f;
        s.n_expert = 8, s.n_expert_used = 2;
        v.push_back(s);
        s = {};
        s.name = "qwen1.5-moe-a2.7b", s.arch = "qwen2moe", s.n_embd = 2048, s.n_layer = 24, s.n_head = 16, s.n_head_kv = 16, s.n_ff = 5632;
        s.qkv_bias = true, s.n_vocab = 151936, s.n_ctx_train = 8192, s.rope_theta = 1000000.0f, s.norm_eps = 1e-6f;
        s.n_expert = 60, s.n_expert_used = 4, s.n_ff_exp = 1408, s.n_ff_shexp = 5632;
        v.push_back(s);
        s = {};
        s.name = "qwen3-30b-a3b", s.arch = "qwen3moe", s.n_embd = 2048, s.n_layer = 48, s.n_head = 32, s.n_head_kv = 4, s.n_ff = 6144;
        s.key_length = 128, s.qk_norm = true, s.n_vocab = 151936, s.n_ctx_train = 40960, s.rope_theta = 1000000.0f, s.norm_eps = 1e-6f;
        s.n_expert = 128, s.n_expert_used = 8, s.n_ff_exp = 768;
        v.push_back(s);
        s.name = "qwen3-coder-30b-a3b", s.n_ctx_train = 262144, s.rope_theta = 10000000.0f;
        v.push_back(s);
        // The three MoE graphs small: 8 experts (Mixtral's count, which llama.cpp's quantization rules single out),
        // 6 with a shared expert, 16 with 4 a token; expert rows of 256 (one K-quant super-block).
        s = {};
        s.name = "tiny-mixtral", s.arch = "llama", s.n_embd = 256, s.n_layer = 2, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 256;
        s.n_vocab = 0, s.n_ctx_train = 4096, s.rope_theta = 1000000.0f, s.norm_eps = 1e-5f;
        s.n_expert = 8, s.n_expert_used = 2;
        v.push_back(s);
        s = {};
        s.name = "tiny-qwen2moe", s.arch = "qwen2moe", s.n_embd = 256, s.n_layer = 2, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 512;
        s.qkv_bias = true, s.n_vocab = 0, s.n_ctx_train = 4096, s.rope_theta = 1000000.0f, s.norm_eps = 1e-6f;
        s.n_expert = 6, s.n_expert_used = 2, s.n_ff_exp = 256, s.n_ff_shexp = 512;
        v.push_back(s);
        s = {};
        s.name = "tiny-qwen3moe", s.arch = "qwen3moe", s.n_embd = 256, s.n_layer = 2, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 512;
        s.key_length = 128, s.qk_norm = true, s.n_vocab = 0, s.n_ctx_train = 4096, s.rope_theta = 1000000.0f, s.norm_eps = 1e-6f;
        s.n_expert = 16, s.n_expert_used = 4, s.n_ff_exp = 256;
        v.push_back(s);
        return v;
    }();
    return shapes;
}

const SyntheticShape *find_synthetic_shape(const std::string &name) {
    for (const SyntheticShape &s : synthetic_shapes())
        if (s.name == name) return &s;
    return nullptr;
}

std::optional<SyntheticType> parse_synthetic_type(const std::string &name) {
    std::string n = name;
    for (char &c : n) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (n == "f32") return SyntheticType::F32;
    if (n == "f16") return SyntheticType::F16;
    if (n == "q8_0") return SyntheticType::Q8_0;
    if (n == "q4_0") return SyntheticType::Q4_0;
    if (n == "q4_k_m") return SyntheticType::Q4_K_M;
    return std::nullopt;
}

const char *synthetic_type_name(SyntheticType type) {
    switch (type) {
    case SyntheticType::F32: return "F32";
    case SyntheticType::F16: return "F16";
    case SyntheticType::Q4_0: return "Q4_0";
    case SyntheticType::Q8_0: return "Q8_0";
    case SyntheticType::Q4_K_M: return "Q4_K_M";
    }
    return "?";
}

uint32_t synthetic_weight_type(SyntheticType type, const std::string &name, int64_t row_length, int32_t layer, int32_t n_layer,
                               bool tied, int32_t n_expert) {
    // The converter writes routers F32 (convert_hf_to_gguf.py: FFN_GATE_INP), and llama-quantize leaves them so.
    if (name.find("ffn_gate_inp.weight") != std::string::npos) return uint32_t(TensorType::F32);
    // F32 / F16 files are what the converter writes (--outtype f32 / f16): every matrix in that type.
    if (type == SyntheticType::F32) return uint32_t(TensorType::F32);
    if (type == SyntheticType::F16) return uint32_t(TensorType::F16);

    const TensorType base = type == SyntheticType::Q8_0 ? TensorType::Q8_0 : type == SyntheticType::Q4_0 ? TensorType::Q4_0 : TensorType::Q4_K;
    TensorType t = base;
    const bool is_output = name == "output.weight" || (tied && name == "token_embd.weight");
    if (is_output) {
        // llama.cpp gives the LM head Q6_K in every mix but Q8_0 (Q4_0 included), and Q8_0 where the row length is
        // not a multiple of the mix's block size.
        if (row_length % block_size(base) != 0) t = TensorType::Q8_0;
        else if (base != TensorType::Q8_0) t = TensorType::Q6_K;
    } else if (name == "token_embd.weight") {
        // An untied embedding keeps the mix's base type (Q4_K in Q4_K_M, Q4_0 in Q4_0).
    } else if (name.find("attn_qkv.weight") != std::string::npos) {
        if (type == SyntheticType::Q4_K_M) t = TensorType::Q5_K;  // llama.cpp's Q4_K_M: fused Q/K/V in Q5_K
    } else if (name.find("attn_v.weight") != std::string::npos || name.find("ffn_down") != std::string::npos) {
        // Q4_K_M: attn_v and ffn_down of the use_more_bits layers are Q6_K (llama.cpp counts these tensors in
        // layer order, so the counter is the layer index; with experts it reads the layer from the name, the same).
        if (type == SyntheticType::Q4_K_M && use_more_bits(layer, n_layer)) t = TensorType::Q6_K;
        if (n_expert == 8 && name.find("attn_v.weight") != std::string::npos) t = TensorType::Q8_0;  // "trades just ~128MB"
    } else if (name.find("attn_k.weight") != std::string::npos) {
        if (n_expert == 8) t = TensorType::Q8_0;
    } else if (name.find("attn_output.weight") != std::string::npos) {
        if (n_expert == 8 && type == SyntheticType::Q4_K_M) t = TensorType::Q5_K;
    }

    if (row_length % block_size(t) != 0) {
        // llama.cpp's fallback for rows that are no multiple of 256 (Qwen2.5-0.5B's 896): Q6_K -> Q8_0, and Q4_K ->
        // Q5_0. The CPU backend has no Q5_0, so Q4_K falls back to Q8_0 here too: such a file is a little larger
        // than llama.cpp's (8.5 instead of 5.5 bits per weight on those tensors).
        if (t == TensorType::Q6_K || t == TensorType::Q4_K) t = TensorType::Q8_0;
        else invalid("tensor '" + name + "': row length " + std::to_string(row_length) + " is not a multiple of the " +
                     tensor_type_name(uint32_t(t)) + " block size (llama.cpp cannot quantize it either)");
        if (row_length % block_size(t) != 0) t = TensorType::F16;  // as llama.cpp, when even the fallback does not fit
    }
    return uint32_t(t);
}

std::vector<SyntheticTensor> synthetic_tensors(const SyntheticShape &s, int32_t n_layer, int32_t n_vocab, SyntheticType type) {
    const int64_t d = s.n_embd, q = int64_t(s.n_head) * s.head_dim(), kv = int64_t(s.n_head_kv) * s.head_dim(), f = s.n_ff;
    std::vector<SyntheticTensor> tensors;
    auto matrix = [&](const std::string &name, int32_t layer, int64_t cols, int64_t rows) {
        tensors.push_back({name, layer, synthetic_weight_type(type, name, cols, layer, n_layer, s.tied_output, s.n_expert), {cols, rows}});
    };
    auto experts = [&](const std::string &name, int32_t layer, int64_t cols, int64_t rows) {  // stacked {cols, rows, n_expert}
        tensors.push_back({name, layer, synthetic_weight_type(type, name, cols, layer, n_layer, s.tied_output, s.n_expert), {cols, rows, s.n_expert}});
    };
    auto vector = [&](const std::string &name, int32_t layer, int64_t n) { tensors.push_back({name, layer, uint32_t(TensorType::F32), {n}}); };

    matrix("token_embd.weight", -1, d, n_vocab);
    vector("output_norm.weight", -1, d);
    if (s.arch == "starcoder2") vector("output_norm.bias", -1, d);
    if (!s.tied_output) matrix("output.weight", -1, d, n_vocab);
    if (s.llama3_factor > 0) vector("rope_freqs.weight", -1, s.head_dim() / 2);
    if (s.longrope_original_ctx > 0) {
        const int64_t n = int64_t(longrope_factors(s, false).size());
        vector("rope_factors_long.weight", -1, n);
        vector("rope_factors_short.weight", -1, n);
    }
    for (int32_t il = 0; il < n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        vector(p + "attn_norm.weight", il, d);
        if (s.arch == "starcoder2") {  // LayerNorms with biases, biases on every projection, no gate
            vector(p + "attn_norm.bias", il, d);
            for (const char *m : {"attn_q", "attn_k", "attn_v"}) {
                matrix(p + m + ".weight", il, d, std::string(m) == "attn_q" ? q : kv);
                vector(p + m + ".bias", il, std::string(m) == "attn_q" ? q : kv);
            }
            matrix(p + "attn_output.weight", il, q, d);
            vector(p + "attn_output.bias", il, d);
            vector(p + "ffn_norm.weight", il, d);
            vector(p + "ffn_norm.bias", il, d);
            matrix(p + "ffn_up.weight", il, d, f);
            vector(p + "ffn_up.bias", il, f);
            matrix(p + "ffn_down.weight", il, f, d);
            vector(p + "ffn_down.bias", il, d);
            continue;
        }
        if (s.arch == "phi3") {  // fused Q/K/V and gate/up matrices, no biases
            matrix(p + "attn_qkv.weight", il, d, q + 2 * kv);
            matrix(p + "attn_output.weight", il, q, d);
            vector(p + "ffn_norm.weight", il, d);
            matrix(p + "ffn_up.weight", il, d, 2 * f);
            matrix(p + "ffn_down.weight", il, f, d);
            continue;
        }
        matrix(p + "attn_q.weight", il, d, q);
        matrix(p + "attn_k.weight", il, d, kv);
        matrix(p + "attn_v.weight", il, d, kv);
        if (s.qkv_bias) {
            vector(p + "attn_q.bias", il, q);
            vector(p + "attn_k.bias", il, kv);
            vector(p + "attn_v.bias", il, kv);
        }
        if (s.qk_norm) {
            vector(p + "attn_q_norm.weight", il, s.head_dim());
            vector(p + "attn_k_norm.weight", il, s.head_dim());
        }
        matrix(p + "attn_output.weight", il, q, d);
        if (s.output_bias) vector(p + "attn_output.bias", il, d);
        if (s.post_norms) {
            vector(p + "post_attention_norm.weight", il, d);
            vector(p + "post_ffw_norm.weight", il, d);
        }
        vector(p + "ffn_norm.weight", il, d);
        if (s.n_expert > 0) {  // the router, the stacked experts, qwen2moe's shared expert and its gate
            const int64_t fe = s.n_ff_exp > 0 ? s.n_ff_exp : f, fs = s.n_ff_shexp;
            matrix(p + "ffn_gate_inp.weight", il, d, s.n_expert);
            experts(p + "ffn_gate_exps.weight", il, d, fe);
            experts(p + "ffn_up_exps.weight", il, d, fe);
            experts(p + "ffn_down_exps.weight", il, fe, d);
            if (fs > 0) {
                vector(p + "ffn_gate_inp_shexp.weight", il, d);
                matrix(p + "ffn_gate_shexp.weight", il, d, fs);
                matrix(p + "ffn_up_shexp.weight", il, d, fs);
                matrix(p + "ffn_down_shexp.weight", il, fs, d);
            }
            continue;
        }
        matrix(p + "ffn_gate.weight", il, d, f);
        matrix(p + "ffn_up.weight", il, d, f);
        matrix(p + "ffn_down.weight", il, f, d);
    }
    // llama.cpp's loader keeps tensors in a map ordered by weight_name_comparer (non-block tensors first, then by
    // layer number, each group by name), and llama-quantize writes them in that order.
    std::stable_sort(tensors.begin(), tensors.end(), [](const SyntheticTensor &a, const SyntheticTensor &b) {
        return a.layer != b.layer ? a.layer < b.layer : a.name < b.name;
    });
    return tensors;
}

std::vector<float> longrope_factors(const SyntheticShape &shape, bool long_factors) {
    const int32_t n = shape.rope_dim > 0 ? shape.rope_dim / 2 : shape.head_dim() / 2;
    const float scale = float(shape.n_ctx_train) / float(std::max(1, shape.longrope_original_ctx));
    std::vector<float> f(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
        const float t = n > 1 ? float(i) / float(n - 1) : 0.0f;
        f[size_t(i)] = long_factors ? 1.0f + (scale - 1.0f) * t * t : 1.0f + 0.25f * t;
    }
    return f;
}

std::vector<float> llama3_rope_freqs(const SyntheticShape &shape) {
    // convert_hf_to_gguf.py computes this on float32 torch tensors: freqs = 1 / base ** (arange(0, dim, 2) / dim),
    // then per frequency wavelen = 2 * pi / freq etc. A Python scalar meeting a float32 tensor is rounded to
    // float32, and `scalar / tensor` is Tensor.__rtruediv__, i.e. reciprocal(tensor) * scalar. Each step below is
    // that float32 operation. Only torch's float32 pow may differ from the correctly rounded power used here,
    // by an ulp, on some inputs.
    const int32_t dim = shape.head_dim();
    const float base = shape.rope_theta;
    const float factor = shape.llama3_factor, low = shape.llama3_low_freq_factor, high = shape.llama3_high_freq_factor;
    const float old_ctx = float(shape.llama3_original_ctx);
    const double low_wavelen = double(shape.llama3_original_ctx) / double(low);   // Python floats
    const double high_wavelen = double(shape.llama3_original_ctx) / double(high);
    const float two_pi = float(2.0 * M_PI);
    const float band = float(double(high) - double(low));
    std::vector<float> factors(size_t(dim / 2));
    for (int32_t i = 0; i < dim / 2; ++i) {
        const float exponent = float(2 * i) / float(dim);
        const float power = float(std::pow(double(base), double(exponent)));
        const float freq = 1.0f / power;
        const float wavelen = (1.0f / freq) * two_pi;
        if (wavelen < float(high_wavelen)) {
            factors[size_t(i)] = 1.0f;
        } else if (wavelen > float(low_wavelen)) {
            factors[size_t(i)] = factor;
        } else {
            const float smooth = ((1.0f / wavelen) * old_ctx - low) / band;
            const float denom = (1.0f - smooth) / factor + smooth;
            factors[size_t(i)] = 1.0f / denom;
        }
    }
    return factors;
}

SyntheticResult write_synthetic_model(const SyntheticShape &shape, const std::string &vocab_path, const std::string &path,
                                      const SyntheticOptions &options) {
    const int32_t n_layer = options.n_layer > 0 ? options.n_layer : shape.n_layer;
    if (options.n_layer < 0) invalid("layer count " + std::to_string(options.n_layer) + " is negative");
    check_shape(shape, n_layer);
    switch (options.type) {
    case SyntheticType::F32: case SyntheticType::F16: case SyntheticType::Q8_0: case SyntheticType::Q4_0: case SyntheticType::Q4_K_M: break;
    default: invalid("weight type " + std::to_string(int32_t(options.type)) + " is not offered");
    }

    // The tokenizer: every tokenizer.* key of the vocabulary file, in its order.
    const GgufFile vocab = GgufFile::parse(FileBytes::open(vocab_path, true));
    const std::vector<Value> *tokens = vocab.get_array("tokenizer.ggml.tokens", ValueType::STRING);
    require(tokens != nullptr && !tokens->empty(), SPECULA_ERR_FORMAT,
            "synthetic model: '" + vocab_path + "' has no tokenizer.ggml.tokens (not a model or vocab-only GGUF?)");
    const size_t n_tokens = tokens->size();
    const size_t n_vocab = std::max(n_tokens, size_t(shape.n_vocab));
    if (n_vocab > (size_t(1) << 24)) invalid("vocabulary of " + std::to_string(n_vocab) + " tokens");

    GgufWriter w;
    const std::string a = shape.arch + ".";
    w.set_string("general.architecture", shape.arch);
    w.set_string("general.type", "model");
    w.set_string("general.name", shape.name + " (synthetic: random weights)");
    w.set_u32(a + "block_count", uint32_t(n_layer));
    w.set_u32(a + "context_length", uint32_t(shape.n_ctx_train));
    w.set_u32(a + "embedding_length", uint32_t(shape.n_embd));
    w.set_u32(a + "feed_forward_length", uint32_t(shape.n_ff));
    w.set_u32(a + "attention.head_count", uint32_t(shape.n_head));
    w.set_u32(a + "attention.head_count_kv", uint32_t(shape.n_head_kv));
    w.set_f32(a + "rope.freq_base", shape.rope_theta);
    if (shape.arch == "starcoder2") w.set_f32(a + "attention.layer_norm_epsilon", shape.norm_eps);  // LayerNorms
    else w.set_f32(a + "attention.layer_norm_rms_epsilon", shape.norm_eps);
    if (shape.arch == "gemma3") {
        w.set_u32(a + "attention.sliding_window", uint32_t(shape.sliding_window));
        if (shape.rope_linear_factor > 0) {
            w.set_string(a + "rope.scaling.type", "linear");
            w.set_f32(a + "rope.scaling.factor", shape.rope_linear_factor);
        }
    }
    if (shape.arch == "gemma2") {
        w.set_u32(a + "attention.sliding_window", uint32_t(shape.sliding_window));
        w.set_f32(a + "attn_logit_softcapping", shape.attn_softcap);
        w.set_f32(a + "final_logit_softcapping", shape.final_softcap);
    }
    if (shape.arch == "phi3") {  // as convert_hf_to_gguf.py's Phi3MiniModel writes them
        w.set_u32(a + "rope.dimension_count", uint32_t(shape.rotated_dims()));
        w.set_u32(a + "rope.scaling.original_context_length", uint32_t(shape.longrope_original_ctx > 0 ? shape.longrope_original_ctx : shape.n_ctx_train));
        w.set_u32(a + "attention.sliding_window", uint32_t(shape.sliding_window));
        if (shape.longrope_original_ctx > 0) {
            const double scale = double(shape.n_ctx_train) / double(shape.longrope_original_ctx);
            const double attn = scale > 1.0 ? std::sqrt(1.0 + std::log(scale) / std::log(double(shape.longrope_original_ctx))) : 1.0;
            w.set_f32(a + "rope.scaling.attn_factor", float(attn));
        }
    }
    if (shape.n_expert > 0) {  // as the converters write them (Mixtral: no expert_feed_forward_length)
        w.set_u32(a + "expert_count", uint32_t(shape.n_expert));
        w.set_u32(a + "expert_used_count", uint32_t(shape.n_expert_used));
        if (shape.n_ff_exp > 0) w.set_u32(a + "expert_feed_forward_length", uint32_t(shape.n_ff_exp));
        if (shape.n_ff_shexp > 0) w.set_u32(a + "expert_shared_feed_forward_length", uint32_t(shape.n_ff_shexp));
    }
    if (shape.arch == "qwen3" || shape.arch == "qwen3moe" || shape.arch == "gemma2" || shape.arch == "gemma3") {  // the head size is its own (128 for every Qwen3, 256 in Gemma 3)
        w.set_u32(a + "attention.key_length", uint32_t(shape.head_dim()));
        w.set_u32(a + "attention.value_length", uint32_t(shape.head_dim()));
    }
    if (shape.arch == "llama") {  // the keys llama.cpp's converter adds for Llama 3
        w.set_u32(a + "attention.key_length", uint32_t(shape.head_dim()));
        w.set_u32(a + "attention.value_length", uint32_t(shape.head_dim()));
        w.set_u32(a + "vocab_size", uint32_t(n_vocab));
        w.set_u32(a + "rope.dimension_count", uint32_t(shape.head_dim()));
    }
    w.set_u32("general.file_type", uint32_t(options.type));
    for (const auto &[key, value] : vocab.metadata())
        if (key.rfind("tokenizer.", 0) == 0) w.set(key, padded(key, value, n_tokens, n_vocab));
    if (options.type != SyntheticType::F32 && options.type != SyntheticType::F16)
        w.set_u32("general.quantization_version", kQuantizationVersion);

    const std::vector<SyntheticTensor> tensors = synthetic_tensors(shape, n_layer, int32_t(n_vocab), options.type);
    const std::vector<float> rope_freqs = shape.llama3_factor > 0 ? llama3_rope_freqs(shape) : std::vector<float>{};
    const std::vector<float> longrope_short = shape.longrope_original_ctx > 0 ? longrope_factors(shape, false) : std::vector<float>{};
    const std::vector<float> longrope_long = shape.longrope_original_ctx > 0 ? longrope_factors(shape, true) : std::vector<float>{};
    SyntheticResult result;
    result.n_vocab = int32_t(n_vocab);
    result.n_layer = n_layer;
    uint64_t total_bytes = 0;
    for (const SyntheticTensor &t : tensors) {
        uint64_t elements = 1;
        for (int64_t d : t.dims) elements *= uint64_t(d);
        result.n_params += elements;
        const TensorTypeLayout *layout = tensor_type_layout(t.type);
        total_bytes += elements / layout->block_size * layout->type_size;
    }

    uint64_t written = 0;
    auto report = [&](uint64_t bytes) {
        written += bytes;
        if (options.progress && !options.progress(total_bytes ? float(double(written) / double(total_bytes)) : 1.0f))
            throw Error(SPECULA_ERR_CANCELLED, "synthetic model: cancelled");
    };
    for (const SyntheticTensor &t : tensors) {
        // Every row has its own generator, seeded from (seed, tensor name, row): the bytes do not depend on how
        // the writer chunks the data, and a tensor is identical in files with fewer layers.
        const uint64_t tensor_seed = mix64(options.seed ^ fnv1a(t.name));
        const uint32_t type = t.type;
        const int64_t cols = t.dims[0];
        const Fill fill = fill_of(t.name, shape.arch);
        const std::vector<float> *freqs = fill == Fill::LongRopeShort ? &longrope_short : fill == Fill::LongRopeLong ? &longrope_long : &rope_freqs;
        w.add_streamed_tensor(t.name, type, t.dims, [=, &report](int64_t first_row, int64_t n_rows, size_t row_bytes, uint8_t *dst) {
            for (int64_t r = 0; r < n_rows; ++r) {
                uint8_t *row = dst + size_t(r) * row_bytes;
                if (fill == Fill::Ones) {
                    const float one = 1.0f;
                    for (int64_t i = 0; i < cols; ++i) std::memcpy(row + 4 * i, &one, 4);
                } else if (fill == Fill::NearOne) {
                    Rng rng(mix64(tensor_seed + uint64_t(first_row + r)));
                    for (int64_t i = 0; i < cols; ++i) {
                        const float v = 1.0f + 0.25f * rng.symmetric();
                        std::memcpy(row + 4 * i, &v, 4);
                    }
                } else if (fill == Fill::Router) {  // F32, uniform with standard deviation 4 / sqrt(n_embd)
                    Rng rng(mix64(tensor_seed + uint64_t(first_row + r)));
                    const float a = float(4.0 * std::sqrt(3.0) / std::sqrt(double(cols)));
                    for (int64_t i = 0; i < cols; ++i) {
                        const float v = a * rng.symmetric();
                        std::memcpy(row + 4 * i, &v, 4);
                    }
                } else if (fill == Fill::RopeFreqs || fill == Fill::LongRopeShort || fill == Fill::LongRopeLong) {
                    std::memcpy(row, freqs->data(), freqs->size() * sizeof(float));
                } else {
                    Rng rng(mix64(tensor_seed + uint64_t(first_row + r)));
                    random_row(type, cols, rng, row);
                }
            }
            report(uint64_t(n_rows) * row_bytes);
        });
    }
    report(0);
    w.write_file(path);
    result.file_bytes = std::filesystem::file_size(path);
    return result;
}

}  // namespace specula::internal
