// One Vulkan device as the backend uses it: the logical device with one compute queue, its memory types and
// limits, and the compute pipelines of the embedded shaders (made on first use). Shared by every session and
// every model on that device (get_device keeps it while a runner holds it); thread-safe.
#pragma once

#include "backends/vulkan/vulkan_api.h"

#include "backend/device_info.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace specula::internal::vulkan {

// A compute pipeline: `bindings` storage buffers (set 0, bindings 0 ..) and a push-constant block.
struct Kernel {
    VkPipeline pipeline = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    uint32_t bindings = 0;
    uint32_t push_bytes = 0;
};

class Device {
public:
    ~Device();
    Device(const Device &) = delete;
    Device &operator=(const Device &) = delete;

    const Api &api() const { return *api_; }
    VkDevice device() const { return device_; }
    VkPhysicalDevice physical() const { return physical_; }
    int index() const { return index_; }
    const std::string &name() const { return name_; }
    uint32_t queue_family() const { return queue_family_; }
    const VkPhysicalDeviceLimits &limits() const { return limits_; }
    // A CPU implementation (Mesa's lavapipe): AUTO does not choose those, the CPU backend is faster on the same cores.
    bool is_cpu() const { return type_ == VK_PHYSICAL_DEVICE_TYPE_CPU; }

    // The pipeline of an embedded shader (vulkan_shaders.h), made on first use. Throws Error(INTERNAL) for a name
    // the build lacks or a layout that disagrees with an earlier request.
    const Kernel &kernel(const char *name, uint32_t bindings, uint32_t push_bytes);

    // Submits to the device's one queue (queues must not be used from two threads at once).
    void submit(VkCommandBuffer cmd, VkFence fence);

    // A memory type index with `required` flags (and `preferred` when one has them), for buffers of type_bits.
    uint32_t memory_type(uint32_t type_bits, VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) const;
    VkMemoryPropertyFlags memory_flags(uint32_t type) const { return memory_.memoryTypes[type].propertyFlags; }
    // Bytes of the device-local heap(s) and what this process has not allocated of them (the budget extension
    // when the driver has it, else the heap size minus this process's allocations).
    size_t total_memory() const { return total_memory_; }
    size_t free_memory() const;
    void note_allocation(int64_t bytes) { allocated_ += bytes; }

private:
    friend std::shared_ptr<Device> get_device(int index);

    Device() = default;

    const Api *api_ = nullptr;
    int index_ = 0;
    std::string name_;
    VkPhysicalDevice physical_ = VK_NULL_HANDLE;
    VkDevice device_ = VK_NULL_HANDLE;
    VkQueue queue_ = VK_NULL_HANDLE;
    uint32_t queue_family_ = 0;
    VkPhysicalDeviceType type_ = VK_PHYSICAL_DEVICE_TYPE_OTHER;
    VkPhysicalDeviceLimits limits_{};
    VkPhysicalDeviceMemoryProperties memory_{};
    bool has_budget_ = false;
    size_t total_memory_ = 0;
    std::atomic<int64_t> allocated_{0};
    std::mutex queue_mutex_, kernels_mutex_;
    std::map<std::string, Kernel> kernels_;
};

// The usable devices, or an empty list with *reason (no loader, no driver, and why each device was skipped).
std::vector<DeviceInfo> list_devices(std::string *reason);
// The shared Device of a usable device index (as list_devices numbers them). Throws Error(UNSUPPORTED) when Vulkan
// is unavailable, Error(INVALID_ARGUMENT) for an index that is not a usable device.
std::shared_ptr<Device> get_device(int index);


}  // namespace specula::internal::vulkan
