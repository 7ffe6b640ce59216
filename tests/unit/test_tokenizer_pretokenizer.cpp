// The pre-tokenizer's building blocks: codepoint classes, the regex rewrite for collapsed text, and splitting.
#include "core/error.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/pretokenizer_catalog.h"
#include "tokenizer/unicode.h"

#include <catch2/catch.hpp>

using namespace specula::internal;
using Words = std::vector<std::string>;

TEST_CASE("pretokenizer: codepoint classes follow llama.cpp's Unicode 15.1 table", "[tokenizer]") {
    CHECK(codepoint_flags('a') == kCpLetter);
    CHECK(codepoint_flags('7') == kCpNumber);
    CHECK(codepoint_flags('~') == kCpSymbol);
    CHECK(codepoint_flags('!') == kCpPunctuation);
    CHECK(codepoint_flags(' ') == (kCpSeparator | kCpWhitespace));
    CHECK(codepoint_flags('\n') == (kCpControl | kCpWhitespace));
    CHECK(codepoint_flags(0x85) == (kCpControl | kCpWhitespace));     // NEL: White_Space although a control
    CHECK(codepoint_flags(0x200B) == kCpControl);                     // zero width space: Cf, not White_Space
    CHECK(codepoint_flags(0x0301) == kCpMark);
    CHECK(codepoint_flags(0x0378) == kCpUndefined);                   // unassigned
    CHECK(codepoint_flags(0x31350) == kCpLetter);                     // CJK Ext. H (Unicode 15.0)
    CHECK(codepoint_flags(0x2EBF0) == kCpLetter);                     // CJK Ext. I (Unicode 15.1)
    CHECK(codepoint_flags(0x105C0) == kCpUndefined);                  // Todhri: Unicode 16, not in llama.cpp's table
    CHECK(codepoint_flags(0x10FFFF) == kCpUndefined);
    CHECK(codepoint_flags(0x110000) == kCpUndefined);
}

TEST_CASE("pretokenizer: lenient UTF-8 decoding like llama.cpp", "[tokenizer]") {
    CHECK(decode_utf8_lenient("a\xC3\xA9") == std::vector<uint32_t>{'a', 0xE9});
    CHECK(decode_utf8_lenient("\xFF" "a") == std::vector<uint32_t>{0xFFFD, 'a'});
    CHECK(decode_utf8_lenient("\xE2\x82") == std::vector<uint32_t>{0xFFFD, 0xFFFD});
    CHECK(decode_utf8_lenient("\xED\xA0\x80") == std::vector<uint32_t>{0xD800});     // surrogates pass
    CHECK(decode_utf8_lenient("\xC0\xAF") == std::vector<uint32_t>{0x2F});           // overlongs pass
    CHECK(decode_utf8_lenient("\xF7\xBF\xBF\xBF") == std::vector<uint32_t>{0x1FFFFF});
}

TEST_CASE("pretokenizer: GPT-2 byte mapping", "[tokenizer]") {
    CHECK(gpt2_byte_to_utf8('a') == "a");
    CHECK(gpt2_byte_to_utf8(' ') == "\xC4\xA0");   // Ġ
    CHECK(gpt2_byte_to_utf8('\n') == "\xC4\x8A");  // Ċ
    for (int b = 0; b < 256; ++b) CHECK(gpt2_utf8_to_byte(gpt2_byte_to_utf8(uint8_t(b))) == b);
    CHECK(gpt2_utf8_to_byte("\xE2\x96\x81") == -1);
    CHECK(gpt2_utf8_to_byte("ab") == -1);
}

TEST_CASE("pretokenizer: the collapsed-text rewrite of Unicode property classes", "[tokenizer]") {
    CHECK(regex_uses_categories("\\p{L}+"));
    CHECK_FALSE(regex_uses_categories("[0-9]+"));
    CHECK(collapse_regex("\\p{L}+") == "[\xD2" "A-Za-z]+");
    CHECK(collapse_regex("[^\\s\\p{L}\\p{N}]+") == "[^\\s\xD2" "A-Za-z\xD1" "0-9]+");
    CHECK(collapse_regex("\\p{Lu}") == "[\xD2" "A-Za-z]");  // every letter class is "letter"
    CHECK(collapse_regex("\\p{Han}") == "\\p{Han}");         // unknown classes are left alone
}

TEST_CASE("pretokenizer: splitting keeps every byte, matches and gaps alike", "[tokenizer]") {
    CHECK(PreTokenizer({"[0-9]+"}).split("ab12cd") == Words{"ab", "12", "cd"});
    CHECK(PreTokenizer({"[0-9]+"}).split("").empty());
    CHECK(PreTokenizer({"\\p{N}"}).split("a\xD9\xA3" "4") == Words{"a", "\xD9\xA3", "4"});  // Arabic-Indic three is \p{N}

    const PreTokenizerSpec llama3 = *find_pretokenizer("llama-bpe");
    CHECK(PreTokenizer(llama3.regexes).split("Hello world's 1234567!!\n\n  x") ==
          Words{"Hello", " world", "'s", " ", "123", "456", "7", "!!\n\n", " ", " x"});
    CHECK(PreTokenizer(llama3.regexes).split("a  \tb") == Words{"a", "  ", "\tb"});

    const PreTokenizerSpec qwen2 = *find_pretokenizer("qwen2");
    CHECK(PreTokenizer(qwen2.regexes).split("x 2024") == Words{"x", " ", "2", "0", "2", "4"});

    const PreTokenizerSpec gpt2 = *find_pretokenizer("gpt-2");
    CHECK(PreTokenizer(gpt2.regexes).split("I'm  here") == Words{"I", "'m", " ", " here"});
    // A letter PCRE2 10.42 does not know yet (Unicode 15) still counts as one here, as in llama.cpp.
    CHECK(PreTokenizer(gpt2.regexes).split(" \xF0\xB1\x8D\x90\xF0\xB1\x8D\x91.") == Words{" \xF0\xB1\x8D\x90\xF0\xB1\x8D\x91", "."});

    // Not UTF-8: each bad byte reads as U+FFFD.
    CHECK(PreTokenizer(gpt2.regexes).split("a\xFF") == Words{"a", "\xEF\xBF\xBD"});
    // A sequence decoding beyond U+10FFFF cannot be encoded back; llama.cpp fails too.
    CHECK_THROWS_AS(PreTokenizer(gpt2.regexes).split("\xF7\xBF\xBF\xBF"), Error);
}

TEST_CASE("pretokenizer: catalog", "[tokenizer]") {
    for (const char *name : {"", "default", "llama3", "llama-bpe", "qwen2", "gpt-2", "deepseek-coder", "deepseek-llm", "deepseek-v3", "falcon",
                             "starcoder", "tekken", "gpt-4o", "chameleon", "bloom", "viking", "bailingmoe", "seed-coder", "qwen35"}) {
        INFO(name);
        const auto spec = find_pretokenizer(name);
        REQUIRE(spec.has_value());
        CHECK_NOTHROW(PreTokenizer(spec->regexes).split("Hello, World! 123 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80"));
    }
    CHECK_FALSE(find_pretokenizer("no-such-thing").has_value());
    CHECK(find_pretokenizer("llama-bpe")->ignore_merges);
    CHECK(find_pretokenizer("llama-bpe")->add_bos);
    CHECK_FALSE(find_pretokenizer("qwen2")->clean_spaces);
    CHECK(find_pretokenizer("gpt-2")->clean_spaces);
}
