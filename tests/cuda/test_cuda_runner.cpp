// The CUDA runner against the CPU reference on every fixture model, the bit-identity of tree verification and
// decoding, and greedy speculative decoding on CUDA equal to plain greedy decoding on CUDA (lossless).
#include "backends/cpu/cpu_runner.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_devices.h"
#include "backends/cuda/cuda_runner.h"
#include "backends/cuda/prefill_gemm.h"
#include "core/error.h"
#include "common/fixture_files.h"
#include "common/session_run.h"
#include "common/test_inputs.h"
#include "cuda_draft_fixtures.h"
#include "model/model.h"
#include "session/session.h"
#include "speculative/longspec_draft_file.h"
#include "speculative/longspec_drafter.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

using namespace specula::internal;
using specula::internal::cuda::CudaRunner;
using specula::internal::cuda::PrefillGemm;
using specula::internal::cuda::TreeAttention;

namespace {

struct Fixture {
    const char *path;
    double tolerance;  // max |logit difference| / max |logit| allowed against the CPU
};
// F32 weights stay F32 on the GPU (CUDA-core GEMM): close to the CPU. F16 and quantized weights run on tensor
// cores with activations rounded to F16 (as llama.cpp's CUDA backend does), so they sit further off.
// The K/V cache is F16 (as llama.cpp's CUDA backend keeps it), which alone puts F32 models about 1e-3 off.
#ifdef SPECULA_CUDA_EMULATION
// The CPU emulator runs every CUDA thread as a fiber: the same tests on the models and lengths it can afford.
constexpr bool kEmulated = true;
const std::vector<Fixture> kFixtures = {
    {"models/stories260K.gguf", 2e-3}, {"models/synth-llama-gqa-f16.gguf", 2e-2}, {"models/synth-llama-q4_k_m.gguf", 3e-2}};
#else
constexpr bool kEmulated = false;
const std::vector<Fixture> kFixtures = {
    {"models/stories260K.gguf", 2e-3},        {"models/code-7m/model.gguf", 2e-3},   {"models/synth-qwen2-bias-f32.gguf", 2e-3},
    {"models/synth-llama-gqa-f16.gguf", 2e-2}, {"models/synth-llama-q8_0.gguf", 3e-2}, {"models/synth-llama-q4_0.gguf", 3e-2},
    {"models/synth-llama-q4_k_m.gguf", 3e-2},
};
#endif
constexpr int32_t kTokens = kEmulated ? 16 : 48;  // parity positions
// Tests too slow for the emulator's default run (minutes) go to its [slow] set; on a GPU they are quick.
#ifdef SPECULA_CUDA_EMULATION
#define SLOW_WHEN_EMULATED "[slow]"
#else
#define SLOW_WHEN_EMULATED ""
#endif
constexpr int32_t kGenerate = kEmulated ? 40 : 96;  // greedy tokens per run

// A fixture model. stories260K is also bundled with the repository (models/), so the tests that need only it run
// without ../shared too.
std::shared_ptr<const Model> load(const std::string &rel) {
    std::filesystem::path path = test_fixtures::fixtures_dir() / rel;
    const char *source_env = std::getenv("SPECULA_SOURCE_DIR");  // set by bench/gpu/run.sh on the GPU machine
    const std::filesystem::path bundled = std::filesystem::path(source_env ? source_env : SPECULA_SOURCE_DIR) / rel;
    if (!std::filesystem::exists(path) && std::filesystem::exists(bundled)) path = bundled;
    return Model::load(path.string(), LoadOptions{});
}

std::vector<int32_t> prompt_for(const Model &model, int32_t n) {
    std::vector<int32_t> ids = model.vocab().tokenize("Once upon a time, there was a little dog. def add(a, b):\n    return a + b\n", true, false);
    std::vector<int32_t> out;
    while (int32_t(out.size()) < n) out.push_back(ids[out.size() % ids.size()]);
    return out;
}

using test_inputs::argmax;
using test_inputs::max_abs;
using test_sessions::generate;

// A session on the CPU reference, or on this build's CUDA runner (the real one, or the emulator's).
SessionConfig on(BackendKind kind) {
    SessionConfig c = cuda_draft_fixtures::cuda_session_config();  // n_ctx 1024, 2 threads, the CUDA runner
    if (kind != BackendKind::Cuda) c.make_runner = nullptr;         // the CPU backend (c.backend.kind)
    return c;
}

}  // namespace

