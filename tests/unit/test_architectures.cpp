// Architectures beyond llama, built on the one model definition (graph/llama_graph.cpp, gemma_graph.cpp), on the CPU: speculative
// decoding stays lossless with every drafter (n-grams, a LongSpec draft made for the architecture, a draft model of
// the same family), greedy token for token. Every backend's logits and tree bits: tests/backends; parity with an
// independent reference: tools/train/tests/test_target_parity.py (qwen3, gemma2, gemma3), llama.cpp's outputs in
// tests/api/test_parity.cpp (gemma2, phi3).
#include "common/session_run.h"
#include "common/test_scale.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "session/session.h"
#include "speculative/longspec_draft_file.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

using namespace specula::internal;

namespace {

std::string scratch(const std::string &name) {
    return (std::filesystem::temp_directory_path() / ("specula-arch-" + std::to_string(::getpid()) + "-" + name)).string();
}

std::shared_ptr<const Model> synthetic(const std::string &shape, int32_t n_layer, uint64_t seed) {
    const std::string path = scratch(shape + "-" + std::to_string(n_layer) + ".gguf");
    SyntheticOptions opt;
    opt.type = SyntheticType::F32;
    opt.n_layer = n_layer;
    opt.seed = seed;
    write_synthetic_model(*find_synthetic_shape(shape), std::string(SPECULA_SOURCE_DIR) + "/models/stories260K.gguf", path, opt);
    LoadOptions lo;
    lo.use_mmap = false;
    auto model = Model::load(path, lo);
    std::filesystem::remove(path);
    return model;
}

// Greedy speculative output equals plain greedy output on a synthetic model of `shape`, with every drafter, in a
// session of n_ctx positions.
void check_lossless(const std::string &shape, int32_t n_ctx = 256) {
    const auto model = synthetic(shape, 0, 1);
    const auto small = synthetic(shape, 1, 2);  // the draft model: one layer of other random weights
    const std::string draft_path = scratch(shape + ".longspec.gguf");
    RandomDraftOptions ro;
    ro.window = 16;  // far below the context: the ring wraps
    ro.init_scale = 0.2f;
    write_random_longspec_draft(*model, draft_path, ro);
    const auto draft = LongSpecDraft::load(draft_path, model);
    std::filesystem::remove(draft_path);

    // A prompt that repeats itself, so that n-grams and drafts find continuations the target accepts.
    std::vector<int32_t> prompt;
    std::mt19937 rng(7);
    for (int i = 0; i < 12; ++i) prompt.push_back(3 + int32_t(rng() % 400));
    for (int r = 0; r < 3; ++r) prompt.insert(prompt.end(), prompt.begin(), prompt.begin() + 12);
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    SessionConfig sc;
    sc.n_ctx = n_ctx;
    sc.n_threads = 2;
    Session plain(model, sc, greedy);
    const int32_t n_gen = test_scale::count(96, 48);  // past every window of 16 either way
    const std::vector<int32_t> want = test_sessions::generate(plain, prompt, n_gen);

    SpeculativeConfig ngram, longspec, draft_model, merged;
    ngram.ngram = true;
    longspec.longspec = draft;
    draft_model.draft_model = small;
    merged.longspec = draft;
    merged.ngram = true;
    const std::pair<const char *, SpeculativeConfig> drafters[] = {
        {"n-grams", ngram}, {"LongSpec", longspec}, {"draft model", draft_model}, {"LongSpec + n-grams", merged}};
    for (const auto &[name, spec] : drafters) {
        // Under the sanitizers the merged drafter stands for n-grams and LongSpec alone (it runs both drafters' code;
        // the plain build checks each): the nine architectures' five sessions each were ~400 s of that pass.
        if (test_scale::kSanitized && (spec.ngram != (spec.longspec != nullptr))) continue;
        INFO(name);
        Session s(model, sc, greedy);
        s.set_speculative(spec);
        CHECK(test_sessions::generate(s, prompt, n_gen) == want);
        CHECK(s.speculative_stats().rounds > 0);
        CHECK(s.speculative_stats().drafted > 0);
    }
}

}  // namespace

