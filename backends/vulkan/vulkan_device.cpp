#include "backends/vulkan/vulkan_device.h"

#include "backends/vulkan/vulkan_shaders.h"

#include <algorithm>
#include <cstring>

namespace specula::internal::vulkan {
namespace {

constexpr size_t kMiB = size_t(1) << 20;
// What the shaders rely on beyond Vulkan 1.2's minimums (attention_chunks.comp keeps ~18 KiB in shared memory).
constexpr uint32_t kSharedMemoryBytes = 20 * 1024;
constexpr uint32_t kWorkgroupSize = 256;
constexpr size_t kMinDeviceMemory = 64 * kMiB;

struct Candidate {
    VkPhysicalDevice physical = VK_NULL_HANDLE;
    VkPhysicalDeviceProperties props{};
    uint32_t queue_family = 0;
    size_t device_local = 0;
};

int type_rank(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
    }
}

size_t device_local_bytes(const VkPhysicalDeviceMemoryProperties &m) {
    size_t total = 0;
    for (uint32_t h = 0; h < m.memoryHeapCount; ++h)
        if (m.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) total += size_t(m.memoryHeaps[h].size);
    return total;
}

// Every physical device that can run the shaders, best first (discrete, integrated, virtual, CPU), or the reasons
// each was skipped. The list's order gives the device indices.
std::vector<Candidate> usable_devices(const Instance &inst, std::string *reason) {
    const Api &api = inst.api;
    uint32_t n = 0;
    api.vkEnumeratePhysicalDevices(inst.instance, &n, nullptr);
    std::vector<VkPhysicalDevice> physical(n);
    if (n > 0) api.vkEnumeratePhysicalDevices(inst.instance, &n, physical.data());
    std::vector<Candidate> out;
    std::string skipped;
    for (uint32_t i = 0; i < n; ++i) {
        Candidate c;
        c.physical = physical[i];
        api.vkGetPhysicalDeviceProperties(c.physical, &c.props);
        std::string why;
        VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
        VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
        f11.pNext = &f12;
        VkPhysicalDeviceFeatures2 f{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
        f.pNext = &f11;
        uint32_t nq = 0;
        api.vkGetPhysicalDeviceQueueFamilyProperties(c.physical, &nq, nullptr);
        std::vector<VkQueueFamilyProperties> queues(nq);
        api.vkGetPhysicalDeviceQueueFamilyProperties(c.physical, &nq, queues.data());
        bool compute = false;
        for (uint32_t q = 0; q < nq && !compute; ++q)
            if (queues[q].queueFlags & VK_QUEUE_COMPUTE_BIT) {
                compute = true;
                c.queue_family = q;
            }
        VkPhysicalDeviceMemoryProperties mem{};
        api.vkGetPhysicalDeviceMemoryProperties(c.physical, &mem);
        c.device_local = device_local_bytes(mem);
        const VkPhysicalDeviceLimits &lim = c.props.limits;
        if (c.props.apiVersion < VK_API_VERSION_1_2) {
            why = "supports Vulkan " + std::to_string(VK_API_VERSION_MAJOR(c.props.apiVersion)) + "." +
                  std::to_string(VK_API_VERSION_MINOR(c.props.apiVersion)) + ", below 1.2";
        } else if (!compute) {
            why = "has no compute queue";
        } else {
            api.vkGetPhysicalDeviceFeatures2(c.physical, &f);
            if (!f11.storageBuffer16BitAccess) why = "lacks 16-bit storage buffers (storageBuffer16BitAccess)";
            else if (!f12.storageBuffer8BitAccess) why = "lacks 8-bit storage buffers (storageBuffer8BitAccess)";
            else if (lim.maxComputeSharedMemorySize < kSharedMemoryBytes)
                why = "has " + std::to_string(lim.maxComputeSharedMemorySize) + " bytes of shared memory per workgroup, below " +
                      std::to_string(kSharedMemoryBytes);
            else if (lim.maxComputeWorkGroupSize[0] < kWorkgroupSize || lim.maxComputeWorkGroupInvocations < kWorkgroupSize)
                why = "allows workgroups of fewer than " + std::to_string(kWorkgroupSize) + " invocations";
            else if (c.device_local < kMinDeviceMemory)
                why = "has " + std::to_string(c.device_local / kMiB) + " MiB of device memory, below " + std::to_string(kMinDeviceMemory / kMiB) + " MiB";
        }
        if (!why.empty()) {
            skipped += std::string(skipped.empty() ? "" : "; ") + c.props.deviceName + " " + why;
            continue;
        }
        out.push_back(c);
    }
    std::stable_sort(out.begin(), out.end(), [](const Candidate &a, const Candidate &b) { return type_rank(a.props.deviceType) < type_rank(b.props.deviceType); });
    if (out.empty() && reason) *reason = n == 0 ? "no Vulkan device found" : "no usable Vulkan device: " + skipped;
    return out;
}

const char *type_name(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
    }
}

}  // namespace

