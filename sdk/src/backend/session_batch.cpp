// The rendezvous of cross-session batching (session_batch.h).
#include "backend/session_batch.h"

#include "backend/target_runner.h"
#include "core/error.h"

#include <algorithm>

namespace specula::internal {

namespace {
// How long a leader waits for the members it expects: a quarter of the last pass (sampling and a LongSpec draft take
// less), within these bounds. A member that stopped generating costs the others this once a pass until it is no
// longer "recent" (three passes, at least kRecentMin).
constexpr std::chrono::microseconds kWindowMin{100}, kWindowMax{5000};
constexpr std::chrono::milliseconds kRecentMin{10};
}  // namespace

int SessionBatch::expected_members(Clock::time_point now) const {
    const Clock::duration recent = std::max<Clock::duration>(3 * last_pass_, kRecentMin);
    int n = 0;
    for (const auto &m : last_seen_) n += now - m.second <= recent ? 1 : 0;
    return n;
}

void SessionBatch::forward(Request &r) {
    std::unique_lock<std::mutex> lock(mutex_);
    last_seen_[r.member] = Clock::now();
    waiting_.push_back(&r);
    changed_.notify_all();
    while (!r.done) {
        if (leading_) {
            changed_.wait(lock);
            continue;
        }
        // This thread leads the next pass: gather, run everything waiting, hand the results back.
        leading_ = true;
        const Clock::duration window = std::clamp<Clock::duration>(last_pass_ / 4, kWindowMin, kWindowMax);
        const Clock::time_point until = Clock::now() + window;
        while (int(waiting_.size()) < expected_members(Clock::now()) && Clock::now() < until) changed_.wait_until(lock, until);
        pass_.swap(waiting_);
        lock.unlock();
        const Clock::time_point t0 = Clock::now();
        try {
            run(pass_);
        } catch (...) {
            for (Request *p : pass_) p->error = std::current_exception();
        }
        const Clock::time_point t1 = Clock::now();
        lock.lock();
        last_pass_ = t1 - t0;
        stats_.passes += 1;
        stats_.requests += pass_.size();
        stats_.widest = std::max(stats_.widest, uint32_t(pass_.size()));
        for (Request *p : pass_) {
            stats_.rows += uint64_t(p->rows);
            p->done = true;
            last_seen_[p->member] = t1;  // "recent" counts from the end of its pass
        }
        pass_.clear();
        leading_ = false;
        changed_.notify_all();
    }
    if (r.error) std::rethrow_exception(r.error);
}

void SessionBatch::leave(const void *member) {
    std::lock_guard<std::mutex> lock(mutex_);
    last_seen_.erase(member);
    changed_.notify_all();
}

void TargetRunner::join_batch(BatchGroup &group) {
    (void)group;
    throw Error(SPECULA_ERR_UNSUPPORTED, std::string("the ") + backend() +
                                             " backend does not batch sessions together yet (the CPU backend does); run its sessions without a batch");
}

SessionBatch::Stats SessionBatch::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
}

}  // namespace specula::internal
