// Fixture helpers shared by the unit and API tests: header-only, public-API-free (no internal types), so both
// test executables can use them.
#pragma once

#include <catch2/catch.hpp>

#include "common/skip.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace test_fixtures {

// $SPECULA_FIXTURES_DIR when set (binaries run on another machine, e.g. the GPU one), else the build's path.
inline std::filesystem::path fixtures_dir() {
    const char *env = std::getenv("SPECULA_FIXTURES_DIR");
    return env != nullptr && *env != '\0' ? std::filesystem::path(env) : std::filesystem::path(SPECULA_FIXTURES_DIR);
}

// True when the fixture exists; otherwise the test is marked skipped (common/skip.h) and the caller returns.
inline bool have_fixture(const std::filesystem::path &path) {
    if (std::filesystem::exists(path)) return true;
    SPECULA_SKIP("fixture " << path.string() << " is missing (../shared/fixtures, or set SPECULA_FIXTURES_DIR)");
    return false;
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

// One of llama.cpp's tokenizer test vectors.
struct VectorCase {
    std::string text;
    std::vector<int32_t> expected;
};

// NAME.gguf.inp: strings separated by "\n__ggml_vocab_test__\n" (the file ends with one); NAME.gguf.out: one
// line of space-separated ids per string (add-special and parse-special off).
inline std::vector<VectorCase> read_vectors(const std::filesystem::path &gguf) {
    const std::string separator = "\n__ggml_vocab_test__\n";
    const std::string inp = read_file(gguf.string() + ".inp");
    std::vector<std::string> texts;
    size_t start = 0;
    for (size_t pos; (pos = inp.find(separator, start)) != std::string::npos; start = pos + separator.size())
        texts.push_back(inp.substr(start, pos - start));
    if (start < inp.size()) texts.push_back(inp.substr(start));

    std::istringstream out(read_file(gguf.string() + ".out"));
    std::vector<VectorCase> cases;
    std::string line;
    for (size_t i = 0; i < texts.size() && std::getline(out, line); ++i) {
        VectorCase c{texts[i], {}};
        std::istringstream ids(line);
        for (int32_t id; ids >> id;) c.expected.push_back(id);
        cases.push_back(std::move(c));
    }
    REQUIRE(cases.size() == texts.size());
    return cases;
}

}  // namespace test_fixtures
