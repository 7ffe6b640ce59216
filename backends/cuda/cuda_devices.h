// What CUDA devices this process can use, and why none when there are none.
#pragma once

#include "backends/cuda/cuda_namespace.h"

#include "backend/device_info.h"

#include <string>
#include <vector>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {

// Every device, or an empty list with *reason set (no driver, no device, compute capability below 8.0, ...).
std::vector<DeviceInfo> list_devices(std::string *reason);

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
