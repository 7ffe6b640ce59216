// Rotary position embedding, the reference arithmetic every backend reproduces: the rotation angles of a position
// (GPU backends tabulate them) and the rotation of a row's heads by given angles (the CPU's forward pass, and the
// context shift, which re-rotates stored keys on any backend).
#pragma once

#include "model/hparams.h"

#include <cstdint>
#include <vector>

namespace specula::internal {

// The rope_dim / 2 rotation angles' cosines and sines at `pos`, times hp.rope_attn_factor. freq_factors (rope_dim/2
// values) may be empty.
void rope_angles(const HParams &hp, const std::vector<float> &freq_factors, int32_t pos, float *cos_t, float *sin_t);
// The angles of positions [0, n_positions): n_positions rows of max(1, rope_dim / 2) cosines and sines, each row as
// rope_angles computes it. GPU backends upload this table once per session.
void rope_table(const HParams &hp, const std::vector<float> &freq_factors, int32_t n_positions, std::vector<float> &cos_t, std::vector<float> &sin_t);
// Whether two settings give the same angles at every position (then one table serves both).
bool same_rope_angles(const HParams &a, const std::vector<float> &freq_a, const HParams &b, const std::vector<float> &freq_b);
// Rotates each of n_heads heads' first rope_dim values (head_dim apart) by the given angles. A context shift passes
// the angles of a negative position difference: rotations compose, so a key moves to an earlier position.
void rope_rotate(float *x, int n_heads, const HParams &hp, const float *cos_t, const float *sin_t);

}  // namespace specula::internal
