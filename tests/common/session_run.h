// Drives an internal Session the way the tests and benchmarks need: generate exactly n tokens (end-of-generation
// tokens do not stop it) after the context, or after a prompt in an emptied context, and return them. Shared by the
// CPU and CUDA lossless and snapshot tests and bench_snapshot.
#pragma once

#include "session/session.h"

#include <vector>

namespace test_sessions {

// Generates exactly n tokens after the context as it is (end-of-generation tokens do not stop it), or with
// stop_at_eog at most n, stopping at an end-of-generation token (not returned; *ended then says one came).
inline std::vector<int32_t> generate_more(specula::internal::Session &s, int32_t n, bool stop_at_eog = false, bool *ended = nullptr) {
    using namespace specula::internal;
    GenerateConfig run;
    run.max_tokens = n;
    run.stop_at_eog = stop_at_eog;
    s.configure_run(run);
    s.begin_run();
    std::vector<int32_t> out;
    for (;;) {
        StepResult r;
        s.step(r);
        if (r.stop == SPECULA_STOP_EOS && ended) *ended = true;
        if (r.token >= 0) out.push_back(r.token);
        if (r.stop != SPECULA_STOP_NONE) break;
    }
    return out;
}

inline std::vector<int32_t> generate(specula::internal::Session &s, const std::vector<int32_t> &prompt, int32_t n) {
    s.rewind(0);
    s.append_tokens(prompt.data(), prompt.size());
    return generate_more(s, n);
}

}  // namespace test_sessions
