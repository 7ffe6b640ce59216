// Chat templates through the public C API (libspecula.so): the two-call pattern, argument checks, the built-in
// list, the templates that real vocabularies carry (../shared/fixtures/tokenizer/ggml-vocab-*.gguf, loaded
// vocab-only) and a model without one. The byte-level formatting of every family is tested on the internal API
// (tests/unit/test_chat_template.cpp); here it is the shim's job that is checked.
#include <specula/specula.h>
#include <specula/specula.hpp>

#include <catch2/catch.hpp>

#include "common/skip.h"

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

const std::string kModelPath = SPECULA_SOURCE_DIR "/models/stories260K.gguf";  // has no tokenizer.chat_template

const std::vector<specula_chat_message> kChat{
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
};
const std::string kChatml =
    "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
    "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n";

struct ModelDeleter {
    void operator()(specula_model *m) const { specula_model_destroy(m); }
};
using ModelPtr = std::unique_ptr<specula_model, ModelDeleter>;

ModelPtr load(const std::string &path, bool vocab_only) {
    specula_model_options opts;
    specula_model_options_init(&opts);
    opts.vocab_only = vocab_only ? 1 : 0;
    specula_model *model = nullptr;
    specula_error *err = nullptr;
    const specula_status status = specula_model_load(path.c_str(), &opts, &model, &err);
    INFO(path << ": " << specula_error_message(err));
    specula_error_destroy(err);
    REQUIRE(status == SPECULA_OK);
    return ModelPtr(model);
}

// One specula_chat_apply_template call through the two-call pattern: status, text and error message.
struct Applied {
    specula_status status = SPECULA_OK;
    std::string text;
    std::string message;
};

Applied apply(const specula_model *model, const char *tmpl, const std::vector<specula_chat_message> &chat, bool add_assistant = true) {
    Applied out;
    size_t len = 0;
    specula_error *err = nullptr;
    out.status = specula_chat_apply_template(model, tmpl, chat.data(), chat.size(), add_assistant, nullptr, 0, &len, &err);
    if (out.status == SPECULA_ERR_BUFFER_TOO_SMALL) {
        specula_error_destroy(err);
        err = nullptr;
        std::vector<char> buf(len + 1, 'x');
        out.status = specula_chat_apply_template(model, tmpl, chat.data(), chat.size(), add_assistant, buf.data(), buf.size(), &len, &err);
        if (out.status == SPECULA_OK) {
            CHECK(buf[len] == '\0');
            out.text.assign(buf.data(), len);
        }
    }
    out.message = specula_error_message(err);
    specula_error_destroy(err);
    return out;
}

bool has_meta(const specula_model *model, const std::string &key) {
    for (int32_t i = 0; i < specula_model_meta_count(model); ++i)
        if (key == specula_model_meta_key(model, i)) return true;
    return false;
}

std::vector<int32_t> tokenize(const specula_model *model, const std::string &text, int32_t flags) {
    size_t n = 0;
    specula_model_tokenize(model, text.data(), text.size(), flags, nullptr, 0, &n, nullptr);
    std::vector<int32_t> ids(n);
    REQUIRE(specula_model_tokenize(model, text.data(), text.size(), flags, ids.data(), ids.size(), &n, nullptr) == SPECULA_OK);
    return ids;
}

}  // namespace

