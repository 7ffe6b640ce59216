#include "backends/vulkan/vulkan_buffer.h"

#include <utility>

namespace specula::internal::vulkan {

Buffer::Buffer(std::shared_ptr<Device> device, size_t bytes, Kind kind, const char *what) : device_(std::move(device)), bytes_(bytes) {
    const Api &a = device_->api();
    const VkDevice dev = device_->device();
    require(bytes <= device_->limits().maxStorageBufferRange || kind == Kind::Staging, SPECULA_ERR_UNSUPPORTED,
            std::string("Vulkan: ") + what + " needs a buffer of " + std::to_string(bytes) + " bytes, above this device's maxStorageBufferRange (" +
                std::to_string(device_->limits().maxStorageBufferRange) + ")");
    VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bi.size = std::max<size_t>(bytes, 16);
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    check(a.vkCreateBuffer(dev, &bi, nullptr, &buffer_), "vkCreateBuffer");
    VkMemoryRequirements req{};
    a.vkGetBufferMemoryRequirements(dev, buffer_, &req);
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = kind == Kind::Device
                             ? device_->memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0)
                             : device_->memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                                    VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    const VkResult r = a.vkAllocateMemory(dev, &ai, nullptr, &memory_);
    if (r != VK_SUCCESS) {
        a.vkDestroyBuffer(dev, buffer_, nullptr);
        buffer_ = VK_NULL_HANDLE;
        const bool oom = r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY;
        throw Error(oom ? SPECULA_ERR_OUT_OF_MEMORY : SPECULA_ERR_INTERNAL,
                    std::string("Vulkan: allocating ") + std::to_string(req.size >> 20) + " MiB for " + what + " failed (" + result_name(r) + ")");
    }
    device_->note_allocation(int64_t(req.size));
    check(a.vkBindBufferMemory(dev, buffer_, memory_, 0), "vkBindBufferMemory");
    if (kind == Kind::Staging) check(a.vkMapMemory(dev, memory_, 0, VK_WHOLE_SIZE, 0, &mapped_), "vkMapMemory");
    bytes_ = bytes;
    alloc_size_ = req.size;
}

Buffer &Buffer::operator=(Buffer &&o) noexcept {
    if (this != &o) {
        reset();
        device_ = std::move(o.device_);
        buffer_ = std::exchange(o.buffer_, VK_NULL_HANDLE);
        memory_ = std::exchange(o.memory_, VK_NULL_HANDLE);
        bytes_ = std::exchange(o.bytes_, 0);
        alloc_size_ = std::exchange(o.alloc_size_, 0);
        mapped_ = std::exchange(o.mapped_, nullptr);
    }
    return *this;
}

void Buffer::reset() {
    if (!device_) return;
    const Api &a = device_->api();
    if (buffer_ != VK_NULL_HANDLE) a.vkDestroyBuffer(device_->device(), buffer_, nullptr);
    if (memory_ != VK_NULL_HANDLE) {
        a.vkFreeMemory(device_->device(), memory_, nullptr);
        device_->note_allocation(-int64_t(alloc_size_));
    }
    buffer_ = VK_NULL_HANDLE;
    memory_ = VK_NULL_HANDLE;
    mapped_ = nullptr;
    bytes_ = alloc_size_ = 0;
    device_.reset();
}

}  // namespace specula::internal::vulkan
