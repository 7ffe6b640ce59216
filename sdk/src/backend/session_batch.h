// Cross-session batching (continuous batching, as llama-server's slots): sessions of one model that joined the same
// batch group (specula_batch) hand their forward passes to it, and the passes waiting at the same time run as one,
// so each weight is read once per step for all of them instead of once per session. A session's thread still runs
// its own loop (sampling, drafting, verification); only the target's forward pass is shared. Every row's result is
// what it gets alone (the backends' batch invariance, graph/graph.h), so batching changes no token.
//
// The rendezvous is written here once; a backend supplies the combined pass (CpuSessionBatch). When to start a pass:
// the first request waiting becomes the leader and gathers until every member that has been passing recently is
// waiting too, or until a short window passes (a member may be sampling, drafting or gone), then runs everything that
// waits as one pass. Requests that arrive during a pass wait for the next one.
#pragma once

#include "model/model.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace specula::internal {

class SessionBatch {
public:
    struct Request {
        const void *member = nullptr;  // the runner asking (who "recently passed")
        int32_t rows = 0;              // its rows (statistics)
        bool done = false;
        std::exception_ptr error;
    };

    virtual ~SessionBatch() = default;

    // Runs r within the next combined pass; returns when it is done. Rethrows what the pass threw for it.
    void forward(Request &r);
    // A member that leaves (its runner is destroyed) is no longer waited for.
    void leave(const void *member);

    // What the group has done: passes, requests and rows, for tests and benchmarks.
    struct Stats {
        uint64_t passes = 0, requests = 0, rows = 0;
        uint32_t widest = 0;  // the most requests one pass combined
    };
    Stats stats() const;

protected:
    // The backend's combined pass over the requests (in the order they arrived). Sets each request's error, or
    // throws for all of them.
    virtual void run(std::vector<Request *> &requests) = 0;

private:
    using Clock = std::chrono::steady_clock;
    int expected_members(Clock::time_point now) const;

    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<Request *> waiting_;
    bool leading_ = false;  // a leader is gathering or running a pass
    std::unordered_map<const void *, Clock::time_point> last_seen_;
    Clock::duration last_pass_{};
    std::vector<Request *> pass_;  // the leader's
    Stats stats_;
};

// What a specula_batch handle holds: the model, the threads a combined pass computes on, and the backend's batch,
// made by the first session that joins (its backend decides which kind).
struct BatchGroup {
    std::shared_ptr<const Model> model;
    int n_threads = 0;
    std::mutex mutex;
    std::shared_ptr<SessionBatch> batch;  // null until a session joins
    std::string backend;                  // the backend of `batch` ("cpu")
};

}  // namespace specula::internal
