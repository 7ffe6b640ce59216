// Holds generated text back while it could still be the start of a stop string, so a stop string never reaches
// the caller, not even in part.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace specula::internal {

class StopStrings {
public:
    void set(std::vector<std::string> stops) { stops_ = std::move(stops); }
    void reset() { pending_.clear(); }

    // Adds text; returns what can safely be emitted. Sets `stopped` when a stop string is complete: the returned
    // text then ends right before it and the rest is dropped.
    std::string push(std::string_view text, bool &stopped);
    // Everything held back (at the end of generation).
    std::string flush();
    // The text held back, and putting it back (snapshots of a session between two tokens).
    const std::string &pending() const { return pending_; }
    void restore(std::string pending) { pending_ = std::move(pending); }

private:
    std::vector<std::string> stops_;
    std::string pending_;
};

}  // namespace specula::internal