TEST_CASE("qwen3: greedy speculative decoding equals plain greedy with n-grams, a LongSpec draft and a qwen3 draft model",
          "[arch][qwen3][lossless]") {
    check_lossless("tiny-qwen3");
}

// Gemma 3's sliding layers (a window of 16 in tiny-gemma3) see a different set of keys at every position: 144
// positions cross it many times, and tree nodes at depth d see the window that decoding them would. The LongSpec
// draft cross-attends the target's last layer (a sliding one in tiny-gemma3, as in Gemma 3 1B, 4B and 27B, whose
// layers 25, 33 and 61 are local; 12B's layer 47 is global), reading all of its cache: the draft's context is not
// windowed, and only its guesses depend on it.
TEST_CASE("gemma3: greedy speculative decoding equals plain greedy with n-grams, a LongSpec draft and a gemma3 draft model",
          "[arch][gemma3][lossless]") {
    check_lossless("tiny-gemma3");
}

// Gemma 2: local (a window of 16 in tiny-gemma2) and global layers alternate, and scores and logits are soft-capped:
// a tree node's capped scores and logits are decoding's bits too.
TEST_CASE("gemma2: greedy speculative decoding equals plain greedy with n-grams, a LongSpec draft and a gemma2 draft model",
          "[arch][gemma2][lossless]") {
    check_lossless("tiny-gemma2");
}

// Phi-3: every layer attends to a window (16 keys in tiny-phi3), Q/K/V and gate/up are views of fused matrices, and a
// session of 1024 positions takes LongRoPE's long factors and its attention factor (past tiny-phi3's 512), which
// the LongSpec draft's queries take too (they cross-attend the target's keys).
TEST_CASE("phi3: greedy speculative decoding equals plain greedy with n-grams, a LongSpec draft and a phi3 draft model",
          "[arch][phi3][lossless]") {
    check_lossless("tiny-phi3", 1024);
    check_lossless("tiny-phi3", 256);
}

// Phi-4-mini's variations: RoPE on 48 of each head's 64 dimensions, a tied head, no window.
TEST_CASE("phi4-mini's shape: greedy speculative decoding equals plain greedy with every drafter (partial rotation, tied head)",
          "[arch][phi3][lossless]") {
    check_lossless("tiny-phi4", 1024);
}

// StarCoder2: LayerNorms with biases, biases on every projection and a GELU MLP (graph/starcoder2_graph.cpp).
TEST_CASE("starcoder2: greedy speculative decoding equals plain greedy with n-grams, a LongSpec draft and a starcoder2 draft model",
          "[arch][starcoder2][lossless]") {
    check_lossless("tiny-starcoder2");
}

// Mixture of experts (graph/llama_graph.cpp, the route and expert operations of graph.h): Mixtral (llama with 8
// experts, 2 a token), qwen2moe (6 experts, 2 a token, a shared expert behind a sigmoid gate) and qwen3moe (16
// experts, 4 a token, per-head norms). A tree's rows are grouped by expert when verified: a node's logits must stay
// those of decoding its path, so speculation stays lossless. The LongSpec draft's FFN is dense (its own weights,
// the target's n_ff); it cross-attends the target's last layer, whose attention is as a dense model's.
TEST_CASE("mixtral: greedy speculative decoding equals plain greedy with n-grams, a LongSpec draft and a mixtral draft model",
          "[arch][moe][lossless]") {
    check_lossless("tiny-mixtral");
}

TEST_CASE("qwen2moe: greedy speculative decoding equals plain greedy with n-grams, a LongSpec draft and a qwen2moe draft model",
          "[arch][moe][lossless]") {
    check_lossless("tiny-qwen2moe");
}

TEST_CASE("qwen3moe: greedy speculative decoding equals plain greedy with n-grams, a LongSpec draft and a qwen3moe draft model",
          "[arch][moe][lossless]") {
    check_lossless("tiny-qwen3moe");
}
