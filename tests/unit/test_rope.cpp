// RoPE: pairing (NORM vs NEOX), angles, and the two scalings no fixture model uses (linear, llama3).
#include <catch2/catch.hpp>

#include "backends/cpu/ops.h"
#include "model/rope_scaling.h"

#include <cmath>
#include <vector>

using namespace specula::internal;

namespace {

HParams head(RopeType type, int dim) {
    HParams hp;
    hp.head_dim = dim;
    hp.rope_dim = dim;
    hp.rope_type = type;
    hp.rope_freq_base = 10000.0f;
    return hp;
}

std::vector<float> ramp(int n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) v[size_t(i)] = 0.1f * float(i + 1);
    return v;
}

}  // namespace

TEST_CASE("rope at position 0 is the identity", "[rope]") {
    for (RopeType type : {RopeType::Norm, RopeType::Neox}) {
        std::vector<float> x = ramp(8);
        rope(x.data(), 1, head(type, 8), {}, 0);
        CHECK(x == ramp(8));
    }
}

TEST_CASE("NORM rotates neighbours, NEOX rotates the two halves", "[rope]") {
    const int d = 8;
    const int32_t pos = 3;
    for (RopeType type : {RopeType::Norm, RopeType::Neox}) {
        std::vector<float> x = ramp(d);
        rope(x.data(), 1, head(type, d), {}, pos);
        const std::vector<float> in = ramp(d);
        for (int i = 0; i < d / 2; ++i) {
            const double theta = pos * std::pow(10000.0, -2.0 * i / d);
            const int a = type == RopeType::Norm ? 2 * i : i;
            const int b = type == RopeType::Norm ? 2 * i + 1 : i + d / 2;
            INFO("pair " << i);
            CHECK(x[size_t(a)] == Approx(in[size_t(a)] * std::cos(theta) - in[size_t(b)] * std::sin(theta)).margin(1e-5));
            CHECK(x[size_t(b)] == Approx(in[size_t(a)] * std::sin(theta) + in[size_t(b)] * std::cos(theta)).margin(1e-5));
        }
    }
}

TEST_CASE("rope leaves dimensions beyond rope_dim alone and handles several heads", "[rope]") {
    HParams hp = head(RopeType::Norm, 8);
    hp.rope_dim = 4;
    std::vector<float> x = ramp(16);  // two heads
    rope(x.data(), 2, hp, {}, 5);
    const std::vector<float> in = ramp(16);
    for (int h = 0; h < 2; ++h)
        for (int i = 4; i < 8; ++i) CHECK(x[size_t(h * 8 + i)] == in[size_t(h * 8 + i)]);
    CHECK(x[0] != in[0]);
    CHECK(x[8] != in[8]);
}

TEST_CASE("linear scaling by f equals rotating at position / f", "[rope]") {
    HParams scaled = head(RopeType::Norm, 8);
    scaled.rope_freq_scale = 1.0f / 4.0f;
    std::vector<float> a = ramp(8), b = ramp(8);
    rope(a.data(), 1, scaled, {}, 12);
    rope(b.data(), 1, head(RopeType::Norm, 8), {}, 3);
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-5));
}

TEST_CASE("llama3 frequency factors: 1 for short wavelengths, the factor for long ones", "[rope]") {
    HParams hp = head(RopeType::Norm, 128);  // Llama-3.1-8B: base 500000, factor 8, low 1, high 4, original 8192
    hp.rope_freq_base = 500000.0f;
    hp.rope_scaling = RopeScaling::Llama3;
    hp.rope_scaling_factor = 8.0f;
    hp.rope_low_freq_factor = 1.0f;
    hp.rope_high_freq_factor = 4.0f;
    hp.rope_original_ctx = 8192;
    const std::vector<float> f = llama3_rope_freq_factors(hp);
    REQUIRE(f.size() == 64);
    CHECK(f.front() == 1.0f);
    CHECK(f.back() == 8.0f);
    for (size_t i = 1; i < f.size(); ++i) CHECK(f[i] >= f[i - 1]);  // monotone
    // Wavelength 2*pi*base^(2i/d) below 8192/4 keeps factor 1; above 8192 gets the full factor 8.
    for (size_t i = 0; i < f.size(); ++i) {
        const double wavelen = 2.0 * M_PI * std::pow(500000.0, 2.0 * double(i) / 128.0);
        if (wavelen < 2048.0) CHECK(f[i] == 1.0f);
        if (wavelen > 8192.0) CHECK(f[i] == 8.0f);
    }
    // A factor f_i divides the angle: rotating with it equals rotating the unscaled pair at position / f_i.
    HParams small = head(RopeType::Norm, 2);
    std::vector<float> x = {1.0f, 0.5f}, y = {1.0f, 0.5f};
    rope(x.data(), 1, small, {8.0f}, 64);
    rope(y.data(), 1, small, {}, 8);
    CHECK(x[0] == Approx(y[0]).margin(1e-5));
    CHECK(x[1] == Approx(y[1]).margin(1e-5));
}
