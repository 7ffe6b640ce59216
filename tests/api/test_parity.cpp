// Parity with llama.cpp: for every reference in ../shared/fixtures/reference/ (and, for the architectures whose
// models the fixtures lack, tests/api/data/llama_cpp/: references of synthetic models that the test writes again from
// their shape, type and seed, so a fresh clone has them too), feed prompt_ids, then at each step
// take the next token greedily through the public C API and compare with llama.cpp's step: the greedy token must be
// the same and each of llama.cpp's five largest logits must match ours within a per-type tolerance:
//   F32 / F16 / BF16 weights:   |ours - llama.cpp| <= 1e-3 * max(1, |llama.cpp|)   (float rounding only)
//   quantized weights:          |ours - llama.cpp| <= 1e-2 * max(1, |llama.cpp|)   (both engines quantize the
//                               activations, but sum in different orders)
// The context is teacher-forced with llama.cpp's token, so every step is compared on the same prefix. The one
// excuse for a different greedy token is a near-tie that the tolerance cannot decide: llama.cpp's own top-2 logits
// closer together than the tolerance allows. Such steps are counted and reported.
//
// Known-bad references are listed in kKnownBad with the reason and evidence; they are still run and their
// deviation reported, but not asserted (see docs/parity.md).
#include <catch2/catch.hpp>

#include "common/skip.h"
#include "common/test_scale.h"
#include <nlohmann/json.hpp>
#include <specula/specula.h>
#include <specula/specula_experimental.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

namespace fs = std::filesystem;

