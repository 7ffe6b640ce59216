// Since 0.7: the fill-in-the-middle tokens and add_bos of a vocabulary, and specula_session_evaluate (a prompt
// evaluated without generating, what a server's cache warm-up does).
#include <catch2/catch.hpp>
#include <specula/specula.hpp>

#include "common/fixture_files.h"

#include <string>
#include <vector>

namespace {
const std::string kModelPath = SPECULA_SOURCE_DIR "/models/stories260K.gguf";

specula::Model vocab(const std::string &name) {
    specula::ModelOptions o;
    o.vocab_only = true;
    return specula::Model::load((test_fixtures::fixtures_dir() / "tokenizer" / ("ggml-vocab-" + name + ".gguf")).string(), o);
}
}  // namespace

TEST_CASE("FIM tokens come from the vocabulary as llama.cpp finds them, and a model without them says so", "[fim]") {
    const specula::Model stories = specula::Model::load(kModelPath);
    for (const specula_fim_token k : {SPECULA_FIM_PRE, SPECULA_FIM_SUF, SPECULA_FIM_MID, SPECULA_FIM_PAD, SPECULA_FIM_REP, SPECULA_FIM_SEP})
        CHECK(stories.token_fim(k) == SPECULA_TOKEN_NULL);
    CHECK(stories.add_bos());
    CHECK_FALSE(stories.add_eos());
    CHECK(stories.token_eot() == SPECULA_TOKEN_NULL);
    CHECK(specula_model_token_fim(nullptr, SPECULA_FIM_PRE) == SPECULA_TOKEN_NULL);
    CHECK(specula_model_token_fim(stories.get(), static_cast<specula_fim_token>(99)) == SPECULA_TOKEN_NULL);
    CHECK(specula_model_add_bos(nullptr) == 0);

    if (!test_fixtures::have_fixture(test_fixtures::fixtures_dir() / "tokenizer" / "ggml-vocab-qwen2.gguf")) return;
    const specula::Model qwen = vocab("qwen2");
    CHECK(qwen.token_text(qwen.token_fim(SPECULA_FIM_PRE)) == "<|fim_prefix|>");
    CHECK(qwen.token_text(qwen.token_fim(SPECULA_FIM_SUF)) == "<|fim_suffix|>");
    CHECK(qwen.token_text(qwen.token_fim(SPECULA_FIM_MID)) == "<|fim_middle|>");
    CHECK(qwen.token_text(qwen.token_fim(SPECULA_FIM_PAD)) == "<|fim_pad|>");
    CHECK(qwen.token_text(qwen.token_fim(SPECULA_FIM_REP)) == "<|repo_name|>");
    CHECK(qwen.token_text(qwen.token_fim(SPECULA_FIM_SEP)) == "<|file_sep|>");
    CHECK(qwen.token_text(qwen.token_eot()) == "<|im_end|>");
    CHECK_FALSE(qwen.add_bos());
    // FIM_PAD/REP/SEP end generation, as in llama.cpp.
    CHECK(qwen.token_is_eog(qwen.token_fim(SPECULA_FIM_SEP)));

    const specula::Model deepseek = vocab("deepseek-coder");
    CHECK(deepseek.token_text(deepseek.token_fim(SPECULA_FIM_PRE)) == "<｜fim▁begin｜>");
    CHECK(deepseek.token_text(deepseek.token_fim(SPECULA_FIM_SUF)) == "<｜fim▁hole｜>");
    CHECK(deepseek.token_text(deepseek.token_fim(SPECULA_FIM_MID)) == "<｜fim▁end｜>");
    CHECK(deepseek.token_fim(SPECULA_FIM_REP) == SPECULA_TOKEN_NULL);
    CHECK(deepseek.token_fim(SPECULA_FIM_SEP) == SPECULA_TOKEN_NULL);
}

TEST_CASE("specula_session_evaluate evaluates the prompt once: the generation after it is the same and starts evaluated", "[evaluate]") {
    const specula::Model model = specula::Model::load(kModelPath);
    const std::vector<int32_t> prompt = model.tokenize("Once upon a time, there was a little girl named Lily.");
    for (const bool ngram : {false, true}) {
        specula::Session plain(model, specula::SessionOptions(), specula::SamplerOptions::greedy());
        specula::Session warmed(model, specula::SessionOptions(), specula::SamplerOptions::greedy());
        if (ngram) {
            specula::SpeculativeOptions so;
            so.ngram = true;
            plain.set_speculative(so);
            warmed.set_speculative(so);
        }
        plain.append_tokens(prompt);
        warmed.append_tokens(prompt);
        warmed.evaluate();
        const int32_t evaluated = warmed.stats().n_prompt_tokens;
        // With a drafter the last prompt token stays pending: it is the next round's root.
        CHECK(evaluated == int32_t(prompt.size()) - (ngram ? 1 : 0));
        warmed.evaluate();  // nothing pending: nothing happens
        CHECK(warmed.stats().n_prompt_tokens == evaluated);

        std::vector<int32_t> a, b;
        plain.generate(specula::GenerateOptions(40), [&](const specula_token_event &e) {
            if (e.token >= 0) a.push_back(e.token);
            return true;
        });
        warmed.generate(specula::GenerateOptions(40), [&](const specula_token_event &e) {
            if (e.token >= 0) b.push_back(e.token);
            return true;
        });
        CHECK(a == b);
        CHECK(warmed.stats().n_prompt_tokens == plain.stats().n_prompt_tokens);
    }

    // A cancel request stops it; an empty session and a NULL one are fine / refused.
    specula::Session s(model);
    s.evaluate();
    s.append_tokens(prompt);
    s.cancel();
    CHECK_THROWS_AS(s.evaluate(), specula::Error);
    s.evaluate();  // the request was consumed
    CHECK(s.stats().n_prompt_tokens == int32_t(prompt.size()));
    specula_error *err = nullptr;
    CHECK(specula_session_evaluate(nullptr, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    specula_error_destroy(err);
}
