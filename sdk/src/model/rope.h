// Rotary position embedding, the reference arithmetic every backend reproduces: the rotation angles of a position
// (GPU backends tabulate them) and the rotation of a row's heads by given angles (the CPU's forward pass, and the
// context shift, which re-rotates stored keys on any backend).
#pragma once

#include "model/hparams.h"

#include <cstdint>
#include <vector>

namespace specula::internal {

// The rope_dim / 2 rotation angles' cosines and sines at `pos`. freq_factors (rope_dim/2 values) may be empty.
void rope_angles(const HParams &hp, const std::vector<float> &freq_factors, int32_t pos, float *cos_t, float *sin_t);
// Rotates each of n_heads heads' first rope_dim values (head_dim apart) by the given angles. A context shift passes
// the angles of a negative position difference: rotations compose, so a key moves to an earlier position.
void rope_rotate(float *x, int n_heads, const HParams &hp, const float *cos_t, const float *sin_t);

}  // namespace specula::internal
