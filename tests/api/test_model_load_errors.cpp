// specula_model_load failures through the public C API: every failure returns its documented status, an error
// object with a non-empty message naming the culprit, and leaves *out NULL.
//
// The "valid GGUF, wrong model" files are the bundled stories260K.gguf with one same-length patch each (so the
// GGUF layout stays valid and only the model-level check can object). The GGUF-level catalogue of hostile files
// is tests/unit/test_gguf_malformed.cpp.
#include <specula/specula.h>

#include <catch2/catch.hpp>

#include "common/gguf_bytes.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include <unistd.h>

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

using test_gguf::Bytes;

const std::string kModelPath = SPECULA_SOURCE_DIR "/models/stories260K.gguf";

// A private temp folder, removed with everything in it when the test case ends.
struct TempDir {
    fs::path path;
    TempDir() {
        path = fs::temp_directory_path() / ("specula-load-errors-" + std::to_string(::getpid()));
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string write(const std::string &name, const Bytes &bytes) const {
        const fs::path p = path / name;
        std::ofstream out(p, std::ios::binary);
        out.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
        REQUIRE(out.good());
        return p.string();
    }
};

Bytes read_model() { return test_gguf::read_bytes(kModelPath); }
using test_gguf::after_string;
using test_gguf::get_u64;
using test_gguf::put_u64;
using test_gguf::rename_string;

// Loads path (with and without mmap) and checks status, message and *out. fragment: expected in the message.
void expect_load_error(const char *path, specula_status status, const std::string &fragment) {
    for (int32_t use_mmap : {1, 0}) {
        INFO("path " << (path ? path : "(NULL)") << ", use_mmap " << use_mmap);
        specula_model_options opts;
        specula_model_options_init(&opts);
        opts.use_mmap = use_mmap;
        specula_model *model = nullptr;
        specula_error *err = nullptr;
        const specula_status got = specula_model_load(path, &opts, &model, &err);
        CHECK(got == status);
        CHECK(model == nullptr);
        REQUIRE(err != nullptr);
        CHECK(specula_error_status(err) == status);
        const std::string message = specula_error_message(err);
        INFO("message: " << message);
        CHECK_FALSE(message.empty());
        CHECK_THAT(message, Contains(fragment));
        specula_error_destroy(err);
        specula_model_destroy(model);  // NULL: a no-op, and harmless if the check above failed

        // Without an error object the status is the same.
        model = nullptr;
        CHECK(specula_model_load(path, &opts, &model, nullptr) == status);
        CHECK(model == nullptr);
        specula_model_destroy(model);
    }
}

}  // namespace

TEST_CASE("model load errors: the unpatched copy loads", "[api][load]") {
    TempDir dir;
    const std::string path = dir.write("ok.gguf", read_model());
    specula_model *model = nullptr;
    specula_error *err = nullptr;
    REQUIRE(specula_model_load(path.c_str(), nullptr, &model, &err) == SPECULA_OK);
    CHECK(err == nullptr);
    REQUIRE(model != nullptr);
    CHECK(std::string(specula_model_arch(model)) == "llama");
    specula_model_destroy(model);
}

TEST_CASE("model load errors: unsupported architecture", "[api][load]") {
    TempDir dir;
    Bytes b = read_model();
    // The value of general.architecture: type (u32), length (u64), "llama" ("llama" also names the tokenizer).
    const size_t value = after_string(b, "general.architecture") + 4;
    REQUIRE(get_u64(b, value) == 5);
    REQUIRE(std::memcmp(b.data() + value + 8, "llama", 5) == 0);
    std::memcpy(b.data() + value + 8, "gpt-j", 5);
    expect_load_error(dir.write("gptj.gguf", b).c_str(), SPECULA_ERR_UNSUPPORTED, "gpt-j");
}

TEST_CASE("model load errors: required metadata missing", "[api][load]") {
    TempDir dir;
    Bytes b = read_model();
    rename_string(b, "llama.block_count", "llama.block_coXnt");
    expect_load_error(dir.write("no-block-count.gguf", b).c_str(), SPECULA_ERR_FORMAT, "llama.block_count");
}

TEST_CASE("model load errors: tensor missing", "[api][load]") {
    TempDir dir;
    Bytes b = read_model();
    rename_string(b, "blk.4.ffn_up.weight", "blk.4.ffn_up.weighX");
    expect_load_error(dir.write("no-tensor.gguf", b).c_str(), SPECULA_ERR_FORMAT, "'blk.4.ffn_up.weight' is missing");
}

TEST_CASE("model load errors: tensor of the wrong shape", "[api][load]") {
    TempDir dir;
    Bytes b = read_model();
    // blk.0.ffn_gate.weight is [n_embd 64, n_ff 172]; swapping the dims keeps the byte size, so the GGUF stays valid.
    const size_t dims = after_string(b, "blk.0.ffn_gate.weight") + 4;  // after n_dims
    REQUIRE(get_u64(b, dims) == 64);
    REQUIRE(get_u64(b, dims + 8) == 172);
    put_u64(b, dims, 172);
    put_u64(b, dims + 8, 64);
    expect_load_error(dir.write("bad-shape.gguf", b).c_str(), SPECULA_ERR_FORMAT, "blk.0.ffn_gate.weight");
}

TEST_CASE("model load errors: not a valid GGUF", "[api][load]") {
    TempDir dir;
    const Bytes b = read_model();
    expect_load_error(dir.write("truncated.gguf", Bytes(b.begin(), b.begin() + ptrdiff_t(b.size() / 2))).c_str(),
                      SPECULA_ERR_FORMAT, "past the end");
    const std::string text = "this is not a model\n";
    expect_load_error(dir.write("text.gguf", Bytes(text.begin(), text.end())).c_str(), SPECULA_ERR_FORMAT, "bad magic");
    expect_load_error(dir.write("empty.gguf", Bytes()).c_str(), SPECULA_ERR_FORMAT, "truncated");
}

TEST_CASE("model load errors: missing file, directory", "[api][load]") {
    TempDir dir;
    const std::string missing = (dir.path / "does-not-exist.gguf").string();
    expect_load_error(missing.c_str(), SPECULA_ERR_IO, "does-not-exist.gguf");
    expect_load_error(dir.path.string().c_str(), SPECULA_ERR_IO, "not a regular file");
}

TEST_CASE("model load errors: NULL arguments", "[api][load]") {
    expect_load_error(nullptr, SPECULA_ERR_INVALID_ARGUMENT, "path");

    specula_error *err = nullptr;
    CHECK(specula_model_load(kModelPath.c_str(), nullptr, nullptr, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    REQUIRE(err != nullptr);
    CHECK(specula_error_status(err) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK_THAT(std::string(specula_error_message(err)), Contains("out"));
    specula_error_destroy(err);
    CHECK(specula_model_load(nullptr, nullptr, nullptr, nullptr) == SPECULA_ERR_INVALID_ARGUMENT);
}