TEST_CASE("cuda logits match the CPU reference on every fixture model both batched and decoded", "[cuda][parity]") {
    for (const Fixture &f : kFixtures) {
        if (!test_fixtures::have_fixture(test_fixtures::fixtures_dir() / f.path)) continue;
        INFO(f.path);
        const auto model = load(f.path);
        const int32_t n_vocab = model->hparams().n_vocab, n = kTokens;
        const std::vector<int32_t> prompt = prompt_for(*model, n);
        CpuRunner cpu(model, 256, 2);
        CudaRunner gpu(model, 256, 0);
        std::vector<float> ref(size_t(n) * n_vocab), got(ref.size()), step(static_cast<size_t>(n_vocab));
        cpu.eval(prompt.data(), n, 0, ref.data(), true);
        REQUIRE(gpu.eval(prompt.data(), n, 0, got.data(), true));
        double worst = 0, scale = 0;
        for (int32_t i = 0; i < n; ++i) {
            const float *r = ref.data() + size_t(i) * n_vocab, *g = got.data() + size_t(i) * n_vocab;
            scale = std::max(scale, max_abs(r, size_t(n_vocab)));
            for (int32_t t = 0; t < n_vocab; ++t) worst = std::max(worst, double(std::fabs(r[t] - g[t])));
        }
        INFO("max |diff| " << worst << " at max |logit| " << scale);
        CHECK(worst <= f.tolerance * scale);
        // Where the greedy picks differ, the CPU's own logits must call it a near-tie (within twice the tolerance):
        // random-weight models have many, and F16 activations (or the CPU's Q8 ones) may flip them.
        int32_t same_top1 = 0;
        for (int32_t i = 0; i < n; ++i) {
            const float *r = ref.data() + size_t(i) * n_vocab, *g = got.data() + size_t(i) * n_vocab;
            const int32_t a = argmax(r, n_vocab), b = argmax(g, n_vocab);
            same_top1 += a == b;
            INFO("position " << i << ": CPU picks " << a << " (" << r[a] << "), CUDA " << b << " (CPU logit " << r[b] << ")");
            CHECK(double(r[a] - r[b]) <= 2.0 * f.tolerance * scale);
        }
        INFO("same top-1 " << same_top1 << "/" << n);
        if (f.tolerance <= 2e-3) CHECK(same_top1 == n);  // trained F32 models: no flips at all
        // Decoding token by token gives the same logits as the batch, bit for bit (batch invariance).
        CudaRunner gpu2(model, 256, 0);
        for (int32_t i = 0; i < n; ++i) {
            REQUIRE(gpu2.eval(prompt.data() + i, 1, i, step.data(), false));
            INFO("position " << i);
            REQUIRE(std::memcmp(step.data(), got.data() + size_t(i) * n_vocab, size_t(n_vocab) * 4) == 0);
        }
    }
}

