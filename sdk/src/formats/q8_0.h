// The Q8_0 block layout, shared by the types whose activations are quantized to Q8_0.
#pragma once

#include <cstdint>

namespace specula::internal {

constexpr int kQ8_0Block = 32;

struct BlockQ8_0 {
    uint16_t d;       // fp16 scale
    int8_t qs[kQ8_0Block];
};
static_assert(sizeof(BlockQ8_0) == 34, "ggml block_q8_0 is 34 bytes");

}  // namespace specula::internal
