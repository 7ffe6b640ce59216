// Tokenization through the public C API (libspecula.so), on llama.cpp's own test vectors: every .inp/.out pair of
// the six vocab-only GGUFs in ../shared/fixtures/tokenizer, the two-call pattern, flags, token_to_piece,
// token_text, token_kind, the tokenizer/pre-tokenizer names, bad ids and NULL arguments.
//
// This is what `specula tokenize --no-special` prints (the CLI is a thin loop over these calls); the tokenizer's
// internals have their own tests in tests/unit/test_tokenizer*.cpp.
#include <specula/specula.h>

#include "common/fixture_files.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

using namespace test_fixtures;

namespace {

const char *const kVocabs[] = {"llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2", "deepseek-coder"};

fs::path vocab_path(const std::string &name) {
    return fs::path(SPECULA_FIXTURES_DIR) / "tokenizer" / ("ggml-vocab-" + name + ".gguf");
}

struct ModelDeleter {
    void operator()(specula_model *m) const { specula_model_destroy(m); }
};
using ModelPtr = std::unique_ptr<specula_model, ModelDeleter>;

// Vocab-only load: the fixtures have no tensors (and some an architecture we do not run, such as gpt2 or phi3).
ModelPtr load_vocab_only(const fs::path &path) {
    specula_model_options opts;
    specula_model_options_init(&opts);
    opts.vocab_only = 1;
    specula_model *m = nullptr;
    specula_error *err = nullptr;
    const specula_status st = specula_model_load(path.string().c_str(), &opts, &m, &err);
    INFO("loading " << path.string() << ": " << specula_error_message(err));
    specula_error_destroy(err);
    REQUIRE(st == SPECULA_OK);
    REQUIRE(m != nullptr);
    return ModelPtr(m);
}

ModelPtr load_full(const fs::path &path) {
    specula_model *m = nullptr;
    specula_error *err = nullptr;
    const specula_status st = specula_model_load(path.string().c_str(), nullptr, &m, &err);
    INFO("loading " << path.string() << ": " << specula_error_message(err));
    specula_error_destroy(err);
    REQUIRE(st == SPECULA_OK);
    return ModelPtr(m);
}

// The two-call pattern, as a caller should write it: ask for the count, then fetch exactly that many.
std::vector<int32_t> tokenize(const specula_model *m, const std::string &text, int32_t flags) {
    size_t n = 0;
    specula_error *err = nullptr;
    specula_status st = specula_model_tokenize(m, text.data(), text.size(), flags, nullptr, 0, &n, &err);
    if (n == 0) {
        CHECK(st == SPECULA_OK);
        CHECK(err == nullptr);
        specula_error_destroy(err);
        return {};
    }
    CHECK(st == SPECULA_ERR_BUFFER_TOO_SMALL);
    CHECK(specula_error_status(err) == SPECULA_ERR_BUFFER_TOO_SMALL);
    specula_error_destroy(err);
    err = nullptr;
    std::vector<int32_t> ids(n, -7);
    size_t n2 = 0;
    st = specula_model_tokenize(m, text.data(), text.size(), flags, ids.data(), ids.size(), &n2, &err);
    INFO(specula_error_message(err));
    CHECK(st == SPECULA_OK);
    CHECK(err == nullptr);
    CHECK(n2 == n);
    specula_error_destroy(err);
    return ids;
}

// Two-call text getter: the length first (buf = NULL), then a buffer of exactly length + 1.
template <class Fn> std::string fetch(Fn &&call, specula_status *status = nullptr) {
    size_t len = 0;
    specula_error *err = nullptr;
    specula_status st = call(nullptr, 0, &len, &err);
    specula_error_destroy(err);
    if (st != SPECULA_ERR_BUFFER_TOO_SMALL) {
        if (status) *status = st;
        return {};
    }
    std::string buf(len + 1, '\x7F');
    err = nullptr;
    size_t len2 = 0;
    st = call(buf.data(), buf.size(), &len2, &err);
    specula_error_destroy(err);
    if (status) *status = st;
    CHECK(len2 == len);
    CHECK(buf[len] == '\0');
    buf.resize(len);
    return buf;
}

std::string detokenize(const specula_model *m, const std::vector<int32_t> &ids, int32_t render_special,
                       specula_status *status = nullptr) {
    return fetch([&](char *buf, size_t size, size_t *len, specula_error **err) {
        return specula_model_detokenize(m, ids.data(), ids.size(), render_special, buf, size, len, err);
    }, status);
}

std::string piece(const specula_model *m, int32_t token, int32_t render_special, specula_status *status = nullptr) {
    return fetch([&](char *buf, size_t size, size_t *len, specula_error **err) {
        return specula_model_token_to_piece(m, token, render_special, buf, size, len, err);
    }, status);
}

// Vocabularies whose detokenizer tidies " ," and friends (llama.cpp's clean_up_tokenization_spaces).
bool tidies_spaces(const std::string &name) { return name == "gpt-2" || name == "llama-bpe"; }

// The token whose vocabulary text is `text`, found by tokenizing its display form; -1 if that is not one token.
int32_t single_token(const specula_model *m, const std::string &text) {
    const std::vector<int32_t> ids = tokenize(m, text, 0);
    return ids.size() == 1 ? ids[0] : -1;
}

}  // namespace

