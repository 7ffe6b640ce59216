// Synthetic models through the public API: the shape list, argument checking, cancellation (no file left), and a
// written model that loads with the file's declared type and runs.
#include <specula/specula.hpp>

#include "common/fixture_files.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const std::string kStoriesPath = SPECULA_SOURCE_DIR "/models/stories260K.gguf";

struct TempDir {
    fs::path path;
    TempDir() {
        path = fs::temp_directory_path() / ("specula-synthetic-api-" + std::to_string(::getpid()));
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string file(const std::string &name) const { return (path / name).string(); }
};

specula_status status_of(specula_status status, specula_error **err) {
    CHECK((status == SPECULA_OK) == (*err == nullptr));
    specula_error_destroy(*err);
    *err = nullptr;
    return status;
}

}  // namespace

TEST_CASE("synthetic API: the built-in shapes", "[synthetic]") {
    const std::vector<std::string> shapes = specula::synthetic_shapes();
    CHECK(shapes == std::vector<std::string>{"llama-3.2-1b", "llama-3.1-8b", "qwen2.5-0.5b", "qwen2.5-7b", "qwen3-0.6b", "qwen3-8b", "gemma2-2b",
                                             "gemma2-9b", "gemma3-1b", "gemma3-4b", "phi3-mini", "phi3.5-mini", "phi4-mini", "phi4",
                                             "starcoder2-3b", "starcoder2-7b", "starcoder2-15b", "tiny-llama", "tiny-qwen3", "tiny-qwen2", "tiny-gemma2",
                                             "tiny-gemma3", "tiny-phi3", "tiny-phi4", "tiny-starcoder2", "mixtral-8x7b", "qwen1.5-moe-a2.7b",
                                             "qwen3-30b-a3b", "qwen3-coder-30b-a3b", "tiny-mixtral", "tiny-qwen2moe", "tiny-qwen3moe"});
    CHECK(specula_synthetic_shape(-1) == nullptr);
    CHECK(specula_synthetic_shape(32) == nullptr);
}

TEST_CASE("synthetic API: bad arguments and cancellation leave no file", "[synthetic]") {
    TempDir dir;
    const std::string out = dir.file("x.gguf");
    specula_error *err = nullptr;
    const char *vocab = kStoriesPath.c_str();
    CHECK(status_of(specula_synthetic_model_write(nullptr, vocab, out.c_str(), nullptr, &err), &err) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(status_of(specula_synthetic_model_write("tiny-llama", nullptr, out.c_str(), nullptr, &err), &err) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(status_of(specula_synthetic_model_write("tiny-llama", vocab, nullptr, nullptr, &err), &err) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(status_of(specula_synthetic_model_write("llama-9", vocab, out.c_str(), nullptr, &err), &err) == SPECULA_ERR_INVALID_ARGUMENT);
    specula_synthetic_options o;
    specula_synthetic_options_init(&o);
    o.weight_type = "q3_k_s";
    CHECK(status_of(specula_synthetic_model_write("tiny-llama", vocab, out.c_str(), &o, &err), &err) == SPECULA_ERR_INVALID_ARGUMENT);
    specula_synthetic_options_init(&o);
    o.n_layer = -2;
    CHECK(status_of(specula_synthetic_model_write("tiny-llama", vocab, out.c_str(), &o, &err), &err) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(status_of(specula_synthetic_model_write("tiny-llama", dir.file("none.gguf").c_str(), out.c_str(), nullptr, &err), &err) ==
          SPECULA_ERR_IO);
    CHECK_FALSE(fs::exists(out));

    specula::SyntheticOptions cancel;
    cancel.progress = [](float p) { return p < 0.3f; };
    try {
        specula::write_synthetic_model("tiny-llama", kStoriesPath, out, cancel);
        FAIL("not cancelled");
    } catch (const specula::Error &e) {
        CHECK(e.status() == SPECULA_ERR_CANCELLED);
    }
    CHECK_FALSE(fs::exists(out));
    specula::SyntheticOptions throwing;
    throwing.progress = [](float p) -> bool {
        if (p > 0.5f) throw std::runtime_error("host error");
        return true;
    };
    CHECK_THROWS_AS(specula::write_synthetic_model("tiny-llama", kStoriesPath, out, throwing), std::runtime_error);
    CHECK_FALSE(fs::exists(out));
}

TEST_CASE("synthetic API: a written model loads with its declared type and generates", "[synthetic]") {
    TempDir dir;
    const std::string out = dir.file("tiny.gguf");
    specula::SyntheticOptions o;
    o.weight_type = "Q4_K_M";
    o.n_layer = 3;
    specula::write_synthetic_model("tiny-llama", kStoriesPath, out, o);
    const specula::Model model = specula::Model::load(out);
    CHECK(model.arch() == "llama");
    CHECK(model.weight_type() == "Q4_K_M");
    CHECK(model.n_layer() == 3);
    CHECK(model.n_embd() == 256);
    CHECK(model.n_vocab() == 512);
    CHECK(model.file_size() == fs::file_size(out));

    specula::Session session(model, specula::SessionOptions(), specula::SamplerOptions::greedy());
    session.append_text("Once upon a time");
    specula::GenerateOptions g(8);
    g.stop_at_eog = false;
    int tokens = 0;
    session.generate(g, [&](const specula_token_event &ev) {
        tokens += ev.token != SPECULA_TOKEN_NULL;
        return true;
    });
    CHECK(tokens == 8);
}
