// RoPE frequency factors for llama3-style scaling, for files that give the scaling parameters but no
// rope_freqs tensor (llama.cpp's converter usually stores the tensor; then it is used as is).
#pragma once

#include "model/hparams.h"

#include <vector>

namespace specula::internal {

// rope_dim/2 divisors of the rotation frequencies: 1 for short wavelengths, rope_scaling_factor for long ones,
// interpolated in between (the formula of Meta's reference and of llama.cpp's converter).
std::vector<float> llama3_rope_freq_factors(const HParams &hp);

}  // namespace specula::internal
