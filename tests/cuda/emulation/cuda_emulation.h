// A CPU emulator of the slice of CUDA the backend uses, so that CI (which has no GPU) compiles and runs the very
// same kernel and runner sources: every CUDA thread is a fiber, a block's fibers run on one OS thread and switch
// only at __syncthreads / __syncwarp / shuffles, blocks run one after another, and a kernel launch or copy runs
// when it is issued (or, while a stream is being captured, when its graph is launched). It checks what the
// hardware would only get wrong quietly: a barrier that not every live thread of the block (or warp) reaches is
// reported as an error instead of hanging.
//
// It is not a performance model and does not emulate memory races between blocks (they run in turn) or the
// tensor cores' rounding (WMMA products are summed in float, in k order). Built only for the emulated test target
// (tests/CMakeLists.txt: specula_cuda_emulated_tests), with -DSPECULA_CUDA_EMULATION; x86-64 only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <utility>

// ---- language ---------------------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static  // block-shared: blocks run one at a time, so a static is one block's shared memory
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
    unsigned x = 0, y = 0, z = 0;
};

struct __half {
    uint16_t bits;
};
__half __float2half_rn(float f);
float __half2float(__half h);

// CUDA's device min/max for the integer types the kernels mix with.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }

// ---- runtime types ----------------------------------------------------------------------------------------
enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorGraphExecUpdateFailure = 910,
    cudaErrorLaunchFailure = 719,
};
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4 };
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1, cudaStreamCaptureModeRelaxed = 2 };
enum cudaDeviceAttr { cudaDevAttrMemoryClockRate = 36, cudaDevAttrGlobalMemoryBusWidth = 37 };
constexpr unsigned cudaStreamNonBlocking = 1;

struct CUstream_st;
using cudaStream_t = CUstream_st *;
struct CUgraph_st;
using cudaGraph_t = CUgraph_st *;
struct CUgraphExec_st;
using cudaGraphExec_t = CUgraphExec_st *;
struct cudaGraphExecUpdateResultInfo {
    int result = 0;
};
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    int major, minor, multiProcessorCount;
};

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaMalloc(void **ptr, size_t bytes);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMallocHost(void **ptr, size_t bytes);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemset(void *ptr, int value, size_t bytes);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags);
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo *info);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGetLastError();
const char *cudaGetErrorName(cudaError_t error);
const char *cudaGetErrorString(cudaError_t error);

// ---- execution --------------------------------------------------------------------------------------------
namespace cuda_emulation {

struct ThreadContext {
    uint3 thread, block;
    dim3 block_dim, grid_dim;
};
const ThreadContext &current();
void syncthreads();
void syncwarp();
// Exchanges 8 bytes with lane (own lane ^ lane_mask) of the warp.
uint64_t shfl_xor_bits(uint64_t bits, int lane_mask);
void *dynamic_shared();
// Runs body on every thread of every block (now, or into the stream's capture).
void launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, std::function<void()> body);
// Kernel launches and copies issued so far (tests check that a replayed graph really re-ran its kernels).
uint64_t launches();
// cudaGraphLaunch calls so far (tests check that work really went through a graph).
uint64_t graph_launches();

template <typename Kernel> struct Launcher {
    Kernel kernel;
    dim3 grid, block;
    size_t shared_bytes;
    cudaStream_t stream;
    template <typename... Args> void operator()(Args... args) const {
        Kernel k = kernel;
        launch(grid, block, shared_bytes, stream, [k, args...]() { k(args...); });
    }
};
template <typename Kernel> Launcher<Kernel> launcher(Kernel kernel, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream) {
    return Launcher<Kernel>{kernel, grid, block, shared_bytes, stream};
}

}  // namespace cuda_emulation

#define threadIdx (::cuda_emulation::current().thread)
#define blockIdx (::cuda_emulation::current().block)
#define blockDim (::cuda_emulation::current().block_dim)
#define gridDim (::cuda_emulation::current().grid_dim)

inline void __syncthreads() { cuda_emulation::syncthreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) { cuda_emulation::syncwarp(); }
template <typename T> T __shfl_xor_sync(unsigned, T value, int lane_mask) {
    static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    bits = cuda_emulation::shfl_xor_bits(bits, lane_mask);
    T out;
    std::memcpy(&out, &bits, sizeof(T));
    return out;
}

// Float arithmetic rounded per operation (never fused into a multiply-add): what the kernels write where their result
// must equal the host's bit for bit. The emulated kernels are C++ built with -ffp-contract=off, so plain operations.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
// Fibers switch only at barriers and shuffles, so a plain read-modify-write is atomic within a block (and blocks run
// one at a time).
inline unsigned atomicOr(unsigned *address, unsigned value) {
    const unsigned old = *address;
    *address = old | value;
    return old;
}
