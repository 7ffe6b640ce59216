// A small fixed thread pool: run(n_tasks, fn) calls fn(task, thread) for every task in [0, n_tasks), spread over
// the calling thread (thread 0) and the workers (1..size()-1), and returns when all are done. `thread` lets a
// task use per-thread scratch memory. One pool per session; not re-entrant.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace specula::internal {

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
    void drain(std::unique_lock<std::mutex> &lock, int thread);

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_, done_;
    const std::function<void(int64_t, int)> *job_ = nullptr;
    int64_t n_tasks_ = 0;
    std::atomic<int64_t> next_task_{0};  // claimed without the lock
    int busy_ = 0;
    uint64_t generation_ = 0;
    bool stop_ = false;
};

}  // namespace specula::internal
