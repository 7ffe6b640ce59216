// A Vulkan buffer with its own memory: device-local for the forward pass's data, or host-visible and mapped for
// staging. Move-only; frees its memory when destroyed (after the caller has waited for work that uses it).
#pragma once

#include "backends/vulkan/vulkan_device.h"

#include <memory>

namespace specula::internal::vulkan {

class Buffer {
public:
    enum class Kind { Device, Staging };
    Buffer() = default;
    // Throws Error(OUT_OF_MEMORY) naming `what` and the size when the device refuses the allocation.
    Buffer(std::shared_ptr<Device> device, size_t bytes, Kind kind, const char *what);
    ~Buffer() { reset(); }
    Buffer(Buffer &&o) noexcept { *this = std::move(o); }
    Buffer &operator=(Buffer &&o) noexcept;
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;

    VkBuffer handle() const { return buffer_; }
    size_t bytes() const { return bytes_; }
    // The mapped bytes of a staging buffer (nullptr for a device buffer).
    void *mapped() const { return mapped_; }
    explicit operator bool() const { return buffer_ != VK_NULL_HANDLE; }
    void reset();

private:
    std::shared_ptr<Device> device_;
    VkBuffer buffer_ = VK_NULL_HANDLE;
    VkDeviceMemory memory_ = VK_NULL_HANDLE;
    size_t bytes_ = 0, alloc_size_ = 0;
    void *mapped_ = nullptr;
};

}  // namespace specula::internal::vulkan
