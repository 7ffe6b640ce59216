// Splits text into the words that byte-level BPE then merges within, exactly where llama.cpp's
// unicode_regex_split() splits them.
//
// llama.cpp applies a list of regexes in turn; each one cuts every piece so far into its matches and the gaps
// between them (gaps are kept as pieces of their own, nothing is dropped). It classifies non-ASCII codepoints
// with its own Unicode 15.1 table and, for a regex that uses \p{..}, runs the regex over a "collapsed" copy of
// the text in which every non-ASCII codepoint is one byte standing for its class (0xD1 number, 0xD2 letter,
// 0xD3 punctuation, 0xD4 mark, 0xD5 symbol, 0x0B whitespace, 0xD0 anything else) and rewrites \p{X} to match
// those bytes plus X's ASCII members. We do the same, with PCRE2 as the engine: that makes the class of every
// codepoint come from llama.cpp's table rather than from PCRE2's (older) Unicode data, quirks included (\p{Lu}
// means any letter; of ASCII, \p{P} and \p{S} cover exactly what llama.cpp lists). Regexes without \p{..} run
// over the real codepoints (PCRE2 in UTF mode, \s ASCII-only with non-ASCII whitespace turned into 0x0B), as
// llama.cpp's std::wregex path does.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace specula::internal {

class PreTokenizer {
public:
    PreTokenizer() = default;
    // Compiles each regex once (JIT where available). Throws Error(UNSUPPORTED) if PCRE2 rejects one.
    explicit PreTokenizer(const std::vector<std::string> &regexes);

    bool empty() const { return regexes_.empty(); }

    // The words of text, in order, as UTF-8 (not yet byte-encoded). Bytes that are not valid UTF-8 become
    // U+FFFD first, as in llama.cpp. Throws Error(INVALID_ARGUMENT) for a sequence that decodes above U+10FFFF
    // (llama.cpp cannot encode those back either).
    std::vector<std::string> split(std::string_view text) const;

private:
    struct Regex;
    std::vector<std::shared_ptr<const Regex>> regexes_;
    bool need_collapse_ = false;
    bool need_wide_ = false;
};

// llama.cpp's rewrite of a regex for the collapsed text (exposed for tests).
std::string collapse_regex(const std::string &regex);
// Whether llama.cpp would run this regex on the collapsed text (it names a \p{..} class llama.cpp knows).
bool regex_uses_categories(const std::string &regex);

}  // namespace specula::internal
