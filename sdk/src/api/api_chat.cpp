// specula_chat_*: formatting a conversation with a chat template (the model's tokenizer.chat_template or one the
// caller names), recognising a template's family, listing the built-in families.
#include "handles.h"

#include "chat/chat_template.h"
#include "chat/jinja_template.h"

#include <optional>
#include <string>
#include <vector>

using namespace specula::internal;

namespace {

constexpr const char *kTemplateKey = "tokenizer.chat_template";

// The template text a call works on: the caller's, else the model's own. Throws INVALID_ARGUMENT when there is
// neither a template nor a model, UNSUPPORTED when the model carries no template (llama.cpp would fall back to
// chatml here; guessing a format the model was not trained on gives silently bad output, so we say so instead).
std::string template_text(const specula_model *model, const char *tmpl) {
    if (tmpl != nullptr) return tmpl;
    require_arg(model != nullptr && model->model != nullptr, "model and tmpl are both NULL");
    std::optional<std::string> text = model->model->file().get_string(kTemplateKey);
    if (!text) throw Error(SPECULA_ERR_UNSUPPORTED, "the model has no chat template (no tokenizer.chat_template); pass a template name");
    return std::move(*text);
}

}  // namespace

extern "C" {

void specula_chat_options_init_sized(specula_chat_options *opts, size_t struct_size) {
    init_options_sized(opts, struct_size, [](specula_chat_options *opts) {
        opts->add_assistant = 1;
        opts->enable_thinking = -1;
    });
}

// The function that applications built against the headers up to 0.16 call: their struct ends at enable_thinking.
void (specula_chat_options_init)(specula_chat_options *opts) { specula_chat_options_init_sized(opts, SPECULA_OPTIONS_END(specula_chat_options, enable_thinking)); }

specula_status specula_chat_format(const specula_model *model, const char *tmpl, const specula_chat_message *messages, size_t n_messages,
                                   const specula_chat_options *opts, char *buf, size_t buf_size, size_t *len, specula_error **err) {
    return guarded(err, [&] {
        specula_chat_options defaults;
        specula_chat_options_init(&defaults);
        const specula_chat_options o = read_options(opts, defaults, "opts");
        require_arg(o.enable_thinking >= -1 && o.enable_thinking <= 1, "opts->enable_thinking is not -1, 0 or 1");
        require_arg(o.jinja == 0 || o.jinja == 1, "opts->jinja is not 0 or 1");
        require_arg(messages != nullptr || n_messages == 0, "messages is NULL");
        std::vector<chat::Message> chat_messages;
        chat_messages.reserve(n_messages);
        for (size_t i = 0; i < n_messages; ++i) {
            const specula_chat_message &m = messages[i];
            if (m.role == nullptr || m.content == nullptr) {
                const std::string what = "messages[" + std::to_string(i) + "]." + (m.role == nullptr ? "role" : "content") + " is NULL";
                require_arg(false, what.c_str());
            }
            chat_messages.push_back({m.role, m.content});
        }
        const chat::Thinking thinking = o.enable_thinking < 0 ? chat::Thinking::Default : o.enable_thinking ? chat::Thinking::On : chat::Thinking::Off;
        if (o.jinja) {
            std::string bos, eos;
            if (model != nullptr && model->model != nullptr) {
                const Vocab &vocab = model->model->vocab();
                // As llama.cpp (common_token_to_piece with special = true): the tokens' text, "" without them.
                if (vocab.bos() >= 0) bos = vocab.token_to_piece(vocab.bos(), true);
                if (vocab.eos() >= 0) eos = vocab.token_to_piece(vocab.eos(), true);
            }
            copy_text(chat::apply_jinja(template_text(model, tmpl), bos, eos, chat_messages, o.add_assistant != 0, thinking), buf, buf_size, len);
            return;
        }
        const chat::Family family = chat::require_family(template_text(model, tmpl));
        copy_text(chat::apply(family, chat_messages, o.add_assistant != 0, thinking), buf, buf_size, len);
    });
}

specula_status specula_chat_apply_template(const specula_model *model, const char *tmpl, const specula_chat_message *messages,
                                           size_t n_messages, int32_t add_assistant, char *buf, size_t buf_size, size_t *len,
                                           specula_error **err) {
    specula_chat_options opts;
    specula_chat_options_init(&opts);
    opts.add_assistant = add_assistant;
    return specula_chat_format(model, tmpl, messages, n_messages, &opts, buf, buf_size, len, err);
}

const char *specula_chat_template_detect(const specula_model *model, const char *tmpl) {
    return guarded_value<const char *>(nullptr, [&]() -> const char * {
        if (tmpl == nullptr && (model == nullptr || model->model == nullptr)) return nullptr;
        const std::optional<chat::Family> family = chat::detect(template_text(model, tmpl));
        return family ? chat::name(*family) : nullptr;
    });
}

const char *specula_chat_template_builtin(int32_t index) {
    const auto names = chat::builtin_names();
    return index >= 0 && size_t(index) < names.size() ? names[size_t(index)] : nullptr;
}

}  // extern "C"
