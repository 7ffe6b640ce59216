// The unit both merge tokenizers (SentencePiece and byte-level BPE) work on: a run of bytes of the text being
// merged, linked to its neighbours in a doubly linked list over a vector. A symbol merged into its left
// neighbour keeps n = 0.
#pragma once

#include <cstddef>

namespace specula::internal {

struct MergeSymbol {
    int prev;
    int next;
    size_t offset;  // into the text being merged
    size_t n;       // bytes
};

}  // namespace specula::internal
