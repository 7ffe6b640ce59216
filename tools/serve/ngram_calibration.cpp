#include "ngram_calibration.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace specula_serve {

NgramChoice calibrate_ngram_nodes(const specula::Model &model, const specula::SessionOptions &options) {
    struct Size {
        int32_t nodes;
        double tau;  // tokens per round measured on code (see the header)
    };
    static const Size sizes[] = {{2, 1.87}, {4, 2.15}, {8, 2.43}, {16, 2.63}};
    constexpr int32_t kContext = 256;

    specula::SessionOptions so = options;
    so.n_batch = 64;
    so.n_ctx = std::max<int32_t>(kContext + 32, std::min<int32_t>(options.n_ctx > 0 ? options.n_ctx : 4096, 4096));
    specula::Session s(model, so, specula::SamplerOptions::greedy());
    const int32_t n_vocab = model.n_vocab();
    std::vector<int32_t> tokens(size_t(kContext) + 17);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7919 + 13) % size_t(n_vocab));
    s.append_tokens(tokens.data(), size_t(kContext));
    s.evaluate();

    // The fastest of a few passes of k tokens after the context (the first pass warms caches and threads).
    auto pass_ms = [&](int32_t k) {
        double best = 1e300, spent = 0;
        // At least 4 passes, more while they are short (sub-millisecond passes are noisy): up to 40 ms or 64 passes.
        for (int rep = 0; rep < 64 && (rep < 4 || spent < 40.0); ++rep) {
            s.rewind(kContext);
            s.append_tokens(tokens.data() + kContext, size_t(k));
            const auto t0 = std::chrono::steady_clock::now();
            s.evaluate();
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (rep > 0) best = std::min(best, ms);
            spent += ms;
        }
        return best;
    };
    const double one = pass_ms(1);
    NgramChoice choice;
    double best_rate = 1.0;  // plain decoding: one token per one-token pass
    std::string costs;
    for (const Size &size : sizes) {
        const double ratio = pass_ms(size.nodes + 1) / std::max(one, 1e-6);
        const double rate = size.tau / ratio;
        char buf[96];
        std::snprintf(buf, sizeof buf, "%s%d tokens %.2fx", costs.empty() ? "" : ", ", size.nodes + 1, ratio);
        costs += buf;
        if (rate > best_rate) best_rate = rate, choice.nodes = size.nodes;
    }
    char line[256];
    if (choice.nodes > 0)
        std::snprintf(line, sizeof line, "n-gram drafting with %d tree nodes (expected %.2fx plain decoding)", choice.nodes, best_rate);
    else
        std::snprintf(line, sizeof line, "n-gram drafting off: no tree size would beat plain decoding here");
    choice.report = std::string(line) + "; a pass of " + costs + " the time of one token (" + std::to_string(one).substr(0, 6) + " ms)";
    return choice;
}

}  // namespace specula_serve
