#include "speculative/tuner_memory.h"

#include <algorithm>

namespace specula::internal {

namespace {

bool expired(const TunerSetup &s) { return s.target.expired() || (s.drafter_id != nullptr && s.drafter.expired()); }

}  // namespace

TunerMemory &TunerMemory::process() {
    static TunerMemory memory;
    return memory;
}

bool TunerMemory::same(const TunerSetup &a, const TunerSetup &b) {
    if (a.target_id != b.target_id || a.drafter_id != b.drafter_id || a.settings != b.settings) return false;
    // The same address after a model or drafter was destroyed may be another one: an expired entry never matches.
    return !expired(a);
}

void TunerMemory::drop_expired() {
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [](const Entry &e) { return expired(e.setup); }), entries_.end());
}

std::optional<TreeTuner::Knowledge> TunerMemory::find(const TunerSetup &setup) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Entry &e : entries_)
        if (same(e.setup, setup)) return e.knowledge;
    return std::nullopt;
}

void TunerMemory::store(const TunerSetup &setup, TreeTuner::Knowledge knowledge) {
    std::lock_guard<std::mutex> lock(mutex_);
    drop_expired();
    for (Entry &e : entries_)
        if (same(e.setup, setup)) {
            e.knowledge = std::move(knowledge);
            return;
        }
    // A bound for a process that makes many setups (the oldest goes first); a few are the usual case.
    if (entries_.size() >= kMaxEntries) entries_.erase(entries_.begin());
    entries_.push_back(Entry{setup, std::move(knowledge)});
}

size_t TunerMemory::size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
}

}  // namespace specula::internal
