// Owning handles for device and pinned host memory (cudaMalloc / cudaMallocHost; never managed memory).
#pragma once

#include "backends/cuda/cuda_namespace.h"

#include "backends/cuda/cuda_check.h"

#include <cstddef>
#include <utility>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {

class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
        if (bytes > 0) check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
    }
    DeviceBuffer(DeviceBuffer &&o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
    DeviceBuffer &operator=(DeviceBuffer &&o) noexcept {
        if (this != &o) {
            reset();
            ptr_ = std::exchange(o.ptr_, nullptr);
            bytes_ = std::exchange(o.bytes_, 0);
        }
        return *this;
    }
    ~DeviceBuffer() { reset(); }

    // Grows (never shrinks) to at least `bytes`; the contents are not kept.
    void reserve(size_t bytes) {
        if (bytes <= bytes_) return;
        reset();
        *this = DeviceBuffer(bytes);
    }
    template <typename T = void> T *as() const { return static_cast<T *>(ptr_); }
    size_t bytes() const { return bytes_; }

private:
    void reset() noexcept {
        if (ptr_ != nullptr) cudaFree(ptr_);
        ptr_ = nullptr;
        bytes_ = 0;
    }
    void *ptr_ = nullptr;
    size_t bytes_ = 0;
};

class PinnedBuffer {
public:
    PinnedBuffer() = default;
    PinnedBuffer(const PinnedBuffer &) = delete;
    PinnedBuffer &operator=(const PinnedBuffer &) = delete;
    ~PinnedBuffer() {
        if (ptr_ != nullptr) cudaFreeHost(ptr_);
    }
    void reserve(size_t bytes) {
        if (bytes <= bytes_) return;
        if (ptr_ != nullptr) cudaFreeHost(ptr_);
        ptr_ = nullptr;
        bytes_ = 0;
        check(cudaMallocHost(&ptr_, bytes), "cudaMallocHost");
        bytes_ = bytes;
    }
    template <typename T = void> T *as() const { return static_cast<T *>(ptr_); }

private:
    void *ptr_ = nullptr;
    size_t bytes_ = 0;
};

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
