// How the GPU backends split an attention's keys into chunks (split-K flash attention, partials merged by
// log-sum-exp in chunk order). A key list whose rows must be batch-invariant (the target's: KeyList::invariant) is
// cut at fixed positions chosen once per store, so a row's arithmetic never depends on the batch or on how long the
// other rows' lists are; a list that need not be (the draft's cross-attention) is cut into a bounded number of
// chunks to suit its length.
#pragma once

#include <algorithm>
#include <cstdint>

namespace specula::internal {

// The most chunks a list split by its length has.
inline constexpr int32_t kMaxLengthChunks = 32;

// Keys per chunk over a store of `slots` slots: about 32 chunks over a full store, between 64 and 1024 keys.
inline int32_t fixed_split_chunk(int32_t slots) { return std::clamp((slots / 32 + 63) / 64 * 64, 64, 1024); }

// Keys per chunk for a list of `keys` keys: at most kMaxLengthChunks chunks, each a multiple of 64.
inline int32_t length_split_chunk(int32_t keys) { return std::max(64, ((keys + kMaxLengthChunks - 1) / kMaxLengthChunks + 63) / 64 * 64); }

}  // namespace specula::internal
