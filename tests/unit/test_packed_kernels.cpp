// The SIMD kernels against the scalar reference kernels: random quantized matrices of odd sizes (row counts that
// leave partial 16-row groups, several blocks per row), every instruction-set level this CPU has, batches of
// 1 to 9 activations. The packed kernels promise bit-identical results (packed_gemm.h), so the test compares
// bits, not a tolerance -- which also proves a token's logits do not depend on the batch it is computed in.
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/packed/packed_matrix.h"
#include "formats/half.h"
#include "formats/type_kernels.h"
#include "gguf/tensor_type.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

using namespace specula::internal;

namespace {

struct TypeCase {
    const char *name;
    uint32_t type;
    int block;      // elements per block
    int type_size;  // bytes per block
};

const TypeCase kCases[] = {{"Q8_0", 8, 32, 34}, {"Q4_0", 2, 32, 18}, {"Q4_K", 12, 256, 144}, {"Q5_K", 13, 256, 176},
                           {"Q6_K", 14, 256, 210}, {"F32", 0, 1, 4}, {"F16", 1, 1, 2}, {"BF16", 30, 1, 2}};

// Random blocks: random quant bytes, with every fp16 scale field replaced by a finite random scale.
std::vector<uint8_t> random_matrix(const TypeCase &c, int64_t rows, int64_t cols, std::mt19937 &rng, bool extreme) {
    const int64_t blocks = rows * (cols / c.block);
    std::vector<uint8_t> data(size_t(blocks) * size_t(c.type_size));
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
    for (uint8_t &b : data) b = uint8_t(extreme ? (byte(rng) < 128 ? 0x80 : 0x7F) : byte(rng));
    for (int64_t b = 0; b < blocks; ++b) {
        uint8_t *blk = data.data() + size_t(b) * size_t(c.type_size);
        auto set_half = [&](size_t offset) {
            const uint16_t h = float_to_half(scale(rng));
            std::memcpy(blk + offset, &h, 2);
        };
        switch (c.type) {
        case 0: {  // F32: random finite values (random bytes could be NaN)
            const float f = scale(rng) * 50.0f;
            std::memcpy(blk, &f, 4);
            break;
        }
        case 1: set_half(0); break;
        case 30: {
            const uint16_t h = float_to_bf16(scale(rng) * 50.0f);
            std::memcpy(blk, &h, 2);
            break;
        }
        case 8:
        case 2: set_half(0); break;                // d first
        case 12:
        case 13: set_half(0), set_half(2); break;  // d, dmin
        case 14: set_half(208); break;             // d last
        }
    }
    return data;
}

}  // namespace

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
        for (const TypeCase &c : kCases)
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
                        const TypeKernels &kx = *find_type_kernels(kw.dot_type);
                        std::unique_ptr<PackedMatrix> packed = PackedMatrix::pack(w);
                        PackedGemmFn gemm = packed_gemm(c.type, isa);
                        REQUIRE(gemm != nullptr);

                        for (int64_t n : {1, 2, 4, 5, 9, 16, 37}) {
                            // Activations: normal values with a few outliers, quantized as matmul does.
                            std::normal_distribution<float> value(0.0f, 1.0f);
                            std::vector<float> x(size_t(n * cols));
                            for (float &v : x) v = value(rng) * (std::uniform_int_distribution<int>(0, 30)(rng) == 0 ? 20.0f : 1.0f);
                            const size_t xrow = type_row_bytes(kx, cols);
                            std::vector<uint8_t> xq(xrow * size_t(n));
                            for (int64_t m = 0; m < n; ++m) kx.from_float(x.data() + m * cols, xq.data() + size_t(m) * xrow, cols);
                            std::vector<int32_t> sums(size_t(n * (cols / 32)));
                            if (kw.dot_type == uint32_t(TensorType::Q8_0))
                                for (int64_t m = 0; m < n; ++m) q8_0_block_sums(xq.data() + size_t(m) * xrow, cols, sums.data() + m * (cols / 32));
                            PackedActs acts;
                            acts.xq = xq.data();
                            acts.row_bytes = xrow;
                            acts.block_sums = sums.data();
                            acts.sums_per_row = cols / 32;
                            acts.n = n;
                            std::vector<float> y(size_t(n * rows), -1.0f);
                            gemm(packed->view(), 0, packed->view().n_groups, acts, y.data(), rows);

                            int mismatches = 0;
                            for (int64_t m = 0; m < n; ++m)
                                for (int64_t r = 0; r < rows; ++r) {
                                    const float ref = kw.vec_dot(cols, w.row(r), xq.data() + size_t(m) * xrow);
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
