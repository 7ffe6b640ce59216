#include "backend/backend_choice.h"

#include "backends/cpu/cpu_runner.h"
#include "core/error.h"
#include "core/log.h"

#ifdef SPECULA_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_devices.h"
#endif

namespace specula::internal {

bool built_with_cuda() {
#ifdef SPECULA_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

std::vector<GpuDevice> list_gpu_devices(BackendKind kind, std::string *reason) {
    std::vector<GpuDevice> out;
    if (kind != BackendKind::Cuda) {
        if (reason) *reason = "not a GPU backend";
        return out;
    }
#ifdef SPECULA_HAVE_CUDA
    for (const cuda::DeviceInfo &d : cuda::list_devices(reason))
        out.push_back(GpuDevice{d.index, d.name, d.total_memory, d.free_memory, d.compute_major, d.compute_minor, d.multiprocessors,
                                d.peak_bandwidth_gbs});
#else
    if (reason) *reason = "this build has no CUDA backend (configure with -DSPECULA_CUDA=ON and the CUDA toolkit)";
#endif
    return out;
}

std::unique_ptr<TargetRunner> make_target_runner(std::shared_ptr<const Model> model, int32_t n_ctx, int n_threads,
                                                 const BackendChoice &choice, std::string &note) {
    note.clear();
    const KvType cpu_kv = choice.kv_type.value_or(KvType::F16);
    if (choice.kind == BackendKind::Cpu) return std::make_unique<CpuRunner>(std::move(model), n_ctx, n_threads, cpu_kv);
    require(choice.device >= 0, SPECULA_ERR_INVALID_ARGUMENT, "session: device index must be >= 0");
    std::string reason;
#ifdef SPECULA_HAVE_CUDA
    if (choice.kv_type && *choice.kv_type != KvType::F16) {
        reason = std::string("CUDA: keeps its KV cache in F16 only (asked for ") + kv_type_name(*choice.kv_type) + ")";
        require(choice.allow_fallback, SPECULA_ERR_UNSUPPORTED, reason);
    } else {
        try {
            return cuda::make_cuda_runner(model, n_ctx, n_threads, choice.device);
        } catch (const Error &e) {
            if (!choice.allow_fallback || (choice.kind == BackendKind::Cuda && e.status() == SPECULA_ERR_INVALID_ARGUMENT)) throw;
            reason = e.what();
        }
    }
#else
    reason = "CUDA: this build has no CUDA backend (configure with -DSPECULA_CUDA=ON and the CUDA toolkit)";
    require(choice.allow_fallback || choice.kind == BackendKind::Auto, SPECULA_ERR_UNSUPPORTED, reason);
#endif
    note = reason + "; running on the CPU";
    log(choice.kind == BackendKind::Cuda ? SPECULA_LOG_WARN : SPECULA_LOG_INFO, "%s", note.c_str());
    return std::make_unique<CpuRunner>(std::move(model), n_ctx, n_threads, cpu_kv);
}

}  // namespace specula::internal
