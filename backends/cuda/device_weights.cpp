#include "backends/cuda/device_weights.h"

#include "formats/half.h"
#include "formats/type_kernels.h"
#include "gguf/tensor_type.h"
#include "model/model.h"

#include <cmath>
#include <map>
#include <mutex>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {
namespace {

constexpr int64_t kTile = 16;
int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

enum class Plan { F32, F16Direct, F16Convert };

// F16 data copies straight; F32 stays F32; everything else is converted to F16 rows (BF16 falls back to F32 when
// a value overflows F16; that is decided while converting).
Plan plan_for(const WeightView &w) {
    if (w.type == uint32_t(TensorType::F32)) return Plan::F32;
    if (w.type == uint32_t(TensorType::F16)) return Plan::F16Direct;
    return Plan::F16Convert;
}

std::mutex registry_mutex;
std::map<std::pair<const Model *, int>, std::weak_ptr<const DeviceWeights>> registry;

}  // namespace

DeviceMatrix DeviceUploads::layout(const WeightView &w) {
    DeviceMatrix m;
    m.rows = w.rows;
    m.cols = w.cols;
    const bool f32 = plan_for(w) == Plan::F32;
    m.type = f32 ? MatType::F32 : MatType::F16;
    m.ld = f32 ? w.cols : round_up(w.cols, kTile);
    m.rows_alloc = f32 ? w.rows : round_up(w.rows, kTile);
    return m;
}

size_t DeviceUploads::matrix_bytes(const WeightView &w) {
    const DeviceMatrix m = layout(w);
    return size_t(m.rows_alloc) * size_t(m.ld) * (m.type == MatType::F32 ? 4 : 2);
}

size_t DeviceWeights::bytes_needed(const Graph &graph) { return weight_bytes(graph, DeviceUploads::matrix_bytes); }

std::shared_ptr<const DeviceWeights> DeviceWeights::get(const Model &model, const Graph &graph, int device) {
    std::lock_guard<std::mutex> lock(registry_mutex);
    const auto key = std::make_pair(&model, device);
    if (auto it = registry.find(key); it != registry.end())
        if (auto live = it->second.lock()) return live;
    check(cudaSetDevice(device), "cudaSetDevice");
    std::shared_ptr<DeviceWeights> weights(new DeviceWeights());
    weights->device_ = device;
    for (const Graph::WeightUse &u : graph.weights()) {
        if (u.matrix) weights->uploads_.matrix(*u.w);
        else weights->uploads_.floats(*u.w);
    }
    check(cudaDeviceSynchronize(), "weight upload");
    registry[key] = weights;
    return weights;
}

const DeviceMatrix *DeviceUploads::find_matrix(const WeightView &w) const {
    const auto it = matrices_.find(w.data);
    return it == matrices_.end() ? nullptr : &it->second;
}

const float *DeviceUploads::find_floats(const WeightView &w) const {
    const auto it = vectors_.find(w.data);
    return it == vectors_.end() ? nullptr : it->second;
}

const float *DeviceUploads::floats(const WeightView &w) {
    if (!w) return nullptr;
    if (const float *have = find_floats(w)) return have;
    const size_t bytes = size_t(w.rows) * size_t(w.cols) * sizeof(float);
    DeviceBuffer buf(bytes);
    check(cudaMemcpy(buf.as(), w.floats(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy (norm/bias)");
    bytes_ += bytes;
    const float *p = buf.as<float>();
    buffers_.push_back(std::move(buf));
    vectors_.emplace(w.data, p);
    return p;
}

DeviceMatrix DeviceUploads::matrix(const WeightView &w) {
    if (const DeviceMatrix *have = find_matrix(w)) return *have;
    DeviceMatrix m = layout(w);
    const Plan plan = plan_for(w);
    if (plan == Plan::F32) {
        DeviceBuffer buf(matrix_bytes(w));
        check(cudaMemcpy2D(buf.as(), size_t(m.ld) * 4, w.data, w.row_bytes, size_t(w.cols) * 4, size_t(w.rows), cudaMemcpyHostToDevice),
              "cudaMemcpy2D (F32 weights)");
        m.data = buf.as();
        bytes_ += buf.bytes();
        buffers_.push_back(std::move(buf));
        matrices_.emplace(w.data, m);
        return m;
    }
    DeviceBuffer buf(matrix_bytes(w));
    check(cudaMemset(buf.as(), 0, buf.bytes()), "cudaMemset (weight padding)");
    if (plan == Plan::F16Direct) {
        check(cudaMemcpy2D(buf.as(), size_t(m.ld) * 2, w.data, w.row_bytes, size_t(w.cols) * 2, size_t(w.rows), cudaMemcpyHostToDevice),
              "cudaMemcpy2D (F16 weights)");
    } else {
        const TypeKernels *k = find_type_kernels(w.type);
        require(k != nullptr, SPECULA_ERR_UNSUPPORTED, std::string("CUDA: cannot convert weights of type ") + tensor_type_name(w.type));
        // Convert a few MiB of rows at a time on the host, then copy them up.
        const int64_t batch = std::max<int64_t>(1, (int64_t(8) << 20) / (m.ld * 2));
        std::vector<float> row(size_t(w.cols));
        std::vector<uint16_t> staging(size_t(batch * m.ld), 0);
        bool fits_f16 = true;
        for (int64_t r0 = 0; r0 < w.rows && fits_f16; r0 += batch) {
            const int64_t n = std::min(batch, w.rows - r0);
            for (int64_t r = 0; r < n; ++r) {
                k->to_float(w.row(r0 + r), row.data(), w.cols);
                for (int64_t c = 0; c < w.cols; ++c) {
                    if (!(std::fabs(row[size_t(c)]) <= 65504.0f)) fits_f16 = false;
                    staging[size_t(r * m.ld + c)] = float_to_half(row[size_t(c)]);
                }
            }
            check(cudaMemcpy(buf.as<uint16_t>() + r0 * m.ld, staging.data(), size_t(n * m.ld) * 2, cudaMemcpyHostToDevice),
                  "cudaMemcpy (converted weights)");
        }
        if (!fits_f16) {
            // Out of F16's range (BF16 weights can be): keep this matrix in F32 instead.
            buf = DeviceBuffer(size_t(w.rows) * size_t(w.cols) * 4);
            std::vector<float> all(size_t(w.cols));
            for (int64_t r = 0; r < w.rows; ++r) {
                k->to_float(w.row(r), all.data(), w.cols);
                check(cudaMemcpy(buf.as<float>() + r * w.cols, all.data(), size_t(w.cols) * 4, cudaMemcpyHostToDevice), "cudaMemcpy (F32 rows)");
            }
            m.type = MatType::F32;
            m.ld = w.cols;
            m.rows_alloc = w.rows;
        }
    }
    m.data = buf.as();
    bytes_ += buf.bytes();
    buffers_.push_back(std::move(buf));
    matrices_.emplace(w.data, m);
    return m;
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
