// How many tree nodes n-gram drafting gets on this model and machine ("--ngram-nodes auto", the default).
//
// A verification pass of n drafted nodes costs one pass of n + 1 tokens. On a large model that is memory-bound, so a
// pass of 17 tokens costs about what one token does and a wide tree pays; on a small model (code-7m: 7M parameters)
// the pass is compute-bound and 16 nodes cost more than the ~2.6 tokens per round they bring. So the server times
// passes of 1, 3, 5, 9 and 17 tokens at a context of 256 on this machine, and picks the tree size with the most
// tokens per unit of time, using the tokens per round n-gram drafting reached on code (code-7m, held-out asyncio
// sources, greedy: 1.87 / 2.15 / 2.43 / 2.63 for 2 / 4 / 8 / 16 nodes). When no size beats plain decoding, drafting
// is turned off: it would be lossless still, but slower.
#pragma once

#include <specula/specula.hpp>

#include <string>

namespace specula_serve {

struct NgramChoice {
    int32_t nodes = 0;  // 0: no n-gram drafting
    std::string report; // one line for the log: the measured costs and the choice
};

NgramChoice calibrate_ngram_nodes(const specula::Model &model, const specula::SessionOptions &options);

}  // namespace specula_serve
