#include "candidates.h"

#include <algorithm>
#include <cmath>

namespace specula::internal {
namespace {

bool before(const Candidate &a, const Candidate &b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); }

}  // namespace

void Candidates::reset(const float *logits, int32_t n_vocab) {
    items.resize(size_t(n_vocab));
    for (int32_t i = 0; i < n_vocab; ++i) items[size_t(i)] = {i, logits[i], 0.0f};
    sorted = false;
}

void Candidates::keep_top(size_t k) {
    k = std::min(k, items.size());
    if (!sorted) std::partial_sort(items.begin(), items.begin() + ptrdiff_t(k), items.end(), before);
    items.resize(k);
    sorted = true;
}

void Candidates::sort() {
    if (!sorted) std::sort(items.begin(), items.end(), before);
    sorted = true;
}

void Candidates::normalize() {
    float max = -INFINITY;
    for (const Candidate &c : items) max = std::max(max, c.logit);
    double sum = 0.0;
    for (Candidate &c : items) {
        c.p = std::exp(c.logit - max);
        sum += c.p;
    }
    for (Candidate &c : items) c.p = float(c.p / sum);
}

}  // namespace specula::internal
