// The attention inner loops (backends/cpu/attention_kernels.h): the AVX2 versions must give exactly the scalar
// reference's bits, since decode and tree verification both use them and speculation is bit-exact.
#include "backends/cpu/attention_kernels.h"
#include "backends/cpu/cpu_isa.h"
#include "formats/half.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace specula::internal;

TEST_CASE("attention kernels are bit-identical to the scalar reference", "[cpu][attention]") {
    if (detected_cpu_isa() < CpuIsa::Avx2) {
        WARN("SKIPPED: this CPU has no AVX2; only the reference runs");
        return;
    }
    std::mt19937 rng(11);
    std::normal_distribution<float> g(0.0f, 1.0f);
    for (int32_t hd : {1, 7, 8, 16, 60, 64, 100, 128, 136}) {
        for (int32_t n : {1, 2, 3, 4, 5, 8, 9, 17, 37, 64}) {
            const size_t stride = size_t(hd) + 5;
            std::vector<float> q(static_cast<size_t>(hd)), k(stride * static_cast<size_t>(n)), v(k.size()), w(static_cast<size_t>(n));
            for (float &x : q) x = g(rng);
            for (float &x : k) x = g(rng) * 3.0f;
            for (float &x : v) x = g(rng);
            for (float &x : w) x = std::abs(g(rng));
            std::vector<float> s_ref(static_cast<size_t>(n)), s(s_ref.size()), o_ref(static_cast<size_t>(hd)), o(o_ref.size());
            for (size_t j = 0; j < o.size(); ++j) o_ref[j] = o[j] = g(rng);
            attention_kernels_testing::scores_reference(q.data(), hd, 0.125f, k.data(), stride, n, s_ref.data());
            attention_scores(q.data(), hd, 0.125f, k.data(), stride, n, s.data());
            attention_kernels_testing::accumulate_reference(o_ref.data(), hd, w.data(), v.data(), stride, n);
            accumulate_weighted(o.data(), hd, w.data(), v.data(), stride, n);
            INFO("hd " << hd << " n " << n);
            CHECK(std::memcmp(s.data(), s_ref.data(), s.size() * sizeof(float)) == 0);
            CHECK(std::memcmp(o.data(), o_ref.data(), o.size() * sizeof(float)) == 0);
        }
    }
}

TEST_CASE("F16 rows read in place give the bits of the same rows converted to floats", "[cpu][attention]") {
    // Block attention reads an F16 cache in place for decoding and converts it once for many rows; a tree node and
    // the decode step of its path may take different ways, so both must give the same bits.
    std::mt19937 rng(12);
    std::normal_distribution<float> g(0.0f, 1.0f);
    for (int32_t hd : {1, 7, 8, 60, 64, 128, 136}) {
        for (int32_t n : {1, 3, 4, 9, 64}) {
            const size_t stride = size_t(hd) + 3;
            std::vector<uint16_t> kh(stride * static_cast<size_t>(n)), vh(kh.size());
            std::vector<float> kf(kh.size()), vf(kh.size()), q(static_cast<size_t>(hd)), w(static_cast<size_t>(n));
            for (size_t i = 0; i < kh.size(); ++i) {
                kh[i] = float_to_half(g(rng) * 3.0f);
                vh[i] = float_to_half(g(rng));
                kf[i] = half_to_float(kh[i]);
                vf[i] = half_to_float(vh[i]);
            }
            for (float &x : q) x = g(rng);
            for (float &x : w) x = std::abs(g(rng));
            std::vector<float> s_f(static_cast<size_t>(n)), s_h(s_f.size()), o_f(static_cast<size_t>(hd)), o_h(o_f.size());
            for (size_t j = 0; j < o_f.size(); ++j) o_f[j] = o_h[j] = g(rng);
            attention_scores(q.data(), hd, 0.125f, kf.data(), stride, n, s_f.data());
            attention_scores(q.data(), hd, 0.125f, kh.data(), stride, n, s_h.data());
            accumulate_weighted(o_f.data(), hd, w.data(), vf.data(), stride, n);
            accumulate_weighted(o_h.data(), hd, w.data(), vh.data(), stride, n);
            INFO("hd " << hd << " n " << n << " isa " << cpu_isa_name(active_cpu_isa()));
            CHECK(std::memcmp(s_f.data(), s_h.data(), s_f.size() * sizeof(float)) == 0);
            CHECK(std::memcmp(o_f.data(), o_h.data(), o_f.size() * sizeof(float)) == 0);
        }
    }
}

