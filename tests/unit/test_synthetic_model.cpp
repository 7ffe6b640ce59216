// Synthetic (random-weight) models of real shapes: the built-in shapes against the published parameter counts,
// llama.cpp's Q4_K_M / Q4_0 tensor-type mix against the type counts llama.cpp reports for the real files, the
// llama3 rope_freqs, and whole files: written in every type, loaded by Model::load and run by the CPU runner
// with finite logits; determinism, cancellation, and the Qwen2.5 vocabulary padding (with the fixture vocab).
#include "backends/cpu/cpu_runner.h"
#include "common/fixture_files.h"
#include "common/error_status.h"
#include "core/error.h"
#include "model/model.h"
#include "model/rope_scaling.h"
#include "model/synthetic_model.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>

using namespace specula::internal;
using test_fixtures::fixtures_dir;
using test_fixtures::have_fixture;
namespace fs = std::filesystem;

namespace {

const std::string kStoriesPath = SPECULA_SOURCE_DIR "/models/stories260K.gguf";  // a 512-token SentencePiece vocabulary

struct TempDir {
    fs::path path;
    TempDir() {
        static std::atomic<int> counter{0};
        path = fs::temp_directory_path() /
               ("specula-synthetic-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + std::to_string(std::random_device{}()));
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string file(const std::string &name) const { return (path / name).string(); }
};

const SyntheticShape &shape(const std::string &name) {
    const SyntheticShape *s = find_synthetic_shape(name);
    REQUIRE(s != nullptr);
    return *s;
}

uint64_t n_params(const std::vector<SyntheticTensor> &tensors) {
    uint64_t n = 0;
    for (const SyntheticTensor &t : tensors) {
        uint64_t e = 1;
        for (int64_t d : t.dims) e *= uint64_t(d);
        n += e;
    }
    return n;
}

std::map<std::string, int> type_counts(const std::vector<SyntheticTensor> &tensors) {
    std::map<std::string, int> counts;
    for (const SyntheticTensor &t : tensors) ++counts[tensor_type_name(t.type)];
    return counts;
}

// Evaluates a few tokens (a batch, then single steps) and checks every logit is finite and they are not all equal.
void check_runs(const std::shared_ptr<const Model> &model) {
    const int32_t n_vocab = model->hparams().n_vocab;
    CpuRunner runner(model, 64, 2);
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    const std::vector<int32_t> prompt = {1, 5, n_vocab / 2, n_vocab - 1};
    runner.eval(prompt.data(), int32_t(prompt.size()), 0, logits.data(), false);
    for (int32_t step = 0; step < 2; ++step) {
        bool finite = true;
        float lo = logits[0], hi = logits[0];
        for (float v : logits) {
            finite &= std::isfinite(v);
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
        CHECK(finite);
        CHECK(hi > lo);
        const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        runner.eval(&next, 1, int32_t(prompt.size()) + step, logits.data(), false);
    }
}

}  // namespace

TEST_CASE("synthetic shapes have the published parameter counts", "[synthetic]") {
    // Hugging Face's parameter counts of the real checkpoints (rope_freqs, which they do not have, excluded).
    auto params = [](const std::string &name, int32_t n_vocab) {
        const SyntheticShape &s = shape(name);
        uint64_t n = n_params(synthetic_tensors(s, s.n_layer, n_vocab, SyntheticType::F16));
        if (s.llama3_factor > 0) n -= uint64_t(s.head_dim() / 2);
        return n;
    };
    CHECK(params("llama-3.2-1b", 128256) == 1235814400ull);
    CHECK(params("llama-3.1-8b", 128256) == 8030261248ull);
    CHECK(params("qwen2.5-0.5b", 151936) == 494032768ull);
    CHECK(params("qwen2.5-7b", 152064) == 7615616512ull);
    CHECK(params("qwen3-8b", 151936) == 8190735360ull);  // per-head q/k norms, heads of 128 over a width of 4096
    // Mixtures of experts: every expert counted (the 46.7B, 14.3B and 30.5B of their model cards).
    CHECK(params("mixtral-8x7b", 32000) == 46702792704ull);
    CHECK(params("qwen1.5-moe-a2.7b", 151936) == 14315784192ull);
    CHECK(params("qwen3-30b-a3b", 151936) == 30532122624ull);
    CHECK(shape("llama-3.2-1b").head_dim() == 64);
    CHECK(shape("llama-3.1-8b").head_dim() == 128);
    CHECK(shape("qwen2.5-0.5b").head_dim() == 64);
    CHECK(shape("qwen2.5-7b").head_dim() == 128);
    CHECK(shape("qwen3-0.6b").head_dim() == 128);  // wider than n_embd / n_head = 64
    CHECK(find_synthetic_shape("tiny-llama") != nullptr);
    CHECK(find_synthetic_shape("llama-4") == nullptr);
}

TEST_CASE("synthetic Q4_K_M and Q4_0 follow llama.cpp's tensor-type mix", "[synthetic]") {
    auto counts = [](const std::string &name, SyntheticType type) {
        const SyntheticShape &s = shape(name);
        return type_counts(synthetic_tensors(s, s.n_layer, s.n_vocab, type));
    };
    // What llama.cpp's loader prints ("type q4_K: 193 tensors") for llama-quantize's Q4_K_M of the real models.
    using Counts = std::map<std::string, int>;
    CHECK(counts("llama-3.1-8b", SyntheticType::Q4_K_M) == Counts{{"F32", 66}, {"Q4_K", 193}, {"Q6_K", 33}});
    CHECK(counts("llama-3.2-1b", SyntheticType::Q4_K_M) == Counts{{"F32", 34}, {"Q4_K", 96}, {"Q6_K", 17}});
    // Qwen2.5-0.5B: llama.cpp has 132 Q5_0 (Q4_K rows of 896) + 13 Q8_0 (Q6_K rows of 896, the tied embedding);
    // without Q5_0 those are all Q8_0 here. ffn_down (rows of 4864) keeps the K-quants.
    CHECK(counts("qwen2.5-0.5b", SyntheticType::Q4_K_M) == Counts{{"F32", 121}, {"Q8_0", 145}, {"Q4_K", 12}, {"Q6_K", 12}});
    CHECK(counts("llama-3.1-8b", SyntheticType::Q4_0) == Counts{{"F32", 66}, {"Q4_0", 225}, {"Q6_K", 1}});
    CHECK(counts("qwen2.5-0.5b", SyntheticType::Q4_0) == Counts{{"F32", 121}, {"Q4_0", 168}, {"Q8_0", 1}});
    CHECK(counts("llama-3.1-8b", SyntheticType::Q8_0) == Counts{{"F32", 66}, {"Q8_0", 226}});
    CHECK(counts("llama-3.1-8b", SyntheticType::F16) == Counts{{"F32", 66}, {"F16", 226}});

    // Which layers get more bits: use_more_bits(i, 16) = i < 2 || i >= 14 || (i - 2) % 3 == 2.
    const auto q4_k = uint32_t(TensorType::Q4_K), q6_k = uint32_t(TensorType::Q6_K);
    for (int32_t i = 0; i < 16; ++i) {
        const bool more = i < 2 || i >= 14 || i == 4 || i == 7 || i == 10 || i == 13;
        const std::string p = "blk." + std::to_string(i) + ".";
        CHECK(synthetic_weight_type(SyntheticType::Q4_K_M, p + "attn_v.weight", 2048, i, 16, true) == (more ? q6_k : q4_k));
        CHECK(synthetic_weight_type(SyntheticType::Q4_K_M, p + "ffn_down.weight", 8192, i, 16, true) == (more ? q6_k : q4_k));
        CHECK(synthetic_weight_type(SyntheticType::Q4_K_M, p + "attn_k.weight", 2048, i, 16, true) == q4_k);
    }
    // The LM head: Q6_K; the tied embedding is the LM head; an untied embedding keeps the base type.
    CHECK(synthetic_weight_type(SyntheticType::Q4_K_M, "token_embd.weight", 2048, -1, 16, true) == q6_k);
    CHECK(synthetic_weight_type(SyntheticType::Q4_K_M, "token_embd.weight", 2048, -1, 16, false) == q4_k);
    CHECK(synthetic_weight_type(SyntheticType::Q4_K_M, "output.weight", 2048, -1, 16, false) == q6_k);
    CHECK(synthetic_weight_type(SyntheticType::Q4_0, "output.weight", 2048, -1, 16, false) == q6_k);
    CHECK(synthetic_weight_type(SyntheticType::Q8_0, "output.weight", 2048, -1, 16, false) == uint32_t(TensorType::Q8_0));
    // Mixtures of experts (checked tensor by tensor against llama.cpp 2025-02-20's llama_model_quantize on 16-layer
    // tiny-mixtral and tiny-qwen2moe in Q4_0, Q8_0 and Q4_K_M: the same type for all 163 and 275 tensors, in the same
    // order): routers stay F32; 8-expert models get Q8_0 attn_k and attn_v in every mix and a Q5_K attn_output in
    // Q4_K_M; stacked ffn_down experts (and qwen2moe's shared one) follow ffn_down's layer rule.
    const auto q8_0 = uint32_t(TensorType::Q8_0), q5_k = uint32_t(TensorType::Q5_K);
    CHECK(synthetic_weight_type(SyntheticType::Q4_K_M, "blk.3.ffn_gate_inp.weight", 4096, 3, 32, false, 8) == uint32_t(TensorType::F32));
    CHECK(synthetic_weight_type(SyntheticType::F16, "blk.3.ffn_gate_inp.weight", 4096, 3, 32, false, 8) == uint32_t(TensorType::F32));
    CHECK(synthetic_weight_type(SyntheticType::Q4_K_M, "blk.3.attn_v.weight", 4096, 3, 32, false, 8) == q8_0);
    CHECK(synthetic_weight_type(SyntheticType::Q4_0, "blk.3.attn_k.weight", 4096, 3, 32, false, 8) == q8_0);
    CHECK(synthetic_weight_type(SyntheticType::Q4_K_M, "blk.3.attn_output.weight", 4096, 3, 32, false, 8) == q5_k);
    CHECK(synthetic_weight_type(SyntheticType::Q4_K_M, "blk.3.attn_output.weight", 2048, 3, 24, false, 60) == q4_k);
    CHECK(synthetic_weight_type(SyntheticType::Q4_K_M, "blk.3.attn_k.weight", 2048, 3, 24, false, 60) == q4_k);
    CHECK(synthetic_weight_type(SyntheticType::Q4_K_M, "blk.0.ffn_down_exps.weight", 1408, 0, 24, false, 60) == uint32_t(TensorType::Q8_0));
    CHECK(synthetic_weight_type(SyntheticType::Q4_K_M, "blk.0.ffn_down_exps.weight", 14336, 0, 32, false, 8) == q6_k);
    CHECK(synthetic_weight_type(SyntheticType::Q4_K_M, "blk.5.ffn_down_exps.weight", 14336, 5, 32, false, 8) == q4_k);
    CHECK(synthetic_weight_type(SyntheticType::Q4_K_M, "blk.0.ffn_down_shexp.weight", 5632, 0, 24, false, 60) == q6_k);
    // Rows no block divides: llama.cpp refuses, and so do we.
    CHECK_THROWS_AS(synthetic_weight_type(SyntheticType::Q8_0, "blk.0.attn_q.weight", 100, 0, 1, false), Error);
}

TEST_CASE("synthetic llama3 rope_freqs follow the converter's formula", "[synthetic]") {
    for (const std::string name : {"llama-3.2-1b", "llama-3.1-8b"}) {
        const SyntheticShape &s = shape(name);
        const std::vector<float> f = llama3_rope_freqs(s);
        REQUIRE(f.size() == size_t(s.head_dim() / 2));
        // The loader's own (double precision) computation of the same formula agrees to float rounding.
        HParams hp;
        hp.rope_dim = s.head_dim();
        hp.rope_freq_base = s.rope_theta;
        hp.rope_scaling = RopeScaling::Llama3;
        hp.rope_scaling_factor = s.llama3_factor;
        const std::vector<float> ref = llama3_rope_freq_factors(hp);
        for (size_t i = 0; i < f.size(); ++i) CHECK(f[i] == Approx(ref[i]).epsilon(1e-5));
        CHECK(f.front() == 1.0f);
        CHECK(f.back() == s.llama3_factor);
        for (size_t i = 1; i < f.size(); ++i) CHECK(f[i] >= f[i - 1]);
    }
}

TEST_CASE("synthetic tiny-llama in every type loads and runs", "[synthetic]") {
    TempDir dir;
    const SyntheticShape &s = shape("tiny-llama");
    for (const SyntheticType type : {SyntheticType::F32, SyntheticType::F16, SyntheticType::Q8_0, SyntheticType::Q4_0, SyntheticType::Q4_K_M}) {
        DYNAMIC_SECTION(synthetic_type_name(type)) {
            const std::string path = dir.file(std::string("tiny-") + synthetic_type_name(type) + ".gguf");
            SyntheticOptions options;
            options.type = type;
            const SyntheticResult r = write_synthetic_model(s, kStoriesPath, path, options);
            CHECK(r.file_bytes == fs::file_size(path));
            CHECK(r.n_vocab == 512);
            CHECK(r.n_layer == 2);

            const auto model = Model::load(path, LoadOptions{});
            const HParams &hp = model->hparams();
            CHECK(hp.arch == Architecture::Llama);
            CHECK(hp.n_embd == 256);
            CHECK(hp.n_layer == 2);
            CHECK(hp.n_head == 4);
            CHECK(hp.n_head_kv == 2);
            CHECK(hp.n_ff == 512);
            CHECK(hp.n_vocab == 512);
            CHECK(hp.rope_scaling == RopeScaling::Llama3);
            CHECK(model->weights().rope_freq_factors == llama3_rope_freqs(s));
            CHECK_FALSE(model->weights().tied_output);
            CHECK(std::string(model->weight_type()) == synthetic_type_name(type));
            CHECK(model->n_params() == r.n_params);
            CHECK(model->vocab().n_tokens() == 512);

            // Every tensor has the type the mix gives it; 2 layers: use_more_bits is true for layer 1 only.
            const std::vector<SyntheticTensor> expected = synthetic_tensors(s, 2, 512, type);
            REQUIRE(model->file().tensors().size() == expected.size());
            for (size_t i = 0; i < expected.size(); ++i) {
                const TensorInfo &t = model->file().tensors()[i];
                CHECK(t.name == expected[i].name);
                CHECK(t.type == expected[i].type);
                if (t.n_dims == 1) CHECK(t.type == uint32_t(TensorType::F32));
            }
            if (type == SyntheticType::Q4_K_M) {
                CHECK(model->file().find_tensor("blk.0.attn_v.weight")->type == uint32_t(TensorType::Q4_K));
                CHECK(model->file().find_tensor("blk.1.attn_v.weight")->type == uint32_t(TensorType::Q6_K));
                CHECK(model->file().find_tensor("blk.1.ffn_down.weight")->type == uint32_t(TensorType::Q6_K));
                CHECK(model->file().find_tensor("output.weight")->type == uint32_t(TensorType::Q6_K));
                CHECK(model->file().find_tensor("token_embd.weight")->type == uint32_t(TensorType::Q4_K));
            }
            check_runs(model);
        }
    }
}

TEST_CASE("synthetic models are deterministic, and a layer is the same whatever the layer count", "[synthetic]") {
    TempDir dir;
    const SyntheticShape &s = shape("tiny-llama");
    SyntheticOptions options;
    options.type = SyntheticType::Q4_K_M;
    options.seed = 7;
    write_synthetic_model(s, kStoriesPath, dir.file("a.gguf"), options);
    write_synthetic_model(s, kStoriesPath, dir.file("b.gguf"), options);
    CHECK(test_fixtures::read_file(dir.file("a.gguf")) == test_fixtures::read_file(dir.file("b.gguf")));
    options.seed = 8;
    write_synthetic_model(s, kStoriesPath, dir.file("c.gguf"), options);
    CHECK(test_fixtures::read_file(dir.file("a.gguf")) != test_fixtures::read_file(dir.file("c.gguf")));

    options.seed = 7;
    options.n_layer = 1;
    float last = -1.0f;
    options.progress = [&](float p) {
        CHECK(p >= last);
        last = p;
        return true;
    };
    const SyntheticResult r = write_synthetic_model(s, kStoriesPath, dir.file("one.gguf"), options);
    CHECK(r.n_layer == 1);
    CHECK(last == 1.0f);
    const auto two = Model::load(dir.file("a.gguf"), LoadOptions{});
    const auto one = Model::load(dir.file("one.gguf"), LoadOptions{});
    CHECK(one->hparams().n_layer == 1);
    const TensorInfo *x = two->file().find_tensor("blk.0.ffn_up.weight");
    const TensorInfo *y = one->file().find_tensor("blk.0.ffn_up.weight");
    REQUIRE(x != nullptr);
    REQUIRE(y != nullptr);
    REQUIRE(x->n_bytes == y->n_bytes);
    CHECK(std::equal(x->data, x->data + x->n_bytes, y->data));
    // With 1 layer, use_more_bits(0, 1) holds (0 >= 7 * 1 / 8): Q6_K, where the 2-layer file has Q4_K.
    CHECK(one->file().find_tensor("blk.0.attn_v.weight")->type == uint32_t(TensorType::Q6_K));
}

TEST_CASE("synthetic model: cancelling and bad arguments leave no file", "[synthetic]") {
    TempDir dir;
    const SyntheticShape &s = shape("tiny-llama");
    SyntheticOptions options;
    options.progress = [](float p) { return p < 0.5f; };
    CHECK(test_fixtures::error_status([&] { write_synthetic_model(s, kStoriesPath, dir.file("x.gguf"), options); }) == SPECULA_ERR_CANCELLED);
    CHECK_FALSE(fs::exists(dir.file("x.gguf")));

    options = SyntheticOptions{};
    CHECK(test_fixtures::error_status([&] { write_synthetic_model(s, dir.file("missing.gguf"), dir.file("x.gguf"), options); }) == SPECULA_ERR_IO);
    options.n_layer = -1;
    CHECK(test_fixtures::error_status([&] { write_synthetic_model(s, kStoriesPath, dir.file("x.gguf"), options); }) == SPECULA_ERR_INVALID_ARGUMENT);
    SyntheticShape bad = s;
    bad.n_head_kv = 3;
    CHECK(test_fixtures::error_status([&] { write_synthetic_model(bad, kStoriesPath, dir.file("x.gguf"), SyntheticOptions{}); }) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK_FALSE(fs::exists(dir.file("x.gguf")));

    CHECK(parse_synthetic_type("Q4_K_M") == SyntheticType::Q4_K_M);
    CHECK(parse_synthetic_type("q8_0") == SyntheticType::Q8_0);
    CHECK_FALSE(parse_synthetic_type("q5_k_m").has_value());
}

TEST_CASE("synthetic qwen2.5-0.5b (one layer): padded vocabulary, biases, Q8_0 fallback", "[synthetic]") {
    // Qwen2's own vocabulary when the shared fixtures are there; else the bundled SentencePiece one, padded the same
    // way, so that a fresh clone still runs the qwen2 architecture (biases, NEOX RoPE) and its Q8_0 fallback.
    fs::path vocab = fixtures_dir() / "tokenizer" / "ggml-vocab-qwen2.gguf";
    if (!fs::exists(vocab)) vocab = kStoriesPath;
    TempDir dir;
    SyntheticOptions options;
    options.type = SyntheticType::Q4_K_M;
    options.n_layer = 1;
    const std::string path = dir.file("qwen.gguf");
    const SyntheticResult r = write_synthetic_model(shape("qwen2.5-0.5b"), vocab.string(), path, options);
    CHECK(r.n_vocab == 151936);  // the tokenizer's 151669 tokens, padded to the embedding size

    const auto model = Model::load(path, LoadOptions{});
    const HParams &hp = model->hparams();
    CHECK(hp.arch == Architecture::Qwen2);
    CHECK(hp.n_vocab == 151936);
    CHECK(hp.n_layer == 1);
    CHECK(hp.norm_eps == 1e-6f);
    CHECK(hp.rope_freq_base == 1e6f);
    CHECK(hp.rope_scaling == RopeScaling::None);
    CHECK(model->weights().tied_output);
    CHECK(model->vocab().n_tokens() == 151936);
    CHECK(model->vocab().token_text(151935) == "[PAD151935]");
    CHECK(model->weights().layers[0].bq);
    CHECK(model->weights().layers[0].bk);
    CHECK(model->weights().layers[0].bv);
    auto type_of = [&](const std::string &name) { return model->file().find_tensor(name)->type; };
    // Rows of 896 cannot be K-quants: Q4_K and Q6_K fall back to Q8_0 (llama.cpp: Q5_0 and Q8_0).
    CHECK(type_of("token_embd.weight") == uint32_t(TensorType::Q8_0));
    CHECK(type_of("blk.0.attn_q.weight") == uint32_t(TensorType::Q8_0));
    CHECK(type_of("blk.0.attn_v.weight") == uint32_t(TensorType::Q8_0));
    CHECK(type_of("blk.0.ffn_up.weight") == uint32_t(TensorType::Q8_0));
    CHECK(type_of("blk.0.ffn_down.weight") == uint32_t(TensorType::Q6_K));  // rows of 4864 = 19 x 256
    CHECK(type_of("blk.0.attn_q.bias") == uint32_t(TensorType::F32));
    check_runs(model);
}
