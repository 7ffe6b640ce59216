// Helpers shared by the tokenizer unit tests: the fixture helpers plus loading a vocabulary with the internal API.
#pragma once

#include "gguf/gguf_file.h"
#include "tokenizer/vocab.h"

#include "common/fixture_files.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tokenizer_test {

using namespace test_fixtures;

inline specula::internal::Vocab load_vocab(const std::filesystem::path &path) {
    using namespace specula::internal;
    return Vocab::load(GgufFile::parse(FileBytes::open(path.string(), true)));
}

}  // namespace tokenizer_test
