// A test hook at the phase boundaries of generation: tests (tests/catalogue) set a function that the session calls
// when it enters a phase, so that they can cancel a session at exactly that phase (prefill, plain decode, or
// drafting / verification / acceptance / commit of a speculative round). Internal: not in the public ABI, reached
// only by code linked against specula_engine. Unset (the default) it costs one relaxed load and a predictable
// branch per phase; the hook runs on the thread making the session call.
#pragma once

#include <atomic>

namespace specula::internal {

enum class Phase {
    Prefill,  // before each batch of prompt tokens is evaluated
    Decode,   // before a plain decoding step evaluates its token (also an auto tree's plain round)
    Draft,    // a speculative round, before the drafter builds its tree
    Verify,   // after drafting, before the target's pass over root + tree
    Accept,   // after the target's tree pass, before the acceptance walk
    Commit,   // after the accepted path's keys/values are committed, before its tokens are queued
};

using PhaseHook = void (*)(Phase phase, void *user);

inline std::atomic<PhaseHook> g_phase_hook{nullptr};
inline std::atomic<void *> g_phase_hook_user{nullptr};

// Sets (or, with nullptr, clears) the process-wide hook. Tests only; not thread-safe against running sessions.
inline void set_phase_hook(PhaseHook fn, void *user) {
    g_phase_hook_user.store(user, std::memory_order_relaxed);
    g_phase_hook.store(fn, std::memory_order_release);
}

inline void at_phase(Phase phase) {
    const PhaseHook fn = g_phase_hook.load(std::memory_order_acquire);
    if (__builtin_expect(fn != nullptr, 0)) fn(phase, g_phase_hook_user.load(std::memory_order_relaxed));
}

}  // namespace specula::internal
