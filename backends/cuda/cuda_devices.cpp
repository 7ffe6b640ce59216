#include "backends/cuda/cuda_devices.h"

#include <cuda_runtime.h>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {

std::vector<DeviceInfo> list_devices(std::string *reason) {
    std::vector<DeviceInfo> devices;
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        (void)cudaGetLastError();
        if (reason) *reason = std::string("no usable CUDA device (") + cudaGetErrorName(status) + ": " + cudaGetErrorString(status) + ")";
        return devices;
    }
    std::string skipped;
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
            (void)cudaGetLastError();
            continue;
        }
        // The kernels use F16 tensor cores (WMMA) and are built for sm_80 and sm_90.
        if (prop.major < 8) {
            skipped += std::string(skipped.empty() ? "" : "; ") + "device " + std::to_string(i) + " (" + prop.name + ") has compute capability " +
                       std::to_string(prop.major) + "." + std::to_string(prop.minor) + ", below 8.0";
            continue;
        }
        DeviceInfo d;
        d.index = i;
        d.name = prop.name;
        d.compute_major = prop.major;
        d.compute_minor = prop.minor;
        d.multiprocessors = prop.multiProcessorCount;
        int clock_khz = 0, bus_bits = 0;
        if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, i) == cudaSuccess &&
            cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, i) == cudaSuccess)
            d.peak_bandwidth_gbs = 2.0 * double(clock_khz) * 1e3 * double(bus_bits) / 8.0 / 1e9;  // double data rate
        (void)cudaGetLastError();
        int previous = 0;
        if (cudaGetDevice(&previous) == cudaSuccess && cudaSetDevice(i) == cudaSuccess) {
            size_t free_b = 0, total_b = 0;
            if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
                d.free_memory = free_b;
                d.total_memory = total_b;
            }
            cudaSetDevice(previous);
        }
        (void)cudaGetLastError();
        if (d.total_memory == 0) d.total_memory = prop.totalGlobalMem;
        devices.push_back(std::move(d));
    }
    if (devices.empty() && reason) *reason = count == 0 ? "no CUDA device found" : "no usable CUDA device: " + skipped;
    return devices;
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
