#include "thread_pool.h"

namespace specula::internal {

ThreadPool::ThreadPool(int n_threads) {
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    for (std::thread &t : workers_) t.join();
}

// Claims tasks with an atomic counter until none are left; the lock is released while tasks run.
void ThreadPool::drain(std::unique_lock<std::mutex> &lock, int thread) {
    const int64_t n = n_tasks_;
    const auto *job = job_;
    lock.unlock();
    for (int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed); task < n; task = next_task_.fetch_add(1, std::memory_order_relaxed))
        (*job)(task, thread);
    lock.lock();
}

void ThreadPool::run(int64_t n_tasks, const std::function<void(int64_t, int)> &fn) {
    if (n_tasks <= 0) return;
    if (workers_.empty() || n_tasks == 1) {
        for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
        return;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    job_ = &fn;
    n_tasks_ = n_tasks;
    next_task_.store(0, std::memory_order_relaxed);
    busy_ = int(workers_.size());  // every worker takes part in every run, so run() can wait for all of them
    ++generation_;
    wake_.notify_all();
    drain(lock, 0);
    done_.wait(lock, [this] { return busy_ == 0; });
    job_ = nullptr;
}

void ThreadPool::worker_loop(int thread) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        drain(lock, thread);
        if (--busy_ == 0) done_.notify_one();
    }
}

}  // namespace specula::internal
