// The context shift of a KV cache (docs/long-outputs.md): when a session's context is full, it drops a run of old
// slots and moves the newer ones down, so generation goes on in a window of attention sinks plus recent tokens
// (StreamingLLM's and TokenSwift's policy; llama.cpp's context shift). Keys carry their position in their RoPE
// rotation; rotations compose, so rotating a key by minus the distance it moved gives the key of its new slot.
#pragma once

#include "backend/target_runner.h"
#include "model/hparams.h"

#include <cstdint>
#include <vector>

namespace specula::internal {

// Drops slots [keep, keep + discard) of every layer of `runner`'s cache and moves slots [keep + discard, n_used)
// to [keep, n_used - discard): values as stored, keys re-rotated by -discard positions (read as floats, rotated,
// stored again in the cache's type). Goes through read_kv / write_kv, so it serves every backend that has them.
// The caller guarantees 0 <= keep, 0 < discard, keep + discard <= n_used <= n_ctx.
void shift_kv_rows(TargetRunner &runner, const HParams &hp, const std::vector<float> &freq_factors, int32_t keep, int32_t discard,
                   int32_t n_used);

}  // namespace specula::internal