TEST_CASE("attention kernels: several query rows at once give each row's bits alone", "[cpu][attention]") {
    // Decoding folds a KV group's query heads together and a tree its rows; a row's arithmetic must not depend on
    // which rows share the call (speculation is bit-exact), for F32 and F16 keys, at the SIMD level and scalar.
    std::mt19937 rng(13);
    std::normal_distribution<float> g(0.0f, 1.0f);
    for (int32_t hd : {7, 64, 72, 128}) {
        for (int32_t n : {1, 5, 8, 64}) {
            for (int32_t rows : {2, 3, 4, 5, 9}) {
                const size_t stride = size_t(hd) + 3, ld = size_t(n) + 1;
                std::vector<uint16_t> kh(stride * static_cast<size_t>(n)), vh(kh.size());
                std::vector<float> kf(kh.size()), vf(kh.size());
                for (size_t i = 0; i < kh.size(); ++i) {
                    kh[i] = float_to_half(g(rng) * 3.0f), vh[i] = float_to_half(g(rng));
                    kf[i] = half_to_float(kh[i]), vf[i] = half_to_float(vh[i]);
                }
                std::vector<float> q(static_cast<size_t>(rows * hd)), w(static_cast<size_t>(rows) * ld), o0(q.size());
                for (float &x : q) x = g(rng);
                for (float &x : w) x = std::abs(g(rng));
                for (float &x : o0) x = g(rng);
                std::vector<const float *> qp;
                for (int32_t r = 0; r < rows; ++r) qp.push_back(q.data() + r * hd);
                for (bool half : {false, true}) {
                    std::vector<float> s_many(static_cast<size_t>(rows) * ld), o_many = o0, o_one = o0;
                    std::vector<float *> op;
                    for (int32_t r = 0; r < rows; ++r) op.push_back(o_many.data() + r * hd);
                    if (half) {
                        attention_scores(qp.data(), rows, hd, 0.125f, kh.data(), stride, n, s_many.data(), ld);
                        accumulate_weighted(op.data(), rows, hd, w.data(), ld, vh.data(), stride, n);
                    } else {
                        attention_scores(qp.data(), rows, hd, 0.125f, kf.data(), stride, n, s_many.data(), ld);
                        accumulate_weighted(op.data(), rows, hd, w.data(), ld, vf.data(), stride, n);
                    }
                    for (int32_t r = 0; r < rows; ++r) {
                        std::vector<float> s_ref(static_cast<size_t>(n));
                        attention_kernels_testing::scores_reference(qp[size_t(r)], hd, 0.125f, kf.data(), stride, n, s_ref.data());
                        attention_kernels_testing::accumulate_reference(o_one.data() + r * hd, hd, w.data() + size_t(r) * ld, vf.data(), stride, n);
                        INFO("hd " << hd << " n " << n << " rows " << rows << " row " << r << " half " << half);
                        CHECK(std::memcmp(s_many.data() + size_t(r) * ld, s_ref.data(), size_t(n) * sizeof(float)) == 0);
                    }
                    CHECK(std::memcmp(o_many.data(), o_one.data(), o_one.size() * sizeof(float)) == 0);
                }
            }
        }
    }
}

TEST_CASE("attention kernels: scores from transposed keys give the reference's bits", "[cpu][attention]") {
    // Block attention transposes a shared block's keys once when many rows read it (a tree at long context) and
    // decodes from the keys as stored: both must give the same bits, for F32 and F16 keys, any hd and count.
    std::mt19937 rng(14);
    std::normal_distribution<float> g(0.0f, 1.0f);
    INFO("isa " << cpu_isa_name(active_cpu_isa()) << (attention_transposed_pays() ? " (512-bit transposed kernel)" : " (reference order)"));
    for (int32_t hd : {1, 7, 16, 40, 64, 72, 128, 136}) {
        for (int32_t n : {1, 5, 15, 16, 17, 33, 64}) {
            for (int32_t rows : {1, 2, 3, 4}) {
                const size_t stride = size_t(hd) + 3, ld = size_t(n) + 2, ldk = 64;
                std::vector<uint16_t> kh(stride * static_cast<size_t>(n));
                std::vector<float> kf(kh.size());
                for (size_t i = 0; i < kh.size(); ++i) kh[i] = float_to_half(g(rng) * 3.0f), kf[i] = half_to_float(kh[i]);
                std::vector<float> q(static_cast<size_t>(rows * hd));
                for (float &x : q) x = g(rng);
                std::vector<const float *> qp;
                for (int32_t r = 0; r < rows; ++r) qp.push_back(q.data() + r * hd);
                for (bool half : {false, true}) {
                    std::vector<float> kt(static_cast<size_t>(hd) * ldk, std::nanf("")), s(static_cast<size_t>(rows) * ld, -1.0f);
                    if (half) transpose_keys(kh.data(), stride, n, hd, kt.data(), ldk);
                    else transpose_keys(kf.data(), stride, n, hd, kt.data(), ldk);
                    attention_scores_transposed(qp.data(), rows, hd, 0.125f, kt.data(), ldk, n, s.data(), ld);
                    INFO("hd " << hd << " n " << n << " rows " << rows << " half " << half);
                    for (int32_t i = 0; i < hd; ++i)  // the layout: element i of key t at kt[i * ldk + t], zeros to a multiple of 16
                        for (int32_t t = 0; t < ((n + 15) & ~15); ++t)
                            REQUIRE(kt[size_t(i) * ldk + size_t(t)] == (t < n ? kf[size_t(t) * stride + size_t(i)] : 0.0f));
                    for (int32_t r = 0; r < rows; ++r) {
                        std::vector<float> s_ref(static_cast<size_t>(n));
                        attention_kernels_testing::scores_reference(qp[size_t(r)], hd, 0.125f, kf.data(), stride, n, s_ref.data());
                        CHECK(std::memcmp(s.data() + size_t(r) * ld, s_ref.data(), size_t(n) * sizeof(float)) == 0);
                        CHECK(s[size_t(r) * ld + size_t(n)] == -1.0f);  // nothing written past the keys
                    }
                }
            }
        }
    }
}
