// A model's weights in device memory, uploaded once per (model, device) and shared by every session on that
// device (the Model itself stays immutable; the registry holds only weak references).
//
// Formats on the device: F32 matrices stay F32 (CUDA-core GEMM, closest to the CPU reference); F16 stays F16;
// BF16 becomes F16 when every value fits F16's range (else F32); quantized types (Q8_0, Q4_0, K-quants) are
// dequantized to F16 at load with the CPU backend's own dequantizers, so the tensor-core GEMM serves them all.
// Norm weights and biases are F32.
#pragma once

#include "backends/cuda/cuda_namespace.h"

#include "backends/cuda/device_buffer.h"
#include "backends/cuda/kernels/kernels.h"

#include "graph/graph.h"

#include <memory>
#include <unordered_map>
#include <vector>

namespace specula::internal {
class Model;
struct WeightView;
}

namespace specula::internal::SPECULA_CUDA_NAMESPACE {

// Copies weight tensors to the device in the formats above and owns the copies; a tensor is copied once (by its
// data: a tied output is the embedding's copy).
class DeviceUploads {
public:
    DeviceMatrix matrix(const WeightView &w);
    // An F32 vector (norm weights, biases), or nullptr for an absent tensor.
    const float *floats(const WeightView &w);
    // The copies made so far of w, or nullptr.
    const DeviceMatrix *find_matrix(const WeightView &w) const;
    const float *find_floats(const WeightView &w) const;
    size_t bytes() const { return bytes_; }
    // The layout matrix() will give w (data left null; a BF16 matrix that overflows F16 ends up F32, smaller).
    static DeviceMatrix layout(const WeightView &w);
    // Device bytes matrix() will take for w.
    static size_t matrix_bytes(const WeightView &w);

private:
    size_t bytes_ = 0;
    std::vector<DeviceBuffer> buffers_;
    std::unordered_map<const uint8_t *, DeviceMatrix> matrices_;
    std::unordered_map<const uint8_t *, const float *> vectors_;
};

class DeviceWeights {
public:
    // The weights of a model's graph on `device`, uploading them if no live session has (one copy per model and
    // device). Throws Error(OUT_OF_MEMORY) when the device lacks room (with the sizes), Error(UNSUPPORTED) for a
    // type that cannot be converted.
    static std::shared_ptr<const DeviceWeights> get(const Model &model, const Graph &graph, int device);
    // Device bytes the graph's weights will take (for the memory check before anything is allocated).
    static size_t bytes_needed(const Graph &graph);

    const DeviceMatrix *matrix(const WeightView &w) const { return uploads_.find_matrix(w); }
    const float *floats(const WeightView &w) const { return uploads_.find_floats(w); }
    size_t bytes() const { return uploads_.bytes(); }
    int device() const { return device_; }

private:
    DeviceWeights() = default;

    int device_ = 0;
    DeviceUploads uploads_;
};

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
