// Session snapshots on the CUDA backend: the F16 cache and the device LongSpec drafter's ring travel through the
// runner interface, a resumed CUDA session continues exactly (temperature 0 and 1), and a snapshot is never loaded
// across KV types (CPU F32 <-> CUDA F16).
#include "backends/cuda/cuda_runner.h"
#include "common/session_run.h"
#include "core/error.h"
#include "model/model.h"
#include "session/session.h"
#include "speculative/longspec_draft_file.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

using namespace specula::internal;
using specula::internal::cuda::CudaRunner;

namespace {

#ifdef SPECULA_CUDA_EMULATION
constexpr int32_t kHead = 9, kTail = 11;  // the emulator runs every CUDA thread as a fiber: short runs
#else
constexpr int32_t kHead = 40, kTail = 60;
#endif

std::filesystem::path source_dir() {
    const char *env = std::getenv("SPECULA_SOURCE_DIR");  // set by bench/gpu/run.sh on the GPU machine
    return env ? env : SPECULA_SOURCE_DIR;
}

std::shared_ptr<const Model> stories() {
    static const auto model = Model::load((source_dir() / "models/stories260K.gguf").string(), LoadOptions{});
    return model;
}

SessionConfig on_cuda(bool cuda, KvType cpu_kv = KvType::F16) {
    SessionConfig c;
    c.n_ctx = 256;
    c.n_threads = 2;
    c.backend.kind = BackendKind::Cpu;
    c.backend.kv_type = cpu_kv;
    if (cuda)
        c.make_runner = [](std::shared_ptr<const Model> m, int32_t n_ctx, ThreadPool &) -> std::unique_ptr<TargetRunner> {
            return std::make_unique<CudaRunner>(std::move(m), n_ctx, 0);
        };
    return c;
}

std::unique_ptr<Session> make(bool cuda, float temperature, uint64_t seed, bool drafters) {
    SamplerConfig s;
    s.temperature = temperature;
    s.seed = seed;
    auto session = std::make_unique<Session>(stories(), on_cuda(cuda), s);
    if (drafters) {
        SpeculativeConfig c;
        c.longspec = LongSpecDraft::load((source_dir() / "models/drafts/stories260K.longspec.gguf").string(), stories());
        c.ngram = true;
        session->set_speculative(c);
    }
    return session;
}

std::vector<uint8_t> save(Session &s, SnapshotScope scope = SnapshotScope::Full) {
    std::vector<uint8_t> bytes;
    SnapshotOptions o;
    o.scope = scope;
    s.save_snapshot(o, [&](const void *p, size_t n) { bytes.insert(bytes.end(), static_cast<const uint8_t *>(p), static_cast<const uint8_t *>(p) + n); });
    return bytes;
}

void append_prompt(Session &s) { s.append_text("Once upon a time, there was a little girl named Lily.", true, false); }

}  // namespace

TEST_CASE("cuda: a snapshot resumes exactly on CUDA with the device LongSpec drafter and n-grams", "[cuda][snapshot]") {
    const float temperature = GENERATE(0.0f, 1.0f);
    CAPTURE(temperature);
    auto whole = make(true, temperature, 21, true);
    REQUIRE(std::string(whole->backend()) == "cuda");
    append_prompt(*whole);
    const std::vector<int32_t> expected = test_sessions::generate_more(*whole, kHead + kTail);

    auto first = make(true, temperature, 21, true);
    append_prompt(*first);
    std::vector<int32_t> got = test_sessions::generate_more(*first, kHead);
    const std::vector<uint8_t> bytes = save(*first);
    auto second = make(true, temperature, 5, true);
    second->load_snapshot(bytes);
    const std::vector<int32_t> tail = test_sessions::generate_more(*second, kTail);
    got.insert(got.end(), tail.begin(), tail.end());
    CHECK(got == expected);
    CHECK(second->n_restored_tokens() > 0);
}

TEST_CASE("cuda: snapshots are not loaded across KV types, and a context snapshot forks a CUDA session", "[cuda][snapshot]") {
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    auto cpu = std::make_unique<Session>(stories(), on_cuda(false, KvType::F32), greedy);
    auto gpu = make(true, 0.0f, 1, false);
    append_prompt(*cpu);
    append_prompt(*gpu);
    test_sessions::generate_more(*cpu, 4);
    test_sessions::generate_more(*gpu, 4);
    const std::vector<uint8_t> from_cpu = save(*cpu), from_gpu = save(*gpu, SnapshotScope::Context);
    const std::vector<int32_t> gpu_tokens = gpu->tokens();
    try {
        gpu->load_snapshot(from_cpu);
        FAIL("a CPU snapshot loaded into a CUDA session");
    } catch (const Error &e) {
        CHECK(e.status() == SPECULA_ERR_INCOMPATIBLE);
        CHECK_THAT(e.what(), Catch::Matchers::Contains("F32 KV cache") && Catch::Matchers::Contains("F16"));
    }
    CHECK(gpu->tokens() == gpu_tokens);
    try {
        cpu->load_snapshot(from_gpu);
        FAIL("a CUDA snapshot loaded into a CPU session");
    } catch (const Error &e) {
        CHECK(e.status() == SPECULA_ERR_INCOMPATIBLE);
    }
    auto fork = make(true, 0.0f, 1, false);
    fork->load_snapshot(from_gpu);
    CHECK(test_sessions::generate_more(*fork, 6) == test_sessions::generate_more(*gpu, 6));
    // A CPU session with an F16 cache (the CPU's default) stores the very rows a CUDA cache holds: its context
    // snapshot resumes on CUDA, and the CUDA session goes on from those rows.
    auto cpu16 = make(false, 0.0f, 1, false);
    append_prompt(*cpu16);
    test_sessions::generate_more(*cpu16, 4);
    auto resumed = make(true, 0.0f, 1, false);
    resumed->load_snapshot(save(*cpu16, SnapshotScope::Context));
    CHECK(resumed->tokens() == cpu16->tokens());
    CHECK(test_sessions::generate_more(*resumed, 6).size() == 6);
}