TEST_CASE("chat: the two-call pattern", "[chat]") {
    size_t len = 0;
    specula_error *err = nullptr;
    // size query: no buffer
    CHECK(specula_chat_apply_template(nullptr, "chatml", kChat.data(), kChat.size(), 1, nullptr, 0, &len, &err) == SPECULA_ERR_BUFFER_TOO_SMALL);
    CHECK(len == kChatml.size());
    CHECK(specula_error_status(err) == SPECULA_ERR_BUFFER_TOO_SMALL);
    specula_error_destroy(err);

    // one byte short (no room for the NUL): still too small, and the buffer is left an empty string
    std::vector<char> buf(len, 'x');
    CHECK(specula_chat_apply_template(nullptr, "chatml", kChat.data(), kChat.size(), 1, buf.data(), buf.size(), &len, nullptr) == SPECULA_ERR_BUFFER_TOO_SMALL);
    CHECK(buf[0] == '\0');

    buf.assign(len + 1, 'x');
    len = 0;
    err = reinterpret_cast<specula_error *>(&buf);  // must be reset to NULL on success
    CHECK(specula_chat_apply_template(nullptr, "chatml", kChat.data(), kChat.size(), 1, buf.data(), buf.size(), &len, &err) == SPECULA_OK);
    CHECK(err == nullptr);
    CHECK(std::string(buf.data()) == kChatml);
    CHECK(len == kChatml.size());

    // len may be NULL when the buffer is big enough
    CHECK(specula_chat_apply_template(nullptr, "chatml", kChat.data(), kChat.size(), 0, buf.data(), buf.size(), nullptr, nullptr) == SPECULA_OK);
    CHECK(std::string(buf.data()) == kChatml.substr(0, kChatml.size() - std::string("<|im_start|>assistant\n").size()));
}

