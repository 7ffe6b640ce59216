#include "tokenizer/token_piece.h"

#include "core/error.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab_data.h"

#include <cstdio>
#include <cstdlib>

namespace specula::internal {
namespace {

const std::string kEscapedSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

std::string unescape_whitespace(const std::string &text) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        if (text.compare(i, kEscapedSpace.size(), kEscapedSpace) == 0) {
            out += ' ';
            i += kEscapedSpace.size();
        } else {
            out += text[i++];
        }
    }
    return out;
}

// llama.cpp's llama_decode_text: each codepoint of a byte-level token back to its byte. A codepoint outside the
// GPT-2 mapping is spelled out, oddly but faithfully, as "[UNK_BYTE_0x<its utf-8 in hex><the whole token>]".
std::string decode_byte_level(const std::string &text) {
    std::string out;
    for (const uint32_t cp : decode_utf8_lenient(text)) {
        std::string utf8;
        if (!append_utf8(utf8, cp)) throw Error(SPECULA_ERR_FORMAT, "tokenizer: token text '" + text + "' is not UTF-8");
        const int byte = gpt2_utf8_to_byte(utf8);
        if (byte >= 0) {
            out += char(byte);
        } else {
            out += "[UNK_BYTE_0x";
            for (const char c : utf8) {
                char hex[3];
                std::snprintf(hex, sizeof hex, "%02x", unsigned(uint8_t(c)));
                out += hex;
            }
            out += text + "]";
        }
    }
    return out;
}

// llama.cpp reads the two characters after "<0x" with strtol; so do we, leniency included.
char byte_of_byte_token(const std::string &text) {
    if (text.size() < 3) throw Error(SPECULA_ERR_FORMAT, "tokenizer: byte token '" + text + "' is too short to name a byte");
    const std::string hex = text.substr(3, 2);
    return char(std::strtol(hex.c_str(), nullptr, 16));
}

}  // namespace

std::string compute_token_piece(const VocabData &vocab, int32_t id) {
    const TokenData &token = vocab.tokens[size_t(id)];
    if (token.attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return token.text;
    if (token.attr & kAttrNormal) {
        if (vocab.kind == VocabKind::Spm || vocab.escape_whitespaces) return unescape_whitespace(token.text);
        return decode_byte_level(token.text);
    }
    if (token.attr & kAttrByte) return std::string(1, byte_of_byte_token(token.text));
    return {};  // unused or undefined tokens render as nothing
}

}  // namespace specula::internal