TEST_CASE("C API tokenize: llama.cpp's vectors on every fixture vocabulary", "[api][tokenizer]") {
    for (const char *name : kVocabs) {
        SECTION(name) {
            const fs::path path = vocab_path(name);
            if (!have_fixture(path)) return;
            const ModelPtr model = load_vocab_only(path);
            size_t passed = 0;
            const std::vector<VectorCase> cases = read_vectors(path);
            REQUIRE(cases.size() >= 40);
            for (size_t i = 0; i < cases.size(); ++i) {
                const VectorCase &c = cases[i];
                // flags = 0: add-special and parse-special off, as the .out files were made.
                const std::vector<int32_t> got = tokenize(model.get(), c.text, 0);
                INFO(name << " case " << i << ": '" << escaped(c.text) << "'\n  expected " << ids_to_string(c.expected)
                          << "\n  got      " << ids_to_string(got));
                CHECK(got == c.expected);
                passed += got == c.expected;

                // And back: detokenize gives the text, except where the vocabulary tidies spaces on purpose.
                bool tidied = false;
                if (tidies_spaces(name))
                    for (const char *p : {" ?", " !", " .", " ,", " '"}) tidied |= c.text.find(p) != std::string::npos;
                if (!tidied) CHECK(escaped(detokenize(model.get(), got, 0)) == escaped(c.text));
            }
            CHECK(passed == cases.size());
        }
    }
}

TEST_CASE("C API tokenize: the reference prompts of the real models (add-special on)", "[api][tokenizer]") {
    const fs::path ref_dir = fs::path(SPECULA_FIXTURES_DIR) / "reference";
    if (!have_fixture(ref_dir)) return;
    const fs::path stories = fs::path(SPECULA_FIXTURES_DIR) / "models" / "stories260K.gguf";
    const fs::path code7m = fs::path(SPECULA_FIXTURES_DIR) / "models" / "code-7m" / "model.gguf";
    if (!have_fixture(stories) || !have_fixture(code7m)) return;
    const ModelPtr m_stories = load_full(stories), m_code = load_full(code7m);
    size_t checked = 0;
    for (const auto &entry : fs::directory_iterator(ref_dir)) {
        if (entry.path().extension() != ".json") continue;
        const auto j = nlohmann::json::parse(read_file(entry.path()));
        const std::string model = j.at("model").get<std::string>();
        const specula_model *m = model == "stories260K.gguf" ? m_stories.get() : model == "code-7m.gguf" ? m_code.get() : nullptr;
        if (m == nullptr) continue;
        const std::string text = j.at("prompt_text").get<std::string>();
        const std::vector<int32_t> expected = j.at("prompt_ids").get<std::vector<int32_t>>();
        INFO(entry.path().filename().string());
        CHECK(tokenize(m, text, SPECULA_TOKENIZE_ADD_SPECIAL | SPECULA_TOKENIZE_PARSE_SPECIAL) == expected);
        ++checked;
    }
    CHECK(checked >= 8);
}

