// Header-only: the --backend option of the apps (the CLI's generate and serve, the demo, the benchmarks), which see
// only the public API. One list of the names a user may give, in the C ABI's order, and their specula_backend.
#pragma once

#include <specula/specula.h>

#include <string>
#include <vector>

namespace specula_apps {

// What --backend accepts: auto (CUDA, then Vulkan, then the CPU), cpu, cuda, vulkan.
inline const std::vector<std::string> &backend_names() {
    static const std::vector<std::string> names{"auto", "cpu", "cuda", "vulkan"};
    return names;
}

// The help text of --backend.
inline const char *backend_help() { return "Where the model runs: auto (CUDA, then Vulkan, then CPU), cpu, cuda, vulkan"; }

// The specula_backend of a name of backend_names(); anything else is AUTO.
inline specula_backend backend_from_name(const std::string &name) {
    if (name == "cpu") return SPECULA_BACKEND_CPU;
    if (name == "cuda") return SPECULA_BACKEND_CUDA;
    if (name == "vulkan") return SPECULA_BACKEND_VULKAN;
    return SPECULA_BACKEND_AUTO;
}

// A GPU backend the user named (not AUTO, not the CPU): one whose CPU fallback deserves a word on stderr.
inline bool is_gpu_backend(int32_t backend) { return backend == SPECULA_BACKEND_CUDA || backend == SPECULA_BACKEND_VULKAN; }

}  // namespace specula_apps
