#include "token_stream.h"

namespace demo {

bool TokenStream::mark_pending_locked() {
    if (notified_) return false;
    notified_ = true;
    return true;
}

void TokenStream::begin(quint64 run_id, const specula_stats &at_start) {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_ = StreamBatch{};  // whatever an earlier run left unread
    pending_.run_id = run_id;
    pending_.start_stats = at_start;
    pending_.has_start_stats = true;
}

void TokenStream::push(quint64 run_id, StreamedToken token, const specula_stats *stats) {
    bool notify = false;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        pending_.run_id = run_id;
        pending_.tokens.push_back(std::move(token));
        if (stats != nullptr) {
            pending_.stats = *stats;
            pending_.has_stats = true;
        }
        notify = mark_pending_locked();
    }
    if (notify) emit available();
}

void TokenStream::push_round(quint64 run_id, const RoundSample &round) {
    bool notify = false;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        pending_.run_id = run_id;
        pending_.rounds.push_back(round);
        notify = mark_pending_locked();
    }
    if (notify) emit available();
}

StreamBatch TokenStream::take() {
    std::lock_guard<std::mutex> lock(mutex_);
    StreamBatch out = std::move(pending_);
    pending_ = StreamBatch{};
    notified_ = false;
    return out;
}

void RoundTracker::reset(const specula_stats &at_start) {
    last_ = at_start;
    index_ = 0;
}

bool RoundTracker::update(const specula_stats &now, double t_ms, RoundSample &out) {
    const int rounds = now.n_spec_rounds - last_.n_spec_rounds;
    if (rounds <= 0) return false;
    out = RoundSample{};
    out.round = index_;
    out.tokens = (now.n_accepted - last_.n_accepted + rounds) / rounds;
    out.draft_ms = (now.draft_ms - last_.draft_ms) / rounds;
    out.verify_ms = (now.verify_ms - last_.verify_ms) / rounds;
    out.t_ms = t_ms;
    index_ += rounds;
    last_ = now;
    return true;
}

}  // namespace demo