std::vector<DeviceInfo> list_devices(std::string *reason) {
    const Instance *inst = instance(reason);
    if (inst == nullptr) return {};
    std::vector<DeviceInfo> devices;
    const std::vector<Candidate> usable = usable_devices(*inst, reason);
    for (size_t i = 0; i < usable.size(); ++i) {
        const Candidate &c = usable[i];
        DeviceInfo d;
        d.index = int32_t(i);
        d.name = std::string(c.props.deviceName) + " (" + type_name(c.props.deviceType) + ")";
        d.total_memory = c.device_local;
        d.free_memory = c.device_local;
        // A live Device knows its budget and this process's allocations; otherwise the heap size is all we know.
        devices.push_back(std::move(d));
    }
    return devices;
}

std::shared_ptr<Device> get_device(int index) {
    static std::mutex mutex;
    static std::map<int, std::weak_ptr<Device>> live;
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = live.find(index); it != live.end())
        if (std::shared_ptr<Device> d = it->second.lock()) return d;

    std::string reason;
    const Instance *inst = instance(&reason);
    require(inst != nullptr, SPECULA_ERR_UNSUPPORTED, "Vulkan: " + reason);
    const std::vector<Candidate> usable = usable_devices(*inst, &reason);
    require(!usable.empty(), SPECULA_ERR_UNSUPPORTED, "Vulkan: " + reason);
    require(index >= 0 && size_t(index) < usable.size(), SPECULA_ERR_INVALID_ARGUMENT,
            "Vulkan: device " + std::to_string(index) + " does not exist (" + std::to_string(usable.size()) + " usable device(s))");
    const Candidate &c = usable[size_t(index)];
    const Api &api = inst->api;

    std::shared_ptr<Device> dev(new Device());
    dev->api_ = &api;
    dev->index_ = index;
    dev->name_ = c.props.deviceName;
    dev->physical_ = c.physical;
    dev->queue_family_ = c.queue_family;
    dev->type_ = c.props.deviceType;
    dev->limits_ = c.props.limits;
    dev->total_memory_ = c.device_local;
    api.vkGetPhysicalDeviceMemoryProperties(c.physical, &dev->memory_);

    uint32_t n_ext = 0;
    api.vkEnumerateDeviceExtensionProperties(c.physical, nullptr, &n_ext, nullptr);
    std::vector<VkExtensionProperties> exts(n_ext);
    api.vkEnumerateDeviceExtensionProperties(c.physical, nullptr, &n_ext, exts.data());
    std::vector<const char *> enable;
    for (const VkExtensionProperties &e : exts)
        if (std::strcmp(e.extensionName, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME) == 0) {
            enable.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
            dev->has_budget_ = true;
        }

    const float priority = 1.0f;
    VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci.queueFamilyIndex = c.queue_family;
    qci.queueCount = 1;
    qci.pQueuePriorities = &priority;
    VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    f11.storageBuffer16BitAccess = VK_TRUE;
    f12.storageBuffer8BitAccess = VK_TRUE;
    f11.pNext = &f12;
    VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    features.pNext = &f11;
    VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.pNext = &features;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    dci.enabledExtensionCount = uint32_t(enable.size());
    dci.ppEnabledExtensionNames = enable.data();
    check(api.vkCreateDevice(c.physical, &dci, nullptr, &dev->device_), "vkCreateDevice");
    api.vkGetDeviceQueue(dev->device_, c.queue_family, 0, &dev->queue_);
    live[index] = dev;
    return dev;
}

