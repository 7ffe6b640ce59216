// Records a runner's work into one command buffer and runs it: dispatches of the embedded shaders, copies, and
// transfers between host memory and device buffers through a staging buffer. Every command waits for the ones
// before it (a global barrier between them), which keeps the forward pass in the order it is written, as a CUDA
// stream does. finish() submits, waits, and completes the downloads. Not thread-safe: one per runner.
#pragma once

#include "backends/vulkan/vulkan_buffer.h"

#include <initializer_list>
#include <vector>

namespace specula::internal::vulkan {

class Stream {
public:
    explicit Stream(std::shared_ptr<Device> device);
    ~Stream();
    Stream(const Stream &) = delete;
    Stream &operator=(const Stream &) = delete;

    Device &device() const { return *device_; }
    const std::shared_ptr<Device> &shared_device() const { return device_; }

    // Enqueues kernel `k` over groups (x, y, z) with `buffers` at bindings 0.. and the push constants `push`.
    template <class Push>
    void dispatch(const Kernel &k, std::initializer_list<const Buffer *> buffers, const Push &push, uint32_t gx, uint32_t gy = 1, uint32_t gz = 1) {
        dispatch_raw(k, buffers, &push, sizeof(Push), gx, gy, gz);
    }
    void dispatch_raw(const Kernel &k, std::initializer_list<const Buffer *> buffers, const void *push, uint32_t push_bytes, uint32_t gx, uint32_t gy,
                      uint32_t gz);
    // Copies host bytes into dst at `offset` (staged now, copied in order with the other commands).
    void upload(const Buffer &dst, size_t offset, const void *src, size_t bytes);
    // Copies device bytes to host memory `dst`, which is written when finish() returns.
    void download(const Buffer &src, size_t offset, void *dst, size_t bytes);
    void copy(const Buffer &src, size_t src_offset, const Buffer &dst, size_t dst_offset, size_t bytes);
    void fill_zero(const Buffer &dst);
    // Submits what was recorded and waits for it; then the downloads are in host memory.
    void finish();
    // Bytes of the staging buffer (host-visible memory this stream holds).
    size_t staging_bytes() const { return staging_.bytes(); }

private:
    void begin();
    void barrier();
    size_t stage(size_t bytes);  // offset of `bytes` of staging space for this submission (may finish() first)

    struct Download {
        size_t staging_offset;
        void *dst;
        size_t bytes;
    };
    std::shared_ptr<Device> device_;
    VkCommandPool pool_ = VK_NULL_HANDLE;
    VkCommandBuffer cmd_ = VK_NULL_HANDLE;
    VkFence fence_ = VK_NULL_HANDLE;
    VkDescriptorPool descriptors_ = VK_NULL_HANDLE;
    bool recording_ = false, commands_ = false;
    Buffer staging_;
    size_t staged_ = 0;
    std::vector<Download> downloads_;
};

}  // namespace specula::internal::vulkan
