#include "backends/vulkan/vulkan_stream.h"

#include <algorithm>
#include <cstring>

namespace specula::internal::vulkan {
namespace {

constexpr uint32_t kSetsPerPool = 2048;
constexpr uint32_t kBindingsPerSet = 6;
constexpr size_t kMinStaging = size_t(4) << 20;

}  // namespace

Stream::Stream(std::shared_ptr<Device> device) : device_(std::move(device)) {
    const Api &a = device_->api();
    const VkDevice dev = device_->device();
    VkCommandPoolCreateInfo cp{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    cp.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    cp.queueFamilyIndex = device_->queue_family();
    check(a.vkCreateCommandPool(dev, &cp, nullptr, &pool_), "vkCreateCommandPool");
    VkCommandBufferAllocateInfo ca{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ca.commandPool = pool_;
    ca.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ca.commandBufferCount = 1;
    check(a.vkAllocateCommandBuffers(dev, &ca, &cmd_), "vkAllocateCommandBuffers");
    VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    check(a.vkCreateFence(dev, &fi, nullptr, &fence_), "vkCreateFence");
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kBindingsPerSet};
    VkDescriptorPoolCreateInfo dp{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    dp.maxSets = kSetsPerPool;
    dp.poolSizeCount = 1;
    dp.pPoolSizes = &size;
    check(a.vkCreateDescriptorPool(dev, &dp, nullptr, &descriptors_), "vkCreateDescriptorPool");
    staging_ = Buffer(device_, kMinStaging, Buffer::Kind::Staging, "staging");
}

Stream::~Stream() {
    const Api &a = device_->api();
    const VkDevice dev = device_->device();
    if (recording_) {
        // Work recorded but never submitted (an exception unwound the caller): drop it.
        a.vkEndCommandBuffer(cmd_);
    }
    a.vkDestroyDescriptorPool(dev, descriptors_, nullptr);
    a.vkDestroyFence(dev, fence_, nullptr);
    a.vkDestroyCommandPool(dev, pool_, nullptr);
}

void Stream::begin() {
    if (recording_) return;
    const Api &a = device_->api();
    check(a.vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(a.vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
    recording_ = true;
    commands_ = false;
}

void Stream::barrier() {
    if (!commands_) return;  // the first command of a submission: the fence wait already ordered the last one
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    device_->api().vkCmdPipelineBarrier(cmd_, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void Stream::dispatch_raw(const Kernel &k, std::initializer_list<const Buffer *> buffers, const void *push, uint32_t push_bytes, uint32_t gx,
                          uint32_t gy, uint32_t gz) {
    require(buffers.size() == k.bindings && push_bytes == k.push_bytes, SPECULA_ERR_INTERNAL, "Vulkan: a dispatch does not match its shader's layout");
    if (gx == 0 || gy == 0 || gz == 0) return;
    const Api &a = device_->api();
    const VkDevice dev = device_->device();
    begin();
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = descriptors_;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &k.set_layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    VkResult r = a.vkAllocateDescriptorSets(dev, &ai, &set);
    if (r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL) {
        finish();  // runs what was recorded, then frees every set of this pool
        begin();
        r = a.vkAllocateDescriptorSets(dev, &ai, &set);
    }
    check(r, "vkAllocateDescriptorSets");
    VkDescriptorBufferInfo infos[kBindingsPerSet];
    VkWriteDescriptorSet writes[kBindingsPerSet];
    uint32_t i = 0;
    for (const Buffer *b : buffers) {
        require(i < kBindingsPerSet && b != nullptr && *b, SPECULA_ERR_INTERNAL, "Vulkan: a dispatch names a missing buffer");
        infos[i] = VkDescriptorBufferInfo{b->handle(), 0, VK_WHOLE_SIZE};
        writes[i] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        writes[i].dstSet = set;
        writes[i].dstBinding = i;
        writes[i].descriptorCount = 1;
        writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes[i].pBufferInfo = &infos[i];
        ++i;
    }
    a.vkUpdateDescriptorSets(dev, i, writes, 0, nullptr);
    barrier();
    a.vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline);
    a.vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, k.layout, 0, 1, &set, 0, nullptr);
    if (push_bytes > 0) a.vkCmdPushConstants(cmd_, k.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
    a.vkCmdDispatch(cmd_, gx, gy, gz);
    commands_ = true;
}

size_t Stream::stage(size_t bytes) {
    const size_t aligned = (bytes + 15) / 16 * 16;
    if (staged_ + aligned > staging_.bytes()) {
        if (staged_ > 0) finish();
        if (aligned > staging_.bytes()) staging_ = Buffer(device_, std::max(aligned, 2 * staging_.bytes()), Buffer::Kind::Staging, "staging");
    }
    const size_t at = staged_;
    staged_ += aligned;
    return at;
}

void Stream::upload(const Buffer &dst, size_t offset, const void *src, size_t bytes) {
    // In pieces of at most the minimum staging size, so that a large matrix does not grow the staging buffer.
    for (size_t done = 0; done < bytes;) {
        const size_t n = std::min(bytes - done, kMinStaging);
        const size_t at = stage(n);
        std::memcpy(static_cast<uint8_t *>(staging_.mapped()) + at, static_cast<const uint8_t *>(src) + done, n);
        copy(staging_, at, dst, offset + done, n);
        done += n;
    }
}

void Stream::download(const Buffer &src, size_t offset, void *dst, size_t bytes) {
    if (bytes == 0) return;
    const size_t at = stage(bytes);
    copy(src, offset, staging_, at, bytes);
    downloads_.push_back(Download{at, dst, bytes});
}

void Stream::copy(const Buffer &src, size_t src_offset, const Buffer &dst, size_t dst_offset, size_t bytes) {
    if (bytes == 0) return;
    require(src_offset + bytes <= src.bytes() && dst_offset + bytes <= dst.bytes(), SPECULA_ERR_INTERNAL, "Vulkan: a copy runs past a buffer");
    begin();
    barrier();
    VkBufferCopy region{src_offset, dst_offset, bytes};
    device_->api().vkCmdCopyBuffer(cmd_, src.handle(), dst.handle(), 1, &region);
    commands_ = true;
}

void Stream::fill_zero(const Buffer &dst) {
    begin();
    barrier();
    device_->api().vkCmdFillBuffer(cmd_, dst.handle(), 0, VK_WHOLE_SIZE, 0);
    commands_ = true;
}

void Stream::finish() {
    if (!recording_) return;
    const Api &a = device_->api();
    const VkDevice dev = device_->device();
    if (commands_) {
        // Make the transfers' writes visible to the host's reads of the staging buffer after the fence.
        VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
        mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
        a.vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0,
                               nullptr, 0, nullptr);
    }
    recording_ = false;
    check(a.vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
    check(a.vkResetFences(dev, 1, &fence_), "vkResetFences");
    device_->submit(cmd_, fence_);
    check(a.vkWaitForFences(dev, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    for (const Download &d : downloads_) std::memcpy(d.dst, static_cast<const uint8_t *>(staging_.mapped()) + d.staging_offset, d.bytes);
    downloads_.clear();
    staged_ = 0;
    check(a.vkResetDescriptorPool(dev, descriptors_, 0), "vkResetDescriptorPool");
}

}  // namespace specula::internal::vulkan
