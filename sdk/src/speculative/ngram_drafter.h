// Model-free drafting from the text itself:
//  * prompt lookup: find the most recent earlier occurrence of the context's last n tokens (n from
//    lookup_max down to lookup_min) and propose the tokens that followed it, as a chain of max_chain (where they
//    run into the root, the chain repeats them: a match d tokens back is a text repeating with period d);
//  * TokenSwift's token-reuse table: every n-gram (n = table_n) of the context is counted, keyed by its first
//    token; for the root token, the table_topk most frequent n-grams starting with it are proposed, each as a
//    chain (its last n-1 tokens) under the root. Updates lag the newest text by `lag` tokens (TokenSwift uses
//    the contextual-penalty window, so that recently penalised text is not reused).
// All candidates go into one tree (shared prefixes merge), within the request's node budget; the prompt-lookup
// chain first, then table chains by descending count. State is updated incrementally from the context (each
// token is indexed once); rewind() drops what came from cut tokens.
#pragma once

#include "speculative/drafter.h"

#include <cstdint>
#include <memory>

namespace specula::internal {

struct NgramConfig {
    int32_t lookup_min = 1;   // shortest suffix to match (tokens)
    int32_t lookup_max = 4;   // longest suffix to match
    int32_t max_chain = 8;    // longest prompt-lookup chain
    int32_t table_n = 4;      // n-gram size of the reuse table (TokenSwift: 4)
    int32_t table_topk = 20;  // n-grams proposed per root (TokenSwift: 20); 0 disables the table
    int32_t lag = 0;          // the table ignores the newest `lag` tokens

    bool operator==(const NgramConfig &) const = default;
};

std::unique_ptr<Drafter> make_ngram_drafter(const NgramConfig &config);

}  // namespace specula::internal
