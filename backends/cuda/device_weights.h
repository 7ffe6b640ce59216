// A model's weights in device memory, uploaded once per (model, device) and shared by every session on that
// device (the Model itself stays immutable; the registry holds only weak references).
//
// Formats on the device: F32 matrices stay F32 (CUDA-core GEMM, closest to the CPU reference); F16 stays F16;
// BF16 becomes F16 when every value fits F16's range (else F32); quantized types (Q8_0, Q4_0, K-quants) are
// dequantized to F16 at load with the CPU backend's own dequantizers, so the tensor-core GEMM serves them all.
// Norm weights and biases are F32.
#pragma once

#include "backends/cuda/device_buffer.h"
#include "backends/cuda/kernels/kernels.h"

#include <memory>
#include <vector>

namespace specula::internal {
class Model;
struct WeightView;
}

namespace specula::internal::cuda {

struct DeviceLayer {
    const float *attn_norm = nullptr, *ffn_norm = nullptr;
    const float *bq = nullptr, *bk = nullptr, *bv = nullptr;
    DeviceMatrix wq, wk, wv, wo, ffn_gate, ffn_up, ffn_down;
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
    size_t bytes() const { return bytes_; }
    int device() const { return device_; }

private:
    DeviceWeights() = default;
    void upload(const Model &model);
    DeviceMatrix upload_matrix(const WeightView &w);
    const float *upload_floats(const WeightView &w);

    int device_ = 0;
    size_t bytes_ = 0;
    std::vector<DeviceBuffer> buffers_;
};

}  // namespace specula::internal::cuda
