// What CUDA devices this process can use, and why none when there are none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace specula::internal::cuda {

struct DeviceInfo {
    int32_t index = 0;
    std::string name;
    size_t total_memory = 0, free_memory = 0;
    int32_t compute_major = 0, compute_minor = 0;
    int32_t multiprocessors = 0;
    double peak_bandwidth_gbs = 0;  // from the memory clock and bus width the driver reports (0 if unknown)
};

// Every device, or an empty list with *reason set (no driver, no device, compute capability below 8.0, ...).
std::vector<DeviceInfo> list_devices(std::string *reason);

}  // namespace specula::internal::cuda
