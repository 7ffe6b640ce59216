// C shims for device enumeration: the backend registry's device lists (sdk/src/backend/backend_registry.h).
#include "api/handles.h"
#include "backend/backend_registry.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

using namespace specula::internal;

namespace {

// The registry's kind of a specula_backend value that names a GPU backend (one with devices), built in or not.
std::optional<BackendKind> gpu_kind(int32_t backend) {
    if (backend == SPECULA_BACKEND_CUDA) return BackendKind::Cuda;
    if (backend == SPECULA_BACKEND_VULKAN) return BackendKind::Vulkan;
    return std::nullopt;
}

}  // namespace

extern "C" {

int32_t specula_device_count(int32_t backend) {
    return guarded_value<int32_t>(0, [&] {
        const std::optional<BackendKind> kind = gpu_kind(backend);
        return kind ? int32_t(list_devices(*kind, nullptr).size()) : int32_t(0);
    });
}

specula_status specula_device_get_info(int32_t backend, int32_t index, specula_device_info *info, specula_error **err) {
    return guarded(err, [&] {
        require_arg(info != nullptr && info->struct_size >= sizeof(uint32_t), "info is NULL or its struct_size is unset");
        const std::optional<BackendKind> kind = gpu_kind(backend);
        require_arg(kind.has_value(), "backend has no devices to list (only SPECULA_BACKEND_CUDA and SPECULA_BACKEND_VULKAN do)");
        std::string reason;
        const std::vector<DeviceInfo> devices = list_devices(*kind, &reason);
        require_arg(index >= 0 && size_t(index) < devices.size(),
                    ("device index " + std::to_string(index) + " is out of range: " + std::to_string(devices.size()) + " device(s)" +
                     (devices.empty() ? " (" + reason + ")" : std::string()))
                        .c_str());
        const DeviceInfo &d = devices[size_t(index)];
        specula_device_info full{};
        full.struct_size = info->struct_size;
        full.backend = backend;
        full.index = d.index;
        std::strncpy(full.name, d.name.c_str(), sizeof full.name - 1);
        full.total_memory = d.total_memory;
        full.free_memory = d.free_memory;
        full.compute_capability = d.compute_major * 10 + d.compute_minor;
        full.multiprocessors = d.multiprocessors;
        full.peak_bandwidth_gbs = d.peak_bandwidth_gbs;
        std::memcpy(info, &full, std::min<size_t>(info->struct_size, sizeof full));
    });
}

specula_status specula_backend_check(int32_t backend, specula_error **err) {
    return guarded(err, [&] {
        require_arg(backend >= SPECULA_BACKEND_AUTO && backend <= SPECULA_BACKEND_VULKAN, "backend is not a specula_backend value");
        if (backend == SPECULA_BACKEND_CPU) return;
        // One GPU backend, or for AUTO every GPU kind in AUTO's order (gpu_backend_kinds): OK at the first with a
        // usable device, else UNSUPPORTED with every reason ("CUDA: ...; Vulkan: ...").
        std::vector<BackendKind> kinds;
        if (backend == SPECULA_BACKEND_AUTO) kinds.assign(gpu_backend_kinds().begin(), gpu_backend_kinds().end());
        else kinds.push_back(*gpu_kind(backend));
        std::string reasons;
        for (BackendKind kind : kinds) {
            std::string reason;
            if (!list_devices(kind, &reason).empty()) return;
            reasons += (reasons.empty() ? "" : "; ") + std::string(backend_kind_label(kind)) + ": " + reason;
        }
        throw Error(SPECULA_ERR_UNSUPPORTED, reasons);
    });
}

}  // extern "C"
