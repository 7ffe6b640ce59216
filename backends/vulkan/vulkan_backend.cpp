#include "backends/vulkan/vulkan_backend.h"

#include "backends/vulkan/vulkan_device.h"
#include "backends/vulkan/vulkan_executor.h"
#include "backends/vulkan/vulkan_runner.h"

namespace specula::internal::vulkan {
namespace {

std::unique_ptr<TargetRunner> make_runner(const RunnerRequest &r) {
    if (r.kv_type && *r.kv_type != KvType::F16)
        throw Error(SPECULA_ERR_UNSUPPORTED, std::string("Vulkan: keeps its KV cache in F16 only (asked for ") + kv_type_name(*r.kv_type) + ")");
    std::shared_ptr<Device> device = get_device(r.device);  // throws UNSUPPORTED / INVALID_ARGUMENT with the reason
    // A software implementation (Mesa's lavapipe) computes on the same cores as the CPU backend, only slower:
    // AUTO passes it by; asking for Vulkan by name uses it (that is how CI tests this backend).
    if (r.automatic && device->is_cpu())
        throw Error(SPECULA_ERR_UNSUPPORTED, "Vulkan: device " + std::to_string(r.device) + " (" + device->name() +
                                                 ") runs on the CPU; automatic choice prefers the CPU backend (ask for the Vulkan backend to use it)");
    return std::make_unique<VulkanRunner>(r.model, r.n_ctx, std::move(device), r.graph);
}

}  // namespace

BackendDesc vulkan_backend() { return BackendDesc{BackendKind::Vulkan, "vulkan", true, list_devices, make_runner, VulkanExecutor::supports}; }

}  // namespace specula::internal::vulkan
