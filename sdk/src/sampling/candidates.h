// The working set a sampler chain transforms: (token, logit) pairs, later probabilities.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specula::internal {

struct Candidate {
    int32_t id;
    float logit;
    float p;  // filled by normalize()
};

struct Candidates {
    std::vector<Candidate> items;
    bool sorted = false;  // by logit descending, ties by lower id first

    // All n_vocab tokens with their raw logits.
    void reset(const float *logits, int32_t n_vocab);
    // Sorts the first k by logit (descending, lower id first on ties) and drops the rest.
    void keep_top(size_t k);
    // Sorts all items (descending logit, lower id first on ties).
    void sort();
    // Softmax of the logits into p.
    void normalize();
};

}  // namespace specula::internal