TEST_CASE("C API tokenize: two-call pattern and buffer sizes", "[api][tokenizer]") {
    const fs::path path = vocab_path("llama-spm");
    if (!have_fixture(path)) return;
    const ModelPtr model = load_vocab_only(path);
    const specula_model *m = model.get();
    const std::string text = "Hello world, this is a test.";
    const std::vector<int32_t> ids = tokenize(m, text, 0);
    REQUIRE(ids.size() > 3);

    SECTION("capacity one short: BUFFER_TOO_SMALL with the exact count, and an error object") {
        std::vector<int32_t> buf(ids.size() - 1, -7);
        size_t n = 0;
        specula_error *err = nullptr;
        CHECK(specula_model_tokenize(m, text.data(), text.size(), 0, buf.data(), buf.size(), &n, &err) ==
              SPECULA_ERR_BUFFER_TOO_SMALL);
        CHECK(n == ids.size());
        REQUIRE(err != nullptr);
        CHECK(specula_error_status(err) == SPECULA_ERR_BUFFER_TOO_SMALL);
        CHECK(std::strlen(specula_error_message(err)) > 0);
        specula_error_destroy(err);
    }
    SECTION("a larger buffer: OK, the count, the ids, and nothing written past them") {
        std::vector<int32_t> buf(ids.size() + 5, -7);
        size_t n = 0;
        specula_error *err = reinterpret_cast<specula_error *>(&buf);  // must be reset to NULL on success
        CHECK(specula_model_tokenize(m, text.data(), text.size(), 0, buf.data(), buf.size(), &n, &err) == SPECULA_OK);
        CHECK(err == nullptr);
        CHECK(n == ids.size());
        CHECK(std::vector<int32_t>(buf.begin(), buf.begin() + long(n)) == ids);
        for (size_t i = n; i < buf.size(); ++i) CHECK(buf[i] == -7);
    }
    SECTION("err = NULL is allowed") {
        size_t n = 0;
        CHECK(specula_model_tokenize(m, text.data(), text.size(), 0, nullptr, 0, &n, nullptr) == SPECULA_ERR_BUFFER_TOO_SMALL);
        CHECK(n == ids.size());
    }
    SECTION("empty text: zero tokens, OK with capacity 0; BOS alone with ADD_SPECIAL") {
        size_t n = 99;
        CHECK(specula_model_tokenize(m, "", 0, 0, nullptr, 0, &n, nullptr) == SPECULA_OK);
        CHECK(n == 0);
        CHECK(specula_model_tokenize(m, nullptr, 0, 0, nullptr, 0, &n, nullptr) == SPECULA_OK);  // NULL text of length 0
        CHECK(n == 0);
        CHECK(tokenize(m, "", SPECULA_TOKENIZE_ADD_SPECIAL) == std::vector<int32_t>{1});
    }
    SECTION("len is honoured: text need not be NUL-terminated, and embedded NULs are text") {
        const std::string padded = text + "XYZ";
        size_t n = 0;
        std::vector<int32_t> buf(64);
        CHECK(specula_model_tokenize(m, padded.data(), text.size(), 0, buf.data(), buf.size(), &n, nullptr) == SPECULA_OK);
        buf.resize(n);
        CHECK(buf == ids);
        const std::string with_nul("a\0b", 3);
        const std::vector<int32_t> nul_ids = tokenize(m, with_nul, 0);
        CHECK(detokenize(m, nul_ids, 0) == with_nul);
    }
    SECTION("detokenize: two-call, exact fit needs room for the NUL") {
        const std::string back = detokenize(m, ids, 0);
        CHECK(back == text);
        size_t len = 0;
        std::string buf(back.size(), '\x7F');  // one byte short of the NUL
        specula_error *err = nullptr;
        CHECK(specula_model_detokenize(m, ids.data(), ids.size(), 0, buf.data(), buf.size(), &len, &err) ==
              SPECULA_ERR_BUFFER_TOO_SMALL);
        CHECK(specula_error_status(err) == SPECULA_ERR_BUFFER_TOO_SMALL);
        specula_error_destroy(err);
        CHECK(len == back.size());
        buf.assign(back.size() + 1, '\x7F');
        CHECK(specula_model_detokenize(m, ids.data(), ids.size(), 0, buf.data(), buf.size(), &len, nullptr) == SPECULA_OK);
        CHECK(std::string(buf.c_str()) == back);
        CHECK(specula_model_detokenize(m, nullptr, 0, 0, buf.data(), buf.size(), &len, nullptr) == SPECULA_OK);
        CHECK(len == 0);
        CHECK(buf[0] == '\0');
    }
}

