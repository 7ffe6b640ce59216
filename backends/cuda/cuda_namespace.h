// The namespace the CUDA backend's code lives in. The real backend: specula::internal::cuda. The tests also compile
// the same sources as C++ against the CPU emulator of CUDA (tests/cuda/emulation, which defines
// SPECULA_CUDA_EMULATION); that copy lives in specula::internal::cuda_emulated, so it links into a test binary
// beside the real backend without two definitions of one name, and `cuda::` in the code and its tests names
// whichever copy the file is compiled as.
#pragma once

#ifdef SPECULA_CUDA_EMULATION
#define SPECULA_CUDA_NAMESPACE cuda_emulated
namespace specula::internal::cuda_emulated {}
namespace specula::internal {
namespace cuda = cuda_emulated;
}
#else
#define SPECULA_CUDA_NAMESPACE cuda
#endif
