// Tokens on their way from the engine thread to the window. The engine pushes every token as it comes; the window takes
// whatever has gathered when it gets to it. available() is emitted only when the buffer goes from empty to non-empty, so
// at a thousand tokens per second the window repaints at its own pace instead of once per token, and generation never
// waits for the UI (what keeps the demo within a few percent of the CLI's speed).
#pragma once

#include "run_types.h"

#include <QObject>
#include <mutex>
#include <vector>

namespace demo {

struct StreamBatch {
    quint64 run_id = 0;
    std::vector<StreamedToken> tokens;
    std::vector<RoundSample> rounds;
    specula_stats stats{};   // the session's running stats at the newest token
    bool has_stats = false;
    specula_stats start_stats{};  // the session's stats when the run began (its counters run on from earlier runs)
    bool has_start_stats = false;
};

class TokenStream : public QObject {
    Q_OBJECT
public:
    using QObject::QObject;

    // Engine thread.
    void begin(quint64 run_id, const specula_stats &at_start);
    void push(quint64 run_id, StreamedToken token, const specula_stats *stats);
    void push_round(quint64 run_id, const RoundSample &round);

    // Any thread (the window's): everything pushed since the last take, oldest first.
    StreamBatch take();

signals:
    void available();

private:
    bool mark_pending_locked();  // true when this push made the buffer non-empty

    std::mutex mutex_;
    StreamBatch pending_;
    bool notified_ = false;
};

// Turns the session's running stats, read at each token, into one sample per speculative round: a round starts when
// n_spec_rounds grows, and its tokens are the accepted drafts plus the target's bonus token.
class RoundTracker {
public:
    void reset(const specula_stats &at_start);
    // The round(s) that began since the last call, merged into one sample when several did (never in practice: each
    // round emits at least one token), or false.
    bool update(const specula_stats &now, double t_ms, RoundSample &out);

private:
    specula_stats last_{};
    int index_ = 0;
};

}  // namespace demo