TEST_CASE("C API tokenize: ADD_SPECIAL and PARSE_SPECIAL", "[api][tokenizer]") {
    SECTION("llama-spm: BOS added on request, <s> parsed only on request") {
        const fs::path path = vocab_path("llama-spm");
        if (!have_fixture(path)) return;
        const ModelPtr model = load_vocab_only(path);
        const specula_model *m = model.get();
        CHECK(specula_model_token_bos(m) == 1);
        CHECK(specula_model_token_eos(m) == 2);
        const std::vector<int32_t> plain = tokenize(m, "Hello", 0);
        std::vector<int32_t> with_bos = {1};
        with_bos.insert(with_bos.end(), plain.begin(), plain.end());
        CHECK(tokenize(m, "Hello", SPECULA_TOKENIZE_ADD_SPECIAL) == with_bos);

        const std::vector<int32_t> parsed = tokenize(m, "<s>", SPECULA_TOKENIZE_PARSE_SPECIAL);
        CHECK(parsed == std::vector<int32_t>{1});
        const std::vector<int32_t> as_text = tokenize(m, "<s>", 0);
        CHECK(as_text.size() > 1);
        CHECK(std::find(as_text.begin(), as_text.end(), 1) == as_text.end());
        // Control tokens are not rendered unless asked for.
        CHECK(detokenize(m, parsed, 0).empty());
        CHECK(detokenize(m, parsed, 1) == "<s>");
        CHECK(detokenize(m, as_text, 0) == "<s>");
    }
    SECTION("llama-bpe: <|begin_of_text|> added and parsed") {
        const fs::path path = vocab_path("llama-bpe");
        if (!have_fixture(path)) return;
        const ModelPtr model = load_vocab_only(path);
        const specula_model *m = model.get();
        const int32_t bos = specula_model_token_bos(m);
        CHECK(bos == 128000);
        CHECK(specula_model_token_text(m, bos) == std::string("<|begin_of_text|>"));
        CHECK(tokenize(m, "Hi", SPECULA_TOKENIZE_ADD_SPECIAL).front() == bos);
        CHECK(tokenize(m, "<|begin_of_text|>", SPECULA_TOKENIZE_PARSE_SPECIAL) == std::vector<int32_t>{bos});
        CHECK(tokenize(m, "<|begin_of_text|>", 0).size() > 1);
    }
    SECTION("qwen2: <|im_end|> is an end-of-generation control token") {
        const fs::path path = vocab_path("qwen2");
        if (!have_fixture(path)) return;
        const ModelPtr model = load_vocab_only(path);
        const specula_model *m = model.get();
        const std::vector<int32_t> ids = tokenize(m, "<|im_end|>", SPECULA_TOKENIZE_PARSE_SPECIAL);
        REQUIRE(ids.size() == 1);
        CHECK(specula_model_token_kind(m, ids[0]) == SPECULA_TOKEN_KIND_CONTROL);
        CHECK(specula_model_token_is_eog(m, ids[0]) == 1);
        CHECK(piece(m, ids[0], 0).empty());
        CHECK(piece(m, ids[0], 1) == "<|im_end|>");
    }
}