Device::~Device() {
    if (device_ == VK_NULL_HANDLE) return;
    const Api &a = *api_;
    a.vkDeviceWaitIdle(device_);
    for (auto &[name, k] : kernels_) {
        a.vkDestroyPipeline(device_, k.pipeline, nullptr);
        a.vkDestroyPipelineLayout(device_, k.layout, nullptr);
        a.vkDestroyDescriptorSetLayout(device_, k.set_layout, nullptr);
    }
    a.vkDestroyDevice(device_, nullptr);
}

const Kernel &Device::kernel(const char *name, uint32_t bindings, uint32_t push_bytes) {
    std::lock_guard<std::mutex> lock(kernels_mutex_);
    if (auto it = kernels_.find(name); it != kernels_.end()) {
        require(it->second.bindings == bindings && it->second.push_bytes == push_bytes, SPECULA_ERR_INTERNAL,
                std::string("Vulkan: shader ") + name + " requested with two layouts");
        return it->second;
    }
    const std::span<const uint32_t> code = find_spirv(name);
    require(!code.empty(), SPECULA_ERR_INTERNAL, std::string("Vulkan: this build has no shader ") + name);
    const Api &a = *api_;
    Kernel k;
    k.bindings = bindings;
    k.push_bytes = push_bytes;
    std::vector<VkDescriptorSetLayoutBinding> b(bindings);
    for (uint32_t i = 0; i < bindings; ++i) {
        b[i].binding = i;
        b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        b[i].descriptorCount = 1;
        b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    dl.bindingCount = bindings;
    dl.pBindings = b.data();
    check(a.vkCreateDescriptorSetLayout(device_, &dl, nullptr, &k.set_layout), "vkCreateDescriptorSetLayout");
    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
    VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pl.setLayoutCount = 1;
    pl.pSetLayouts = &k.set_layout;
    pl.pushConstantRangeCount = push_bytes > 0 ? 1 : 0;
    pl.pPushConstantRanges = &range;
    check(a.vkCreatePipelineLayout(device_, &pl, nullptr, &k.layout), "vkCreatePipelineLayout");
    VkShaderModuleCreateInfo sm{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    sm.codeSize = code.size() * sizeof(uint32_t);
    sm.pCode = code.data();
    VkShaderModule module = VK_NULL_HANDLE;
    check(a.vkCreateShaderModule(device_, &sm, nullptr, &module), "vkCreateShaderModule");
    VkComputePipelineCreateInfo cp{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    cp.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    cp.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    cp.stage.module = module;
    cp.stage.pName = "main";
    cp.layout = k.layout;
    const VkResult r = a.vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &cp, nullptr, &k.pipeline);
    a.vkDestroyShaderModule(device_, module, nullptr);
    check(r, "vkCreateComputePipelines");
    return kernels_.emplace(name, k).first->second;
}

void Device::submit(VkCommandBuffer cmd, VkFence fence) {
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd;
    std::lock_guard<std::mutex> lock(queue_mutex_);
    check(api_->vkQueueSubmit(queue_, 1, &si, fence), "vkQueueSubmit");
}

uint32_t Device::memory_type(uint32_t type_bits, VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) const {
    uint32_t fallback = UINT32_MAX;
    for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
        if (!(type_bits & (1u << i))) continue;
        const VkMemoryPropertyFlags f = memory_.memoryTypes[i].propertyFlags;
        if ((f & required) != required) continue;
        if ((f & preferred) == preferred) return i;
        if (fallback == UINT32_MAX) fallback = i;
    }
    require(fallback != UINT32_MAX, SPECULA_ERR_UNSUPPORTED, "Vulkan: no memory type with the properties a buffer needs");
    return fallback;
}

size_t Device::free_memory() const {
    if (has_budget_ && api_->vkGetPhysicalDeviceMemoryProperties2) {
        VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
        VkPhysicalDeviceMemoryProperties2 p{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
        p.pNext = &budget;
        api_->vkGetPhysicalDeviceMemoryProperties2(physical_, &p);
        size_t free_b = 0;
        for (uint32_t h = 0; h < p.memoryProperties.memoryHeapCount; ++h)
            if (p.memoryProperties.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
                free_b += budget.heapBudget[h] > budget.heapUsage[h] ? size_t(budget.heapBudget[h] - budget.heapUsage[h]) : 0;
        return free_b;
    }
    const int64_t used = allocated_.load();
    return used >= int64_t(total_memory_) ? 0 : total_memory_ - size_t(used);
}

}  // namespace specula::internal::vulkan
