// Launching a sequence of kernels as a CUDA graph: what a callback enqueues on the stream is captured, patched into
// the instantiated graph kept by the caller (cudaGraphExecUpdate: kernel arguments and grid sizes may change), or
// instantiated anew when the update is refused (another topology), and launched. Used for decode steps
// (cuda_runner.cpp) and the LongSpec draft's levels (cuda_longspec_drafter.cpp).
#pragma once

#include "backends/cuda/cuda_namespace.h"

#include "backends/cuda/cuda_check.h"

namespace specula::internal::SPECULA_CUDA_NAMESPACE {

// Errors thrown by `enqueue` end the capture and leave the stream usable; `exec` stays null after a failed
// instantiation. Nothing may allocate device memory inside `enqueue` (not allowed while capturing).
template <typename Enqueue> void launch_as_graph(cudaStream_t stream, cudaGraphExec_t &exec, Enqueue &&enqueue) {
    cudaGraph_t graph = nullptr;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    try {
        enqueue();
    } catch (...) {
        cudaStreamEndCapture(stream, &graph);
        if (graph) cudaGraphDestroy(graph);
        (void)cudaGetLastError();
        throw;
    }
    check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    bool updated = false;
    if (exec != nullptr) {
        cudaGraphExecUpdateResultInfo info{};
        updated = cudaGraphExecUpdate(exec, graph, &info) == cudaSuccess;
        if (!updated) {
            (void)cudaGetLastError();
            cudaGraphExecDestroy(exec);
            exec = nullptr;
        }
    }
    if (!updated) {
        const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphDestroy(graph);
        if (status != cudaSuccess) exec = nullptr;
        check(status, "cudaGraphInstantiate");
    } else {
        cudaGraphDestroy(graph);
    }
    check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
