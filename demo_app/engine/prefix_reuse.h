// Prefix reuse: a new request on a session evaluates only what differs from the session's context. The keys/values of the
// longest common prefix stay (specula_session_rewind keeps them); the rest of the prompt is appended and evaluated. An
// editor's second completion in the same file thus evaluates the few tokens after the edit, not the whole file.
#pragma once

#include <cstdint>
#include <vector>

namespace demo {

struct PrefixPlan {
    int keep = 0;      // context tokens kept (their keys/values are reused): "N tokens cached"
    int evaluate = 0;  // prompt tokens to append and evaluate
};

inline int common_prefix(const std::vector<int32_t> &a, const std::vector<int32_t> &b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return int(n);
}

// context: the session's tokens now (the last prompt and what was generated after it); prompt: the new one.
inline PrefixPlan plan_prefix_reuse(const std::vector<int32_t> &context, const std::vector<int32_t> &prompt, bool reuse) {
    PrefixPlan p;
    p.keep = reuse ? common_prefix(context, prompt) : 0;
    p.evaluate = int(prompt.size()) - p.keep;
    return p;
}

}  // namespace demo
