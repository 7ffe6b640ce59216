// Ctrl-C handling for `specula generate`: the first SIGINT asks the running generation to stop (via the
// async-signal-safe specula_session_cancel) so that the partial output and the stats still get printed; a
// second SIGINT kills the process as usual, in case something does not react to the cancel.
#pragma once

#include <specula/specula.h>

namespace specula_cli {

// Installs the SIGINT handler for its lifetime and restores the previous disposition afterwards.
class InterruptHandler {
public:
    InterruptHandler();
    ~InterruptHandler();
    InterruptHandler(const InterruptHandler &) = delete;
    InterruptHandler &operator=(const InterruptHandler &) = delete;

    // The session a SIGINT cancels (nullptr: none). Call attach(nullptr) before destroying the session: it
    // waits until no handler is still using the old pointer (a signal may be delivered on another thread).
    void attach(specula_session *session);

    // Whether SIGINT arrived since construction (e.g. during model loading, where there is no session yet).
    static bool interrupted();
};

}  // namespace specula_cli
