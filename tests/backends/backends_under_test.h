// The backends tests/backends/ runs every check on: each registry backend with a usable device (the CPU always;
// Vulkan on lavapipe in CI; CUDA on a GPU) and, in test builds on x86-64, the CUDA backend compiled against the CPU
// emulator. A backend added to backends/registry.cpp is tested without a line changed here.
#pragma once

#include "backend/backend_registry.h"
#include "core/thread_pool.h"
#include "graph/model_graph.h"
#include "model/model.h"

#ifdef SPECULA_CUDA_EMULATION
#include "backends/cuda/cuda_runner.h"
#endif

#include <catch2/catch.hpp>

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace backends_under_test_support {

using namespace specula::internal;

// A backend under test: how to make its runner, and how far its logits may be from the CPU's (relative to the
// largest |logit|): 0 = bit-identical.
struct BackendUnderTest {
    std::string name;
    std::function<std::unique_ptr<TargetRunner>(std::shared_ptr<const Model>, int32_t n_ctx, ThreadPool &)> make;
    double tolerance;
    bool reference;  // the CPU backend: what the others are compared with
};

inline std::vector<BackendUnderTest> backends_under_test() {
    std::vector<BackendUnderTest> out;
    for (const BackendDesc &b : builtin_backends()) {
        std::string why;
        if (b.has_devices && b.devices(&why).empty()) {
            WARN("backend " << b.name << " not tested here: " << why);
            continue;
        }
        const BackendDesc *desc = &b;
        // The CPU is the reference (bit-identical); GPU backends keep an F16 cache and F16 activations on tensor
        // cores (docs/cuda.md): stories260K sits within 2e-3 of the CPU.
        out.push_back({b.name,
                       [desc](std::shared_ptr<const Model> m, int32_t n_ctx, ThreadPool &pool) {
                           return desc->make_runner(RunnerRequest{m, build_model_graph(m, n_ctx), n_ctx, &pool, 0, std::nullopt});
                       },
                       b.has_devices ? 2e-3 : 0.0, b.kind == BackendKind::Cpu});
    }
#ifdef SPECULA_CUDA_EMULATION
    // On a GPU machine the real CUDA backend is tested above, and the emulated one (seconds per check, minutes per
    // architecture) would spend the lease: bench/gpu/run.sh sets SPECULA_TEST_SKIP_EMULATED.
    if (const char *skip = std::getenv("SPECULA_TEST_SKIP_EMULATED"); skip && *skip && std::string(skip) != "0") {
        WARN("cuda (emulated) not tested: SPECULA_TEST_SKIP_EMULATED is set");
        return out;
    }
    out.push_back({"cuda (emulated)",
                   [](std::shared_ptr<const Model> m, int32_t n_ctx, ThreadPool &) {
                       return std::unique_ptr<TargetRunner>(std::make_unique<cuda::CudaRunner>(std::move(m), n_ctx, 0));
                   },
                   2e-3, false});
#endif
    return out;
}

}  // namespace backends_under_test_support