namespace {

struct Reference {
    std::string path, model;
    // An in-repo reference's model: `specula synth --shape synth_shape --type synth_type --seed synth_seed --layers
    // synth_layers` with the tokenizer of models/stories260K.gguf (empty: a fixture model).
    std::string synth_shape, synth_type;
    uint64_t synth_seed = 1;
    int32_t synth_layers = 0;
    int32_t n_ctx = 0;  // the session's context where the reference depends on it (phi3's LongRoPE), else 0
    std::vector<int32_t> prompt;
    std::vector<int32_t> tokens;
    std::vector<std::vector<std::pair<int32_t, float>>> top;
};

Reference read_reference(const fs::path &path) {
    std::ifstream in(path);
    const nlohmann::json j = nlohmann::json::parse(in);
    Reference r;
    r.path = path.string();
    r.model = j.at("model").get<std::string>();
    r.prompt = j.at("prompt_ids").get<std::vector<int32_t>>();
    r.n_ctx = j.value("n_ctx", 0);
    if (j.contains("synthetic")) {
        const nlohmann::json &sy = j.at("synthetic");
        r.synth_shape = sy.at("shape").get<std::string>();
        r.synth_type = sy.at("type").get<std::string>();
        r.synth_seed = sy.at("seed").get<uint64_t>();
        r.synth_layers = sy.value("n_layer", 0);
    }
    for (const auto &step : j.at("steps")) {
        r.tokens.push_back(step.at("token").get<int32_t>());
        std::vector<std::pair<int32_t, float>> top;
        for (const auto &e : step.at("top")) top.emplace_back(e.at(0).get<int32_t>(), e.at(1).get<float>());
        r.top.push_back(top);
    }
    return r;
}

// References produced by a llama.cpp build with a bug of its own; reproducing them would mean copying the bug.
const std::map<std::string, std::string> kKnownBad = {
    {"synth-llama-q4_0/b.json",
     "llama.cpp 2025-02 AMX Q4_0 kernel (ggml-cpu/amx/mmq.cpp, tinygemm_kernel_amx) unpacks the wrong weight tile for "
     "full 32-row activation blocks (fixed upstream later; ggml-org/llama.cpp PR #16315): this 43-token prompt hits "
     "it, the 21-token prompt of a.json does not"},
};

fs::path model_path(const std::string &name) {
    const fs::path models = fs::path(SPECULA_FIXTURES_DIR) / "models";
    if (name == "code-7m.gguf") return models / "code-7m" / "model.gguf";
    return models / name;
}

double tolerance_for(const std::string &weight_type) {
    return (weight_type == "F32" || weight_type == "F16" || weight_type == "BF16") ? 1e-3 : 1e-2;
}

// Teacher-forced comparison of our greedy steps with the reference's, on the model at model_file (`rel` names the
// reference in messages and in kKnownBad). A model that routes tokens to experts, with a cache other than the
// reference's F32: a rounded key or value moves a router's logits by ~1e-3, enough to swap near-tied experts, after
// which the logits are another expert's (measured and reported, not asserted).
void compare_with_reference(const Reference &ref, const std::string &model_file, const std::string &rel, int32_t kv_type) {
    const char *kv_name = kv_type == SPECULA_KV_F32 ? "F32" : kv_type == SPECULA_KV_F16 ? "F16" : "Q8_0";
    specula_model *model = nullptr;
    specula_error *err = nullptr;
    const specula_status load = specula_model_load(model_file.c_str(), nullptr, &model, &err);
    if (load == SPECULA_ERR_UNSUPPORTED) {
        const std::string message = specula_error_message(err);
        specula_error_destroy(err);
        CHECK_THAT(message, Catch::Contains("type"));
        WARN("SKIPPED " << rel << ": " << message);
        return;
    }
    INFO(specula_error_message(err));
    REQUIRE(load == SPECULA_OK);
    bool experts = false;  // the file has <arch>.expert_count
    for (int32_t i = 0; i < specula_model_meta_count(model); ++i) {
        const std::string key = specula_model_meta_key(model, i);
        experts = experts || (key.size() > 13 && key.compare(key.size() - 13, 13, ".expert_count") == 0);
    }
    const bool route_flips = experts && kv_type != SPECULA_KV_F32;
    const double weight_tol = tolerance_for(specula_model_weight_type(model));
    const double tol = kv_type == SPECULA_KV_F32 ? weight_tol : kv_type == SPECULA_KV_F16 ? 3.0 * weight_tol : 0.1;

    specula_session_options so;
    specula_session_options_init(&so);
    so.n_ctx = ref.n_ctx > 0 ? ref.n_ctx : int32_t(ref.prompt.size() + ref.tokens.size() + 4);
    so.n_threads = 2;
    // The CPU reference's parity with llama.cpp's CPU backend; the CUDA backend is held to the CPU's logits
    // in tests/cuda (its F16 K/V cache puts it further off than these tolerances).
    so.backend = SPECULA_BACKEND_CPU;
    so.kv_type = kv_type;
    specula_sampler_options sampler;
    specula_sampler_options_init(&sampler);
    sampler.temperature = 0.0f;
    specula_session *session = nullptr;
    REQUIRE(specula_session_create(model, &so, &sampler, &session, nullptr) == SPECULA_OK);
    REQUIRE(specula_session_append_tokens(session, ref.prompt.data(), ref.prompt.size(), nullptr) == SPECULA_OK);

    specula_generate_options go;
    specula_generate_options_init(&go);
    go.max_tokens = -1;
    go.stop_at_eog = 0;  // llama.cpp's reference runs keep decoding through EOS
    const bool known_bad = kKnownBad.count(rel) != 0 || route_flips;
    double worst = 0.0;
    int near_ties = 0, token_mismatches = 0;
    for (size_t i = 0; i < ref.tokens.size(); ++i) {
        specula_token_event ev{};
        ev.struct_size = sizeof ev;
        REQUIRE(specula_session_next(session, &go, &ev, nullptr) == SPECULA_OK);
        const float *logits = specula_session_logits(session);
        REQUIRE(logits != nullptr);
        INFO("step " << i);
        double step_worst = 0.0;
        for (const auto &[id, value] : ref.top[i]) {
            const double diff = std::fabs(double(logits[id]) - double(value));
            step_worst = std::max(step_worst, diff / std::max(1.0, std::fabs(double(value))));
            INFO("token " << id << ": ours " << logits[id] << ", llama.cpp " << value);
            if (!known_bad) REQUIRE(diff <= tol * std::max(1.0, std::fabs(double(value))));
        }
        worst = std::max(worst, step_worst);
        if (ev.token != ref.tokens[i]) {
            ++token_mismatches;
            const double margin = double(ref.top[i][0].second) - double(ref.top[i][1].second);
            const bool near_tie = margin <= 2.0 * tol * std::max(1.0, std::fabs(double(ref.top[i][0].second)));
            INFO("ours " << ev.token << ", llama.cpp " << ref.tokens[i] << ", llama.cpp's top-2 margin " << margin);
            if (!known_bad) REQUIRE(near_tie);
            near_ties += near_tie ? 1 : 0;
        }
        // Teacher forcing: continue from llama.cpp's token.
        const int32_t n = specula_session_n_tokens(session);
        REQUIRE(specula_session_rewind(session, n - 1, nullptr) == SPECULA_OK);
        REQUIRE(specula_session_append_tokens(session, &ref.tokens[i], 1, nullptr) == SPECULA_OK);
    }
    if (route_flips) {
        WARN(rel << " with a " << kv_name << " cache (experts may route apart: not asserted): " << ref.tokens.size() - size_t(token_mismatches)
                  << "/" << ref.tokens.size() << " greedy tokens equal, worst top-5 logit deviation " << worst);
    } else if (known_bad) {
        WARN("KNOWN-BAD REFERENCE " << rel << " (not asserted): " << kKnownBad.at(rel) << ". Measured: " << token_mismatches
                                    << " of " << ref.tokens.size() << " greedy tokens differ, worst top-5 deviation " << worst);
    } else {
        WARN(rel << ": " << ref.tokens.size() - size_t(token_mismatches) << "/" << ref.tokens.size() << " greedy tokens equal ("
                  << near_ties << " near-ties), worst top-5 logit deviation " << worst << " (relative, tolerance " << tol << ", "
                  << specula_model_weight_type(model) << " weights, " << kv_name << " KV cache)");
    }
    specula_session_destroy(session);
    specula_model_destroy(model);
}

}  // namespace