TEST_CASE("C API vocabulary: token_to_piece, token_text, token_kind", "[api][tokenizer]") {
    SECTION("SentencePiece (llama-spm)") {
        const fs::path path = vocab_path("llama-spm");
        if (!have_fixture(path)) return;
        const ModelPtr model = load_vocab_only(path);
        const specula_model *m = model.get();
        CHECK(specula_model_n_vocab(m) == 32000);

        const int32_t dog = single_token(m, "dog");  // SentencePiece prefixes the space: "▁dog"
        REQUIRE(dog >= 0);
        CHECK(specula_model_token_text(m, dog) == std::string("\xE2\x96\x81" "dog"));
        CHECK(piece(m, dog, 0) == " dog");
        CHECK(specula_model_token_kind(m, dog) == SPECULA_TOKEN_KIND_NORMAL);

        // Byte-fallback tokens <0x00>..<0xFF> are ids 3..258 in Llama 2's vocabulary.
        CHECK(specula_model_token_text(m, 13) == std::string("<0x0A>"));
        CHECK(specula_model_token_kind(m, 13) == SPECULA_TOKEN_KIND_BYTE);
        CHECK(piece(m, 13, 0) == "\n");
        CHECK(specula_model_token_kind(m, 3 + 0xE2) == SPECULA_TOKEN_KIND_BYTE);
        CHECK(piece(m, 3 + 0xE2, 0) == "\xE2");  // a piece may be an incomplete UTF-8 sequence

        CHECK(specula_model_token_text(m, 0) == std::string("<unk>"));
        CHECK(specula_model_token_kind(m, 0) == SPECULA_TOKEN_KIND_UNKNOWN);
        CHECK(piece(m, 0, 0).empty());
        CHECK(piece(m, 0, 1) == "<unk>");
        CHECK(specula_model_token_text(m, 1) == std::string("<s>"));
        CHECK(specula_model_token_kind(m, 1) == SPECULA_TOKEN_KIND_CONTROL);
        CHECK(piece(m, 1, 0).empty());
        CHECK(piece(m, 1, 1) == "<s>");
        CHECK(specula_model_token_kind(m, 2) == SPECULA_TOKEN_KIND_CONTROL);
        CHECK(specula_model_token_is_eog(m, 2) == 1);
        CHECK(specula_model_token_is_eog(m, dog) == 0);

        // The pieces of a tokenization, concatenated, are its text with the prefixed space.
        const std::string text = "The quick brown fox\njumps over 13 lazy dogs.";
        std::string joined;
        for (const int32_t id : tokenize(m, text, 0)) joined += piece(m, id, 0);
        CHECK(joined == " " + text);
    }
    SECTION("byte-level BPE (gpt-2)") {
        const fs::path path = vocab_path("gpt-2");
        if (!have_fixture(path)) return;
        const ModelPtr model = load_vocab_only(path);
        const specula_model *m = model.get();
        CHECK(specula_model_n_vocab(m) == 50257);
        const int32_t the = single_token(m, " the");
        REQUIRE(the >= 0);
        CHECK(specula_model_token_text(m, the) == std::string("\xC4\xA0" "the"));  // "Ġthe"
        CHECK(piece(m, the, 0) == " the");
        CHECK(specula_model_token_kind(m, the) == SPECULA_TOKEN_KIND_NORMAL);
        const int32_t nl = single_token(m, "\n");
        REQUIRE(nl >= 0);
        CHECK(specula_model_token_text(m, nl) == std::string("\xC4\x8A"));  // "Ċ"
        CHECK(piece(m, nl, 0) == "\n");

        // Every piece of a tokenization concatenated is exactly the text: byte-level BPE is lossless.
        const std::string text = "h\xC3\xA9llo \xE2\x98\x83 \xF0\x9F\xA6\x99 , don't\n\tx";
        std::string joined;
        for (const int32_t id : tokenize(m, text, 0)) joined += piece(m, id, 0);
        CHECK(escaped(joined) == escaped(text));
    }
}

