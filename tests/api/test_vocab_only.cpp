// Vocab-only loading: tokenizer GGUFs without weights (and models of architectures we cannot run) load for
// tokenization; sessions refuse them.
#include <catch2/catch.hpp>

#include "common/skip.h"
#include <specula/specula.h>

#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;

TEST_CASE("a vocab-only GGUF loads with vocab_only and tokenizes, and sessions refuse it", "[vocab_only]") {
    const fs::path path = fs::path(SPECULA_FIXTURES_DIR) / "tokenizer" / "ggml-vocab-qwen2.gguf";
    if (!fs::exists(path)) {
        SPECULA_SKIP(path << " not found");
        return;
    }
    specula_model *model = nullptr;
    specula_error *err = nullptr;
    // Without the option the loader wants weights.
    CHECK(specula_model_load(path.c_str(), nullptr, &model, &err) != SPECULA_OK);
    CHECK(model == nullptr);
    specula_error_destroy(err);

    specula_model_options opts;
    specula_model_options_init(&opts);
    opts.vocab_only = 1;
    REQUIRE(specula_model_load(path.c_str(), &opts, &model, nullptr) == SPECULA_OK);
    CHECK(specula_model_n_vocab(model) > 150000);
    CHECK(std::string(specula_model_tokenizer(model)) == "gpt2");
    CHECK(std::string(specula_model_pre_tokenizer(model)) == "qwen2");
    CHECK(specula_model_n_layer(model) == 0);

    const std::string text = "Hello world";
    size_t n = 0;
    CHECK(specula_model_tokenize(model, text.data(), text.size(), 0, nullptr, 0, &n, nullptr) == SPECULA_ERR_BUFFER_TOO_SMALL);
    std::vector<int32_t> ids(n);
    REQUIRE(specula_model_tokenize(model, text.data(), text.size(), 0, ids.data(), ids.size(), &n, nullptr) == SPECULA_OK);
    CHECK(ids == std::vector<int32_t>{9707, 1879});  // Qwen2's ids for "Hello", " world"

    specula_session *session = nullptr;
    CHECK(specula_session_create(model, nullptr, nullptr, &session, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(session == nullptr);
    CHECK_THAT(std::string(specula_error_message(err)), Catch::Contains("vocab-only"));
    specula_error_destroy(err);
    specula_model_destroy(model);
}
