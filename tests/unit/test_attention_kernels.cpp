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

TEST_CASE("attention kernels: rows in lanes give each row's bits alone, at every SIMD level", "[cpu][attention]") {
    // Block attention folds 12+ rows that share a block with the rows side by side in 16 lanes (scores, softmax step
    // and weighted values down the lanes); decoding a row alone takes the per-row kernels. Same bits, lanes outside
    // the mask untouched, F16 keys converted on the way equal to converted first.
    const CpuIsa detected = detected_cpu_isa();
    std::vector<CpuIsa> levels{CpuIsa::Scalar};
    if (detected >= CpuIsa::Avx512Vnni) levels.push_back(CpuIsa::Avx512Vnni);
    std::mt19937 rng(13);
    std::normal_distribution<float> g(0.0f, 1.0f);
    constexpr int32_t L = kLaneRows;
    for (CpuIsa level : levels) {
        set_cpu_isa_cap(level);
        for (int32_t hd : {1, 7, 8, 16, 60, 64, 100, 128, 136}) {
            for (int32_t n : {1, 3, 5, 64}) {
                const size_t stride = size_t(hd) + 5;
                std::vector<std::vector<float>> q(L, std::vector<float>(size_t(hd)));
                const float *qp[L];
                for (int32_t r = 0; r < L; ++r) {
                    for (float &x : q[size_t(r)]) x = g(rng);
                    qp[r] = q[size_t(r)].data();
                }
                std::vector<float> qt(size_t(hd) * L), ot(size_t(hd) * L), m(L, -INFINITY), l(L, 0.0f);
                lanes_transpose_queries(qp, L, hd, qt.data());
                // The per-row way: out, max and sum per row, as BlockAttention::fold does it.
                std::vector<std::vector<float>> out(L, std::vector<float>(size_t(hd), 0.0f));
                std::vector<float> m_ref(L, -INFINITY), l_ref(L, 0.0f);
                for (uint32_t mask : {0xFFFFu, 0xB7E9u, 0x0001u}) {  // three blocks: every row, some, one
                    std::vector<float> k(stride * size_t(n)), v(k.size());
                    std::vector<uint16_t> kh(k.size()), vh(k.size());
                    for (size_t i = 0; i < k.size(); ++i) {
                        kh[i] = float_to_half(g(rng) * 3.0f), vh[i] = float_to_half(g(rng));
                        k[i] = half_to_float(kh[i]), v[i] = half_to_float(vh[i]);
                    }
                    std::vector<float> st(size_t(n + kLaneScoreSlack) * L), st_h(st.size()), kf(size_t(hd) * size_t(n)), vf(kf.size());
                    lanes_scores(qt.data(), hd, 0.125f, k.data(), stride, n, st.data());
                    lanes_scores(qt.data(), hd, 0.125f, kh.data(), vh.data(), stride, n, st_h.data(), kf.data(), vf.data());
                    INFO("isa " << cpu_isa_name(level) << " hd " << hd << " n " << n << " mask " << mask);
                    REQUIRE(std::memcmp(st.data(), st_h.data(), size_t(n) * L * sizeof(float)) == 0);
                    for (int32_t t = 0; t < n; ++t) {
                        REQUIRE(std::memcmp(kf.data() + size_t(t) * size_t(hd), k.data() + size_t(t) * stride, size_t(hd) * sizeof(float)) == 0);
                        REQUIRE(std::memcmp(vf.data() + size_t(t) * size_t(hd), v.data() + size_t(t) * stride, size_t(hd) * sizeof(float)) == 0);
                    }
                    lanes_softmax(st.data(), n, mask, m.data(), l.data(), ot.data(), hd);
                    lanes_accumulate(ot.data(), hd, st.data(), vf.data(), size_t(hd), n, mask);
                    for (int32_t r = 0; r < L; ++r) {
                        if (!(mask >> r & 1)) continue;
                        std::vector<float> s(static_cast<size_t>(n));
                        attention_scores(qp[r], hd, 0.125f, k.data(), stride, n, s.data());
                        for (int32_t t = 0; t < n; ++t) REQUIRE(std::memcmp(&s[size_t(t)], &st_h[size_t(t) * L + size_t(r)], sizeof(float)) == 0);
                        const float bm = scores_max(s.data(), n);
                        if (bm > m_ref[size_t(r)]) {
                            if (m_ref[size_t(r)] != -INFINITY) {
                                const float rr = std::exp(m_ref[size_t(r)] - bm);
                                for (float &o : out[size_t(r)]) o *= rr;
                                l_ref[size_t(r)] *= rr;
                            }
                            m_ref[size_t(r)] = bm;
                        }
                        l_ref[size_t(r)] += exp_weights(s.data(), n, m_ref[size_t(r)]);
                        accumulate_weighted(out[size_t(r)].data(), hd, s.data(), v.data(), stride, n);
                    }
                    for (int32_t r = 0; r < L; ++r) {
                        INFO("row " << r);
                        REQUIRE(std::memcmp(&m[size_t(r)], &m_ref[size_t(r)], sizeof(float)) == 0);
                        REQUIRE(std::memcmp(&l[size_t(r)], &l_ref[size_t(r)], sizeof(float)) == 0);
                        for (int32_t j = 0; j < hd; ++j) REQUIRE(std::memcmp(&ot[size_t(j) * L + size_t(r)], &out[size_t(r)][size_t(j)], sizeof(float)) == 0);
                    }
                }
            }
        }
    }
    set_cpu_isa_cap(detected);
}
