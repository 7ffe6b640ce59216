#include "thread_pool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SPECULA_CPU_RELAX() _mm_pause()
#else
#define SPECULA_CPU_RELAX() std::this_thread::yield()
#endif

namespace specula::internal {
namespace {

constexpr double kSpinSeconds = 0.002;
// Waits spin with PAUSE this many rounds, then yield the core on every round: when the machine has more runnable
// threads than cores (two sessions, parallel test processes), a pure spin would hold the core the awaited thread
// needs for a whole scheduler time slice.
constexpr int kPureSpins = 2000;

inline void relax(int round) {
    if (round < kPureSpins) SPECULA_CPU_RELAX();
    else std::this_thread::yield();
}

double now_seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_.store(true);
    }
    wake_.notify_all();
    for (std::thread &t : workers_) t.join();
}

// Claims tasks with an atomic counter until none are left.
void ThreadPool::drain(int thread) {
    const int64_t n = n_tasks_;
    const auto *job = job_;
    for (int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed); task < n; task = next_task_.fetch_add(1, std::memory_order_relaxed))
        (*job)(task, thread);
}

void ThreadPool::run(int64_t n_tasks, const std::function<void(int64_t, int)> &fn) {
    if (n_tasks <= 0) return;
    if (workers_.empty() || n_tasks == 1) {
        for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
        return;
    }
    job_ = &fn;
    n_tasks_ = n_tasks;
    next_task_.store(0, std::memory_order_relaxed);
    busy_.store(int(workers_.size()), std::memory_order_relaxed);  // every worker takes part in every job
    generation_.fetch_add(1);  // seq_cst: publishes the job, and orders against a worker's sleepers_ increment
    if (sleepers_.load() > 0) {
        std::lock_guard<std::mutex> lock(mutex_);
        wake_.notify_all();
    }
    drain(0);
    for (int round = 0; busy_.load(std::memory_order_acquire) != 0; ++round) relax(round);
    job_ = nullptr;
}

void ThreadPool::worker_loop(int thread) {
    uint64_t seen = 0;
    for (;;) {
        // Spin for the next job; after kSpinSeconds without one, sleep until run() or the destructor wakes us.
        const double spin_until = now_seconds() + kSpinSeconds;
        for (int i = 0; generation_.load(std::memory_order_acquire) == seen && !stop_.load(std::memory_order_relaxed); ++i) {
            relax(i);
            if ((i & 255) == 255 && now_seconds() > spin_until) {
                std::unique_lock<std::mutex> lock(mutex_);
                sleepers_.fetch_add(1);  // seq_cst: run() either sees us here or we see its new generation below
                wake_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
                sleepers_.fetch_sub(1);
                break;
            }
        }
        if (stop_.load()) return;
        seen = generation_.load(std::memory_order_acquire);
        drain(thread);
        busy_.fetch_sub(1, std::memory_order_release);
    }
}

}  // namespace specula::internal
