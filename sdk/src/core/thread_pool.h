// A small fixed thread pool: run(n_tasks, fn) calls fn(task, thread) for every task in [0, n_tasks), spread over
// the calling thread (thread 0) and the workers (1..size()-1), and returns when all are done. `thread` lets a
// task use per-thread scratch memory. One pool per session; not re-entrant.
//
// A decode step runs ~100 matrix products of ~100 us each, so waking a sleeping worker (a futex round trip, tens
// of microseconds in a VM) for each would cost several percent. Workers therefore spin on the job counter for a
// while (kSpinSeconds) after each job before sleeping on the condition variable, and run() spins for the last
// worker to finish; an idle session sleeps. Spinning turns into yielding after a few microseconds, so that an
// oversubscribed machine (more busy threads than cores) still runs the thread being waited for.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace specula::internal {

// The compute threads a session or batch group gets when the caller leaves the count at 0: the machine's cores, at
// most 8 (past that the CPU kernels are bound by memory bandwidth on the machines measured).
inline int default_thread_count() {
    const unsigned cores = std::thread::hardware_concurrency();
    return int(cores < 1 ? 1 : cores > 8 ? 8 : cores);
}

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool &) = delete;
    ThreadPool &operator=(const ThreadPool &) = delete;

    int size() const { return int(workers_.size()) + 1; }
    // fn must not throw (kernels do not); tasks are claimed dynamically, so uneven tasks balance themselves.
    void run(int64_t n_tasks, const std::function<void(int64_t task, int thread)> &fn);

private:
    void worker_loop(int thread);
    void drain(int thread);

    std::vector<std::thread> workers_;
    std::mutex mutex_;                // guards sleeping and waking only
    std::condition_variable wake_;
    const std::function<void(int64_t, int)> *job_ = nullptr;  // published by generation_
    int64_t n_tasks_ = 0;
    std::atomic<int64_t> next_task_{0};
    std::atomic<int> busy_{0};         // workers still in the current job
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> sleepers_{0};     // workers waiting on wake_
    std::atomic<bool> stop_{false};
};

}  // namespace specula::internal
