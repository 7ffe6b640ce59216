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

#include <memory>
#include <vector>

namespace specula::internal {
class Model;
struct WeightView;
}

namespace specula::internal::SPECULA_CUDA_NAMESPACE {

struct DeviceLayer {
    const float *attn_norm = nullptr, *ffn_norm = nullptr;
    const float *bq = nullptr, *bk = nullptr, *bv = nullptr;
    DeviceMatrix wq, wk, wv, wo, ffn_gate, ffn_up, ffn_down;
};

// Copies weight tensors to the device in the formats above and owns the copies.
class DeviceUploads {
public:
    DeviceMatrix matrix(const WeightView &w);
    // An F32 vector (norm weights, biases), or nullptr for an absent tensor.
    const float *floats(const WeightView &w);
    size_t bytes() const { return bytes_; }
    // The layout matrix() will give w (data left null; a BF16 matrix that overflows F16 ends up F32, smaller).
    static DeviceMatrix layout(const WeightView &w);
    // Device bytes matrix() will take for w.
    static size_t matrix_bytes(const WeightView &w);

private:
    size_t bytes_ = 0;
    std::vector<DeviceBuffer> buffers_;
};

class DeviceWeights {
public:
    // The weights of `model` on `device`, uploading them if no live session has. Throws Error(OUT_OF_MEMORY) when
    // the device lacks room (with the sizes), Error(UNSUPPORTED) for a type that cannot be converted.
    static std::shared_ptr<const DeviceWeights> get(const std::shared_ptr<const Model> &model, int device);
    // Device bytes the model's weights will take (for the memory check before anything is allocated).
    static size_t bytes_needed(const Model &model);

    DeviceMatrix token_embd, output;
    const float *output_norm = nullptr;
    std::vector<DeviceLayer> layers;
    size_t bytes() const { return uploads_.bytes(); }
    int device() const { return device_; }

private:
    DeviceWeights() = default;
    void upload(const Model &model);

    int device_ = 0;
    DeviceUploads uploads_;
};

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
