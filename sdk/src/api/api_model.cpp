// specula_model_*: load, reference counting, information, metadata and tokenization.
#include "handles.h"

using namespace specula::internal;

namespace {

const Model *get(const specula_model *m) { return m ? m->model.get() : nullptr; }

template <typename T> T hparam(const specula_model *m, T HParams::*field) {
    const Model *model = get(m);
    return model ? model->hparams().*field : T{};
}

}  // namespace

extern "C" {

void specula_model_options_init_sized(specula_model_options *opts, size_t struct_size) {
    init_options_sized(opts, struct_size, [](specula_model_options *opts) {
        opts->use_mmap = 1;
    });
}

// The function that applications built against the headers up to 0.16 call: their struct ends at vocab_only.
void (specula_model_options_init)(specula_model_options *opts) { specula_model_options_init_sized(opts, SPECULA_OPTIONS_END(specula_model_options, vocab_only)); }

specula_status specula_model_load(const char *path, const specula_model_options *opts, specula_model **out, specula_error **err) {
    return guarded(err, [&] {
        require_arg(out != nullptr, "out is NULL");
        *out = nullptr;
        require_arg(path != nullptr, "path is NULL");
        specula_model_options defaults;
        specula_model_options_init(&defaults);
        const specula_model_options o = read_options(opts, defaults, "opts");
        LoadOptions load;
        load.use_mmap = o.use_mmap != 0;
        load.vocab_only = o.vocab_only != 0;
        if (o.progress != nullptr) load.progress = [&o](float p) { return o.progress(p, o.progress_user_data) != 0; };
        auto handle = std::make_unique<specula_model>();
        handle->model = Model::load(path, load);
        *out = handle.release();
    });
}

specula_model *specula_model_retain(specula_model *model) {
    if (model != nullptr) model->handle_refs.fetch_add(1, std::memory_order_relaxed);
    return model;
}

void specula_model_destroy(specula_model *model) {
    if (model != nullptr && model->handle_refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete model;
}

const char *specula_model_arch(const specula_model *m) { return get(m) ? get(m)->hparams().arch_name.c_str() : ""; }
const char *specula_model_name(const specula_model *m) { return get(m) ? get(m)->name().c_str() : ""; }
int32_t specula_model_n_vocab(const specula_model *m) { return hparam(m, &HParams::n_vocab); }
int32_t specula_model_n_ctx_train(const specula_model *m) { return hparam(m, &HParams::n_ctx_train); }
int32_t specula_model_n_layer(const specula_model *m) { return hparam(m, &HParams::n_layer); }
int32_t specula_model_n_embd(const specula_model *m) { return hparam(m, &HParams::n_embd); }
int32_t specula_model_n_head(const specula_model *m) { return hparam(m, &HParams::n_head); }
int32_t specula_model_n_head_kv(const specula_model *m) { return hparam(m, &HParams::n_head_kv); }
int32_t specula_model_n_ff(const specula_model *m) { return hparam(m, &HParams::n_ff); }
uint64_t specula_model_n_params(const specula_model *m) { return get(m) ? get(m)->n_params() : 0; }
uint64_t specula_model_file_size(const specula_model *m) { return get(m) ? get(m)->file().file_size() : 0; }
const char *specula_model_weight_type(const specula_model *m) { return get(m) ? get(m)->weight_type() : ""; }

int32_t specula_model_tensor_count(const specula_model *m) { return get(m) ? int32_t(get(m)->file().tensors().size()) : 0; }

specula_status specula_model_tensor_info(const specula_model *m, int32_t index, specula_tensor_info *info, specula_error **err) {
    return guarded(err, [&] {
        require_arg(get(m) != nullptr, "model is NULL");
        require_arg(info != nullptr && info->struct_size >= sizeof(uint32_t), "info is NULL or its struct_size is unset");
        const auto &tensors = get(m)->file().tensors();
        require_arg(index >= 0 && size_t(index) < tensors.size(), "tensor index out of range");
        const TensorInfo &t = tensors[size_t(index)];
        specula_tensor_info full{};
        full.struct_size = info->struct_size;
        full.name = t.name.c_str();
        full.type = tensor_type_name(t.type);
        full.n_dims = int32_t(t.n_dims);
        for (int d = 0; d < 4; ++d) full.dims[d] = t.dims[d];
        full.offset = get(m)->file().data_offset() + t.offset;
        full.n_bytes = t.n_bytes;
        std::memcpy(info, &full, std::min<size_t>(info->struct_size, sizeof full));
    });
}

int32_t specula_model_meta_count(const specula_model *m) { return get(m) ? int32_t(get(m)->file().metadata().size()) : 0; }

const char *specula_model_meta_key(const specula_model *m, int32_t index) {
    if (get(m) == nullptr || index < 0 || size_t(index) >= get(m)->file().metadata().size()) return nullptr;
    return get(m)->file().metadata()[size_t(index)].first.c_str();
}

specula_status specula_model_meta_value(const specula_model *m, int32_t index, int32_t max_array, char *buf, size_t buf_size,
                                        size_t *len, specula_error **err) {
    return guarded(err, [&] {
        require_arg(get(m) != nullptr, "model is NULL");
        const auto &meta = get(m)->file().metadata();
        require_arg(index >= 0 && size_t(index) < meta.size(), "metadata index out of range");
        copy_text(meta[size_t(index)].second.to_string(size_t(std::max(max_array, 0))), buf, buf_size, len);
    });
}

int32_t specula_model_token_bos(const specula_model *m) { return get(m) ? get(m)->vocab().bos() : SPECULA_TOKEN_NULL; }
int32_t specula_model_token_eos(const specula_model *m) { return get(m) ? get(m)->vocab().eos() : SPECULA_TOKEN_NULL; }
int32_t specula_model_token_eot(const specula_model *m) { return get(m) ? get(m)->vocab().eot() : SPECULA_TOKEN_NULL; }
int32_t specula_model_token_fim(const specula_model *m, specula_fim_token which) {
    if (get(m) == nullptr) return SPECULA_TOKEN_NULL;
    const auto &v = get(m)->vocab();
    switch (c_enum_value(which)) {
    case SPECULA_FIM_PRE: return v.fim_pre();
    case SPECULA_FIM_SUF: return v.fim_suf();
    case SPECULA_FIM_MID: return v.fim_mid();
    case SPECULA_FIM_PAD: return v.fim_pad();
    case SPECULA_FIM_REP: return v.fim_rep();
    case SPECULA_FIM_SEP: return v.fim_sep();
    }
    return SPECULA_TOKEN_NULL;
}
int32_t specula_model_add_bos(const specula_model *m) { return get(m) && get(m)->vocab().add_bos() ? 1 : 0; }
int32_t specula_model_add_eos(const specula_model *m) { return get(m) && get(m)->vocab().add_eos() ? 1 : 0; }
int32_t specula_model_token_is_eog(const specula_model *m, int32_t token) {
    return guarded_value<int32_t>(0, [&] { return get(m) && get(m)->vocab().is_eog(token) ? 1 : 0; });
}

specula_status specula_model_tokenize(const specula_model *m, const char *text, size_t len, int32_t flags, int32_t *tokens,
                                      size_t capacity, size_t *n_tokens, specula_error **err) {
    return guarded(err, [&] {
        require_arg(get(m) != nullptr, "model is NULL");
        require_arg(text != nullptr || len == 0, "text is NULL");
        require_arg(n_tokens != nullptr, "n_tokens is NULL");
        const std::vector<int32_t> ids = get(m)->vocab().tokenize(std::string_view(text ? text : "", len),
                                                                  (flags & SPECULA_TOKENIZE_ADD_SPECIAL) != 0,
                                                                  (flags & SPECULA_TOKENIZE_PARSE_SPECIAL) != 0);
        *n_tokens = ids.size();
        if (ids.size() > capacity) throw Error(SPECULA_ERR_BUFFER_TOO_SMALL, "token buffer of " + std::to_string(capacity) + " is too small for " + std::to_string(ids.size()));
        require_arg(tokens != nullptr || ids.empty(), "tokens is NULL");
        std::copy(ids.begin(), ids.end(), tokens);
    });
}

specula_status specula_model_detokenize(const specula_model *m, const int32_t *tokens, size_t n_tokens, int32_t render_special,
                                        char *buf, size_t buf_size, size_t *len, specula_error **err) {
    return guarded(err, [&] {
        require_arg(get(m) != nullptr, "model is NULL");
        require_arg(tokens != nullptr || n_tokens == 0, "tokens is NULL");
        const std::string text = get(m)->vocab().detokenize(std::vector<int32_t>(tokens, tokens + n_tokens), render_special != 0);
        copy_text(text, buf, buf_size, len);
    });
}

specula_status specula_model_token_to_piece(const specula_model *m, int32_t token, int32_t render_special, char *buf, size_t buf_size,
                                            size_t *len, specula_error **err) {
    return guarded(err, [&] {
        require_arg(get(m) != nullptr, "model is NULL");
        copy_text(get(m)->vocab().token_to_piece(token, render_special != 0), buf, buf_size, len);
    });
}

const char *specula_model_token_text(const specula_model *m, int32_t token) {
    return guarded_value<const char *>(nullptr, [&]() -> const char * { return get(m) ? get(m)->vocab().token_text(token).c_str() : nullptr; });
}

specula_token_kind specula_model_token_kind(const specula_model *m, int32_t token) {
    return guarded_value(SPECULA_TOKEN_KIND_INVALID, [&] {
        if (get(m) == nullptr) return SPECULA_TOKEN_KIND_INVALID;
        switch (get(m)->vocab().token_attr(token)) {
        case TokenAttr::Normal: return SPECULA_TOKEN_KIND_NORMAL;
        case TokenAttr::Unknown: return SPECULA_TOKEN_KIND_UNKNOWN;
        case TokenAttr::Control: return SPECULA_TOKEN_KIND_CONTROL;
        case TokenAttr::UserDefined: return SPECULA_TOKEN_KIND_USER_DEFINED;
        case TokenAttr::Unused: return SPECULA_TOKEN_KIND_UNUSED;
        case TokenAttr::Byte: return SPECULA_TOKEN_KIND_BYTE;
        case TokenAttr::Undefined: break;
        }
        return SPECULA_TOKEN_KIND_NORMAL;  // llama.cpp treats undefined types as normal tokens
    });
}

const char *specula_model_tokenizer(const specula_model *m) { return get(m) ? get(m)->vocab().model_name().c_str() : ""; }
const char *specula_model_pre_tokenizer(const specula_model *m) {
    // Only byte-level BPE has pre-tokenizers; SentencePiece files often say "default" in tokenizer.ggml.pre.
    return get(m) && get(m)->vocab().model_name() == "gpt2" ? get(m)->vocab().pre_name().c_str() : "";
}

}  // extern "C"