TEST_CASE("cuda: in exact mode a tree node has the logits of decoding its path bit for bit", "[cuda][lossless]") {
    const auto path = test_fixtures::fixtures_dir() / "models/synth-llama-gqa-f16.gguf";
    if (!test_fixtures::have_fixture(path)) return;
    const auto model = load("models/synth-llama-gqa-f16.gguf");
    const int32_t n_vocab = model->hparams().n_vocab, n_past = 70;
    const std::vector<int32_t> prompt = prompt_for(*model, n_past);
    // Tree: 0 root; 1, 2 under 0; 3 under 1; 4 under 3; 5 under 2.
    const std::vector<int32_t> parent = {-1, 0, 0, 1, 3, 2}, tokens = {5, 17, 29, 301, 4000, 77};
    const int32_t n = int32_t(parent.size());
    std::vector<int32_t> depth(static_cast<size_t>(n), 0), positions(static_cast<size_t>(n));
    std::vector<uint8_t> mask(static_cast<size_t>(n * n), 0);
    for (int32_t i = 0; i < n; ++i) {
        for (int32_t j = i; j >= 0; j = parent[size_t(j)]) mask[size_t(i * n + j)] = 1;
        depth[size_t(i)] = parent[size_t(i)] < 0 ? 0 : depth[size_t(parent[size_t(i)])] + 1;
        positions[size_t(i)] = n_past + depth[size_t(i)];
    }
    for (const bool graphs : {true, false}) {
        setenv("SPECULA_CUDA_GRAPHS", graphs ? "1" : "0", 1);
        CudaRunner tree_runner(model, 256, 0), plain(model, 256, 0);
        unsetenv("SPECULA_CUDA_GRAPHS");
        std::vector<float> scratch(static_cast<size_t>(n_vocab)), tree_rows(size_t(n) * n_vocab), lazy(static_cast<size_t>(n_vocab));
        REQUIRE(tree_runner.eval(prompt.data(), n_past, 0, scratch.data(), false));
        REQUIRE(plain.eval(prompt.data(), n_past, 0, scratch.data(), false));
        REQUIRE(tree_runner.eval_tree(tokens.data(), n, n_past, 0, positions.data(), mask.data(), tree_rows.data()));
        // Path 0 -> 1 -> 3 -> 4 decoded one token at a time.
        const std::vector<int32_t> path_nodes = {0, 1, 3, 4};
        for (size_t d = 0; d < path_nodes.size(); ++d) {
            std::vector<float> step(static_cast<size_t>(n_vocab));
            REQUIRE(plain.eval(&tokens[size_t(path_nodes[d])], 1, n_past + int32_t(d), step.data(), false));
            INFO("graphs " << graphs << ", depth " << d);
            REQUIRE(std::memcmp(step.data(), tree_rows.data() + size_t(path_nodes[d]) * n_vocab, size_t(n_vocab) * 4) == 0);
        }
        // The lazy head (logits == nullptr, then tree_logits) gives the same rows.
        REQUIRE(tree_runner.eval_tree(tokens.data(), n, n_past, 0, positions.data(), mask.data(), nullptr));
        for (int32_t i = 0; i < n; ++i) {
            tree_runner.tree_logits(i, lazy.data());
            REQUIRE(std::memcmp(lazy.data(), tree_rows.data() + size_t(i) * n_vocab, size_t(n_vocab) * 4) == 0);
        }
        // Committing the path leaves the cache as if the path had been decoded: the next token agrees bit for bit.
        tree_runner.commit_tree_path(n_past, path_nodes.data(), int32_t(path_nodes.size()));
        std::vector<float> a(static_cast<size_t>(n_vocab)), b(static_cast<size_t>(n_vocab));
        const int32_t next = 123;
        REQUIRE(tree_runner.eval(&next, 1, n_past + 4, a.data(), false));
        REQUIRE(plain.eval(&next, 1, n_past + 4, b.data(), false));
        REQUIRE(std::memcmp(a.data(), b.data(), size_t(n_vocab) * 4) == 0);
        // LongSpec's hybrid form agrees to rounding.
        tree_runner.set_tree_attention(TreeAttention::Hybrid);
        std::vector<float> hybrid(tree_rows.size());
        REQUIRE(tree_runner.eval_tree(tokens.data(), n, n_past, 0, positions.data(), mask.data(), hybrid.data()));
        double worst = 0;
        for (size_t i = 0; i < hybrid.size(); ++i) worst = std::max(worst, double(std::fabs(hybrid[i] - tree_rows[i])));
        CHECK(worst <= 1e-3 * max_abs(tree_rows.data(), tree_rows.size()));
    }
}

TEST_CASE("cuda: greedy tokens equal the CPU's on the trained models", "[cuda][parity]") {
    for (const char *rel : {"models/stories260K.gguf", kEmulated ? "" : "models/code-7m/model.gguf"}) {
        if (*rel == '\0') continue;
        if (!test_fixtures::have_fixture(test_fixtures::fixtures_dir() / rel)) continue;
        INFO(rel);
        const auto model = load(rel);
        SamplerConfig greedy;
        greedy.temperature = 0.0f;
        Session cpu(model, on(BackendKind::Cpu), greedy), gpu(model, on(BackendKind::Cuda), greedy);
        REQUIRE(std::string(gpu.backend()) == "cuda");
        const std::vector<int32_t> prompt = prompt_for(*model, 24);
        CHECK(generate(gpu, prompt, kGenerate) == generate(cpu, prompt, kGenerate));
    }
}

