// A model's weights on a Vulkan device, uploaded once per (model, device) and shared by every session there.
//
// Formats on the device: F32, F16, Q8_0, Q4_0, Q4_K, Q5_K and Q6_K matrices keep their GGUF bytes and the shaders
// dequantize them (shaders/weights.glsl); every other type is converted to F32 at upload with the core's reference
// dequantizer (formats/type_kernels.h). Norm weights and biases are F32.
#pragma once

#include "backends/vulkan/vulkan_buffer.h"
#include "graph/graph.h"

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace specula::internal {
class Model;
struct WeightView;
}

namespace specula::internal::vulkan {

class Stream;

// A matrix of `rows` output rows of `cols` inputs in `buffer`, in the layout of shader variant `suffix`.
struct Matrix {
    const Buffer *buffer = nullptr;
    const char *suffix = "f32";   // "f32", "f16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k": the shader variant
    uint32_t rows = 0, cols = 0;
    uint32_t row_stride = 0;      // elements (f32, f16) or bytes (quantized) between rows
};

// Uploads tensors and owns their buffers; a tensor is uploaded once (by its data: a tied output is the embedding's).
class Uploads {
public:
    explicit Uploads(Stream &stream) : stream_(&stream) {}
    Matrix matrix(const WeightView &w);
    // An F32 vector (norm weights, biases), or nullptr for an absent tensor.
    const Buffer *floats(const WeightView &w);
    // What was uploaded of w, or nullptr.
    const Matrix *find_matrix(const WeightView &w) const;
    const Buffer *find_floats(const WeightView &w) const;
    size_t bytes() const { return bytes_; }
    // Forgets the stream once uploading is done: shared weights outlive the runner whose stream uploaded them.
    void detach() { stream_ = nullptr; }
    // Device bytes matrix() takes for w.
    static size_t matrix_bytes(const WeightView &w);

private:
    Stream *stream_;
    size_t bytes_ = 0;
    std::vector<std::unique_ptr<Buffer>> buffers_;
    std::unordered_map<const uint8_t *, Matrix> matrices_;
    std::unordered_map<const uint8_t *, const Buffer *> vectors_;
};

class Weights {
public:
    // The weights of a model's graph on the stream's device, uploading them (through `stream`) if no live runner has
    // (one copy per model and device).
    static std::shared_ptr<const Weights> get(const Model &model, const Graph &graph, Stream &stream);
    // Device bytes the graph's weights take (checked against the device's memory before anything is allocated).
    static size_t bytes_needed(const Graph &graph);

    const Matrix *matrix(const WeightView &w) const { return uploads_.find_matrix(w); }
    const Buffer *floats(const WeightView &w) const { return uploads_.find_floats(w); }
    size_t bytes() const { return uploads_.bytes(); }

private:
    explicit Weights(Stream &stream) : uploads_(stream) {}
    Uploads uploads_;
};

}  // namespace specula::internal::vulkan
