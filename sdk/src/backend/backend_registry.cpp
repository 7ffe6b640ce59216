#include "backend/backend_registry.h"

namespace specula::internal {

const BackendDesc *find_backend(BackendKind kind) {
    for (const BackendDesc &b : builtin_backends())
        if (b.kind == kind) return &b;
    return nullptr;
}

const Op *unsupported_op(const BackendDesc &backend, const Graph &graph) {
    for (const std::vector<Op> &stage : graph.stages)
        for (const Op &op : stage)
            if (!backend.supports_op(op)) return &op;
    return nullptr;
}

std::span<const BackendKind> gpu_backend_kinds() {
    static constexpr BackendKind kGpuKinds[] = {BackendKind::Cuda, BackendKind::Vulkan};
    return kGpuKinds;
}

const char *backend_kind_label(BackendKind kind) {
    switch (kind) {
    case BackendKind::Auto: return "auto";
    case BackendKind::Cpu: return "CPU";
    case BackendKind::Cuda: return "CUDA";
    case BackendKind::Vulkan: return "Vulkan";
    }
    return "unknown";
}

std::vector<DeviceInfo> list_devices(BackendKind kind, std::string *reason) {
    const BackendDesc *b = find_backend(kind);
    if (b == nullptr) {
        // How to get it: the CMake option of each optional backend and what it needs.
        const char *hint = "";
        switch (kind) {
        case BackendKind::Cuda: hint = " (configure with -DSPECULA_CUDA=ON and the CUDA toolkit)"; break;
        case BackendKind::Vulkan: hint = " (configure with -DSPECULA_VULKAN=ON, libvulkan-dev and glslc)"; break;
        case BackendKind::Auto:
        case BackendKind::Cpu: break;
        }
        if (reason) *reason = std::string("this build has no ") + backend_kind_label(kind) + " backend" + hint;
        return {};
    }
    if (!b->has_devices) {
        if (reason) *reason = "not a GPU backend";
        return {};
    }
    return b->devices(reason);
}

}  // namespace specula::internal
