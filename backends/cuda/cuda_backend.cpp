#include "backends/cuda/cuda_backend.h"

#include "backends/cuda/cuda_devices.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/cuda_runner.h"

#include <algorithm>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {
namespace {

std::unique_ptr<TargetRunner> make_runner(const RunnerRequest &r) {
    if (r.kv_type && *r.kv_type != KvType::F16)
        throw Error(SPECULA_ERR_UNSUPPORTED, std::string("CUDA: keeps its KV cache in F16 only (asked for ") + kv_type_name(*r.kv_type) + ")");
    return make_cuda_runner(r.model, r.n_ctx, r.device, r.graph);
}

}  // namespace

BackendDesc cuda_backend() { return BackendDesc{BackendKind::Cuda, "cuda", true, list_devices, make_runner, CudaExecutor::supports}; }

std::unique_ptr<TargetRunner> make_cuda_runner(std::shared_ptr<const Model> model, int32_t n_ctx, int device, std::shared_ptr<const Graph> graph) {
    std::string reason;
    const std::vector<DeviceInfo> devices = list_devices(&reason);
    require(!devices.empty(), SPECULA_ERR_UNSUPPORTED, "CUDA: " + reason);
    const bool found = std::any_of(devices.begin(), devices.end(), [&](const DeviceInfo &d) { return d.index == device; });
    require(found, SPECULA_ERR_INVALID_ARGUMENT, "CUDA: device " + std::to_string(device) + " does not exist or is not usable (" +
                                                     std::to_string(devices.size()) + " usable device(s))");
    return std::make_unique<CudaRunner>(std::move(model), n_ctx, device, std::move(graph));
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
