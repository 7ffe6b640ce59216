// Helpers shared by the fuzz targets of tests/fuzz (README.md there): where their data is, skipping when it is
// missing, and the one rule every target applies to what the library throws.
//
// The rule: the library reports bad input by throwing specula::internal::Error (the C shims turn it into a status);
// that is the expected outcome of most fuzz inputs and is swallowed. Anything else escaping the library (a
// std::out_of_range from an unchecked .at(), a std::length_error, ...) is a bug: it is left uncaught, so the
// fuzzer reports it as a crash (std::terminate -> abort). An Error with status INTERNAL is also a bug on input
// that is merely malformed, and traps. Invariant checks in the targets use FUZZ_CHECK, which traps: fine in a
// fuzz target, never in the library.
#pragma once

// The internal Error type, where the target sees the core's headers (serve_request sees only the public API).
#if __has_include("core/error.h")
#include "core/error.h"
#define SPECULA_FUZZ_INTERNAL 1
#endif

#include <specula/specula.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv);

namespace fuzz {

// The exit status of a target whose data (a vocabulary, a model) is missing; ctest and bench/fuzz/run.sh read
// it as "skipped".
constexpr int kSkipExit = 77;

#define FUZZ_CHECK(cond)                                                                                    \
    do {                                                                                                    \
        if (!(cond)) {                                                                                      \
            std::fprintf(stderr, "fuzz invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__);         \
            std::fflush(stderr);                                                                            \
            __builtin_trap();                                                                               \
        }                                                                                                   \
    } while (0)

// $SPECULA_SOURCE_DIR / $SPECULA_FIXTURES_DIR when set (binaries run elsewhere), else the build's paths.
inline std::filesystem::path source_dir() {
    const char *env = std::getenv("SPECULA_SOURCE_DIR");
    return env != nullptr && *env != '\0' ? std::filesystem::path(env) : std::filesystem::path(SPECULA_SOURCE_DIR);
}
inline std::filesystem::path fixtures_dir() {
    const char *env = std::getenv("SPECULA_FIXTURES_DIR");
    return env != nullptr && *env != '\0' ? std::filesystem::path(env) : std::filesystem::path(SPECULA_FIXTURES_DIR);
}

// The path when the file exists; otherwise prints one line (the "SKIPPED:" prefix tests/report_skips.cmake lists)
// and exits 77.
inline std::string require_file(const std::filesystem::path &path, const char *what) {
    if (std::filesystem::is_regular_file(path)) return path.string();
    std::printf("SKIPPED: %s: %s is missing (set SPECULA_FIXTURES_DIR / SPECULA_SOURCE_DIR)\n", what, path.string().c_str());
    std::fflush(stdout);
    std::exit(kSkipExit);
}

inline std::vector<uint8_t> read_bytes(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

#if SPECULA_FUZZ_INTERNAL
// An Error from the library: expected, unless its status says INTERNAL (a check the input should have failed
// earlier, or a broken invariant).
inline void expected_error(const specula::internal::Error &e) {
    static const bool verbose = std::getenv("SPECULA_FUZZ_VERBOSE") != nullptr;  // to see why a seed is refused
    if (verbose) std::fprintf(stderr, "fuzz: error %d: %s\n", int(e.status()), e.what());
    if (e.status() == SPECULA_ERR_INTERNAL) {
        std::fprintf(stderr, "fuzz: INTERNAL error on input: %s\n", e.what());
        std::fflush(stderr);
        __builtin_trap();
    }
}
#endif

// Reads an input from the front: fixed-size values, then strings of a length byte, then the rest.
class Reader {
public:
    Reader(const uint8_t *data, size_t size) : p_(data), n_(size) {}
    bool empty() const { return n_ == 0; }
    size_t left() const { return n_; }
    uint8_t byte() {
        if (n_ == 0) return 0;
        --n_;
        return *p_++;
    }
    uint32_t u32() {
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i) v |= uint32_t(byte()) << (8 * i);
        return v;
    }
    std::string_view bytes(size_t k) {
        k = k < n_ ? k : n_;
        std::string_view s(reinterpret_cast<const char *>(p_), k);
        p_ += k;
        n_ -= k;
        return s;
    }
    // A string up to the next `sep` byte (not included), or the rest.
    std::string_view until(char sep) {
        size_t k = 0;
        while (k < n_ && char(p_[k]) != sep) ++k;
        std::string_view s = bytes(k);
        if (n_ > 0) byte();  // the separator
        return s;
    }
    std::string_view rest() { return bytes(n_); }

private:
    const uint8_t *p_;
    size_t n_;
};

// True when every byte belongs to a complete, well-formed UTF-8 character (no surrogates, no overlongs).
inline bool is_valid_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = s[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) { ++i; continue; }
        else if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
        else return false;
        if (i + len > s.size()) return false;
        for (size_t k = 1; k < len; ++k) {
            const unsigned char d = s[i + k];
            if ((d & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (d & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}

}  // namespace fuzz
