// The Vulkan functions the backend calls, loaded at run time from the system's loader (libvulkan.so.1, Debian
// libvulkan1) with dlopen: libspecula.so then loads, and reports why Vulkan is unavailable, on a machine that has no
// Vulkan loader at all. Global functions come from vkGetInstanceProcAddr(nullptr, ...), the rest from the instance.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "core/error.h"

#include <string>

namespace specula::internal::vulkan {

#define SPECULA_VK_GLOBAL_FUNCTIONS(X) \
    X(vkCreateInstance)                \
    X(vkEnumerateInstanceLayerProperties) \
    X(vkEnumerateInstanceExtensionProperties)

#define SPECULA_VK_INSTANCE_FUNCTIONS(X)           \
    X(vkDestroyInstance)                           \
    X(vkEnumeratePhysicalDevices)                  \
    X(vkGetPhysicalDeviceProperties)               \
    X(vkGetPhysicalDeviceFeatures2)                \
    X(vkGetPhysicalDeviceMemoryProperties)         \
    X(vkGetPhysicalDeviceMemoryProperties2)        \
    X(vkGetPhysicalDeviceQueueFamilyProperties)    \
    X(vkEnumerateDeviceExtensionProperties)        \
    X(vkCreateDevice)                              \
    X(vkGetDeviceProcAddr)

#define SPECULA_VK_DEVICE_FUNCTIONS(X)  \
    X(vkDestroyDevice)                  \
    X(vkGetDeviceQueue)                 \
    X(vkDeviceWaitIdle)                 \
    X(vkCreateBuffer)                   \
    X(vkDestroyBuffer)                  \
    X(vkGetBufferMemoryRequirements)    \
    X(vkAllocateMemory)                 \
    X(vkFreeMemory)                     \
    X(vkBindBufferMemory)               \
    X(vkMapMemory)                      \
    X(vkUnmapMemory)                    \
    X(vkCreateShaderModule)             \
    X(vkDestroyShaderModule)            \
    X(vkCreateDescriptorSetLayout)      \
    X(vkDestroyDescriptorSetLayout)     \
    X(vkCreatePipelineLayout)           \
    X(vkDestroyPipelineLayout)          \
    X(vkCreateComputePipelines)         \
    X(vkDestroyPipeline)                \
    X(vkCreateDescriptorPool)           \
    X(vkDestroyDescriptorPool)          \
    X(vkResetDescriptorPool)            \
    X(vkAllocateDescriptorSets)         \
    X(vkUpdateDescriptorSets)           \
    X(vkCreateCommandPool)              \
    X(vkDestroyCommandPool)             \
    X(vkAllocateCommandBuffers)         \
    X(vkBeginCommandBuffer)             \
    X(vkEndCommandBuffer)               \
    X(vkResetCommandBuffer)             \
    X(vkCmdBindPipeline)                \
    X(vkCmdBindDescriptorSets)          \
    X(vkCmdPushConstants)               \
    X(vkCmdDispatch)                    \
    X(vkCmdPipelineBarrier)             \
    X(vkCmdCopyBuffer)                  \
    X(vkCmdFillBuffer)                  \
    X(vkCreateFence)                    \
    X(vkDestroyFence)                   \
    X(vkResetFences)                    \
    X(vkWaitForFences)                  \
    X(vkQueueSubmit)

struct Api {
#define SPECULA_VK_DECLARE(name) PFN_##name name = nullptr;
    SPECULA_VK_GLOBAL_FUNCTIONS(SPECULA_VK_DECLARE)
    SPECULA_VK_INSTANCE_FUNCTIONS(SPECULA_VK_DECLARE)
    SPECULA_VK_DEVICE_FUNCTIONS(SPECULA_VK_DECLARE)
    PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT = nullptr;
#undef SPECULA_VK_DECLARE
};

// The process's Vulkan instance and its functions, created once (thread-safe); nullptr with *reason when there is
// no loader, no driver, or the instance cannot be created. With SPECULA_VULKAN_VALIDATION=1 in the environment the
// Khronos validation layer is enabled and its messages are counted (validation_errors()) and logged.
struct Instance {
    Api api;
    VkInstance instance = VK_NULL_HANDLE;
    bool validation = false;
};
const Instance *instance(std::string *reason);

// Errors the validation layer reported since the process started (0 when validation is off).
int validation_errors();
// The last error message the validation layer reported ("" if none).
std::string last_validation_error();

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" for a VkResult.
const char *result_name(VkResult r);
// Throws Error(INTERNAL, or OUT_OF_MEMORY for the out-of-memory results) naming `what` unless r is VK_SUCCESS.
void check(VkResult r, const char *what);

}  // namespace specula::internal::vulkan
