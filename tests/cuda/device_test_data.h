// Test data on the device for the CUDA kernel tests: uploads, downloads, random values, and weight matrices in the
// layout device_weights.cpp gives them (F16 padded to 16 rows and columns), with their host values.
#pragma once

#include "backends/cuda/device_buffer.h"
#include "backends/cuda/kernels/kernels.h"
#include "formats/half.h"

#include <random>
#include <vector>

namespace cuda_test_data {

using specula::internal::SPECULA_CUDA_NAMESPACE::DeviceBuffer;
using specula::internal::SPECULA_CUDA_NAMESPACE::DeviceMatrix;
using specula::internal::SPECULA_CUDA_NAMESPACE::MatType;

template <typename T> DeviceBuffer upload(const std::vector<T> &v) {
    DeviceBuffer b(v.size() * sizeof(T));
    specula::internal::SPECULA_CUDA_NAMESPACE::check(cudaMemcpy(b.as(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
    return b;
}

inline std::vector<float> download(const DeviceBuffer &b, size_t n) {
    std::vector<float> v(n);
    specula::internal::SPECULA_CUDA_NAMESPACE::check(cudaMemcpy(v.data(), b.as(), n * sizeof(float), cudaMemcpyDeviceToHost), "download");
    return v;
}

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (float &x : v) x = dist(rng);
    return v;
}

struct TestMatrix {
    DeviceBuffer buf;
    DeviceMatrix m;
    std::vector<float> host;  // rows x cols (F16 values as stored)
};

inline TestMatrix make_matrix(MatType type, int64_t rows, int64_t cols, uint32_t seed) {
    using namespace specula::internal;
    TestMatrix t;
    t.host = random_floats(size_t(rows * cols), seed, 0.1f);
    t.m.type = type;
    t.m.rows = rows;
    t.m.cols = cols;
    if (type == MatType::F32) {
        t.m.ld = cols;
        t.m.rows_alloc = rows;
        t.buf = upload(t.host);
    } else {
        t.m.ld = (cols + 15) / 16 * 16;
        t.m.rows_alloc = (rows + 15) / 16 * 16;
        std::vector<uint16_t> h(size_t(t.m.ld * t.m.rows_alloc), 0);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) {
                h[size_t(r * t.m.ld + c)] = float_to_half(t.host[size_t(r * cols + c)]);
                t.host[size_t(r * cols + c)] = half_to_float(h[size_t(r * t.m.ld + c)]);
            }
        t.buf = upload(h);
    }
    t.m.data = t.buf.as();
    return t;
}

}  // namespace cuda_test_data
