// tokenizer_<family>: one vocabulary's tokenizer on arbitrary bytes. Built once per family (SPECULA_FUZZ_VOCAB):
// the six vocabularies of ../shared/fixtures/tokenizer (llama-spm, llama-bpe, gpt-2, qwen2, deepseek-coder,
// phi-3; skipped with exit 77 when absent) and the bundled models/stories260K.gguf (always there).
//
// Input: a flags byte, then text (or token ids). Flags bit 0: add_special, bit 1: parse_special, bit 2: the rest
// is token ids (little-endian int32, any value) instead of text.
//   text:  tokenize (ids in range), token_to_piece of each id (with and without special rendering), detokenize,
//          the stream decoder over the pieces (its output is valid UTF-8, and equals the pieces' concatenation
//          when that is valid UTF-8: tokenizer/stream_decoder.h), and for the six fixture vocabularies the round
//          trip tests/unit/test_tokenizer_roundtrip.cpp claims: each codepoint of the text (up to 4, not U+2581)
//          tokenized alone detokenizes to itself.
//   ids:   detokenize and token_to_piece of arbitrary ids: an id outside [0, n_vocab) is Error(INVALID_TOKEN),
//          an id inside never an error.
// LLVMFuzzerInitialize also renders every token of the vocabulary once (token_to_piece, both ways).
#include "fuzz_common.h"

#include "gguf/file_bytes.h"
#include "gguf/gguf_file.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/vocab.h"

#include <memory>

using namespace specula::internal;

namespace {

std::unique_ptr<Vocab> g_vocab;
bool g_roundtrip_claimed = false;  // the six fixture vocabularies (test_tokenizer_roundtrip.cpp's kVocabs)

// Decodes the first codepoints of valid UTF-8 (stops at the first invalid byte).
std::vector<std::string> first_codepoints(std::string_view s, size_t max) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < s.size() && out.size() < max) {
        size_t len = 1;
        const unsigned char c = s[i];
        if (c >= 0xF0) len = 4;
        else if (c >= 0xE0) len = 3;
        else if (c >= 0xC0) len = 2;
        if (i + len > s.size() || !fuzz::is_valid_utf8(s.substr(i, len))) break;
        out.emplace_back(s.substr(i, len));
        i += len;
    }
    return out;
}

void check_pieces(const std::vector<int32_t> &ids) {
    std::string all;
    StreamDecoder decoder;
    std::string streamed;
    for (const int32_t id : ids) {
        const std::string piece = g_vocab->token_to_piece(id, true);
        (void)g_vocab->token_to_piece(id, false);
        (void)g_vocab->token_attr(id);
        all += piece;
        streamed += decoder.push(piece);
        FUZZ_CHECK(decoder.pending().size() <= 3);
    }
    streamed += decoder.flush();
    FUZZ_CHECK(fuzz::is_valid_utf8(streamed));
    if (fuzz::is_valid_utf8(all)) FUZZ_CHECK(streamed == all);
}

void text_mode(std::string_view text, bool add_special, bool parse_special) {
    const std::vector<int32_t> ids = g_vocab->tokenize(text, add_special, parse_special);
    for (const int32_t id : ids) FUZZ_CHECK(id >= 0 && id < g_vocab->n_tokens());
    if (!text.empty() && !add_special) FUZZ_CHECK(!ids.empty());
    check_pieces(ids);
    (void)g_vocab->detokenize(ids, true);
    (void)g_vocab->detokenize(ids, false);

    if (g_roundtrip_claimed) {
        for (const std::string &cp : first_codepoints(text, 4)) {
            if (cp == "\xE2\x96\x81" || cp == std::string(1, '\0')) continue;  // U+2581 is SentencePiece's space; NUL ends C text
            const std::string back = g_vocab->detokenize(g_vocab->tokenize(cp, false, false), true);
            if (back != cp) {
                std::fprintf(stderr, "round trip: codepoint of %zu bytes comes back as %zu bytes\n", cp.size(), back.size());
                FUZZ_CHECK(back == cp);
            }
        }
    }
}

void ids_mode(fuzz::Reader &in) {
    std::vector<int32_t> ids;
    bool any_bad = false;
    while (in.left() >= 4 && ids.size() < 512) {
        const int32_t id = int32_t(in.u32());
        // Mostly ids near the vocabulary (small values, and just past its end); the raw value otherwise.
        const int32_t n = g_vocab->n_tokens();
        const int32_t v = (id & 0x40000000) ? id : (n > 0 ? int32_t(uint32_t(id) % uint32_t(n + 2)) : id);
        any_bad = any_bad || v < 0 || v >= n;
        ids.push_back(v);
    }
    for (int special = 0; special < 2; ++special) {
        bool threw = false;
        try {
            (void)g_vocab->detokenize(ids, special != 0);
        } catch (const Error &e) {
            FUZZ_CHECK(e.status() == SPECULA_ERR_INVALID_TOKEN);
            threw = true;
        }
        FUZZ_CHECK(threw == any_bad);
    }
    for (const int32_t id : ids) {
        const bool bad = id < 0 || id >= g_vocab->n_tokens();
        bool threw = false;
        try {
            (void)g_vocab->token_to_piece(id, true);
        } catch (const Error &e) {
            FUZZ_CHECK(e.status() == SPECULA_ERR_INVALID_TOKEN);
            threw = true;
        }
        FUZZ_CHECK(threw == bad);
        if (bad) FUZZ_CHECK(!g_vocab->is_control(id) && !g_vocab->is_eog(id));
    }
    std::vector<int32_t> good;
    for (const int32_t id : ids)
        if (id >= 0 && id < g_vocab->n_tokens()) good.push_back(id);
    check_pieces(good);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    const std::string family = SPECULA_FUZZ_VOCAB;
    const std::filesystem::path path = family == "stories260K"
        ? fuzz::source_dir() / "models" / "stories260K.gguf"
        : fuzz::fixtures_dir() / "tokenizer" / ("ggml-vocab-" + family + ".gguf");
    const std::string file = fuzz::require_file(path, ("tokenizer_" + family + "'s vocabulary").c_str());
    g_vocab = std::make_unique<Vocab>(Vocab::load(GgufFile::parse(FileBytes::open(file, true))));
    g_roundtrip_claimed = family != "stories260K";
    for (int32_t id = 0; id < g_vocab->n_tokens(); ++id) {
        (void)g_vocab->token_to_piece(id, true);
        (void)g_vocab->token_to_piece(id, false);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Reader in(data, size);
    const uint8_t flags = in.byte();
    try {
        if (flags & 4) {
            ids_mode(in);
        } else {
            text_mode(in.rest(), (flags & 1) != 0, (flags & 2) != 0);
        }
    } catch (const Error &e) {
        fuzz::expected_error(e);
    }
    return 0;
}
