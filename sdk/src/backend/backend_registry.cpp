#include "backend/backend_registry.h"

namespace specula::internal {

const BackendDesc *find_backend(BackendKind kind) {
    for (const BackendDesc &b : builtin_backends())
        if (b.kind == kind) return &b;
    return nullptr;
}

const char *backend_kind_name(BackendKind kind) {
    switch (kind) {
    case BackendKind::Auto: return "auto";
    case BackendKind::Cpu: return "cpu";
    case BackendKind::Cuda: return "cuda";
    }
    return "unknown";
}

std::vector<DeviceInfo> list_devices(BackendKind kind, std::string *reason) {
    const BackendDesc *b = find_backend(kind);
    if (b == nullptr) {
        if (reason) *reason = std::string("this build has no ") + backend_kind_name(kind) + " backend";
        if (reason && kind == BackendKind::Cuda) *reason = "this build has no CUDA backend (configure with -DSPECULA_CUDA=ON and the CUDA toolkit)";
        return {};
    }
    if (!b->has_devices) {
        if (reason) *reason = "not a GPU backend";
        return {};
    }
    return b->devices(reason);
}

}  // namespace specula::internal
