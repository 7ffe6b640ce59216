// Header-only UTF-8 check shared by the apps (the CLI and the benchmarks), which see only the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace specula_apps {

// Length of the well-formed UTF-8 character starting at s[i] (1-4), or 0 if the bytes there are not one
// (bad lead byte, truncated, overlong, surrogate or above U+10FFFF).
inline size_t valid_utf8_length(std::string_view s, size_t i) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = b(i);
    if (c < 0x80) return 1;
    size_t n = 0;
    uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) n = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) n = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) n = 4, cp = c & 0x07;
    else return 0;
    if (i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k) {
        if ((b(i + k) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b(i + k) & 0x3F);
    }
    static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

// Whether all of s is well-formed UTF-8.
inline bool valid_utf8(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        const size_t n = valid_utf8_length(s, i);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

// Length of the longest well-formed UTF-8 prefix of s (a token's piece may end inside a character).
inline size_t valid_utf8_prefix(std::string_view s) {
    size_t i = 0;
    for (size_t n; i < s.size() && (n = valid_utf8_length(s, i)) != 0;) i += n;
    return i;
}

}  // namespace specula_apps
