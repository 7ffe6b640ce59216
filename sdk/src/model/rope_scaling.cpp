#include "rope_scaling.h"

#include <cmath>

namespace specula::internal {

// llama3 rope scaling as llama.cpp's converter computes rope_freqs: long wavelengths are divided by `factor`,
// short ones kept, and the band between interpolated smoothly.
std::vector<float> llama3_rope_freq_factors(const HParams &hp) {
    std::vector<float> factors(size_t(hp.rope_dim / 2));
    const double low_wavelen = hp.rope_original_ctx / hp.rope_low_freq_factor;
    const double high_wavelen = hp.rope_original_ctx / hp.rope_high_freq_factor;
    for (size_t i = 0; i < factors.size(); ++i) {
        const double freq = 1.0 / std::pow(double(hp.rope_freq_base), 2.0 * double(i) / hp.rope_dim);
        const double wavelen = 2.0 * M_PI / freq;
        if (wavelen < high_wavelen) {
            factors[i] = 1.0f;
        } else if (wavelen > low_wavelen) {
            factors[i] = hp.rope_scaling_factor;
        } else {
            const double smooth = (hp.rope_original_ctx / wavelen - hp.rope_low_freq_factor) / (hp.rope_high_freq_factor - hp.rope_low_freq_factor);
            factors[i] = float(1.0 / ((1.0 - smooth) / hp.rope_scaling_factor + smooth));
        }
    }
    return factors;
}

}  // namespace specula::internal
