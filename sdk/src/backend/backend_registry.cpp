#include "backend/backend_registry.h"

namespace specula::internal {

const BackendDesc *find_backend(BackendKind kind) {
    for (const BackendDesc &b : builtin_backends())
        if (b.kind == kind) return &b;
    return nullptr;
}

const char *backend_kind_label(BackendKind kind) {
    switch (kind) {
    case BackendKind::Auto: return "auto";
    case BackendKind::Cpu: return "CPU";
    case BackendKind::Cuda: return "CUDA";
    }
    return "unknown";
}

std::vector<DeviceInfo> list_devices(BackendKind kind, std::string *reason) {
    const BackendDesc *b = find_backend(kind);
    if (b == nullptr) {
        // How to get it: the CMake option of each optional backend.
        const char *hint = kind == BackendKind::Cuda ? " (configure with -DSPECULA_CUDA=ON and the CUDA toolkit)" : "";
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
