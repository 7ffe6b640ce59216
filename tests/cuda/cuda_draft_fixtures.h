// What the CUDA session-level tests share (test_cuda_topk.cpp, test_cuda_draft_graphs.cpp, test_cuda_device_verify.cpp,
// test_cuda_runner.cpp): the repository's model and trained draft, a story prompt, a device drafter with the device
// top-k on or off, and a session whose target runs on this build's CUDA runner (the real one, or the emulator's).
#pragma once

#include "backends/cuda/cuda_runner.h"
#include "model/model.h"
#include "session/session.h"
#include "speculative/drafter.h"
#include "speculative/longspec_draft_file.h"
#include "speculative/longspec_drafter.h"

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

namespace cuda_draft_fixtures {

using namespace specula::internal;

inline std::filesystem::path source_dir() {
    const char *env = std::getenv("SPECULA_SOURCE_DIR");  // set by bench/gpu/run.sh on the GPU machine
    return std::filesystem::path(env ? env : SPECULA_SOURCE_DIR);
}

inline std::vector<int32_t> story_prompt(const Model &model, int32_t n) {
    std::vector<int32_t> ids = model.vocab().tokenize("Once upon a time, there was a little dog. It liked to play in the park with a ball.", true, false);
    std::vector<int32_t> out;
    while (int32_t(out.size()) < n) out.push_back(ids[out.size() % ids.size()]);
    return out;
}

// SPECULA_CUDA_DEVICE_TOPK is read when the drafter is made.
inline std::unique_ptr<Drafter> make_drafter(SPECULA_CUDA_NAMESPACE::CudaRunner &runner, const std::shared_ptr<const LongSpecDraft> &draft,
                                             bool device_topk) {
    setenv("SPECULA_CUDA_DEVICE_TOPK", device_topk ? "1" : "0", 1);
    auto d = make_longspec_drafter(draft, 68, runner);
    unsetenv("SPECULA_CUDA_DEVICE_TOPK");
    return d;
}

inline SessionConfig cuda_session_config() {
    SessionConfig sc;
    sc.n_ctx = 1024;
    sc.n_threads = 2;
    sc.backend.kind = BackendKind::Cpu;
    sc.make_runner = [](std::shared_ptr<const Model> m, int32_t n_ctx, ThreadPool &) -> std::unique_ptr<TargetRunner> {
        return std::make_unique<SPECULA_CUDA_NAMESPACE::CudaRunner>(std::move(m), n_ctx, 0);
    };
    return sc;
}

}  // namespace cuda_draft_fixtures
