// Inputs the speculative tests share: a prompt of the model's own kind of text, and an untrained LongSpec draft
// written for a model (random weights: rarely accepted, which is what lossless tests want to exercise).
#pragma once

#include "model/model.h"
#include "speculative/longspec_draft_file.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

namespace test_inputs {

// A prompt of `n` tokens: BOS + a tokenized story opening and some code, repeated as needed.
inline std::vector<int32_t> model_text_prompt(const specula::internal::Model &model, int32_t n) {
    const std::string text =
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog. "
        "def add(a, b):\n    return a + b\n\nclass Point:\n    def __init__(self, x, y):\n        self.x = x\n";
    const std::vector<int32_t> ids = model.vocab().tokenize(text, true, false);
    std::vector<int32_t> out;
    while (int32_t(out.size()) < n) out.push_back(ids[out.size() % ids.size()]);
    return out;
}

// The largest |x[i]| of n values (the scale logit tolerances are relative to).
inline double max_abs(const float *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; ++i) m = std::max(m, double(std::fabs(x[i])));
    return m;
}

// The index of the largest of n values (ties: the lowest index).
inline int32_t argmax(const float *v, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i)
        if (v[i] > v[best]) best = i;
    return best;
}

// A LongSpec draft with random weights for `model`, written to a temporary file (named after `tag` and this
// process), loaded, and the file removed.
inline std::shared_ptr<const specula::internal::LongSpecDraft> random_longspec_draft(const std::shared_ptr<const specula::internal::Model> &model,
                                                                                  const specula::internal::RandomDraftOptions &options,
                                                                                  const std::string &tag) {
    using namespace specula::internal;
    const auto path = std::filesystem::temp_directory_path() / ("specula-test-" + std::to_string(::getpid()) + "-" + tag + ".gguf");
    write_random_longspec_draft(*model, path.string(), options);
    auto draft = LongSpecDraft::load(path.string(), model);
    std::filesystem::remove(path);
    return draft;
}

}  // namespace test_inputs