TEST_CASE("C API vocabulary: tokenizer and pre-tokenizer names", "[api][tokenizer]") {
    struct Expect {
        const char *vocab, *tokenizer, *pre;
    };
    // The SentencePiece files carry tokenizer.ggml.pre = "default"; the header promises "" for non-BPE models.
    const Expect expect[] = {{"llama-spm", "llama", ""},      {"phi-3", "llama", ""},  {"llama-bpe", "gpt2", "llama-bpe"},
                             {"qwen2", "gpt2", "qwen2"},       {"gpt-2", "gpt2", "gpt-2"},
                             {"deepseek-coder", "gpt2", "deepseek-coder"}};
    for (const Expect &e : expect) {
        SECTION(e.vocab) {
            const fs::path path = vocab_path(e.vocab);
            if (!have_fixture(path)) return;
            const ModelPtr model = load_vocab_only(path);
            CHECK(specula_model_tokenizer(model.get()) == std::string(e.tokenizer));
            CHECK(specula_model_pre_tokenizer(model.get()) == std::string(e.pre));
        }
    }
    SECTION("the bundled model (SentencePiece, no tokenizer.ggml.pre)") {
        const ModelPtr model = load_full(SPECULA_SOURCE_DIR "/models/stories260K.gguf");
        CHECK(specula_model_tokenizer(model.get()) == std::string("llama"));
        CHECK(specula_model_pre_tokenizer(model.get()) == std::string(""));
    }
}

TEST_CASE("C API vocabulary: bad ids", "[api][tokenizer]") {
    const fs::path path = vocab_path("qwen2");
    if (!have_fixture(path)) return;
    const ModelPtr model = load_vocab_only(path);
    const specula_model *m = model.get();
    const int32_t n_vocab = specula_model_n_vocab(m);
    REQUIRE(n_vocab > 150000);
    for (const int32_t bad : {-1, -2, n_vocab, n_vocab + 1, INT32_MAX, INT32_MIN}) {
        INFO("id " << bad);
        CHECK(specula_model_token_text(m, bad) == nullptr);
        CHECK(specula_model_token_kind(m, bad) == SPECULA_TOKEN_KIND_INVALID);
        CHECK(specula_model_token_is_eog(m, bad) == 0);

        char buf[64] = "unchanged";
        size_t len = 12345;
        specula_error *err = nullptr;
        CHECK(specula_model_token_to_piece(m, bad, 1, buf, sizeof buf, &len, &err) == SPECULA_ERR_INVALID_TOKEN);
        REQUIRE(err != nullptr);
        CHECK(specula_error_status(err) == SPECULA_ERR_INVALID_TOKEN);
        CHECK(std::strlen(specula_error_message(err)) > 0);
        specula_error_destroy(err);

        const int32_t ids[] = {100, bad, 200};
        err = nullptr;
        CHECK(specula_model_detokenize(m, ids, 3, 0, buf, sizeof buf, &len, &err) == SPECULA_ERR_INVALID_TOKEN);
        CHECK(specula_error_status(err) == SPECULA_ERR_INVALID_TOKEN);
        specula_error_destroy(err);
    }
    // The last valid id is fine.
    CHECK(specula_model_token_text(m, n_vocab - 1) != nullptr);
    CHECK(specula_model_token_kind(m, n_vocab - 1) != SPECULA_TOKEN_KIND_INVALID);
    specula_status st = SPECULA_ERR_INTERNAL;
    piece(m, n_vocab - 1, 1, &st);
    CHECK(st == SPECULA_OK);
}

