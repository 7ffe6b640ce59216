// The Q4_0 block layout (ggml block_q4_0): 32 4-bit values offset by 8, one fp16 scale. Element j of a block is
// the low nibble of qs[j] for j < 16 and the high nibble of qs[j - 16] otherwise.
#pragma once

#include <cstdint>

namespace specula::internal {

constexpr int kQ4_0Block = 32;

struct BlockQ4_0 {
    uint16_t d;
    uint8_t qs[kQ4_0Block / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "ggml block_q4_0 is 18 bytes");

}  // namespace specula::internal
