#include "longspec_draft_file.h"

#include "formats/half.h"
#include "formats/type_kernels.h"
#include "core/error.h"
#include "gguf/gguf_writer.h"
#include "speculative/vocab_compat.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

namespace specula::internal {
namespace {

constexpr const char *kArchitecture = "longspec";
constexpr int64_t kMaxWindow = int64_t(1) << 20;
constexpr int64_t kBig = int64_t(1) << 24;  // bound on widths and vocabulary sizes, as in read_hparams

std::string float_text(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

// --- metadata -------------------------------------------------------------------------------------------

int64_t required_int(const GgufFile &file, const std::string &key, int64_t lo, int64_t hi) {
    const auto v = file.get_int(key);
    require(v.has_value(), SPECULA_ERR_FORMAT, "longspec draft: required metadata '" + key + "' is missing");
    require(*v >= lo && *v <= hi, SPECULA_ERR_FORMAT,
            "longspec draft: metadata '" + key + "' = " + std::to_string(*v) + " is outside [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "]");
    return *v;
}

float required_float(const GgufFile &file, const std::string &key) {
    const auto v = file.get_float(key);
    require(v.has_value(), SPECULA_ERR_FORMAT, "longspec draft: required metadata '" + key + "' is missing");
    require(std::isfinite(*v), SPECULA_ERR_FORMAT, "longspec draft: metadata '" + key + "' is not a finite number");
    return float(*v);
}

std::string required_string(const GgufFile &file, const std::string &key) {
    const auto v = file.get_string(key);
    require(v.has_value(), SPECULA_ERR_FORMAT, "longspec draft: required metadata '" + key + "' is missing");
    return *v;
}

// The target's RoPE scaling as the draft file spells it.
const char *scaling_name(RopeScaling s) {
    switch (s) {
    case RopeScaling::None: return "none";
    case RopeScaling::Linear: return "linear";
    case RopeScaling::Llama3: return "llama3";
    }
    return "none";
}

float scaling_factor(const HParams &hp) {
    switch (hp.rope_scaling) {
    case RopeScaling::None: return 1.0f;
    case RopeScaling::Linear: return 1.0f / hp.rope_freq_scale;
    case RopeScaling::Llama3: return hp.rope_scaling_factor;
    }
    return 1.0f;
}

// Everything the file says, before it is compared with the target.
struct DraftMetadata {
    std::string target_arch, fingerprint, scaling;
    int64_t target_layers = 0, n_embd = 0, n_ff = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_vocab = 0;
    int64_t window = 0, rope_dim = 0, cross_layer = 0;
    float norm_eps = 0, freq_base = 0, factor = 0;
};

DraftMetadata read_metadata(const GgufFile &file) {
    const auto arch = file.get_string("general.architecture");
    require(arch.has_value(), SPECULA_ERR_FORMAT, "longspec draft: metadata 'general.architecture' is missing");
    require(*arch == kArchitecture, SPECULA_ERR_FORMAT,
            "longspec draft: general.architecture is '" + *arch + "', expected '" + kArchitecture + "' (is this a draft file?)");
    const std::string a = std::string(kArchitecture) + ".";
    DraftMetadata m;
    m.target_arch = required_string(file, a + "target.architecture");
    m.target_layers = required_int(file, a + "target.block_count", 1, 4096);
    m.fingerprint = required_string(file, a + "target.tokenizer_fingerprint");
    m.n_embd = required_int(file, a + "embedding_length", 1, kBig);
    m.n_ff = required_int(file, a + "feed_forward_length", 1, kBig);
    m.n_head = required_int(file, a + "attention.head_count", 1, 4096);
    m.n_head_kv = required_int(file, a + "attention.head_count_kv", 1, 4096);
    m.head_dim = required_int(file, a + "attention.key_length", 1, 2048);
    m.norm_eps = required_float(file, a + "attention.layer_norm_rms_epsilon");
    require(m.norm_eps >= 0 && m.norm_eps < 1, SPECULA_ERR_FORMAT, "longspec draft: layer_norm_rms_epsilon out of range");
    m.window = required_int(file, a + "attention.sliding_window", 1, kMaxWindow);
    m.n_vocab = required_int(file, a + "vocab_size", 1, kBig);
    m.freq_base = required_float(file, a + "rope.freq_base");
    require(m.freq_base > 0, SPECULA_ERR_FORMAT, "longspec draft: rope.freq_base must be positive");
    m.rope_dim = required_int(file, a + "rope.dimension_count", 2, 2048);
    m.scaling = required_string(file, a + "rope.scaling.type");
    require(m.scaling == "none" || m.scaling == "linear" || m.scaling == "llama3", SPECULA_ERR_UNSUPPORTED,
            "longspec draft: rope scaling type '" + m.scaling + "' is not supported");
    m.factor = required_float(file, a + "rope.scaling.factor");
    require(m.factor > 0, SPECULA_ERR_FORMAT, "longspec draft: rope.scaling.factor must be positive");
    // The layer index is checked against the file's own block count: a file that contradicts itself is
    // malformed whatever target it meets (and block_count must then equal the target's n_layer).
    m.cross_layer = required_int(file, a + "cross_attention.target_layer", 0, m.target_layers - 1);
    return m;
}

// Throws INCOMPATIBLE naming the first field where the draft's target differs from `target`.
void check_against_target(const DraftMetadata &m, const Model &target) {
    const HParams &hp = target.hparams();
    auto same = [](const std::string &what, int64_t draft, int64_t actual) {
        require(draft == actual, SPECULA_ERR_INCOMPATIBLE,
                "longspec draft: the draft was made for a target with " + what + " " + std::to_string(draft) + ", this target has " +
                    std::to_string(actual));
    };
    require(m.target_arch == hp.arch_name, SPECULA_ERR_INCOMPATIBLE,
            "longspec draft: the draft was made for a '" + m.target_arch + "' target, this target is '" + hp.arch_name + "'");
    same("n_layer", m.target_layers, hp.n_layer);
    same("n_embd", m.n_embd, hp.n_embd);
    same("n_head", m.n_head, hp.n_head);
    same("n_head_kv", m.n_head_kv, hp.n_head_kv);
    same("head_dim", m.head_dim, hp.head_dim);
    same("n_vocab", m.n_vocab, hp.n_vocab);
    const std::string fingerprint = tokenizer_fingerprint(target.vocab());
    require(m.fingerprint == fingerprint, SPECULA_ERR_INCOMPATIBLE,
            "longspec draft: the draft was made for a tokenizer with fingerprint " + m.fingerprint + ", this target's is " + fingerprint +
                " (same vocabulary size, different tokens)");
    require(m.freq_base == hp.rope_freq_base, SPECULA_ERR_INCOMPATIBLE,
            "longspec draft: the draft was made for a target with rope freq_base " + float_text(m.freq_base) + ", this target has " +
                float_text(hp.rope_freq_base));
    same("rope dimension_count", m.rope_dim, hp.rope_dim);
    const std::string scaling = scaling_name(hp.rope_scaling);
    require(m.scaling == scaling, SPECULA_ERR_INCOMPATIBLE,
            "longspec draft: the draft was made for a target with rope scaling '" + m.scaling + "', this target has '" + scaling + "'");
    // The target keeps a linear factor as its reciprocal, so 1 / (1 / f) may come back an ulp away from the f a
    // trainer wrote: compare to a relative 1e-6, far below any factor anyone would choose on purpose.
    const float factor = scaling_factor(hp);
    require(std::fabs(m.factor - factor) <= 1e-6f * factor, SPECULA_ERR_INCOMPATIBLE,
            "longspec draft: the draft was made for a target with rope scaling factor " + float_text(m.factor) + ", this target has " +
                float_text(factor));
}

// --- tensors --------------------------------------------------------------------------------------------

std::string shape_text(const TensorInfo &t) {
    std::string s = "[";
    for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.dims[d]);
    return s + "]";
}

// As bind_weights: a tensor that must exist with exactly shape {cols} (vector) or {cols, rows} (matrix).
WeightView bind_tensor(const GgufFile &file, const std::string &name, int64_t cols, int64_t rows, bool vector) {
    const TensorInfo *t = file.find_tensor(name);
    require(t != nullptr, SPECULA_ERR_FORMAT, "longspec draft: tensor '" + name + "' is missing");
    const bool shape_ok = vector ? (t->n_dims == 1 && t->dims[0] == cols)
                                 : (t->n_dims == 2 && t->dims[0] == cols && t->dims[1] == rows);
    require(shape_ok, SPECULA_ERR_FORMAT,
            "longspec draft: tensor '" + name + "' has shape " + shape_text(*t) + ", expected [" + std::to_string(cols) +
                (vector ? "" : ", " + std::to_string(rows)) + "]");
    // The format fixes norms and biases as F32 (they are read as plain floats), so another type is a malformed file.
    require(!vector || t->type == uint32_t(TensorType::F32), SPECULA_ERR_FORMAT,
            "longspec draft: vector tensor '" + name + "' must be F32, not " + tensor_type_name(t->type));
    require(find_type_kernels(t->type) != nullptr, SPECULA_ERR_UNSUPPORTED,
            "longspec draft: tensor '" + name + "' has type " + tensor_type_name(t->type) +
                ", which the CPU backend does not support yet");
    WeightView w;
    w.data = t->data;
    w.type = t->type;
    w.cols = cols;
    w.rows = vector ? 1 : rows;
    w.row_bytes = size_t(t->n_bytes / uint64_t(w.rows));
    return w;
}

// --- random weights -------------------------------------------------------------------------------------

// Standard normal samples by Box-Muller over mt19937_64: unlike std::normal_distribution, whose algorithm each
// standard library picks, this gives the same file from the same seed everywhere (up to libm's last-ulp log/cos).
class Gaussian {
public:
    explicit Gaussian(uint64_t seed) : rng_(seed) {}
    double next() {
        if (has_spare_) {
            has_spare_ = false;
            return spare_;
        }
        const double u1 = uniform(), u2 = uniform();
        const double r = std::sqrt(-2.0 * std::log(u1));
        const double theta = 6.283185307179586476925 * u2;
        spare_ = r * std::sin(theta);
        has_spare_ = true;
        return r * std::cos(theta);
    }

private:
    // Uniform in (0, 1]: never 0, so log(u1) is finite.
    double uniform() { return double((rng_() >> 11) + 1) * 0x1.0p-53; }