TEST_CASE("C API vocabulary: NULL arguments", "[api][tokenizer]") {
    const fs::path path = vocab_path("gpt-2");
    if (!have_fixture(path)) return;
    const ModelPtr model = load_vocab_only(path);
    const specula_model *m = model.get();
    int32_t ids[8];
    char buf[64];
    size_t n = 0;

    // Runs call(&err) and checks that the error object carries the status returned (argument evaluation order
    // is unspecified, so the status and err must not be read in one call's arguments).
    auto status_of = [](auto &&call) {
        specula_error *err = nullptr;
        const specula_status st = call(&err);
        CHECK(specula_error_status(err) == st);
        if (st != SPECULA_OK) CHECK(std::strlen(specula_error_message(err)) > 0);
        specula_error_destroy(err);
        return st;
    };
    // NULL model
    CHECK(status_of([&](specula_error **e) { return specula_model_tokenize(nullptr, "a", 1, 0, ids, 8, &n, e); }) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(status_of([&](specula_error **e) { return specula_model_detokenize(nullptr, ids, 0, 0, buf, sizeof buf, &n, e); }) ==
          SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(status_of([&](specula_error **e) { return specula_model_token_to_piece(nullptr, 0, 0, buf, sizeof buf, &n, e); }) ==
          SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(specula_model_token_text(nullptr, 0) == nullptr);
    CHECK(specula_model_token_kind(nullptr, 0) == SPECULA_TOKEN_KIND_INVALID);
    CHECK(specula_model_token_is_eog(nullptr, 0) == 0);
    CHECK(specula_model_token_bos(nullptr) == SPECULA_TOKEN_NULL);
    CHECK(specula_model_token_eos(nullptr) == SPECULA_TOKEN_NULL);
    CHECK(specula_model_n_vocab(nullptr) == 0);
    CHECK(specula_model_tokenizer(nullptr) == std::string(""));
    CHECK(specula_model_pre_tokenizer(nullptr) == std::string(""));

    // NULL text with a length
    CHECK(status_of([&](specula_error **e) { return specula_model_tokenize(m, nullptr, 3, 0, ids, 8, &n, e); }) == SPECULA_ERR_INVALID_ARGUMENT);
    // NULL token buffer with a capacity that claims room
    CHECK(status_of([&](specula_error **e) { return specula_model_tokenize(m, "abc", 3, 0, nullptr, 8, &n, e); }) == SPECULA_ERR_INVALID_ARGUMENT);
    // NULL tokens with a count
    CHECK(status_of([&](specula_error **e) { return specula_model_detokenize(m, nullptr, 2, 0, buf, sizeof buf, &n, e); }) ==
          SPECULA_ERR_INVALID_ARGUMENT);
    // NULL output buffer with a size that claims room
    const int32_t one[] = {262};
    CHECK(status_of([&](specula_error **e) { return specula_model_detokenize(m, one, 1, 0, nullptr, 64, &n, e); }) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(status_of([&](specula_error **e) { return specula_model_token_to_piece(m, 262, 0, nullptr, 64, &n, e); }) == SPECULA_ERR_INVALID_ARGUMENT);
    // buf = NULL, size 0 is the documented way to ask for the length
    n = 0;
    CHECK(status_of([&](specula_error **e) { return specula_model_token_to_piece(m, 262, 0, nullptr, 0, &n, e); }) == SPECULA_ERR_BUFFER_TOO_SMALL);
    CHECK(n == 4);  // " the"
}

TEST_CASE("C API tokenize: one model, many threads", "[api][tokenizer][concurrency]") {
    const fs::path path = vocab_path("llama-bpe");
    if (!have_fixture(path)) return;
    const ModelPtr model = load_vocab_only(path);
    const std::vector<VectorCase> cases = read_vectors(path);
    REQUIRE(cases.size() >= 40);
    std::vector<int> mismatches(4, 0);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < mismatches.size(); ++t)
        threads.emplace_back([&, t] {
            for (int round = 0; round < 5; ++round)
                for (const VectorCase &c : cases) {
                    std::vector<int32_t> ids(c.text.size() + 16);
                    size_t n = 0;
                    if (specula_model_tokenize(model.get(), c.text.data(), c.text.size(), 0, ids.data(), ids.size(), &n,
                                               nullptr) != SPECULA_OK) {
                        ++mismatches[t];
                        continue;
                    }
                    ids.resize(n);
                    mismatches[t] += ids != c.expected;
                }
        });
    for (std::thread &t : threads) t.join();
    for (const int bad : mismatches) CHECK(bad == 0);
}
