#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace specula::internal {

uint16_t codepoint_flags(uint32_t cp) {
    using unicode_detail::kCodepointRunCount;
    using unicode_detail::kCodepointRuns;
    if (cp > 0x10FFFF) return kCpUndefined;
    // The runs are sorted by start and the first starts at 0: find the last run starting at or before cp.
    const auto *end = kCodepointRuns + kCodepointRunCount;
    const auto *it = std::upper_bound(kCodepointRuns, end, cp,
                                      [](uint32_t value, const unicode_detail::CodepointRun &run) { return value < run.start; });
    return (it - 1)->flags;
}

size_t utf8_sequence_length(uint8_t lead) {
    static constexpr uint8_t kLookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return kLookup[lead >> 4];
}

std::vector<uint32_t> decode_utf8_lenient(std::string_view text) {
    std::vector<uint32_t> out;
    out.reserve(text.size());
    const auto *s = reinterpret_cast<const uint8_t *>(text.data());
    const size_t n = text.size();
    auto cont = [&](size_t k) { return (s[k] & 0xC0) == 0x80; };
    size_t i = 0;
    while (i < n) {
        const uint8_t b = s[i];
        if (b < 0x80) {
            out.push_back(b);
            i += 1;
        } else if ((b & 0x40) == 0) {  // a continuation byte where a lead byte belongs
            out.push_back(kReplacementCharacter);
            i += 1;
        } else if ((b & 0x20) == 0) {
            if (i + 1 < n && cont(i + 1)) {
                out.push_back(((b & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu));
                i += 2;
            } else {
                out.push_back(kReplacementCharacter);
                i += 1;
            }
        } else if ((b & 0x10) == 0) {
            if (i + 2 < n && cont(i + 1) && cont(i + 2)) {
                out.push_back(((b & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu));
                i += 3;
            } else {
                out.push_back(kReplacementCharacter);
                i += 1;
            }
        } else if ((b & 0x08) == 0) {
            if (i + 3 < n && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
                out.push_back(((b & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3Fu));
                i += 4;
            } else {
                out.push_back(kReplacementCharacter);
                i += 1;
            }
        } else {
            out.push_back(kReplacementCharacter);
            i += 1;
        }
    }
    return out;
}

bool append_utf8(std::string &out, uint32_t cp) {
    if (cp <= 0x7F) {
        out.push_back(char(cp));
    } else if (cp <= 0x7FF) {
        out.push_back(char(0xC0 | (cp >> 6)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    } else if (cp <= 0xFFFF) {
        out.push_back(char(0xE0 | (cp >> 12)));
        out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    } else if (cp <= 0x10FFFF) {
        out.push_back(char(0xF0 | (cp >> 18)));
        out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    } else {
        return false;
    }
    return true;
}

size_t valid_utf8_prefix_length(std::string_view bytes, bool &incomplete) {
    incomplete = false;
    if (bytes.empty()) return 0;
    const auto *s = reinterpret_cast<const uint8_t *>(bytes.data());
    const uint8_t b0 = s[0];
    if (b0 < 0x80) return 1;
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte (table 3-7)
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        if (b0 == 0xE0) lo = 0xA0;       // no overlongs
        else if (b0 == 0xED) hi = 0x9F;  // no surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        if (b0 == 0xF0) lo = 0x90;       // no overlongs
        else if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
        return 0;  // 0x80..0xC1, 0xF5..0xFF never start a sequence
    }
    for (size_t k = 1; k < need; ++k) {
        if (k >= bytes.size()) {
            incomplete = true;  // every byte so far fits: more may complete it
            return 0;
        }
        const uint8_t b = s[k];
        const uint8_t min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xBF;
        if (b < min || b > max) return 0;
    }
    return need;
}

namespace {

// bytes_to_unicode() from GPT-2: printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100...
struct Gpt2ByteMap {
    std::array<std::string, 256> byte_to_utf8;
    std::array<int, 512> cp_to_byte;  // every mapped codepoint is below U+0144

    Gpt2ByteMap() {
        cp_to_byte.fill(-1);
        int next = 0;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            const uint32_t cp = printable ? uint32_t(b) : uint32_t(256 + next++);
            append_utf8(byte_to_utf8[b], cp);
            cp_to_byte[cp] = b;
        }
    }
};

const Gpt2ByteMap &gpt2_map() {
    static const Gpt2ByteMap map;
    return map;
}

}  // namespace

const std::string &gpt2_byte_to_utf8(uint8_t byte) { return gpt2_map().byte_to_utf8[byte]; }

int gpt2_utf8_to_byte(std::string_view utf8_char) {
    // Only exact one-codepoint strings in the map qualify, as in llama.cpp's string-keyed map.
    const auto *s = reinterpret_cast<const uint8_t *>(utf8_char.data());
    uint32_t cp;
    if (utf8_char.size() == 1 && s[0] < 0x80) {
        cp = s[0];
    } else if (utf8_char.size() == 2 && (s[0] & 0xE0) == 0xC0 && (s[1] & 0xC0) == 0x80) {
        cp = ((s[0] & 0x1Fu) << 6) | (s[1] & 0x3Fu);
        if (cp < 0x80) return -1;  // overlong: not the string the map holds
    } else {
        return -1;
    }
    return cp < 512 ? gpt2_map().cp_to_byte[cp] : -1;
}

}  // namespace specula::internal
