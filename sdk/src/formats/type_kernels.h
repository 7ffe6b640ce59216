// The reference arithmetic of each tensor type, looked up by ggml type id: dequantize, quantize and a scalar dot
// product, written as plain loops bit-exact with ggml's reference code. Backend-neutral (part of the core): loaders
// and snapshots convert with it, the CPU backend computes with it, and every backend's kernels are tested against
// it. Adding a type means adding one file that registers a TypeKernels entry in type_registry.cpp.
//
// As in ggml, each weight type names the `dot_type` its activations are converted to before a dot product:
// F32/F16/BF16 -> F32, Q8_0/Q4_0 -> Q8_0, K-quants -> Q8_K (llama.cpp quantizes activations for quantized
// weights). Mirroring what llama.cpp computes keeps our logits within float rounding of its own.
#pragma once

#include <cstddef>
#include <cstdint>

namespace specula::internal {

struct TypeKernels {
    uint32_t type;           // ggml type id
    uint32_t block_size;     // elements per block
    uint32_t type_size;      // bytes per block
    uint32_t dot_type;       // type activations are converted to for vec_dot
    // Dequantize n elements (n a multiple of block_size) to floats.
    void (*to_float)(const void *src, float *dst, int64_t n);
    // Convert n floats into this type; nullptr where the type is never a dot_type.
    void (*from_float)(const float *src, void *dst, int64_t n);
    // Dot product of n elements of a row of this type with n elements of `dot_type` data.
    float (*vec_dot)(int64_t n, const void *row, const void *x);
};

// The reference arithmetic of a type, or nullptr for a type Specula cannot compute with.
const TypeKernels *find_type_kernels(uint32_t type);

// Bytes needed to hold n elements of a type (n a multiple of its block size).
size_t type_row_bytes(const TypeKernels &kernels, int64_t n);

}  // namespace specula::internal
