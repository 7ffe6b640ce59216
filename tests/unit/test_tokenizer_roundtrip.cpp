// Round trips in the spirit of llama.cpp's test-tokenizer-1-{bpe,spm}: the text of every token tokenizes back to
// something with the same text, and every codepoint survives tokenize + detokenize. The full sweeps take a
// while and are tagged [long] (not run under the sanitizers); the fast variants sample.
#include "test_tokenizer_support.h"

#include "tokenizer/unicode.h"

using namespace specula::internal;
using namespace tokenizer_test;

namespace {

const char *const kVocabs[] = {"llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2", "deepseek-coder"};

// Every token whose text is valid UTF-8: its text, tokenized with special tokens recognised, detokenizes to the
// same text. (Pieces that are part of a character cannot round trip through text, and llama.cpp skips them.)
void check_every_token(const std::string &name, int32_t step) {
    const auto path = fixtures_dir() / "tokenizer" / ("ggml-vocab-" + name + ".gguf");
    if (!have_fixture(path)) return;
    const Vocab vocab = load_vocab(path);
    size_t failures = 0, checked = 0;
    for (int32_t id = 0; id < vocab.n_tokens(); id += step) {
        const std::string text = vocab.detokenize({id}, true);
        if (!is_valid_utf8(text)) continue;
        const std::string back = vocab.detokenize(vocab.tokenize(text, false, true), true);
        ++checked;
        if (back != text && ++failures <= 10) {
            INFO(name << ": token " << id << " is '" << escaped(text) << "' but comes back as '" << escaped(back) << "'");
            CHECK(back == text);
        }
    }
    CHECK(failures == 0);
    CHECK(checked > 0);
}

// Every codepoint (sampled by step) survives tokenize + detokenize; U+2581 is SentencePiece's space and is
// excepted, as in llama.cpp.
void check_every_codepoint(const std::string &name, uint32_t step) {
    const auto path = fixtures_dir() / "tokenizer" / ("ggml-vocab-" + name + ".gguf");
    if (!have_fixture(path)) return;
    const Vocab vocab = load_vocab(path);
    size_t failures = 0;
    for (uint32_t cp = 1; cp <= 0x10FFFF; cp += (cp < 0x3000 ? 1 : step)) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        if (cp == 0x2581) continue;
        std::string text;
        append_utf8(text, cp);
        const std::string back = vocab.detokenize(vocab.tokenize(text, false, false), true);
        if (back != text && ++failures <= 10) {
            INFO(name << ": U+" << std::hex << cp << " comes back as '" << escaped(back) << "'");
            CHECK(back == text);
        }
    }
    CHECK(failures == 0);
}

}  // namespace

TEST_CASE("tokenizer round trip: token texts (sampled)", "[tokenizer]") {
    for (const char *name : kVocabs)
        SECTION(name) { check_every_token(name, 97); }
}

TEST_CASE("tokenizer round trip: codepoints (sampled)", "[tokenizer]") {
    for (const char *name : kVocabs)
        SECTION(name) { check_every_codepoint(name, 4099); }
}

TEST_CASE("tokenizer round trip: every token text", "[tokenizer][long]") {
    for (const char *name : kVocabs)
        SECTION(name) { check_every_token(name, 1); }
}

TEST_CASE("tokenizer round trip: every codepoint", "[tokenizer][long]") {
    for (const char *name : kVocabs)
        SECTION(name) { check_every_codepoint(name, 1); }
}