namespace {

// Greedy speculative decoding on CUDA with a LongSpec draft (random weights, window 16), the target as its own
// draft (everything accepted: long paths committed) and n-grams, for each tree shape: the plain greedy tokens.
void check_lossless_on_cuda(const char *rel, const std::vector<TreeShape> &shapes) {
    if (!test_fixtures::have_fixture(test_fixtures::fixtures_dir() / rel)) return;
    const auto model = load(rel);
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    Session plain(model, on(BackendKind::Cuda), greedy);
    const std::vector<int32_t> prompt = prompt_for(*model, 40);
    const std::vector<int32_t> expected = generate(plain, prompt, kGenerate);
    RandomDraftOptions opt;
    opt.window = 16;
    const auto longspec = test_inputs::random_longspec_draft(model, opt, "cuda-draft");
    for (const TreeShape &shape : shapes) {
        for (int drafter = 0; drafter < 3; ++drafter) {
            SpeculativeConfig c;
            c.shape = shape;
            if (drafter == 0) c.longspec = longspec;
            if (drafter == 1) c.draft_model = model;
            if (drafter == 2) c.ngram = true;
            Session s(model, on(BackendKind::Cuda), greedy);
            s.set_speculative(c);
            INFO(rel << ", drafter " << s.drafter_name() << ", tree " << shape.to_string());
            CHECK(generate(s, prompt, kGenerate) == expected);
            CHECK(s.speculative_stats().rounds > 0);
        }
    }
}

}  // namespace

TEST_CASE("cuda: speculative greedy equals plain greedy on CUDA with each drafter on stories260K", "[cuda][lossless]") {
    // On the emulator (minutes per drafter) the default tree alone; chains are verified by the context-shift case
    // below and chain(5) by the [slow] case.
    if (kEmulated)
        check_lossless_on_cuda("models/stories260K.gguf", {TreeShape{}});
    else
        check_lossless_on_cuda("models/stories260K.gguf", {TreeShape{}, TreeShape::chain(5)});
}

TEST_CASE("cuda: speculative greedy equals plain greedy on CUDA for every drafter and tree", "[cuda][lossless]" SLOW_WHEN_EMULATED) {
    if (kEmulated)
        check_lossless_on_cuda("models/stories260K.gguf", {TreeShape::chain(5), TreeShape{{2, 2, 2, 2, 2, 2, 2, 2}}, TreeShape{{32, 8}}});
    else
        check_lossless_on_cuda("models/stories260K.gguf", {TreeShape{{2, 2, 2, 2, 2, 2, 2, 2}}, TreeShape{{32, 8}}});
    check_lossless_on_cuda("models/synth-llama-gqa-f16.gguf", {TreeShape{}, TreeShape::chain(5), TreeShape{{2, 2, 2, 2, 2, 2, 2, 2}}});
    if (!kEmulated) check_lossless_on_cuda("models/synth-llama-q4_k_m.gguf", {TreeShape{}, TreeShape::chain(5)});
}

TEST_CASE("cuda: greedy speculative decoding through context shifts equals plain greedy on CUDA", "[cuda][lossless][shift]") {
    const auto model = load("models/stories260K.gguf");
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    // A context of 40 with 4 sinks: a shift every 18 tokens, so 50 tokens after a 12-token prompt cross 2.
    SessionConfig sc = on(BackendKind::Cuda);
    sc.n_ctx = 40;
    sc.shift.enabled = true;
    sc.shift.keep = 4;
    const std::vector<int32_t> prompt = prompt_for(*model, 12);
    Session plain(model, sc, greedy);
    const std::vector<int32_t> expected = generate(plain, prompt, 50);
    CHECK(plain.n_context_shifts() >= 2);
    RandomDraftOptions opt;
    opt.window = 16;
    const auto longspec = test_inputs::random_longspec_draft(model, opt, "cuda-shift-draft");
    for (int drafter = 0; drafter < 3; ++drafter) {
        SpeculativeConfig c;
        c.shape = TreeShape::chain(4);
        if (drafter == 0) c.longspec = longspec;
        if (drafter == 1) c.draft_model = model;
        if (drafter == 2) c.ngram = true;
        Session s(model, sc, greedy);
        s.set_speculative(c);
        INFO("drafter " << s.drafter_name());
        CHECK(generate(s, prompt, 50) == expected);
        CHECK(s.n_context_shifts() == plain.n_context_shifts());
    }
}

