// Drives an internal Session the way the tests need: rewind to empty, append a prompt, generate exactly n tokens
// (end-of-generation tokens do not stop it) and return them. Shared by the CPU and CUDA lossless tests.
#pragma once

#include "session/session.h"

#include <vector>

namespace test_sessions {

inline std::vector<int32_t> generate(specula::internal::Session &s, const std::vector<int32_t> &prompt, int32_t n) {
    using namespace specula::internal;
    s.rewind(0);
    s.append_tokens(prompt.data(), prompt.size());
    GenerateConfig run;
    run.max_tokens = n;
    run.stop_at_eog = false;
    s.configure_run(run);
    s.begin_run();
    std::vector<int32_t> out;
    for (;;) {
        StepResult r;
        s.step(r);
        if (r.token >= 0) out.push_back(r.token);
        if (r.stop != SPECULA_STOP_NONE) break;
    }
    return out;
}

}  // namespace test_sessions
