// Helpers shared by the tokenizer tests: where the fixtures are, loading a vocabulary, reading files.
#pragma once

#include "gguf/gguf_file.h"
#include "tokenizer/vocab.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tokenizer_test {

inline std::filesystem::path fixtures_dir() { return SPECULA_FIXTURES_DIR; }

// True when the fixture exists; otherwise a visible warning, and the caller returns (the test is skipped).
inline bool have_fixture(const std::filesystem::path &path) {
    if (std::filesystem::exists(path)) return true;
    WARN("fixture " << path.string() << " is missing; skipping (set SPECULA_FIXTURES_DIR)");
    return false;
}

inline specula::internal::Vocab load_vocab(const std::filesystem::path &path) {
    using namespace specula::internal;
    return Vocab::load(GgufFile::parse(FileBytes::open(path.string(), true)));
}

inline std::string read_file(const std::filesystem::path &path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// A printable rendering of bytes for failure messages.
inline std::string escaped(const std::string &s) {
    std::string out;
    for (const unsigned char c : s) {
        if (c >= 0x20 && c < 0x7F && c != '\\') {
            out += char(c);
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02X", c);
            out += buf;
        }
    }
    return out;
}

inline std::string ids_to_string(const std::vector<int32_t> &ids) {
    std::ostringstream out;
    for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
    return out.str();
}

}  // namespace tokenizer_test