TEST_CASE("cuda: the committed trained draft is lossless on CUDA and accepts several tokens per round", "[cuda][lossless]") {
    const char *source_env = std::getenv("SPECULA_SOURCE_DIR");  // set by bench/gpu/run.sh on the GPU machine
    const auto trained = std::filesystem::path(source_env ? source_env : SPECULA_SOURCE_DIR) / "models/drafts/stories260K.longspec.gguf";
    if (!test_fixtures::have_fixture(trained)) return;
    const auto model = load("models/stories260K.gguf");
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    Session plain(model, on(BackendKind::Cuda), greedy), spec(model, on(BackendKind::Cuda), greedy);
    SpeculativeConfig c;
    c.longspec = LongSpecDraft::load(trained.string(), model);
    spec.set_speculative(c);
    const std::vector<int32_t> prompt = prompt_for(*model, 20);
    const int32_t n = kEmulated ? 64 : 200;
    CHECK(generate(spec, prompt, n) == generate(plain, prompt, n));
    const auto &st = spec.speculative_stats();
    INFO("tau " << double(st.produced) / std::max(1, st.rounds));
    CHECK(double(st.produced) / std::max(1, st.rounds) >= 3.0);
}

// Long prompt batches multiply through cuBLAS (prefill_gemm.h), whose rounding is not our kernels': the session
// then prefills the same batches with and without a drafter (the last prompt token alone), so speculative greedy
// output stays equal to plain greedy output. Prompt lengths around the threshold and past one runner slice (256).
TEST_CASE("cuda: long prompts prefill through cuBLAS and speculative greedy still equals plain greedy", "[cuda][lossless][cublas]") {
    const auto model = load("models/stories260K.gguf");
    const int32_t n_vocab = model->hparams().n_vocab;
    {
        CudaRunner fast(model, 512, 0);
        if (fast.prefill_library() == nullptr) {
            WARN("cuBLAS prefill unavailable: " << fast.prefill_note());
            return;
        }
        CHECK_FALSE(fast.capabilities().prompt_batches_invariant);
        setenv("SPECULA_CUDA_CUBLAS", "0", 1);
        CudaRunner invariant(model, 512, 0);
        unsetenv("SPECULA_CUDA_CUBLAS");
        CHECK(invariant.prefill_library() == nullptr);
        CHECK(invariant.capabilities().prompt_batches_invariant);
        const int32_t n = 100;
        const std::vector<int32_t> prompt = prompt_for(*model, n);
        std::vector<float> a(size_t(n) * n_vocab), b(a.size());
#ifdef SPECULA_CUDA_EMULATION
        const uint64_t calls = cuda_emulation::cublas_gemm_calls();
#endif
        REQUIRE(fast.eval(prompt.data(), n, 0, a.data(), true));
#ifdef SPECULA_CUDA_EMULATION
        CHECK(cuda_emulation::cublas_gemm_calls() > calls);  // every layer's GEMMs and the output head
#endif
        REQUIRE(invariant.eval(prompt.data(), n, 0, b.data(), true));
        double worst = 0;
        for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
        INFO("max |cuBLAS - invariant| " << worst);
        CHECK(worst <= 2e-3 * max_abs(b.data(), b.size()));
        CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) != 0);  // really another rounding: the test below means something
    }
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    RandomDraftOptions opt;
    opt.window = 16;
    const auto longspec = test_inputs::random_longspec_draft(model, opt, "cuda-cublas-draft");
    const int32_t n_gen = kEmulated ? 16 : 64;
    // Around the threshold; on a GPU also past one runner slice (256 rows: a cuBLAS slice, then the rest).
    std::vector<int32_t> lengths = {PrefillGemm::kMinRows, PrefillGemm::kMinRows + 1};
    if (!kEmulated) lengths.push_back(300);
    for (const int32_t len : lengths) {
        const std::vector<int32_t> prompt = prompt_for(*model, len);
        Session plain(model, on(BackendKind::Cuda), greedy);
        const std::vector<int32_t> expected = generate(plain, prompt, n_gen);
        for (int drafter = 0; drafter < 3; ++drafter) {
            if (kEmulated && drafter == 1) continue;  // every drafter batches the target's prompt alike; the draft model only doubles the emulator's time
            SpeculativeConfig c;
            c.shape = TreeShape::chain(4);
            if (drafter == 0) c.longspec = longspec;
            if (drafter == 1) c.draft_model = model;
            if (drafter == 2) c.ngram = true;
            Session s(model, on(BackendKind::Cuda), greedy);
            s.set_speculative(c);
            INFO("prompt " << len << ", drafter " << s.drafter_name());
            CHECK(generate(s, prompt, n_gen) == expected);
        }
    }
}

