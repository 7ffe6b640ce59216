// Slots: --parallel sessions on one shared model. A request takes the idle slot whose context shares the longest
// prefix with its prompt (ties: the least recently used), so that only the new tail of a prompt is evaluated; when no
// slot is idle it waits in a bounded queue, and a request that finds the queue full is answered 503 at once.
#pragma once

#include "serve_config.h"

#include <specula/specula.hpp>

#include <condition_variable>
#include <deque>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace specula_serve {

struct Slot {
    int id = 0;
    specula::Session session;
    // Copy of session.tokens() after the last request, written by the pool when the slot is released: read to pick
    // a slot while the session itself may be generating on another thread.
    std::vector<int32_t> cached_tokens;
    bool busy = false;
    uint64_t last_used = 0;
    int32_t n_ctx = 0;
};

class SlotPool {
public:
    // Creates the sessions and attaches the drafters (throws specula::Error when a draft does not fit the model).
    SlotPool(const specula::Model &model, const ServeConfig &config);

    class Lease {
    public:
        Lease(SlotPool *pool, Slot *slot) : pool_(pool), slot_(slot) {}
        Lease(Lease &&o) noexcept : pool_(o.pool_), slot_(o.slot_) { o.slot_ = nullptr; }
        Lease(const Lease &) = delete;
        Lease &operator=(const Lease &) = delete;
        ~Lease() {
            if (slot_ != nullptr) pool_->release(slot_);
        }
        Slot &operator*() const { return *slot_; }
        Slot *operator->() const { return slot_; }

    private:
        SlotPool *pool_;
        Slot *slot_;
    };

    // Waits for a slot (id_slot >= 0: that one, when it exists). Throws HttpError(Unavailable) when max_queue requests already wait,
    // or when `gone` says the client left while waiting (the caller then answers nobody).
    Lease acquire(const std::vector<int32_t> &prompt, int id_slot, const std::function<bool()> &gone);

    // Cancels every running generation (shutdown).
    void cancel_all();

    int size() const { return int(slots_.size()); }
    int32_t n_ctx() const { return slots_.empty() ? 0 : slots_[0]->n_ctx; }
    std::string drafter_name() const { return drafter_name_; }
    // What the start-up chose for n-gram drafting ("" when not measured).
    const std::string &spec_report() const { return spec_report_; }
    // Why the slots do not run on the backend asked for ("" when they do: specula_session_backend_note).
    const std::string &backend_note() const { return backend_note_; }
    // How the slots' passes are batched: "continuous batching: 4 slots, 2 threads", or why not.
    const std::string &batch_note() const { return batch_note_; }
    // The batch group's counts (all zero without one).
    specula_batch_stats batch_stats() const;
    int busy() const;
    int waiting() const;
    // Per-slot summary for /slots: {id, n_ctx, busy, tokens cached}.
    struct SlotInfo {
        int id;
        int32_t n_ctx;
        bool busy;
        size_t n_cached;
    };
    std::vector<SlotInfo> info() const;

private:
    void release(Slot *slot);

    std::vector<std::unique_ptr<Slot>> slots_;
    int max_queue_;
    std::string drafter_name_;
    std::string spec_report_;
    std::string backend_note_;
    std::string batch_note_;
    specula::Batch batch_;  // the slots' batch group (continuous batching), or none
    mutable std::mutex mutex_;
    std::condition_variable idle_;
    std::deque<uint64_t> waiting_queue_;  // tickets of the waiting requests, oldest first
    uint64_t tickets_ = 0;
    uint64_t clock_ = 0;
};

}  // namespace specula_serve