    std::mt19937_64 rng_;
    bool has_spare_ = false;
    double spare_ = 0;
};

std::vector<uint8_t> encode(const std::vector<float> &values, uint32_t type) {
    std::vector<uint8_t> out;
    if (type == uint32_t(TensorType::F16)) {
        out.resize(values.size() * 2);
        for (size_t i = 0; i < values.size(); ++i) {
            const uint16_t h = float_to_half(values[i]);
            std::memcpy(out.data() + 2 * i, &h, 2);
        }
    } else {
        out.resize(values.size() * 4);
        std::memcpy(out.data(), values.data(), out.size());
    }
    return out;
}

}  // namespace

std::shared_ptr<const LongSpecDraft> LongSpecDraft::load(const std::string &path, std::shared_ptr<const Model> target, bool use_mmap) {
    require(target != nullptr, SPECULA_ERR_INVALID_ARGUMENT, "longspec draft: no target model");
    require(!target->vocab_only(), SPECULA_ERR_INVALID_ARGUMENT, "longspec draft: the target was loaded vocab-only (it has no weights)");
    return load_bytes(FileBytes::open(path, use_mmap), std::move(target));
}

std::shared_ptr<const LongSpecDraft> LongSpecDraft::load_bytes(FileBytes bytes, std::shared_ptr<const Model> target) {
    require(target != nullptr, SPECULA_ERR_INVALID_ARGUMENT, "longspec draft: no target model");
    require(!target->vocab_only(), SPECULA_ERR_INVALID_ARGUMENT, "longspec draft: the target was loaded vocab-only (it has no weights)");

    std::shared_ptr<LongSpecDraft> draft(new LongSpecDraft());
    draft->file_ = GgufFile::parse(std::move(bytes));
    const GgufFile &file = draft->file_;
    const DraftMetadata m = read_metadata(file);
    check_against_target(m, *target);

    LongSpecDraftConfig &c = draft->config_;
    c.n_embd = int32_t(m.n_embd);
    c.n_ff = int32_t(m.n_ff);
    c.n_head = int32_t(m.n_head);
    c.n_head_kv = int32_t(m.n_head_kv);
    c.head_dim = int32_t(m.head_dim);
    c.n_vocab = int32_t(m.n_vocab);
    c.norm_eps = m.norm_eps;
    c.window = int32_t(m.window);
    c.cross_layer = int32_t(m.cross_layer);

    // Sizes now equal the target's (bounded by its own checks), so these products cannot overflow.
    const int64_t d = c.n_embd, q = int64_t(c.n_head) * c.head_dim, kv = int64_t(c.n_head_kv) * c.head_dim, f = c.n_ff;
    LongSpecWeights &w = draft->weights_;
    w.attn_norm = bind_tensor(file, "blk.0.attn_norm.weight", d, 1, true);
    w.wq = bind_tensor(file, "blk.0.attn_q.weight", d, q, false);
    w.bq = bind_tensor(file, "blk.0.attn_q.bias", q, 1, true);
    w.wk = bind_tensor(file, "blk.0.attn_k.weight", d, kv, false);
    w.bk = bind_tensor(file, "blk.0.attn_k.bias", kv, 1, true);
    w.wv = bind_tensor(file, "blk.0.attn_v.weight", d, kv, false);
    w.bv = bind_tensor(file, "blk.0.attn_v.bias", kv, 1, true);
    w.wo = bind_tensor(file, "blk.0.attn_output.weight", q, d, false);
    w.cross_norm = bind_tensor(file, "blk.0.cross_attn_norm.weight", d, 1, true);
    w.cross_wq = bind_tensor(file, "blk.0.cross_attn_q.weight", d, q, false);
    w.cross_bq = bind_tensor(file, "blk.0.cross_attn_q.bias", q, 1, true);
    w.cross_wo = bind_tensor(file, "blk.0.cross_attn_output.weight", q, d, false);
    w.ffn_norm = bind_tensor(file, "blk.0.ffn_norm.weight", d, 1, true);
    w.ffn_gate = bind_tensor(file, "blk.0.ffn_gate.weight", d, f, false);
    w.ffn_up = bind_tensor(file, "blk.0.ffn_up.weight", d, f, false);
    w.ffn_down = bind_tensor(file, "blk.0.ffn_down.weight", f, d, false);

    for (const TensorInfo &t : file.tensors()) draft->n_params_ += uint64_t(t.n_elements());
    draft->target_ = std::move(target);
    return draft;
}

void write_random_longspec_draft(const Model &target, const std::string &path, const RandomDraftOptions &options) {
    require(!target.vocab_only(), SPECULA_ERR_INVALID_ARGUMENT, "longspec draft: the target was loaded vocab-only (it has no weights)");
    require(options.weight_type == uint32_t(TensorType::F32) || options.weight_type == uint32_t(TensorType::F16),
            SPECULA_ERR_INVALID_ARGUMENT, "longspec draft: random drafts are written as F32 (0) or F16 (1), not type " +
                                              std::to_string(options.weight_type));
    require(options.window >= 1 && options.window <= kMaxWindow, SPECULA_ERR_INVALID_ARGUMENT,
            "longspec draft: window " + std::to_string(options.window) + " is outside [1, " + std::to_string(kMaxWindow) + "]");
    require(options.n_ff >= 0 && options.n_ff <= kBig, SPECULA_ERR_INVALID_ARGUMENT,
            "longspec draft: n_ff " + std::to_string(options.n_ff) + " is outside [0, " + std::to_string(kBig) + "]");
    require(std::isfinite(options.init_scale) && options.init_scale >= 0, SPECULA_ERR_INVALID_ARGUMENT,
            "longspec draft: init_scale must be a finite non-negative number");

    const HParams &hp = target.hparams();
    const int64_t d = hp.n_embd, q = hp.n_embd_q(), kv = hp.n_embd_kv(), f = options.n_ff > 0 ? options.n_ff : hp.n_ff;

    GgufWriter w;
    const std::string a = std::string(kArchitecture) + ".";
    w.set_string("general.architecture", kArchitecture);
    w.set_string("general.name", "LongSpec draft (random init)");
    w.set_string(a + "target.architecture", hp.arch_name);
    w.set_u32(a + "target.block_count", uint32_t(hp.n_layer));
    w.set_string(a + "target.tokenizer_fingerprint", tokenizer_fingerprint(target.vocab()));
    w.set_u32(a + "embedding_length", uint32_t(d));
    w.set_u32(a + "feed_forward_length", uint32_t(f));
    w.set_u32(a + "attention.head_count", uint32_t(hp.n_head));
    w.set_u32(a + "attention.head_count_kv", uint32_t(hp.n_head_kv));
    w.set_u32(a + "attention.key_length", uint32_t(hp.head_dim));
    w.set_f32(a + "attention.layer_norm_rms_epsilon", hp.norm_eps);
    w.set_u32(a + "attention.sliding_window", uint32_t(options.window));
    w.set_u32(a + "vocab_size", uint32_t(hp.n_vocab));
    w.set_f32(a + "rope.freq_base", hp.rope_freq_base);
    w.set_u32(a + "rope.dimension_count", uint32_t(hp.rope_dim));
    w.set_string(a + "rope.scaling.type", scaling_name(hp.rope_scaling));
    w.set_f32(a + "rope.scaling.factor", scaling_factor(hp));
    w.set_u32(a + "cross_attention.target_layer", uint32_t(hp.n_layer - 1));

    // One random stream over the matrices in file order: the same seed and target give the same bytes.
    Gaussian gauss(options.seed);
    auto matrix = [&](const std::string &name, int64_t cols, int64_t rows) {
        std::vector<float> v(size_t(cols * rows));
        for (float &x : v) x = float(gauss.next() * options.init_scale);
        w.add_tensor(name, options.weight_type, {cols, rows}, encode(v, options.weight_type));
    };
    auto vector = [&](const std::string &name, int64_t n, float value) {
        w.add_tensor(name, uint32_t(TensorType::F32), {n}, encode(std::vector<float>(size_t(n), value), uint32_t(TensorType::F32)));
    };
    vector("blk.0.attn_norm.weight", d, 1.0f);
    matrix("blk.0.attn_q.weight", d, q);
    vector("blk.0.attn_q.bias", q, 0.0f);
    matrix("blk.0.attn_k.weight", d, kv);
    vector("blk.0.attn_k.bias", kv, 0.0f);
    matrix("blk.0.attn_v.weight", d, kv);
    vector("blk.0.attn_v.bias", kv, 0.0f);
    matrix("blk.0.attn_output.weight", q, d);
    vector("blk.0.cross_attn_norm.weight", d, 1.0f);
    matrix("blk.0.cross_attn_q.weight", d, q);
    vector("blk.0.cross_attn_q.bias", q, 0.0f);
    matrix("blk.0.cross_attn_output.weight", q, d);
    vector("blk.0.ffn_norm.weight", d, 1.0f);
    matrix("blk.0.ffn_gate.weight", d, f);
    matrix("blk.0.ffn_up.weight", d, f);
    matrix("blk.0.ffn_down.weight", f, d);
    w.write_file(path);
}

}  // namespace specula::internal