TEST_CASE("cuda: a raised cancel flag stops the pass between launches and the runner recovers", "[cuda]") {
    const auto model = load("models/stories260K.gguf");
    CudaRunner r(model, 256, 0);
    std::atomic<bool> flag{true};
    r.set_cancel_flag(&flag);
    const std::vector<int32_t> prompt = prompt_for(*model, 16);
    std::vector<float> logits(static_cast<size_t>(model->hparams().n_vocab)), ref(logits.size());
    CHECK_FALSE(r.eval(prompt.data(), 16, 0, logits.data(), false));
    flag = false;
    REQUIRE(r.eval(prompt.data(), 16, 0, logits.data(), false));
    CudaRunner fresh(model, 256, 0);
    REQUIRE(fresh.eval(prompt.data(), 16, 0, ref.data(), false));
    CHECK(std::memcmp(logits.data(), ref.data(), logits.size() * 4) == 0);
}

TEST_CASE("cuda: the cache's rows equal the CPU cache to F16 rounding (1e-2 after 5 layers of F16 KV)", "[cuda]") {
    const auto model = load("models/stories260K.gguf");
    CudaRunner gpu(model, 256, 0);
    CpuRunner cpu(model, 256, 2, KvType::F32);
    const std::vector<int32_t> prompt = prompt_for(*model, 30);
    std::vector<float> logits(static_cast<size_t>(model->hparams().n_vocab));
    REQUIRE(gpu.eval(prompt.data(), 30, 0, logits.data(), false));
    cpu.eval(prompt.data(), 30, 0, logits.data(), false);
    const int32_t layer = model->hparams().n_layer - 1, dkv = model->hparams().n_embd_kv();
    REQUIRE(gpu.kv_type() == KvType::F16);
    std::vector<uint8_t> rows(size_t(30) * size_t(dkv) * 2);
    std::vector<float> got(static_cast<size_t>(dkv)), want(static_cast<size_t>(dkv));
    for (const bool keys : {true, false}) {
        gpu.read_kv(layer, keys ? KvPart::Keys : KvPart::Values, 0, 30, rows.data());
        for (int32_t slot = 0; slot < 30; ++slot) {
            kv_load_row(KvType::F16, rows.data() + size_t(slot) * size_t(dkv) * 2, dkv, got.data());
            kv_load_head(keys ? cpu.kv().keys(layer) : cpu.kv().values(layer), slot, nullptr, 1, 0, dkv, want.data());
            for (int32_t e = 0; e < dkv; ++e) REQUIRE(std::fabs(got[size_t(e)] - want[size_t(e)]) <= 1e-2f * (1.0f + std::fabs(want[size_t(e)])));
        }
    }
}

TEST_CASE("cuda: eval_argmax returns the greedy token without copying logits", "[cuda]") {
    const auto model = load("models/stories260K.gguf");
    CudaRunner a(model, 256, 0), b(model, 256, 0);
    const std::vector<int32_t> prompt = prompt_for(*model, 12);
    std::vector<float> logits(static_cast<size_t>(model->hparams().n_vocab));
    int32_t next = -1;
    REQUIRE(a.eval_argmax(prompt.data(), 12, 0, &next));
    REQUIRE(b.eval(prompt.data(), 12, 0, logits.data(), false));
    CHECK(next == argmax(logits.data(), model->hparams().n_vocab));
}

