// The SIMD kernels against the scalar reference kernels: random quantized matrices of odd sizes (row counts that
// leave partial 16-row groups, several blocks per row), every instruction-set level this CPU has, batches of
// 1 to 17 and 37 activations (every width of the tiles, and tiles after tiles). The packed kernels promise
// bit-identical results (packed_gemm.h), so the test compares bits, not a tolerance -- which also proves a token's
// logits do not depend on the batch it is computed in.
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/packed/packed_matrix.h"
#include "formats/half.h"
#include "formats/type_kernels.h"
#include "gguf/tensor_type.h"
#include "common/random_blocks.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace specula::internal;

using test_blocks::random_matrix;
using test_blocks::TypeCase;

TEST_CASE("packed SIMD kernels equal the scalar reference kernels bit for bit", "[kernels]") {
    const CpuIsa detected = detected_cpu_isa();
    int levels_run = 0;
    for (CpuIsa isa : {CpuIsa::Avx2, CpuIsa::Avx512Vnni, CpuIsa::Amx}) {
        if (int(isa) > int(detected)) {
            WARN("this CPU lacks " << cpu_isa_name(isa) << ": its kernels are not tested here");
            continue;
        }
        ++levels_run;
        std::mt19937 rng(1234);
        for (const TypeCase &c : test_blocks::kPackedTypes)
            for (int64_t rows : {1, 15, 17, 37})
                for (int64_t nblocks : {1, 3, 7, 29})
                    for (bool extreme : {false, true}) {
                        const int64_t cols = nblocks * c.block;
                        std::vector<uint8_t> data = random_matrix(c, rows, cols, rng, extreme);
                        WeightView w;
                        w.data = data.data();
                        w.type = c.type;
                        w.cols = cols;
                        w.rows = rows;
                        w.row_bytes = size_t(nblocks) * size_t(c.type_size);
                        const TypeKernels &kw = *find_type_kernels(c.type);
                        std::unique_ptr<PackedMatrix> packed = PackedMatrix::pack(w);
                        PackedGemmFn gemm = packed_gemm(c.type, isa);
                        REQUIRE(gemm != nullptr);

                        for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 37}) {
                            // Activations: normal values with a few outliers, quantized as matmul does.
                            std::normal_distribution<float> value(0.0f, 1.0f);
                            std::vector<float> x(size_t(n * cols));
                            for (float &v : x) v = value(rng) * (std::uniform_int_distribution<int>(0, 30)(rng) == 0 ? 20.0f : 1.0f);
                            const test_blocks::ConvertedActs xc = test_blocks::convert_acts(c.type, x.data(), n, cols);
                            std::vector<float> y(size_t(n * rows), -1.0f);
                            gemm(packed->view(), 0, packed->view().n_groups, xc.acts(), y.data(), rows);

                            int mismatches = 0;
                            for (int64_t m = 0; m < n; ++m)
                                for (int64_t r = 0; r < rows; ++r) {
                                    const float ref = kw.vec_dot(cols, w.row(r), xc.row(m));
                                    const float got = y[size_t(m * rows + r)];
                                    if (std::memcmp(&ref, &got, sizeof ref) != 0 && !(ref == 0.0f && got == 0.0f)) {
                                        if (mismatches++ == 0)
                                            UNSCOPED_INFO(cpu_isa_name(isa) << " " << c.name << " rows " << rows << " cols " << cols << " n "
                                                                            << n << " row " << r << " act " << m << ": " << got << " vs " << ref);
                                    }
                                }
                            CHECK(mismatches == 0);
                        }
                    }
    }
    if (levels_run == 0) WARN("no SIMD level on this CPU: only the scalar kernels run");
}

TEST_CASE("the CPU instruction-set level is reported and capped by SPECULA_CPU_ISA", "[kernels]") {
    const CpuIsa active = active_cpu_isa();
    CHECK(int(active) <= int(detected_cpu_isa()));
    CHECK(std::string(cpu_isa_name(active)).size() > 0);
}

// The vector conversions of activations against the scalar from_float (and q8_0_block_sums) byte for byte: normal
// rows with outliers, blocks of zeros, a magnitude reached twice with both signs (Q8_K keeps the first), values that
// round at .5 once scaled, tiny and huge values, infinities and NaNs.
TEST_CASE("the vector conversions of activations write the scalar conversion's bytes", "[kernels]") {
    const CpuIsa detected = detected_cpu_isa();
    std::mt19937 rng(99);
    std::normal_distribution<float> value(0.0f, 1.0f);
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<std::vector<float>> rows;
    for (int kind = 0; kind < 12; ++kind) {
        std::vector<float> x(1024);
        for (float &v : x) v = value(rng) * (std::uniform_int_distribution<int>(0, 30)(rng) == 0 ? 20.0f : 1.0f);
        switch (kind) {
        case 1: std::fill(x.begin() + 256, x.begin() + 512, 0.0f), std::fill(x.begin(), x.begin() + 32, -0.0f); break;
        case 2:  // the same magnitude twice, negative first, then positive first
            x[3] = -50.0f, x[200] = 50.0f, x[300] = 50.0f, x[301] = -50.0f, x[40] = 50.0f, x[41] = -50.0f;
            break;
        case 3:  // halves once scaled by 127 / 127: ties to even
            for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 32 == 0) ? 127.0f : float(int(i % 7) - 3) + 0.5f;
            break;
        case 4: for (float &v : x) v *= 1e-30f; break;
        case 5: for (float &v : x) v *= 1e30f; break;
        case 6: x[5] = inf, x[300] = -inf; break;
        case 7: x[7] = nan, x[33] = nan, x[260] = -nan; break;
        case 8: for (size_t i = 0; i < x.size(); i += 3) x[i] = nan; break;
        case 9: x[100] = 70000.0f * 127.0f; break;  // a Q8_0 scale past F16's range
        case 10: for (float &v : x) v = std::nextafter(0.0f, 1.0f) * float(std::uniform_int_distribution<int>(-3, 3)(rng)); break;  // denormals
        }
        rows.push_back(std::move(x));
    }
    int levels = 0;
    for (CpuIsa isa : {CpuIsa::Avx2, CpuIsa::Avx512Vnni, CpuIsa::Amx}) {
        if (int(isa) > int(detected)) continue;
        ++levels;
        for (uint32_t type : {uint32_t(TensorType::Q8_0), uint32_t(TensorType::Q8_K)}) {
            const PackedConvertFn convert = packed_convert(type, isa);
            REQUIRE(convert != nullptr);
            const TypeKernels &k = *find_type_kernels(type);
            for (size_t r = 0; r < rows.size(); ++r) {
                const std::vector<float> &x = rows[r];
                const int64_t n = int64_t(x.size());
                std::vector<uint8_t> want(type_row_bytes(k, n)), got(want.size(), 0xAB);
                std::vector<int32_t> want_sums(size_t(n / 32)), got_sums(want_sums.size(), -7);
                k.from_float(x.data(), want.data(), n);
                convert(x.data(), n, got.data(), type == uint32_t(TensorType::Q8_0) ? got_sums.data() : nullptr);
                INFO(cpu_isa_name(isa) << " type " << type << " row kind " << r);
                CHECK(std::memcmp(want.data(), got.data(), want.size()) == 0);
                if (type == uint32_t(TensorType::Q8_0)) {
                    q8_0_block_sums(want.data(), n, want_sums.data());
                    CHECK(want_sums == got_sums);
                }
            }
        }
    }
    if (levels == 0) WARN("no SIMD level on this CPU: only the scalar conversions run");
}
