// What "--tree auto" learned in sessions, handed from one session to the next (TreeTuner::Knowledge): a server's
// slots, an editor's completions one after another, a benchmark's rows. One memory serves the process
// (TunerMemory::process()), with an entry per setup that changes the costs or the candidates: the target model and
// the drafter (a LongSpec draft or a draft model), by identity (an entry whose model or drafter was destroyed is
// dropped), and as text the backend, threads, KV cache type, context size, n-gram settings, bound on the shapes,
// sampled-draft rule and temperature. A session takes its setup's entry before its first round and puts back what its tuner knows as it runs and when it ends;
// the last session to put back wins. Only the speed depends on it: the tokens do not depend on the trees drafted
// (speculative/verifier.h). Thread-safe.
#pragma once

#include "speculative/tree_tuner.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace specula::internal {

struct TunerSetup {
    std::weak_ptr<const void> target, drafter;  // the target model; the LongSpec draft or draft model (n-grams alone: none)
    const void *target_id = nullptr, *drafter_id = nullptr;  // their addresses, compared while they live
    std::string settings;               // everything else, as text (speculative_round.cpp)
};

class TunerMemory {
public:
    static TunerMemory &process();  // the process's memory

    // What the last session of this setup knew, if any.
    std::optional<TreeTuner::Knowledge> find(const TunerSetup &setup) const;
    void store(const TunerSetup &setup, TreeTuner::Knowledge knowledge);
    size_t size() const;  // entries (for tests)

private:
    struct Entry {
        TunerSetup setup;
        TreeTuner::Knowledge knowledge;
    };
    static constexpr size_t kMaxEntries = 64;
    static bool same(const TunerSetup &a, const TunerSetup &b);
    void drop_expired();  // entries whose drafter was destroyed (under the lock)

    mutable std::mutex mutex_;
    std::vector<Entry> entries_;
};

}  // namespace specula::internal
