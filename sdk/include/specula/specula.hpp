/*
 * specula.hpp - header-only C++17 RAII wrapper over the C ABI in specula.h.
 *
 * Everything here is inline and calls only the exported specula_* functions, so it adds no ABI of its own:
 * an application built against this header keeps working with any libspecula.so of the same ABI version.
 *
 *   specula::Model model = specula::Model::load("model.gguf");
 *   specula::Session session(model);
 *   session.append_text("Once upon a time");
 *   session.generate({}, [](const specula_token_event &ev) { std::cout << ev.text; return true; });
 *
 * Errors become specula::Error exceptions (carrying the specula_status). Cancellation and a full context are
 * normal outcomes of generation, so generate()/next() report them through the stop reason instead of throwing.
 * The threading contract of specula.h applies unchanged: a Model may be shared by many threads, a Session is
 * used by one thread at a time, and Session::cancel() may be called from anywhere (including signal handlers).
 */
#ifndef SPECULA_HPP
#define SPECULA_HPP

#ifndef __cplusplus
#error "specula.hpp is the C++ wrapper; C code includes <specula/specula.h> instead"
#endif

#include "specula_experimental.h"  // specula.h, and the tools outside the stable ABI some wrappers use

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specula {

/* ------------------------------------------------------------------------------------------------------ */
/* Errors                                                                                                 */

/// A failed specula_* call: what() is the library's message, status() its specula_status.
class Error : public std::runtime_error {
public:
    Error(specula_status status, const std::string &message) : std::runtime_error(message), status_(status) {}
    specula_status status() const noexcept { return status_; }

private:
    specula_status status_;
};

/// Takes ownership of err. Does nothing for SPECULA_OK; otherwise throws Error with the library's message
/// (or the status name when the library gave none).
/// Call it with a status already computed: in `check(specula_x(..., &err), err)` the compiler may read err
/// before specula_x has set it (argument evaluation order is unspecified), losing the message.
inline void check(specula_status status, specula_error *err) {
    if (status == SPECULA_OK) {
        specula_error_destroy(err);
        return;
    }
    std::string message = err != nullptr ? specula_error_message(err) : "";
    specula_error_destroy(err);
    if (message.empty()) message = specula_status_string(status);
    throw Error(status, message);
}

/// Library version as "MAJOR.MINOR.PATCH".
inline std::string version() { return specula_version_string(); }

/// A GPU the library can run sessions on (specula_device_info).
struct DeviceInfo : specula_device_info {
    DeviceInfo() noexcept : specula_device_info() { struct_size = sizeof(specula_device_info); }
};

/// The usable devices of a GPU backend, SPECULA_BACKEND_CUDA (the default) or SPECULA_BACKEND_VULKAN (empty when
/// none, or when the library was built without it).
inline std::vector<DeviceInfo> devices(specula_backend backend = SPECULA_BACKEND_CUDA) {
    std::vector<DeviceInfo> out(static_cast<size_t>(std::max(0, specula_device_count(backend))));
    for (size_t i = 0; i < out.size(); ++i) {
        specula_error *err = nullptr;
        const specula_status st = specula_device_get_info(backend, static_cast<int32_t>(i), &out[i], &err);
        check(st, err);
    }
    return out;
}

/// Why a backend cannot be used now, or "" when it can (AUTO: "" when any GPU backend can; the CPU always can).
inline std::string backend_unavailable_reason(specula_backend backend) {
    specula_error *err = nullptr;
    if (specula_backend_check(backend, &err) == SPECULA_OK) return "";
    std::string message = err != nullptr ? specula_error_message(err) : "unavailable";
    specula_error_destroy(err);
    return message;
}

namespace detail {

// A C progress callback around a std::function<bool(float)>. Exceptions must not unwind through the C library:
// one thrown by the function is parked in `error` and the call is cancelled; the caller rethrows it afterwards.
struct ProgressTrampoline {
    const std::function<bool(float)> *fn;
    std::exception_ptr error;
    static int32_t call(float p, void *user) noexcept {
        auto *self = static_cast<ProgressTrampoline *>(user);
        try {
            return (*self->fn)(p) ? 1 : 0;
        } catch (...) {
            self->error = std::current_exception();
            return 0;
        }
    }
};

// The C API wants a non-NULL pointer even for empty text; std::string_view::data() may be NULL when empty.
inline const char *text_ptr(std::string_view text) noexcept { return text.data() != nullptr ? text.data() : ""; }

// Two-call pattern for the text getters: try a stack-sized buffer first (enough for nearly every call),
// then retry once with the exact size the library reported.
template <class Fn>
std::string fetch_text(Fn &&call) {
    std::string out(256, '\0');
    for (int attempt = 0; attempt < 2; ++attempt) {
        size_t len = 0;
        specula_error *err = nullptr;
        specula_status st = call(out.data(), out.size(), &len, &err);
        if (st == SPECULA_OK) {
            specula_error_destroy(err);
            out.resize(len);
            return out;
        }
        if (st != SPECULA_ERR_BUFFER_TOO_SMALL || attempt == 1) check(st, err);
        specula_error_destroy(err);
        out.assign(len + 1, '\0');
    }
    return out;  // unreachable
}

}  // namespace detail

/// The GBNF grammar of the JSON text a JSON schema admits (specula_json_schema_to_grammar), for
/// SamplerOptions::set_grammar. Throws Error: INVALID_ARGUMENT (not JSON, not a schema), UNSUPPORTED ("pattern").
inline std::string json_schema_to_grammar(std::string_view schema) {
    return detail::fetch_text([&](char *buf, size_t size, size_t *len, specula_error **err) {
        return specula_json_schema_to_grammar(detail::text_ptr(schema), schema.size(), buf, size, len, err);
    });
}

/* ------------------------------------------------------------------------------------------------------ */
/* Options                                                                                                */
// SessionOptions and SamplerOptions are the C structs, pre-filled by the library's *_init() so that new
// fields added in later versions get their defaults. ModelOptions and GenerateOptions carry C++ types
// (std::function, std::string) and are translated into the C structs at call time.

/// specula_session_options with library defaults (n_ctx, n_threads, n_batch, backend AUTO with CPU fallback).
struct SessionOptions : specula_session_options {
    SessionOptions() noexcept : specula_session_options() { specula_session_options_init(this); }
};

/// specula_sampler_options with library defaults (temperature 0.8, top_k 40, ...). temperature <= 0: greedy.
struct SnapshotOptions : specula_snapshot_options {
    SnapshotOptions() noexcept { specula_snapshot_options_init(this); }
    static SnapshotOptions context() noexcept {
        SnapshotOptions o;
        o.scope = SPECULA_SNAPSHOT_CONTEXT;
        return o;
    }
};

struct SamplerOptions : specula_sampler_options {
    SamplerOptions() : specula_sampler_options() { specula_sampler_options_init(this); }
    /// Convenience: greedy decoding (argmax).
    static SamplerOptions greedy() {
        SamplerOptions s;
        s.temperature = 0.0f;
        return s;
    }
    /// A GBNF grammar the generated text must follow (llama.cpp's format; docs/grammars.md) and its start rule; an
    /// empty grammar removes it. Kept in this object (the C fields `grammar`/`grammar_root` point into it when the
    /// options are used); a grammar that does not parse throws Error (INVALID_ARGUMENT) when the sampler is set.
    SamplerOptions &set_grammar(std::string gbnf, std::string root = "root") {
        grammar_text_ = std::move(gbnf);
        grammar_root_ = std::move(root);
        return *this;
    }
    const std::string &grammar_text() const noexcept { return grammar_text_; }
    /// The C struct for a call, pointing into this object (valid while it lives unchanged).
    specula_sampler_options to_c() const noexcept {
        specula_sampler_options c = *this;
        if (!grammar_text_.empty()) {
            c.grammar = grammar_text_.c_str();
            c.grammar_root = grammar_root_.c_str();
        }
        return c;
    }

private:
    std::string grammar_text_, grammar_root_ = "root";
};

/// Options for Model::load.
struct ModelOptions {
    bool use_mmap = true;
    bool vocab_only = false;  ///< tokenizer and metadata only (vocab-only GGUFs too); sessions refuse the model
    /// Called with progress in [0, 1]; return false to cancel the load (Error with SPECULA_ERR_CANCELLED).
    /// If it throws, the load is cancelled and the exception is rethrown from Model::load.
    std::function<bool(float)> progress;
};

/// Options for Session::generate / Session::next. Defaults are the library's.
struct GenerateOptions {
    int32_t max_tokens;                    ///< < 0: until the context is full
    bool stop_at_eog;                      ///< stop when an end-of-generation token is sampled
    std::vector<std::string> stop_strings; ///< generation stops before the first occurrence of any of these
    int32_t top_logits;                    ///< report the K largest raw logits with each token (0..64) and their logsumexp
    int32_t top_probs;                     ///< report the K most likely tokens after the sampler chain (0..64)

    GenerateOptions() {
        specula_generate_options c;
        specula_generate_options_init(&c);
        max_tokens = c.max_tokens;
        stop_at_eog = c.stop_at_eog != 0;
        top_logits = c.top_logits;
        top_probs = c.top_probs;
    }
    explicit GenerateOptions(int32_t max) : GenerateOptions() { max_tokens = max; }
};

namespace detail {
// A specula_generate_options whose stop_strings point into the GenerateOptions it was built from.
struct CGenerateOptions {
    specula_generate_options c;
    std::vector<const char *> stops;

    explicit CGenerateOptions(const GenerateOptions &o) {
        specula_generate_options_init(&c);
        c.max_tokens = o.max_tokens;
        c.stop_at_eog = o.stop_at_eog ? 1 : 0;
        c.top_logits = o.top_logits;
        c.top_probs = o.top_probs;
        for (const std::string &s : o.stop_strings) stops.push_back(s.c_str());
        c.stop_strings = stops.empty() ? nullptr : stops.data();
        c.n_stop_strings = static_cast<int32_t>(stops.size());
    }
    CGenerateOptions(const CGenerateOptions &) = delete;  // c.stop_strings points into stops
    CGenerateOptions &operator=(const CGenerateOptions &) = delete;
};
}  // namespace detail

/* ------------------------------------------------------------------------------------------------------ */
/* Model                                                                                                  */

/// One tensor of a model file, as reported by specula_model_tensor_info.
struct TensorInfo {
    std::string name;
    std::string type;           ///< "F32", "Q4_0", ...
    std::vector<int64_t> dims;  ///< ggml order: dims[0] is the contiguous (row) dimension
    uint64_t offset = 0;        ///< byte offset of the data in the file
    uint64_t n_bytes = 0;
};

/// A loaded model: a shared, immutable, reference-counted handle. Copying retains, destruction releases;
/// a moved-from or default-constructed Model is empty. All const members are thread-safe.
class Model {
public:
    Model() noexcept = default;
    /// Adopts one reference the caller owns (e.g. from specula_model_load).
    explicit Model(specula_model *adopt) noexcept : m_(adopt) {}
    Model(const Model &o) noexcept : m_(o.m_ != nullptr ? specula_model_retain(o.m_) : nullptr) {}
    Model(Model &&o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
    Model &operator=(const Model &o) noexcept {
        if (this != &o) reset(o.m_ != nullptr ? specula_model_retain(o.m_) : nullptr);
        return *this;
    }
    Model &operator=(Model &&o) noexcept {
        if (this != &o) reset(std::exchange(o.m_, nullptr));
        return *this;
    }
    ~Model() { specula_model_destroy(m_); }

    /// Loads a GGUF file; throws Error (IO, FORMAT, UNSUPPORTED, OUT_OF_MEMORY, CANCELLED).
    static Model load(const std::string &path, const ModelOptions &opts = {}) {
        detail::ProgressTrampoline progress{&opts.progress, nullptr};

        specula_model_options c;
        specula_model_options_init(&c);
        c.use_mmap = opts.use_mmap ? 1 : 0;
        c.vocab_only = opts.vocab_only ? 1 : 0;
        if (opts.progress) {
            c.progress = &detail::ProgressTrampoline::call;
            c.progress_user_data = &progress;
        }
        specula_model *out = nullptr;
        specula_error *err = nullptr;
        specula_status st = specula_model_load(path.c_str(), &c, &out, &err);
        if (progress.error) {
            specula_error_destroy(err);
            specula_model_destroy(out);
            std::rethrow_exception(progress.error);
        }
        check(st, err);
        return Model(out);
    }

    specula_model *get() const noexcept { return m_; }
    explicit operator bool() const noexcept { return m_ != nullptr; }
    /// Gives up ownership of the reference without releasing it.
    specula_model *release() noexcept { return std::exchange(m_, nullptr); }
    void reset(specula_model *adopt = nullptr) noexcept { specula_model_destroy(std::exchange(m_, adopt)); }

    std::string arch() const { return specula_model_arch(m_); }
    std::string name() const { return specula_model_name(m_); }
    int32_t n_vocab() const noexcept { return specula_model_n_vocab(m_); }
    int32_t n_ctx_train() const noexcept { return specula_model_n_ctx_train(m_); }
    int32_t n_layer() const noexcept { return specula_model_n_layer(m_); }
    int32_t n_embd() const noexcept { return specula_model_n_embd(m_); }
    int32_t n_head() const noexcept { return specula_model_n_head(m_); }
    int32_t n_head_kv() const noexcept { return specula_model_n_head_kv(m_); }
    int32_t n_ff() const noexcept { return specula_model_n_ff(m_); }
    uint64_t n_params() const noexcept { return specula_model_n_params(m_); }
    uint64_t file_size() const noexcept { return specula_model_file_size(m_); }
    std::string weight_type() const { return specula_model_weight_type(m_); }
    /// Tokenizer family ("llama" for SentencePiece, "gpt2" for byte-level BPE, ...) and BPE pre-tokenizer ("" if none).
    std::string tokenizer() const { return specula_model_tokenizer(m_); }
    std::string pre_tokenizer() const { return specula_model_pre_tokenizer(m_); }
    /// The built-in family the model's own chat template belongs to ("chatml", "llama3", ...); "" when the model has no
    /// template or one of no known family (specula_chat_template_detect).
    std::string chat_template_family() const {
        const char *family = specula_chat_template_detect(m_, nullptr);
        return family != nullptr ? family : "";
    }

    int32_t token_bos() const noexcept { return specula_model_token_bos(m_); }
    int32_t token_eos() const noexcept { return specula_model_token_eos(m_); }
    bool token_is_eog(int32_t token) const noexcept { return specula_model_token_is_eog(m_, token) != 0; }
    int32_t token_eot() const noexcept { return specula_model_token_eot(m_); }
    /// The fill-in-the-middle token of that kind, SPECULA_TOKEN_NULL if the model has none.
    int32_t token_fim(specula_fim_token which) const noexcept { return specula_model_token_fim(m_, which); }
    bool add_bos() const noexcept { return specula_model_add_bos(m_) != 0; }
    /// The token's text as stored in the vocabulary ("▁dog", "<|fim_prefix|>"); "" for an invalid id.
    std::string token_text(int32_t token) const {
        const char *text = specula_model_token_text(m_, token);
        return text != nullptr ? text : "";
    }
    bool add_eos() const noexcept { return specula_model_add_eos(m_) != 0; }

    int32_t tensor_count() const noexcept { return specula_model_tensor_count(m_); }
    TensorInfo tensor(int32_t index) const {
        specula_tensor_info c{};
        c.struct_size = sizeof c;
        specula_error *err = nullptr;
        const specula_status status = specula_model_tensor_info(m_, index, &c, &err);
        check(status, err);
        TensorInfo t;
        t.name = c.name != nullptr ? c.name : "";
        t.type = c.type != nullptr ? c.type : "";
        for (int32_t d = 0; d < c.n_dims && d < 4; ++d) t.dims.push_back(c.dims[d]);
        t.offset = c.offset;
        t.n_bytes = c.n_bytes;
        return t;
    }
    std::vector<TensorInfo> tensors() const {
        std::vector<TensorInfo> out;
        for (int32_t i = 0, n = tensor_count(); i < n; ++i) out.push_back(tensor(i));
        return out;
    }

    int32_t meta_count() const noexcept { return specula_model_meta_count(m_); }
    /// Key of metadata entry index ("" when out of range).
    std::string meta_key(int32_t index) const {
        const char *k = specula_model_meta_key(m_, index);
        return k != nullptr ? k : "";
    }
    /// XXH3-128 of the whole GGUF file as 32 hex digits (what snapshots are bound to).
    std::string fingerprint() const {
        return detail::fetch_text([&](char *buf, size_t size, size_t *len, specula_error **err) {
            return specula_model_fingerprint(m_, buf, size, len, err);
        });
    }
    /// Value of metadata entry index rendered as text; arrays abbreviated after max_array items.
    std::string meta_value(int32_t index, int32_t max_array = 8) const {
        return detail::fetch_text([&](char *buf, size_t size, size_t *len, specula_error **err) {
            return specula_model_meta_value(m_, index, max_array, buf, size, len, err);
        });
    }

    /// Tokenizes UTF-8 text; flags are SPECULA_TOKENIZE_* (ADD_SPECIAL adds BOS/EOS as the model asks).
    std::vector<int32_t> tokenize(std::string_view text, int32_t flags = SPECULA_TOKENIZE_ADD_SPECIAL) const {
        // A guess that fits almost always (SentencePiece byte fallback is at most one token per byte,
        // plus specials); otherwise the library tells us the exact count and we call again.
        std::vector<int32_t> tokens(text.size() + 8);
        for (int attempt = 0; attempt < 2; ++attempt) {
            size_t n = 0;
            specula_error *err = nullptr;
            specula_status st = specula_model_tokenize(m_, detail::text_ptr(text), text.size(), flags,
                                                       tokens.data(), tokens.size(), &n, &err);
            if (st == SPECULA_OK) {
                specula_error_destroy(err);
                tokens.resize(n);
                return tokens;
            }
            if (st != SPECULA_ERR_BUFFER_TOO_SMALL || attempt == 1) check(st, err);
            specula_error_destroy(err);
            tokens.resize(n);
        }
        return tokens;  // unreachable
    }

    /// Text of a token sequence (special tokens rendered only if render_special).
    std::string detokenize(const int32_t *tokens, size_t n_tokens, bool render_special = false) const {
        return detail::fetch_text([&](char *buf, size_t size, size_t *len, specula_error **err) {
            return specula_model_detokenize(m_, tokens, n_tokens, render_special ? 1 : 0, buf, size, len, err);
        });
    }
    std::string detokenize(const std::vector<int32_t> &tokens, bool render_special = false) const {
        return detokenize(tokens.data(), tokens.size(), render_special);
    }

    /// Bytes of one token (may be an incomplete UTF-8 sequence; see specula_model_token_to_piece).
    std::string token_to_piece(int32_t token, bool render_special = false) const {
        return detail::fetch_text([&](char *buf, size_t size, size_t *len, specula_error **err) {
            return specula_model_token_to_piece(m_, token, render_special ? 1 : 0, buf, size, len, err);
        });
    }

    /// A conversation formatted as prompt text: with the model's own chat template when tmpl is empty, else with
    /// a built-in family name or template text. Append the result with ADD_SPECIAL | PARSE_SPECIAL.
    std::string apply_chat_template(const std::vector<std::pair<std::string, std::string>> &role_content,
                                    bool add_assistant = true, const std::string &tmpl = {}) const {
        return apply_chat_template(role_content, tmpl, add_assistant, std::nullopt);
    }
    /// The same with the template's thinking switch (qwen3's enable_thinking): nullopt leaves it to the template.
    /// jinja renders the template's own Jinja (llama-server's --jinja) instead of its built-in family.
    std::string apply_chat_template(const std::vector<std::pair<std::string, std::string>> &role_content, const std::string &tmpl,
                                    bool add_assistant, std::optional<bool> enable_thinking, bool jinja = false) const {
        std::vector<specula_chat_message> messages;
        for (const auto &[role, content] : role_content) messages.push_back({role.c_str(), content.c_str()});
        specula_chat_options opts;
        specula_chat_options_init(&opts);
        opts.add_assistant = add_assistant ? 1 : 0;
        opts.enable_thinking = enable_thinking ? (*enable_thinking ? 1 : 0) : -1;
        opts.jinja = jinja ? 1 : 0;
        return detail::fetch_text([&](char *buf, size_t size, size_t *len, specula_error **err) {
            return specula_chat_format(m_, tmpl.empty() ? nullptr : tmpl.c_str(), messages.data(), messages.size(), &opts, buf, size, len, err);
        });
    }

private:
    specula_model *m_ = nullptr;
};

/* ------------------------------------------------------------------------------------------------------ */
/* Speculative decoding                                                                                   */

/// A LongSpec draft file loaded for one target model: shared, immutable, reference-counted like Model.
/// Sessions it is attached to keep their own reference, so a Draft may be destroyed right after attaching.
class Draft {
public:
    Draft() noexcept = default;
    /// Adopts one reference the caller owns (e.g. from specula_draft_load).
    explicit Draft(specula_draft *adopt) noexcept : d_(adopt) {}
    Draft(const Draft &o) noexcept : d_(o.d_ != nullptr ? specula_draft_retain(o.d_) : nullptr) {}
    Draft(Draft &&o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
    Draft &operator=(const Draft &o) noexcept {
        if (this != &o) reset(o.d_ != nullptr ? specula_draft_retain(o.d_) : nullptr);
        return *this;
    }
    Draft &operator=(Draft &&o) noexcept {
        if (this != &o) reset(std::exchange(o.d_, nullptr));
        return *this;
    }
    ~Draft() { specula_draft_destroy(d_); }

    /// Loads a draft and checks it against target; throws Error (IO, FORMAT, UNSUPPORTED, INCOMPATIBLE, ...).
    static Draft load(const std::string &path, const Model &target) {
        specula_draft *out = nullptr;
        specula_error *err = nullptr;
        const specula_status status = specula_draft_load(path.c_str(), target.get(), &out, &err);
        check(status, err);
        return Draft(out);
    }
    /// Writes an untrained (random) draft for target to path (window 0 = 512). Throws Error.
    static void write_random(const Model &target, const std::string &path, uint64_t seed = 1, int32_t window = 0) {
        specula_error *err = nullptr;
        const specula_status status = specula_draft_write_random(target.get(), path.c_str(), seed, window, &err);
        check(status, err);
    }

    specula_draft *get() const noexcept { return d_; }
    explicit operator bool() const noexcept { return d_ != nullptr; }
    specula_draft *release() noexcept { return std::exchange(d_, nullptr); }
    void reset(specula_draft *adopt = nullptr) noexcept { specula_draft_destroy(std::exchange(d_, adopt)); }

    int32_t window() const noexcept { return specula_draft_window(d_); }
    uint64_t n_params() const noexcept { return specula_draft_n_params(d_); }

private:
    specula_draft *d_ = nullptr;
};

/// What Session::set_speculative attaches. The pointers are borrowed for the call only (the session retains
/// what it uses). Defaults are the library's; with no draft, no draft model, ngram and grammar off, it detaches.
struct SpeculativeOptions {
    const Draft *draft = nullptr;        ///< a LongSpec draft loaded for the session's model
    const Model *draft_model = nullptr;  ///< or an independent draft model with the same vocabulary
    bool ngram = false;                  ///< n-gram drafting (alone, or merged into the tree of the above)
    bool grammar = false;                ///< the sampler's grammar drafts alone (since 0.14; specula_speculative_options.grammar)
    std::vector<int32_t> tree;           ///< beam widths per level; empty = the library's [4, 16, 16, 16, 16]
    /// How each round's tree is chosen (specula_tree_mode): by default auto unless `tree` is given.
    specula_tree_mode tree_mode = SPECULA_TREE_DEFAULT;
    /// How sampled chains are drawn and verified (specula_sampled_drafts): coupled by default (a seed fixes the text).
    specula_sampled_drafts sampled_drafts = SPECULA_SAMPLED_DRAFTS_COUPLED;
    int32_t ngram_nodes, ngram_lookup_min, ngram_lookup_max, ngram_max_chain, ngram_table_n, ngram_table_topk, ngram_lag;

    SpeculativeOptions() {
        specula_speculative_options c;
        specula_speculative_options_init(&c);
        ngram = c.ngram != 0;
        ngram_nodes = c.ngram_nodes;
        ngram_lookup_min = c.ngram_lookup_min;
        ngram_lookup_max = c.ngram_lookup_max;
        ngram_max_chain = c.ngram_max_chain;
        ngram_table_n = c.ngram_table_n;
        ngram_table_topk = c.ngram_table_topk;
        ngram_lag = c.ngram_lag;
    }
    /// Convenience: a chain of `length` drafted tokens per round instead of a tree.
    static std::vector<int32_t> chain(int32_t length) { return std::vector<int32_t>(static_cast<size_t>(length), 1); }

    /// The C struct; its tree_widths points into this object's `tree`.
    specula_speculative_options to_c() const {
        specula_speculative_options c;
        specula_speculative_options_init(&c);
        c.draft = draft != nullptr ? draft->get() : nullptr;
        c.draft_model = draft_model != nullptr ? draft_model->get() : nullptr;
        c.ngram = ngram ? 1 : 0;
        c.grammar = grammar ? 1 : 0;
        c.tree_widths = tree.empty() ? nullptr : tree.data();
        c.n_tree_levels = static_cast<int32_t>(tree.size());
        c.ngram_nodes = ngram_nodes;
        c.ngram_lookup_min = ngram_lookup_min;
        c.ngram_lookup_max = ngram_lookup_max;
        c.ngram_max_chain = ngram_max_chain;
        c.ngram_table_n = ngram_table_n;
        c.ngram_table_topk = ngram_table_topk;
        c.ngram_lag = ngram_lag;
        c.tree_mode = tree_mode;
        c.sampled_drafts = sampled_drafts;
        return c;
    }
};

/* ------------------------------------------------------------------------------------------------------ */
/* Session                                                                                                */

/// Per-token callback of Session::generate; return false to stop (stop reason SPECULA_STOP_CALLBACK).
/// The event and everything it points to are valid only during the call.
using TokenCallback = std::function<bool(const specula_token_event &)>;

/// A generation context on a model (which it keeps alive). Move-only; use from one thread at a time,
/// except cancel().
class Session {
public:
    Session() noexcept = default;
    explicit Session(const Model &model, const SessionOptions &opts = SessionOptions(),
                     const SamplerOptions &sampler = SamplerOptions()) {
        specula_error *err = nullptr;
        const specula_sampler_options c = sampler.to_c();
        const specula_status status = specula_session_create(model.get(), &opts, &c, &s_, &err);
        check(status, err);
    }
    /// Adopts a session the caller owns.
    explicit Session(specula_session *adopt) noexcept : s_(adopt) {}
    Session(const Session &) = delete;
    Session &operator=(const Session &) = delete;
    Session(Session &&o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    Session &operator=(Session &&o) noexcept {
        if (this != &o) reset(std::exchange(o.s_, nullptr));
        return *this;
    }
    ~Session() { specula_session_destroy(s_); }

    specula_session *get() const noexcept { return s_; }
    explicit operator bool() const noexcept { return s_ != nullptr; }
    specula_session *release() noexcept { return std::exchange(s_, nullptr); }
    void reset(specula_session *adopt = nullptr) noexcept { specula_session_destroy(std::exchange(s_, adopt)); }

    /// Replaces the sampler settings and reseeds.
    void set_sampler(const SamplerOptions &sampler) {
        specula_error *err = nullptr;
        const specula_sampler_options c = sampler.to_c();
        const specula_status status = specula_session_set_sampler(s_, &c, &err);
        check(status, err);
    }

    /// Attaches drafters (speculative decoding); throws Error (INVALID_ARGUMENT, INCOMPATIBLE). The output is
    /// unchanged (exact verification); only the speed differs.
    void set_speculative(const SpeculativeOptions &opts) {
        const specula_speculative_options c = opts.to_c();
        specula_error *err = nullptr;
        const specula_status status = specula_session_set_speculative(s_, &c, &err);
        check(status, err);
    }
    /// Convenience: a LongSpec draft, optionally merged with n-gram drafting.
    void set_speculative(const Draft &draft, bool ngram = false) {
        SpeculativeOptions o;
        o.draft = &draft;
        o.ngram = ngram;
        set_speculative(o);
    }
    /// Detaches every drafter: plain autoregressive decoding again.
    void clear_speculative() {
        specula_error *err = nullptr;
        const specula_status status = specula_session_set_speculative(s_, nullptr, &err);
        check(status, err);
    }
    /// Name of the attached drafter ("ngram", "longspec+ngram", ...), "" when none.
    std::string drafter_name() const { return specula_session_drafter_name(s_); }
    /// The tree the last speculative round drafted ("auto:1,1,1,1", "auto:plain", ...; specula_session_tree_shape).
    std::string tree_shape() const { return specula_session_tree_shape(s_); }
    /// Rounds whose accepted path reached depth d + 1, for every level reached (specula_session_accepted_at_depth).
    std::vector<int32_t> accepted_at_depth() const {
        std::vector<int32_t> out(static_cast<size_t>(specula_session_accepted_at_depth(s_, nullptr, 0)));
        specula_session_accepted_at_depth(s_, out.data(), static_cast<int32_t>(out.size()));
        return out;
    }
    /// The attached LongSpec draft's raw logits for the token after the context (specula_session_draft_logits).
    std::vector<float> draft_logits(int32_t n_vocab) {
        std::vector<float> out(static_cast<size_t>(n_vocab));
        specula_error *err = nullptr;
        const specula_status st = specula_session_draft_logits(s_, out.data(), out.size(), &err);
        check(st, err);
        return out;
    }

    /// Appends text (evaluated lazily by the next generate/next). Throws Error(CONTEXT_FULL) if it does not fit.
    void append_text(std::string_view text, int32_t flags = SPECULA_TOKENIZE_ADD_SPECIAL) {
        specula_error *err = nullptr;
        const specula_status status = specula_session_append_text(s_, detail::text_ptr(text), text.size(), flags, &err);
        check(status, err);
    }
    /// Appends token ids; throws Error(INVALID_TOKEN / CONTEXT_FULL), appending nothing in that case.
    void append_tokens(const int32_t *tokens, size_t n_tokens) {
        specula_error *err = nullptr;
        const specula_status status = specula_session_append_tokens(s_, tokens, n_tokens, &err);
        check(status, err);
    }
    void append_tokens(const std::vector<int32_t> &tokens) { append_tokens(tokens.data(), tokens.size()); }

    /// Evaluates the pending context (a prompt) without generating; throws Error(CANCELLED) when cancelled.
    void evaluate() {
        specula_error *err = nullptr;
        const specula_status status = specula_session_evaluate(s_, &err);
        check(status, err);
    }
    /// Truncates the context to its first n_tokens tokens (keeps their cached keys/values).
    void rewind(int32_t n_tokens) {
        specula_error *err = nullptr;
        const specula_status status = specula_session_rewind(s_, n_tokens, &err);
        check(status, err);
    }

    int32_t n_ctx() const noexcept { return specula_session_n_ctx(s_); }
    /// "cpu", "cuda" or "vulkan".
    std::string backend() const { return specula_session_backend(s_); }
    /// Why the session is not on the backend asked for ("" when it is).
    std::string backend_note() const { return specula_session_backend_note(s_); }
    int32_t n_tokens() const noexcept { return specula_session_n_tokens(s_); }
    /// The context's token ids.
    std::vector<int32_t> tokens() const {
        std::vector<int32_t> out(static_cast<size_t>(n_tokens() > 0 ? n_tokens() : 0));
        for (int attempt = 0; attempt < 2; ++attempt) {
            size_t n = 0;
            specula_error *err = nullptr;
            specula_status st = specula_session_tokens(s_, out.data(), out.size(), &n, &err);
            if (st == SPECULA_OK) {
                specula_error_destroy(err);
                out.resize(n);
                return out;
            }
            if (st != SPECULA_ERR_BUFFER_TOO_SMALL || attempt == 1) check(st, err);
            specula_error_destroy(err);
            out.resize(n);
        }
        return out;  // unreachable
    }

    /// Evaluates pending context and generates, calling on_token (may be empty) for each token.
    /// Returns why generation stopped; SPECULA_STOP_CANCELLED and SPECULA_STOP_CONTEXT_FULL are returned,
    /// not thrown. Throws Error for real failures. If on_token throws, generation stops and the exception
    /// is rethrown here once the library has returned (it never crosses the C boundary).
    specula_stop_reason generate(const GenerateOptions &opts = GenerateOptions(),
                                 const TokenCallback &on_token = TokenCallback()) {
        struct Trampoline {
            const TokenCallback *fn;
            std::exception_ptr error;
            static int32_t call(const specula_token_event *ev, void *user) noexcept {
                auto *self = static_cast<Trampoline *>(user);
                try {
                    return (*self->fn)(*ev) ? 1 : 0;
                } catch (...) {
                    self->error = std::current_exception();
                    return 0;  // stop generation; rethrown after specula_session_generate returns
                }
            }
        } tramp{&on_token, nullptr};

        detail::CGenerateOptions c(opts);
        specula_stop_reason reason = SPECULA_STOP_NONE;
        specula_error *err = nullptr;
        specula_status st = specula_session_generate(s_, &c.c, on_token ? &Trampoline::call : nullptr,
                                                     on_token ? &tramp : nullptr, &reason, &err);
        if (tramp.error) {
            specula_error_destroy(err);
            std::rethrow_exception(tramp.error);
        }
        return finish(st, err, reason);
    }

    /// Pull-style generation: produces at most one token. event.stop == SPECULA_STOP_NONE means a token was
    /// produced and more may follow. The event's pointers stay valid until the next call on this session.
    specula_token_event next(const GenerateOptions &opts = GenerateOptions()) {
        detail::CGenerateOptions c(opts);
        specula_token_event ev{};
        ev.struct_size = sizeof ev;
        specula_error *err = nullptr;
        specula_status st = specula_session_next(s_, &c.c, &ev, &err);
        ev.stop = finish(st, err, ev.stop);
        return ev;
    }

    /// Asks the running (or next) generation to stop at the next step boundary. Thread- and signal-safe.
    void cancel() const noexcept { specula_session_cancel(s_); }

    /// Running statistics of this session.
    specula_stats stats() const {
        specula_stats st{};
        st.struct_size = sizeof st;
        specula_error *err = nullptr;
        const specula_status status = specula_session_stats(s_, &st, &err);
        check(status, err);
        return st;
    }

    /// Raw logits (n_vocab floats) of the last evaluated position, or nullptr. Valid until the next call.
    const float *logits() const noexcept { return specula_session_logits(s_); }

    /// Snapshots (specula.h, "Snapshots and prompt caches"). save_file writes atomically (temporary + rename).
    void save_file(const std::string &path, const SnapshotOptions &opts = SnapshotOptions()) {
        specula_error *err = nullptr;
        const specula_status st_ = specula_session_save_file(s_, path.c_str(), &opts, &err);
        check(st_, err);
    }
    /// Loads a snapshot; on failure throws Error and the session is unchanged.
    void load_file(const std::string &path) {
        specula_error *err = nullptr;
        const specula_status st_ = specula_session_load_file(s_, path.c_str(), &err);
        check(st_, err);
    }
    /// The snapshot as bytes (one compression: the buffer is sized by the library's upper bound, then trimmed).
    std::vector<uint8_t> save(const SnapshotOptions &opts = SnapshotOptions()) {
        size_t bound = 0;
        specula_error *err = nullptr;
        specula_status st = specula_session_save_buffer(s_, &opts, nullptr, 0, &bound, &err);
        if (st != SPECULA_ERR_BUFFER_TOO_SMALL) check(st, err);
        specula_error_destroy(err);
        std::vector<uint8_t> out(bound);
        size_t used = 0;
        err = nullptr;
        const specula_status st_ = specula_session_save_buffer(s_, &opts, out.data(), out.size(), &used, &err);
        check(st_, err);
        out.resize(used);
        return out;
    }
    void load(const std::vector<uint8_t> &bytes) { load(bytes.data(), bytes.size()); }
    void load(const void *data, size_t size) {
        specula_error *err = nullptr;
        const specula_status st_ = specula_session_load_buffer(s_, data, size, &err);
        check(st_, err);
    }
    /// Copies this session's state into dst (same model), in memory.
    void fork_into(Session &dst, const SnapshotOptions &opts = SnapshotOptions()) {
        specula_error *err = nullptr;
        const specula_status st_ = specula_session_fork(s_, dst.get(), &opts, &err);
        check(st_, err);
    }

private:
    // CANCELLED and CONTEXT_FULL are outcomes, not failures: report them as stop reasons.
    static specula_stop_reason finish(specula_status st, specula_error *err, specula_stop_reason reason) {
        if (st == SPECULA_ERR_CANCELLED || st == SPECULA_ERR_CONTEXT_FULL) {
            specula_error_destroy(err);
            if (reason == SPECULA_STOP_NONE)
                reason = st == SPECULA_ERR_CANCELLED ? SPECULA_STOP_CANCELLED : SPECULA_STOP_CONTEXT_FULL;
            return reason;
        }
        check(st, err);
        return reason;
    }

    specula_session *s_ = nullptr;
};

/// A directory of context snapshots shared by processes (specula_prompt_cache_*). Movable; thread-safe.
class PromptCache {
public:
    PromptCache() noexcept = default;
    explicit PromptCache(const std::string &dir, uint64_t max_bytes = uint64_t(1) << 30, int32_t compression_level = 1) {
        specula_prompt_cache_options o;
        specula_prompt_cache_options_init(&o);
        o.max_bytes = max_bytes;
        o.compression_level = compression_level;
        specula_error *err = nullptr;
        const specula_status st_ = specula_prompt_cache_open(dir.c_str(), &o, &c_, &err);
        check(st_, err);
    }
    PromptCache(const PromptCache &) = delete;
    PromptCache &operator=(const PromptCache &) = delete;
    PromptCache(PromptCache &&o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
    PromptCache &operator=(PromptCache &&o) noexcept {
        if (this != &o) {
            specula_prompt_cache_destroy(c_);
            c_ = std::exchange(o.c_, nullptr);
        }
        return *this;
    }
    ~PromptCache() { specula_prompt_cache_destroy(c_); }
    specula_prompt_cache *get() const noexcept { return c_; }
    explicit operator bool() const noexcept { return c_ != nullptr; }

    /// Restores the longest cached prefix of tokens into session; returns its length (0: miss, session unchanged).
    size_t restore(Session &session, const std::vector<int32_t> &tokens) {
        size_t n = 0;
        specula_error *err = nullptr;
        const specula_status st_ = specula_prompt_cache_restore(c_, session.get(), tokens.data(), tokens.size(), &n, &err);
        check(st_, err);
        return n;
    }
    void store(Session &session) {
        specula_error *err = nullptr;
        const specula_status st_ = specula_prompt_cache_store(c_, session.get(), &err);
        check(st_, err);
    }
    specula_prompt_cache_stats stats() const {
        specula_prompt_cache_stats st{};
        st.struct_size = sizeof st;
        specula_error *err = nullptr;
        const specula_status st_ = specula_prompt_cache_get_stats(c_, &st, &err);
        check(st_, err);
        return st;
    }

private:
    specula_prompt_cache *c_ = nullptr;
};

/// A batch group (specula_batch): sessions of one model that join it compute their forward passes together
/// (continuous batching); their tokens do not change.
class Batch {
public:
    Batch() noexcept = default;
    /// n_threads: threads of the combined passes (0: cores, at most 8).
    explicit Batch(const Model &model, int32_t n_threads = 0) {
        specula_batch_options o;
        specula_batch_options_init(&o);
        o.n_threads = n_threads;
        specula_error *err = nullptr;
        const specula_status st_ = specula_batch_create(model.get(), &o, &b_, &err);
        check(st_, err);
    }
    Batch(const Batch &) = delete;
    Batch &operator=(const Batch &) = delete;
    Batch(Batch &&o) noexcept : b_(std::exchange(o.b_, nullptr)) {}
    Batch &operator=(Batch &&o) noexcept {
        if (this != &o) {
            specula_batch_free(b_);
            b_ = std::exchange(o.b_, nullptr);
        }
        return *this;
    }
    ~Batch() { specula_batch_free(b_); }
    specula_batch *get() const noexcept { return b_; }
    explicit operator bool() const noexcept { return b_ != nullptr; }

    /// The session's passes join this group's (not while it generates on another thread).
    void join(Session &session) {
        specula_error *err = nullptr;
        const specula_status st_ = specula_session_join_batch(session.get(), b_, &err);
        check(st_, err);
    }
    /// The session computes alone again.
    static void leave(Session &session) {
        specula_error *err = nullptr;
        const specula_status st_ = specula_session_join_batch(session.get(), nullptr, &err);
        check(st_, err);
    }
    specula_batch_stats stats() const {
        specula_batch_stats st{};
        st.struct_size = sizeof st;
        specula_error *err = nullptr;
        const specula_status st_ = specula_batch_get_stats(b_, &st, &err);
        check(st_, err);
        return st;
    }

private:
    specula_batch *b_ = nullptr;
};

/* ------------------------------------------------------------------------------------------------------ */
/* Synthetic models                                                                                       */

/// The built-in shapes of write_synthetic_model ("llama-3.2-1b", ...).
inline std::vector<std::string> synthetic_shapes() {
    std::vector<std::string> names;
    for (int32_t i = 0; const char *name = specula_synthetic_shape(i); ++i) names.emplace_back(name);
    return names;
}

/// Options for write_synthetic_model. Defaults are the library's.
struct SyntheticOptions {
    std::string weight_type = "q8_0";  ///< "f32", "f16", "q8_0", "q4_0", "q4_k_m"
    uint64_t seed;                     ///< same seed, shape and type: the same file
    int32_t n_layer;                   ///< > 0: this many layers instead of the shape's
    /// Called with the fraction written; return false to cancel (Error with SPECULA_ERR_CANCELLED). If it
    /// throws, the write is cancelled and the exception is rethrown.
    std::function<bool(float)> progress;

    SyntheticOptions() {
        specula_synthetic_options c;
        specula_synthetic_options_init(&c);
        seed = c.seed;
        n_layer = c.n_layer;
    }
};

/// Writes a random-weight model of a real model's shape (for speed measurements) with the tokenizer of the GGUF at
/// vocab_path. Throws Error (INVALID_ARGUMENT, IO, FORMAT, CANCELLED, ...).
inline void write_synthetic_model(const std::string &shape, const std::string &vocab_path, const std::string &path,
                                  const SyntheticOptions &opts = {}) {
    detail::ProgressTrampoline progress{&opts.progress, nullptr};

    specula_synthetic_options c;
    specula_synthetic_options_init(&c);
    c.weight_type = opts.weight_type.c_str();
    c.seed = opts.seed;
    c.n_layer = opts.n_layer;
    if (opts.progress) {
        c.progress = &detail::ProgressTrampoline::call;
        c.progress_user_data = &progress;
    }
    specula_error *err = nullptr;
    const specula_status st = specula_synthetic_model_write(shape.c_str(), vocab_path.c_str(), path.c_str(), &c, &err);
    if (progress.error) {
        specula_error_destroy(err);
        std::rethrow_exception(progress.error);
    }
    check(st, err);
}

}  // namespace specula

#endif  // SPECULA_HPP