#ifdef SPECULA_CUDA_EMULATION
// The emulator can pretend to have no device or little memory: the runner's refusals carry their reasons.
TEST_CASE("cuda emulated: a device without room refuses the session with the sizes", "[cuda]") {
    const auto model = load("models/stories260K.gguf");
    setenv("SPECULA_CUDA_EMULATION_MEMORY_MB", "300", 1);
    try {
        CudaRunner r(model, 1 << 20, 0);
        FAIL("a 1M-token session fit in 300 MiB");
    } catch (const Error &e) {
        CHECK(e.status() == SPECULA_ERR_OUT_OF_MEMORY);
        CHECK(std::string(e.what()).find("not enough device memory") != std::string::npos);
        CHECK(std::string(e.what()).find("n_ctx 1048576") != std::string::npos);
    }
    CudaRunner small(model, 256, 0);  // a small context still fits
    unsetenv("SPECULA_CUDA_EMULATION_MEMORY_MB");
    CHECK(small.n_ctx() == 256);
}

TEST_CASE("cuda emulated: without a device the factory says why", "[cuda]") {
    const auto model = load("models/stories260K.gguf");
    setenv("SPECULA_CUDA_EMULATION_DEVICES", "0", 1);
    std::string reason;
    CHECK(cuda::list_devices(&reason).empty());
    CHECK(reason.find("no usable CUDA device") != std::string::npos);
    try {
        cuda::make_cuda_runner(model, 256, 0);
        FAIL("a runner without a device");
    } catch (const Error &e) {
        CHECK(e.status() == SPECULA_ERR_UNSUPPORTED);
        CHECK(std::string(e.what()).rfind("CUDA: ", 0) == 0);
    }
    unsetenv("SPECULA_CUDA_EMULATION_DEVICES");
    CHECK(!cuda::list_devices(&reason).empty());
    CHECK_THROWS_AS(cuda::make_cuda_runner(model, 256, 3), Error);  // no device 3
}
#endif

TEST_CASE("cuda: the device LongSpec drafter's logits match the CPU drafter's", "[cuda][longspec]") {
    const auto path = test_fixtures::fixtures_dir() / "models/stories260K.gguf";
    if (!test_fixtures::have_fixture(path)) return;
    const auto model = load("models/stories260K.gguf");
    RandomDraftOptions opt;
    opt.window = 16;  // the 40-token context wraps the ring twice
    const auto draft = test_inputs::random_longspec_draft(model, opt, "cuda-draft-logits");
    const int32_t n_vocab = model->hparams().n_vocab;
    const std::vector<int32_t> context = prompt_for(*model, 41);
    CpuRunner cpu(model, 256, 2);
    CudaRunner gpu(model, 256, 0);
    std::vector<float> scratch(static_cast<size_t>(n_vocab));
    cpu.eval(context.data(), 40, 0, scratch.data(), false);
    REQUIRE(gpu.eval(context.data(), 40, 0, scratch.data(), false));
    auto cpu_drafter = make_longspec_drafter(draft, 68, cpu);
    auto gpu_drafter = make_longspec_drafter(draft, 68, gpu);  // reads the device cache in place
    REQUIRE(gpu_drafter != nullptr);
    DraftRequest req;
    req.tokens = context;
    req.n_target_kv = 40;
    std::vector<float> a(static_cast<size_t>(n_vocab)), b(a.size());
    REQUIRE(cpu_drafter->root_logits(req, a.data()));
    REQUIRE(gpu_drafter->root_logits(req, b.data()));
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
    INFO("max |diff| " << worst << " at max |logit| " << max_abs(a.data(), a.size()));
    CHECK(worst <= 1e-2 * max_abs(a.data(), a.size()));
    CHECK(argmax(a.data(), n_vocab) == argmax(b.data(), n_vocab));
    // Its memory is fixed at creation.
    const size_t bytes = gpu_drafter->allocated_bytes();
    DraftTree tree;
    tree.reset(context.back());
    req.shape = TreeShape{};
    req.node_budget = 69;
    gpu_drafter->draft(req, tree);
    CHECK(tree.size() > 1);
    CHECK(gpu_drafter->allocated_bytes() == bytes);
}
