// The cuBLAS prefill GEMM (backends/cuda/prefill_gemm.h) against a host loop. In the emulated build the calls reach
// the emulator's stand-in (tests/cuda/emulation/cublas_v2.h); on a GPU, the machine's libcublas.
#include "backends/cuda/prefill_gemm.h"
#include "device_test_data.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>

using namespace specula::internal;
using namespace specula::internal::SPECULA_CUDA_NAMESPACE;
using namespace cuda_test_data;

TEST_CASE("cuda: the cuBLAS prefill GEMM matches a host loop for F16 and F32 weights", "[cuda][kernels][cublas]") {
    std::string why;
    const auto prefill = PrefillGemm::create(nullptr, &why);
    if (!prefill) {
        WARN("cuBLAS prefill unavailable: " << why);
        return;
    }
    INFO("cuBLAS: " << prefill->library());
    for (const MatType type : {MatType::F32, MatType::F16}) {
        for (const auto &[rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{64, 64}, {172, 72}, {260, 520}}) {
            INFO((type == MatType::F32 ? "F32 " : "F16 ") << rows << "x" << cols);
            const TestMatrix w = make_matrix(type, rows, cols, uint32_t(rows * 5 + cols));
            const int32_t n = 80;
            std::vector<float> x = random_floats(size_t(n * cols), 7);
            if (type == MatType::F16)  // cuBLAS gets the activations rounded to F16, as our tensor-core GEMM does
                for (float &v : x) v = half_to_float(float_to_half(v));
            DeviceBuffer dx = upload(x), dy(size_t(n * rows) * 4), dz(size_t(n * rows) * 4);
            DeviceBuffer scratch(std::max<size_t>(gemm_scratch_bytes(w.m, n), 256));
            prefill->gemm(w.m, dx.as<float>(), n, dy.as<float>(), scratch.as(), nullptr);
            gemm(w.m, dx.as<float>(), n, dz.as<float>(), scratch.as(), nullptr);
            check(cudaDeviceSynchronize(), "prefill gemm");
            const std::vector<float> y = download(dy, size_t(n * rows)), z = download(dz, size_t(n * rows));
            double worst = 0, worst_ours = 0;
            for (int32_t t = 0; t < n; ++t)
                for (int64_t r = 0; r < rows; ++r) {
                    double ref = 0;
                    for (int64_t c = 0; c < cols; ++c) ref += double(w.host[size_t(r * cols + c)]) * double(x[size_t(t * cols + c)]);
                    worst = std::max(worst, std::fabs(ref - double(y[size_t(t * rows + r)])));
                    worst_ours = std::max(worst_ours, std::fabs(double(z[size_t(t * rows + r)]) - double(y[size_t(t * rows + r)])));
                }
            INFO("max |cuBLAS - host| " << worst << ", max |cuBLAS - ours| " << worst_ours);
            CHECK(worst < 1e-3 * std::sqrt(double(cols)));
            CHECK(worst_ours < 2e-3 * std::sqrt(double(cols)));
        }
    }
}
