#include "backends/vulkan/vulkan_weights.h"

#include "backends/vulkan/vulkan_stream.h"
#include "formats/type_kernels.h"
#include "gguf/tensor_type.h"
#include "model/model.h"

#include <map>
#include <mutex>

namespace specula::internal::vulkan {
namespace {

// The shader variant that reads a type in its GGUF layout, or nullptr (converted to F32).
const char *native_suffix(uint32_t type) {
    switch (TensorType(type)) {
    case TensorType::F32: return "f32";
    case TensorType::F16: return "f16";
    case TensorType::Q8_0: return "q8_0";
    case TensorType::Q4_0: return "q4_0";
    case TensorType::Q4_K: return "q4_k";
    case TensorType::Q5_K: return "q5_k";
    case TensorType::Q6_K: return "q6_k";
    default: return nullptr;
    }
}

std::mutex registry_mutex;
std::map<std::pair<const Model *, int>, std::weak_ptr<const Weights>> registry;

}  // namespace

size_t Uploads::matrix_bytes(const WeightView &w) {
    if (native_suffix(w.type) != nullptr) return size_t(w.rows) * w.row_bytes;
    return size_t(w.rows) * size_t(w.cols) * 4;
}

const Matrix *Uploads::find_matrix(const WeightView &w) const {
    const auto it = matrices_.find(w.data);
    return it == matrices_.end() ? nullptr : &it->second;
}

const Buffer *Uploads::find_floats(const WeightView &w) const {
    const auto it = vectors_.find(w.data);
    return it == vectors_.end() ? nullptr : it->second;
}

Matrix Uploads::matrix(const WeightView &w) {
    if (const Matrix *have = find_matrix(w)) return *have;
    require(stream_ != nullptr, SPECULA_ERR_INTERNAL, "Vulkan: upload after the uploads were detached");
    Matrix m;
    m.rows = uint32_t(w.rows);
    m.cols = uint32_t(w.cols);
    const char *suffix = native_suffix(w.type);
    auto buffer = std::make_unique<Buffer>(stream_->shared_device(), matrix_bytes(w), Buffer::Kind::Device, "weights");
    if (suffix != nullptr) {
        m.suffix = suffix;
        const bool quantized = w.type != uint32_t(TensorType::F32) && w.type != uint32_t(TensorType::F16);
        m.row_stride = uint32_t(quantized ? w.row_bytes : w.row_bytes / (w.type == uint32_t(TensorType::F32) ? 4 : 2));
        require(!quantized || w.cols % 32 == 0, SPECULA_ERR_UNSUPPORTED, "Vulkan: a quantized matrix's width must be a multiple of 32");
        // Rows of F32/F16 are whole elements; the quantized shaders read bytes, so any row size works.
        require(quantized || w.row_bytes % (w.type == uint32_t(TensorType::F32) ? 4 : 2) == 0, SPECULA_ERR_UNSUPPORTED,
                "Vulkan: a matrix row is not a whole number of elements");
        stream_->upload(*buffer, 0, w.data, size_t(w.rows) * w.row_bytes);
    } else {
        const TypeKernels *k = find_type_kernels(w.type);
        require(k != nullptr && k->to_float != nullptr, SPECULA_ERR_UNSUPPORTED,
                std::string("Vulkan: cannot compute with tensor type ") + tensor_type_name(w.type));
        m.suffix = "f32";
        m.row_stride = uint32_t(w.cols);
        std::vector<float> rows;
        // Converted in slices of rows so that a large matrix does not need a second full copy on the host.
        const int64_t slice = std::max<int64_t>(1, (int64_t(1) << 22) / std::max<int64_t>(1, w.cols));
        for (int64_t r0 = 0; r0 < w.rows; r0 += slice) {
            const int64_t n = std::min(slice, w.rows - r0);
            rows.resize(size_t(n) * size_t(w.cols));
            for (int64_t r = 0; r < n; ++r) k->to_float(w.row(r0 + r), rows.data() + size_t(r) * size_t(w.cols), w.cols);
            stream_->upload(*buffer, size_t(r0) * size_t(w.cols) * 4, rows.data(), rows.size() * 4);
            stream_->finish();  // `rows` is reused by the next slice
        }
    }
    m.buffer = buffer.get();
    bytes_ += buffer->bytes();
    buffers_.push_back(std::move(buffer));
    matrices_.emplace(w.data, m);
    return m;
}

const Buffer *Uploads::floats(const WeightView &w) {
    if (!w) return nullptr;
    if (const Buffer *have = find_floats(w)) return have;
    require(stream_ != nullptr, SPECULA_ERR_INTERNAL, "Vulkan: upload after the uploads were detached");
    require(w.type == uint32_t(TensorType::F32), SPECULA_ERR_UNSUPPORTED, "Vulkan: norm weights and biases must be F32");
    const size_t bytes = size_t(w.rows) * size_t(w.cols) * 4;
    auto buffer = std::make_unique<Buffer>(stream_->shared_device(), bytes, Buffer::Kind::Device, "weights");
    stream_->upload(*buffer, 0, w.data, bytes);
    bytes_ += bytes;
    buffers_.push_back(std::move(buffer));
    vectors_.emplace(w.data, buffers_.back().get());
    return buffers_.back().get();
}

size_t Weights::bytes_needed(const Graph &graph) { return weight_bytes(graph, Uploads::matrix_bytes); }

std::shared_ptr<const Weights> Weights::get(const Model &model, const Graph &graph, Stream &stream) {
    std::lock_guard<std::mutex> lock(registry_mutex);
    const auto key = std::make_pair(&model, stream.device().index());
    if (auto it = registry.find(key); it != registry.end())
        if (std::shared_ptr<const Weights> live = it->second.lock()) return live;
    std::shared_ptr<Weights> up(new Weights(stream));
    for (const Graph::WeightUse &u : graph.weights()) {
        if (u.matrix) up->uploads_.matrix(*u.w);
        else up->uploads_.floats(*u.w);
    }
    stream.finish();
    up->uploads_.detach();
    registry[key] = up;
    return up;
}

}  // namespace specula::internal::vulkan
