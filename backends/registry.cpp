// The one place that names the backends of this build (backend/backend_registry.h): a backend is added here and
// in CMake, and nowhere in the core. AUTO tries the GPU kinds in the order of gpu_backend_kinds() (CUDA, then
// Vulkan; backend/backend_registry.cpp), then the CPU.
#include "backend/backend_registry.h"

#include "backends/cpu/cpu_backend.h"
#ifdef SPECULA_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif
#ifdef SPECULA_HAVE_VULKAN
#include "backends/vulkan/vulkan_backend.h"
#endif

namespace specula::internal {

std::span<const BackendDesc> builtin_backends() {
    static const BackendDesc kBackends[] = {
#ifdef SPECULA_HAVE_CUDA
        cuda::cuda_backend(),
#endif
#ifdef SPECULA_HAVE_VULKAN
        vulkan::vulkan_backend(),
#endif
        cpu_backend(),
    };
    return kBackends;
}

}  // namespace specula::internal
