#include "backends/vulkan/vulkan_api.h"

#include "core/log.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace specula::internal::vulkan {
namespace {

std::atomic<int> g_validation_errors{0};
std::mutex g_last_error_mutex;
std::string g_last_error;

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
                                                   const VkDebugUtilsMessengerCallbackDataEXT *data, void *) {
    const char *text = data && data->pMessage ? data->pMessage : "(no message)";
    if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
        g_validation_errors.fetch_add(1);
        {
            std::lock_guard<std::mutex> lock(g_last_error_mutex);
            g_last_error = text;
        }
        log(SPECULA_LOG_ERROR, "Vulkan validation: %s", text);
    } else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        log(SPECULA_LOG_WARN, "Vulkan validation: %s", text);
    }
    return VK_FALSE;
}

struct Loaded {
    Instance inst;
    std::string reason;
    bool ok = false;
};

Loaded load() {
    Loaded out;
    // The loader is opened once and never closed: drivers keep threads and state for the process's lifetime.
    void *lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        out.reason = "no Vulkan loader (libvulkan.so.1: install libvulkan1 and a driver such as mesa-vulkan-drivers)";
        return out;
    }
    auto get_instance_proc = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
    if (get_instance_proc == nullptr) {
        out.reason = "libvulkan.so.1 has no vkGetInstanceProcAddr";
        return out;
    }
    Api &api = out.inst.api;
#define SPECULA_VK_LOAD_GLOBAL(name) api.name = reinterpret_cast<PFN_##name>(get_instance_proc(VK_NULL_HANDLE, #name));
    SPECULA_VK_GLOBAL_FUNCTIONS(SPECULA_VK_LOAD_GLOBAL)
#undef SPECULA_VK_LOAD_GLOBAL
    if (!api.vkCreateInstance || !api.vkEnumerateInstanceLayerProperties || !api.vkEnumerateInstanceExtensionProperties) {
        out.reason = "the Vulkan loader lacks the global functions";
        return out;
    }

    const char *env = std::getenv("SPECULA_VULKAN_VALIDATION");
    bool validation = env != nullptr && std::strcmp(env, "0") != 0 && env[0] != '\0';
    std::vector<const char *> layers, extensions;
    if (validation) {
        uint32_t n = 0;
        api.vkEnumerateInstanceLayerProperties(&n, nullptr);
        std::vector<VkLayerProperties> props(n);
        api.vkEnumerateInstanceLayerProperties(&n, props.data());
        bool found = false;
        for (const VkLayerProperties &p : props) found = found || std::strcmp(p.layerName, "VK_LAYER_KHRONOS_validation") == 0;
        if (found) {
            layers.push_back("VK_LAYER_KHRONOS_validation");
            extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
        } else {
            log(SPECULA_LOG_WARN, "Vulkan: SPECULA_VULKAN_VALIDATION is set but VK_LAYER_KHRONOS_validation is not installed (vulkan-validationlayers)");
            validation = false;
        }
    }
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "specula";
    app.pEngineName = "specula";
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    ci.enabledLayerCount = uint32_t(layers.size());
    ci.ppEnabledLayerNames = layers.data();
    ci.enabledExtensionCount = uint32_t(extensions.size());
    ci.ppEnabledExtensionNames = extensions.data();
    VkDebugUtilsMessengerCreateInfoEXT messenger{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    messenger.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
    messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    messenger.pfnUserCallback = on_validation_message;
    if (validation) ci.pNext = &messenger;  // also reports what happens during vkCreateInstance itself
    const VkResult r = api.vkCreateInstance(&ci, nullptr, &out.inst.instance);
    if (r != VK_SUCCESS) {
        out.reason = std::string("vkCreateInstance failed (") + result_name(r) + ")" +
                     (r == VK_ERROR_INCOMPATIBLE_DRIVER ? ": no Vulkan 1.2 driver (install mesa-vulkan-drivers or the GPU vendor's driver)" : "");
        return out;
    }
    VkInstance vi = out.inst.instance;
#define SPECULA_VK_LOAD_INSTANCE(name) api.name = reinterpret_cast<PFN_##name>(get_instance_proc(vi, #name));
    SPECULA_VK_INSTANCE_FUNCTIONS(SPECULA_VK_LOAD_INSTANCE)
    SPECULA_VK_DEVICE_FUNCTIONS(SPECULA_VK_LOAD_INSTANCE)
#undef SPECULA_VK_LOAD_INSTANCE
    api.vkCreateDebugUtilsMessengerEXT =
        reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(get_instance_proc(vi, "vkCreateDebugUtilsMessengerEXT"));
    if (validation && api.vkCreateDebugUtilsMessengerEXT) {
        VkDebugUtilsMessengerEXT handle = VK_NULL_HANDLE;
        api.vkCreateDebugUtilsMessengerEXT(vi, &messenger, nullptr, &handle);  // lives as long as the instance
    }
    out.inst.validation = validation;
    out.ok = true;
    return out;
}

}  // namespace

const Instance *instance(std::string *reason) {
    // Created on first use and kept for the process: the instance is shared by every device and session.
    static const Loaded loaded = load();
    if (!loaded.ok) {
        if (reason) *reason = loaded.reason;
        return nullptr;
    }
    return &loaded.inst;
}

int validation_errors() { return g_validation_errors.load(); }

std::string last_validation_error() {
    std::lock_guard<std::mutex> lock(g_last_error_mutex);
    return g_last_error;
}

const char *result_name(VkResult r) {
    switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default: return "VkResult error";
    }
}

void check(VkResult r, const char *what) {
    if (r == VK_SUCCESS) return;
    const bool oom = r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY;
    throw Error(oom ? SPECULA_ERR_OUT_OF_MEMORY : SPECULA_ERR_INTERNAL, std::string("Vulkan: ") + what + " failed (" + result_name(r) + ")");
}

}  // namespace specula::internal::vulkan
