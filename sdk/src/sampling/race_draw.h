// How a sampled token is drawn from its distribution and a 64-bit key: an exponential race (Gumbel-max).
//
// Each candidate i gets its own uniform U_i = unit(hash(key, id_i)) and the draw is the candidate with the smallest
// -log(U_i) / p_i: the first of independent exponential clocks of rates p_i to ring, which is candidate i with
// probability exactly p_i. The key is fixed per output position (one word of the session's generator per sampled
// token, Sampler::next_key), so a position's draw depends only on the seed, the position and the distribution. That
// is what makes sampling drafter-invariant (speculative/verifier.h): a drafter that knows the next positions' keys
// draws its own tokens from its distribution q with them, and its token equals the target's whenever the two races
// have the same winner, which happens with probability at least (1 - TV(p, q)) / (1 + TV(p, q)) (Daliri et al. 2024,
// "Coupling without Communication and Drafter-Invariant Speculative Decoding"), robust to drafts that rank close
// tokens differently, where sharing one uniform through each side's inverse CDF is not.
//
// Shared by the host (Sampler) and the CUDA walk (backends/cuda/kernels/sampling.cu) so both draw the same token.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define SPECULA_RACE_FN __host__ __device__ inline
#else
#define SPECULA_RACE_FN inline
#endif

namespace specula::internal::race {

// splitmix64's finalizer: a bijection of 64-bit words whose outputs for consecutive inputs look independent.
SPECULA_RACE_FN uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Candidate id's uniform in (0, 1] at the race keyed by `key`.
SPECULA_RACE_FN double uniform(uint64_t key, int32_t id) {
    const uint64_t bits = mix64(key ^ mix64(uint64_t(uint32_t(id)) + 0x9E3779B97F4A7C15ull));
    return double((bits >> 11) + 1) * 0x1.0p-53;
}

// Candidate id's arrival time E / p at the race keyed by `key` (E = -log(uniform), an exponential draw); +inf for
// p <= 0 (such a candidate never wins).
SPECULA_RACE_FN double arrival(uint64_t key, int32_t id, float p) {
    if (!(p > 0.0f)) return INFINITY;
    return -log(uniform(key, id)) / double(p);
}

// False only when candidate id cannot arrive before `best`: -log(u) >= 1 - u, so 1 - u >= best p (with a margin
// for rounding) means E / p >= best. A filter for long candidate lists (a whole vocabulary): most candidates are
// passed over without a log, and the winner is the same as without it.
SPECULA_RACE_FN bool may_arrive_before(uint64_t key, int32_t id, float p, double best) {
    return 1.0 - uniform(key, id) < best * double(p) * (1.0 + 1e-9);
}

}  // namespace specula::internal::race
