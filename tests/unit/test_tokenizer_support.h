// Helpers shared by the tokenizer unit tests: the fixture helpers plus loading a vocabulary with the internal API.
#pragma once

#include "gguf/gguf_file.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

#include "common/fixture_files.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace tokenizer_test {

using namespace test_fixtures;

inline specula::internal::Vocab load_vocab(const std::filesystem::path &path) {
    using namespace specula::internal;
    return Vocab::load(GgufFile::parse(FileBytes::open(path.string(), true)));
}

// True when every byte belongs to a complete, well-formed UTF-8 character.
inline bool is_valid_utf8(std::string_view rest) {
    while (!rest.empty()) {
        bool incomplete = false;
        const size_t n = specula::internal::valid_utf8_prefix_length(rest, incomplete);
        if (n == 0) return false;
        rest.remove_prefix(n);
    }
    return true;
}

}  // namespace tokenizer_test
