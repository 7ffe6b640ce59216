// One device a backend can run a session on, as every layer reports it: the backends fill it, the registry lists
// it, the C ABI copies it into specula_device_info and `specula devices` prints it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace specula::internal {

struct DeviceInfo {
    int32_t index = 0;  // the value for specula_session_options.device
    std::string name;
    size_t total_memory = 0, free_memory = 0;  // bytes
    int32_t compute_major = 0, compute_minor = 0;  // CUDA's compute capability (0 for other backends)
    int32_t multiprocessors = 0;                   // streaming multiprocessors / compute units
    double peak_bandwidth_gbs = 0;  // from the memory clock and bus width the driver reports (0 if unknown)
};

}  // namespace specula::internal