TEST_CASE("greedy tokens and top-5 logits match llama.cpp on every reference", "[parity][model]") {
    const fs::path dir = fs::path(SPECULA_FIXTURES_DIR) / "reference";
    if (!fs::exists(dir)) {
        SPECULA_SKIP(dir << " not found (../shared/fixtures is needed for parity tests)");
        return;
    }
    std::vector<fs::path> files;
    for (const auto &e : fs::recursive_directory_iterator(dir))
        if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    REQUIRE(files.size() >= 10);
    // llama.cpp's references were made with an F32 KV cache: ours in F32 is held to the weight type's tolerance.
    // F16 and Q8_0 caches round every key and value once more: F16 is held to three times it, Q8_0 to 0.1 relative
    // (measured worst: 1.7e-3 and 9.2e-2, both on stories260K, whose 8-value heads share one Q8_0 block by four).
    // (Under the sanitizers the F32 cache alone: the others change the cache's rounding, not its code's memory use,
    // and the three took 84 s of that pass.)
    const std::vector<int32_t> all_kv = {SPECULA_KV_F32, SPECULA_KV_F16, SPECULA_KV_Q8_0}, f32_kv = {SPECULA_KV_F32};
    const int32_t kv_type = GENERATE_COPY(from_range(test_scale::kSanitized ? f32_kv : all_kv));

    for (const fs::path &file : files) {
        const Reference ref = read_reference(file);
        const std::string rel = fs::relative(file, dir).string();
        DYNAMIC_SECTION(rel) { compare_with_reference(ref, model_path(ref.model).string(), rel, kv_type); }
    }
}

// The architectures the fixtures have no model of (gemma2, phi3, starcoder2, mixtral, qwen2moe), and llama and qwen2
// again so that a fresh clone without the fixtures checks them too, against llama.cpp 2025-02-20's outputs on synthetic
// models that the test writes again, byte for byte, from the reference's shape, type, seed and layer count.
// llama, qwen2: tiny-llama (GQA, llama3 RoPE scaling, an untied head) and tiny-qwen2 (Q/K/V biases, NEOX RoPE, a tied
// head), F32/F16/Q8_0/Q4_0/Q4_K_M; without qwen2's key bias its references fail at step 0.
// gemma2: tiny-gemma2 (256 wide, a window of 16, scores capped at 0.15 and logits at 0.5, so that both caps bend
// random weights' values) with 26 layers, the count llama.cpp needs to take a gemma2 file for a 2B (it refuses
// other counts); prompts of 42 and 11 tokens, 24 and 40 steps: both cross the window.
// phi3: tiny-phi3 (a window of 16 on every layer, fused Q/K/V and gate/up, LongRoPE past 512 positions) in sessions
// of the reference's n_ctx, 512 (short factors) or 1024 (long ones); docs/parity.md says how they were made.
// starcoder2: tiny-starcoder2 (3 layers: LayerNorms and biases, a GELU MLP).
// Mixture of experts: tiny-mixtral (llama with 8 experts, 2 a token, weights renormalized) and tiny-qwen2moe (6
// experts, 2 a token, not renormalized, a shared expert behind a sigmoid gate); with an F16 cache their values are
// reported, not asserted (compare_with_reference).
TEST_CASE("greedy tokens and top-5 logits match llama.cpp on the in-repo references of synthetic models", "[parity][model]") {
    const fs::path dir = fs::path(SPECULA_SOURCE_DIR) / "tests/api/data/llama_cpp";
    std::vector<fs::path> files;
    for (const auto &e : fs::directory_iterator(dir))
        if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    REQUIRE(files.size() >= 5);
    const std::vector<int32_t> all_kv = {SPECULA_KV_F32, SPECULA_KV_F16}, f32_kv = {SPECULA_KV_F32};
    const int32_t kv_type = GENERATE_COPY(from_range(test_scale::kSanitized ? f32_kv : all_kv));  // as above
    for (const fs::path &file : files) {
        const Reference ref = read_reference(file);
        REQUIRE(!ref.synth_shape.empty());
        const std::string rel = file.filename().string();
        DYNAMIC_SECTION(rel) {
            const fs::path model_file = fs::temp_directory_path() / ("specula-parity-" + std::to_string(::getpid()) + "-" + rel + ".gguf");
            specula_synthetic_options so;
            specula_synthetic_options_init(&so);
            so.weight_type = ref.synth_type.c_str();
            so.seed = ref.synth_seed;
            so.n_layer = ref.synth_layers;
            const std::string vocab = (fs::path(SPECULA_SOURCE_DIR) / "models/stories260K.gguf").string();
            REQUIRE(specula_synthetic_model_write(ref.synth_shape.c_str(), vocab.c_str(), model_file.c_str(), &so, nullptr) == SPECULA_OK);
            compare_with_reference(ref, model_file.string(), rel, kv_type);
            fs::remove(model_file);
        }
    }
}