TEST_CASE("chat: NULL and bad arguments", "[chat]") {
    char buf[256];
    size_t len = 0;
    specula_error *err = nullptr;

    // neither a template nor a model
    CHECK(specula_chat_apply_template(nullptr, nullptr, kChat.data(), kChat.size(), 1, buf, sizeof buf, &len, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK_THAT(specula_error_message(err), Contains("model and tmpl are both NULL"));
    specula_error_destroy(err);

    // messages NULL with a count
    CHECK(specula_chat_apply_template(nullptr, "chatml", nullptr, 2, 1, buf, sizeof buf, &len, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK_THAT(specula_error_message(err), Contains("messages is NULL"));
    specula_error_destroy(err);

    // a NULL role or content names the message
    const std::vector<specula_chat_message> bad_role{{"user", "hi"}, {nullptr, "x"}};
    CHECK(specula_chat_apply_template(nullptr, "chatml", bad_role.data(), bad_role.size(), 1, buf, sizeof buf, &len, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK_THAT(specula_error_message(err), Contains("messages[1].role is NULL"));
    specula_error_destroy(err);
    const std::vector<specula_chat_message> bad_content{{"user", nullptr}};
    CHECK(specula_chat_apply_template(nullptr, "chatml", bad_content.data(), bad_content.size(), 1, buf, sizeof buf, &len, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK_THAT(specula_error_message(err), Contains("messages[0].content is NULL"));
    specula_error_destroy(err);

    // a big enough size with a NULL buffer
    CHECK(specula_chat_apply_template(nullptr, "chatml", kChat.data(), kChat.size(), 1, nullptr, 4096, &len, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    specula_error_destroy(err);

    // no messages at all is a valid conversation; err may be NULL
    CHECK(specula_chat_apply_template(nullptr, "chatml", nullptr, 0, 1, buf, sizeof buf, &len, nullptr) == SPECULA_OK);
    CHECK(std::string(buf) == "<|im_start|>assistant\n");

    // a template of no known family
    const Applied unknown = apply(nullptr, "{{ messages }} INVALID TEMPLATE", kChat);
    CHECK(unknown.status == SPECULA_ERR_UNSUPPORTED);
    CHECK(unknown.message == "chat template not recognised: {{ messages }} INVALID TEMPLATE");

    CHECK(specula_chat_template_detect(nullptr, nullptr) == nullptr);
    CHECK(specula_chat_template_detect(nullptr, "INVALID TEMPLATE") == nullptr);
}

TEST_CASE("chat: the built-in templates are listed and each is a name apply accepts", "[chat]") {
    std::vector<std::string> names;
    for (int32_t i = 0; specula_chat_template_builtin(i) != nullptr; ++i) names.push_back(specula_chat_template_builtin(i));
    CHECK(names.size() == 49);  // llama.cpp's LLM_CHAT_TEMPLATES (2a20c85a), then ours: qwen3
    CHECK(names.back() == "qwen3");
    CHECK(specula_chat_template_builtin(-1) == nullptr);
    CHECK(specula_chat_template_builtin(int32_t(names.size())) == nullptr);
    for (const char *expected : {"chatml", "llama2", "llama2-sys", "llama3", "phi3", "mistral-v1", "mistral-v3", "mistral-v3-tekken",
                                 "mistral-v7", "deepseek", "deepseek2", "deepseek3", "zephyr", "gemma", "vicuna", "command-r"}) {
        CHECK(std::find(names.begin(), names.end(), expected) != names.end());
    }
    for (const std::string &name : names) {
        INFO(name);
        const char *detected = specula_chat_template_detect(nullptr, name.c_str());
        REQUIRE(detected != nullptr);
        CHECK(name == detected);
        CHECK(apply(nullptr, name.c_str(), kChat).status == SPECULA_OK);
    }
}

TEST_CASE("chat: a model without tokenizer.chat_template", "[chat]") {
    const ModelPtr model = load(kModelPath, false);
    const Applied own = apply(model.get(), nullptr, kChat);
    CHECK(own.status == SPECULA_ERR_UNSUPPORTED);
    CHECK_THAT(own.message, StartsWith("the model has no chat template"));
    CHECK(specula_chat_template_detect(model.get(), nullptr) == nullptr);

    // a named template works with any model (the model is not consulted)
    const Applied named = apply(model.get(), "chatml", kChat);
    CHECK(named.status == SPECULA_OK);
    CHECK(named.text == kChatml);
    CHECK(std::string(specula_chat_template_detect(model.get(), "llama3")) == "llama3");

    // The C++ wrapper's views of the same (specula.hpp).
    const specula::Model wrapped = specula::Model::load(kModelPath);
    CHECK(wrapped.chat_template_family().empty());
    CHECK(wrapped.tokenizer() == "llama");
    CHECK(wrapped.pre_tokenizer().empty());
}

TEST_CASE("chat: the templates of real vocabularies", "[chat]") {
    const fs::path dir = fs::path(SPECULA_FIXTURES_DIR) / "tokenizer";
    if (!fs::is_directory(dir)) {
        SPECULA_SKIP(dir.string() << " not found (../shared/fixtures is needed for the vocabulary fixtures)");
        return;
    }
    // What llama.cpp's detection makes of the templates these vocabularies carry (the others carry none).
    const std::map<std::string, std::string> expected_family{
        {"ggml-vocab-llama-bpe.gguf", "llama3"},
        {"ggml-vocab-phi-3.gguf", "phi3"},
        {"ggml-vocab-qwen2.gguf", "qwen3"},  // it carries Qwen3's template (Qwen3 uses Qwen2's vocabulary)
    };
    // A marker that ends or opens every message of the family's text, and must become a control token under
    // PARSE_SPECIAL.
    const std::map<std::string, std::string> marker{{"llama3", "<|start_header_id|>"}, {"phi3", "<|end|>"}, {"chatml", "<|im_start|>"}, {"qwen3", "<|im_start|>"}};

    int with_template = 0;
    for (const auto &[file, family] : expected_family) {
        const fs::path path = dir / file;
        if (!fs::exists(path)) {
            SPECULA_SKIP("fixture " << path.string() << " is missing");
            continue;
        }
        INFO(file);
        const ModelPtr model = load(path.string(), true);
        if (!has_meta(model.get(), "tokenizer.chat_template")) {
            WARN("SKIPPED: " << file << " carries no tokenizer.chat_template");
            continue;
        }
        ++with_template;
        const char *detected = specula_chat_template_detect(model.get(), nullptr);
        REQUIRE(detected != nullptr);
        CHECK(family == detected);

        // the model's own template (tmpl = NULL) formats like the family's name does
        const Applied own = apply(model.get(), nullptr, kChat);
        REQUIRE(own.status == SPECULA_OK);
        CHECK(own.text == apply(nullptr, family.c_str(), kChat).text);

        // and the result is meant for PARSE_SPECIAL: the markers become single control tokens
        const std::vector<int32_t> ids = tokenize(model.get(), own.text, SPECULA_TOKENIZE_ADD_SPECIAL | SPECULA_TOKENIZE_PARSE_SPECIAL);
        const std::vector<int32_t> one = tokenize(model.get(), marker.at(family), SPECULA_TOKENIZE_PARSE_SPECIAL);
        REQUIRE(one.size() == 1);
        CHECK(specula_model_token_kind(model.get(), one[0]) == SPECULA_TOKEN_KIND_CONTROL);
        CHECK(std::count(ids.begin(), ids.end(), one[0]) >= 4);  // one per message at least
    }

    // every other vocabulary fixture has no template and says so
    for (const auto &entry : fs::directory_iterator(dir)) {
        const std::string file = entry.path().filename().string();
        if (entry.path().extension() != ".gguf" || expected_family.count(file) != 0) continue;
        INFO(file);
        const ModelPtr model = load(entry.path().string(), true);
        if (has_meta(model.get(), "tokenizer.chat_template")) {
            WARN(file << " carries a chat template this test does not know: detected as "
                      << (specula_chat_template_detect(model.get(), nullptr) ? specula_chat_template_detect(model.get(), nullptr) : "(none)"));
            continue;
        }
        CHECK(apply(model.get(), nullptr, kChat).status == SPECULA_ERR_UNSUPPORTED);
        CHECK(specula_chat_template_detect(model.get(), nullptr) == nullptr);
    }
    if (with_template == 0) SPECULA_SKIP("no vocabulary fixture with a chat template was found");
}

TEST_CASE("chat: specula_chat_format's options: Qwen3's thinking switch, defaults, bad values", "[chat]") {
    const std::vector<specula_chat_message> one{{"user", "hi"}};
    auto format = [&](const specula_chat_options *opts, std::string *text) {
        char buf[512];
        size_t len = 0;
        specula_error *err = nullptr;
        const specula_status st = specula_chat_format(nullptr, "qwen3", one.data(), one.size(), opts, buf, sizeof buf, &len, &err);
        if (text != nullptr) *text = st == SPECULA_OK ? std::string(buf, len) : std::string(specula_error_message(err));
        specula_error_destroy(err);
        return st;
    };
    specula_chat_options opts;
    specula_chat_options_init(&opts);
    CHECK(opts.struct_size == sizeof opts);
    CHECK(opts.add_assistant == 1);
    CHECK(opts.enable_thinking == -1);
    std::string text;
    REQUIRE(format(nullptr, &text) == SPECULA_OK);  // NULL: the defaults
    CHECK(text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    opts.enable_thinking = 0;
    REQUIRE(format(&opts, &text) == SPECULA_OK);
    CHECK(text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    opts.enable_thinking = 1;
    REQUIRE(format(&opts, &text) == SPECULA_OK);
    CHECK(text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    opts.add_assistant = 0;
    REQUIRE(format(&opts, &text) == SPECULA_OK);
    CHECK(text == "<|im_start|>user\nhi<|im_end|>\n");
    // bad values are refused, naming the field
    opts.enable_thinking = 2;
    CHECK(format(&opts, &text) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK_THAT(text, Contains("enable_thinking"));
    opts.enable_thinking = -1;
    opts.struct_size = 2;
    CHECK(format(&opts, &text) == SPECULA_ERR_INVALID_ARGUMENT);
    // a struct from an older header (struct_size covering add_assistant only) keeps enable_thinking's default
    specula_chat_options old;
    specula_chat_options_init(&old);
    old.add_assistant = 1;
    old.enable_thinking = 0;  // beyond struct_size: not read
    old.struct_size = offsetof(specula_chat_options, enable_thinking);
    REQUIRE(format(&old, &text) == SPECULA_OK);
    CHECK(text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");

    // The C++ wrapper's overload.
    const specula::Model model = specula::Model::load(kModelPath);
    CHECK(model.apply_chat_template({{"user", "hi"}}, "qwen3", true, false) ==
          "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    CHECK(model.apply_chat_template({{"user", "hi"}}, "qwen3", true, std::nullopt) == model.apply_chat_template({{"user", "hi"}}, true, "qwen3"));
}

TEST_CASE("chat: Jinja mode renders the template's own program, with the model's BOS and EOS, and refuses bad options", "[chat][jinja]") {
    auto format = [](const specula_model *model, const char *tmpl, const std::vector<specula_chat_message> &chat, int32_t jinja,
                     std::string *text) {
        specula_chat_options opts;
        specula_chat_options_init(&opts);
        opts.jinja = jinja;
        char buf[2048];
        size_t len = 0;
        specula_error *err = nullptr;
        const specula_status st = specula_chat_format(model, tmpl, chat.data(), chat.size(), &opts, buf, sizeof buf, &len, &err);
        *text = st == SPECULA_OK ? std::string(buf, len) : std::string(specula_error_message(err));
        specula_error_destroy(err);
        return st;
    };
    specula_chat_options defaults;
    specula_chat_options_init(&defaults);
    CHECK(defaults.jinja == 0);
    std::string text;
    // "chatml" is ChatML's Jinja: the family's text.
    REQUIRE(format(nullptr, "chatml", kChat, 1, &text) == SPECULA_OK);
    CHECK(text == kChatml);
    // bos_token and eos_token are the model's pieces (stories260K: <s> and </s>); at the ends they are cut.
    const ModelPtr model = load(kModelPath, false);
    const std::vector<specula_chat_message> hi{{"user", "hi"}};
    REQUIRE(format(model.get(), "[{{ bos_token }}|{{ eos_token }}]", hi, 1, &text) == SPECULA_OK);
    CHECK(text == "[<s>|</s>]");
    REQUIRE(format(model.get(), "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}", hi, 1, &text) == SPECULA_OK);
    CHECK(text == "hi");
    // The model has no template of its own: UNSUPPORTED, as without Jinja.
    CHECK(format(model.get(), nullptr, hi, 1, &text) == SPECULA_ERR_UNSUPPORTED);
    // Errors name the template's reason; a value other than 0 or 1 is refused.
    CHECK(format(nullptr, "{% for %}", hi, 1, &text) == SPECULA_ERR_UNSUPPORTED);
    CHECK_THAT(text, Contains("does not parse"));
    CHECK(format(nullptr, "{{ raise_exception('only user turns') }}", hi, 1, &text) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK_THAT(text, Contains("only user turns"));
    CHECK(format(nullptr, "chatml", hi, 2, &text) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK_THAT(text, Contains("jinja"));

    // A real GGUF's template: the qwen2 vocabulary carries Qwen3's, whose Jinja our qwen3 family reproduces for
    // role/content messages.
    const fs::path qwen = fs::path(SPECULA_FIXTURES_DIR) / "tokenizer" / "ggml-vocab-qwen2.gguf";
    if (!fs::exists(qwen)) {
        SPECULA_SKIP("fixture " << qwen.string() << " is missing (../shared/fixtures)");
        return;
    }
    const ModelPtr vocab = load(qwen.string(), true);
    std::string family;
    REQUIRE(format(vocab.get(), nullptr, kChat, 0, &family) == SPECULA_OK);
    REQUIRE(format(vocab.get(), nullptr, kChat, 1, &text) == SPECULA_OK);
    CHECK(text == family);
}
