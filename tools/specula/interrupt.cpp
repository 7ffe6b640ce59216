#include "interrupt.h"

#include <atomic>
#include <csignal>
#include <thread>

namespace specula_cli {
namespace {

// Only lock-free atomics may be touched from a signal handler.
static_assert(std::atomic<specula_session *>::is_always_lock_free);
static_assert(std::atomic<int>::is_always_lock_free);

std::atomic<specula_session *> g_session{nullptr};
std::atomic<int> g_handlers_running{0};  // handlers that may still hold the old g_session value
std::atomic<bool> g_interrupted{false};
struct sigaction g_previous;

extern "C" void on_sigint(int) {
    g_handlers_running.fetch_add(1);
    g_interrupted.store(true);
    if (specula_session *s = g_session.load()) specula_session_cancel(s);
    g_handlers_running.fetch_sub(1);
}

}  // namespace

InterruptHandler::InterruptHandler() {
    g_interrupted.store(false);
    struct sigaction sa = {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    // SA_RESETHAND: the next Ctrl-C gets the default action (terminate) - the escape hatch if cancel hangs.
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    sigaction(SIGINT, &sa, &g_previous);
}

InterruptHandler::~InterruptHandler() {
    attach(nullptr);
    sigaction(SIGINT, &g_previous, nullptr);
}

void InterruptHandler::attach(specula_session *session) {
    g_session.store(session);
    // A handler on another thread may have loaded the previous pointer just before the store; let it finish
    // its cancel call before the caller frees that session.
    while (g_handlers_running.load() != 0) std::this_thread::yield();
}

bool InterruptHandler::interrupted() { return g_interrupted.load(); }

}  // namespace specula_cli
