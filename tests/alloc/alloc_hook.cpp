// The replaced global operator new / delete of the alloc tests (alloc_hook.h). Allocation goes to malloc /
// aligned_alloc and release to free, so AddressSanitizer and LeakSanitizer still see every block (their own
// operator new is replaced by these, consistently for new and delete).
#include "alloc_hook.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<int64_t> g_live{0};

// Plain thread_local PODs: the executable's TLS (local-exec), no allocation when a thread first touches them.
thread_local bool t_armed = false;
thread_local int64_t t_count = 0;
thread_local int64_t t_fail_at = 0;
thread_local bool t_fired = false;
thread_local void *t_site = nullptr;

// True when this allocation must fail.
inline bool should_fail(void *site) {
    if (!t_armed) return false;
    ++t_count;
    if (t_fail_at != 0 && t_count == t_fail_at) {
        t_fired = true;
        t_site = site;
        return true;
    }
    return false;
}

inline void *allocate(std::size_t size, std::size_t align, void *site) {
    if (should_fail(site)) return nullptr;
    if (size == 0) size = 1;
    void *p;
    if (align <= alignof(std::max_align_t)) {
        p = std::malloc(size);
    } else {
        const std::size_t rounded = (size + align - 1) / align * align;  // aligned_alloc wants a multiple
        p = std::aligned_alloc(align, rounded);
    }
    if (p != nullptr) g_live.fetch_add(1, std::memory_order_relaxed);
    return p;
}

inline void release(void *p) {
    if (p == nullptr) return;
    g_live.fetch_sub(1, std::memory_order_relaxed);
    std::free(p);
}

}  // namespace

namespace alloc_hook {

void arm(int64_t fail_at) {
    t_count = 0;
    t_fail_at = fail_at;
    t_fired = false;
    t_site = nullptr;
    t_armed = true;
}

int64_t disarm() {
    t_armed = false;
    return t_count;
}

bool fired() { return t_fired; }
void *fired_site() { return t_site; }
int64_t live() { return g_live.load(); }

}  // namespace alloc_hook

#define SITE __builtin_return_address(0)

void *operator new(std::size_t size) {
    void *p = allocate(size, 0, SITE);
    if (p == nullptr) throw std::bad_alloc();
    return p;
}
void *operator new[](std::size_t size) {
    void *p = allocate(size, 0, SITE);
    if (p == nullptr) throw std::bad_alloc();
    return p;
}
void *operator new(std::size_t size, const std::nothrow_t &) noexcept { return allocate(size, 0, SITE); }
void *operator new[](std::size_t size, const std::nothrow_t &) noexcept { return allocate(size, 0, SITE); }
void *operator new(std::size_t size, std::align_val_t align) {
    void *p = allocate(size, std::size_t(align), SITE);
    if (p == nullptr) throw std::bad_alloc();
    return p;
}
void *operator new[](std::size_t size, std::align_val_t align) {
    void *p = allocate(size, std::size_t(align), SITE);
    if (p == nullptr) throw std::bad_alloc();
    return p;
}
void *operator new(std::size_t size, std::align_val_t align, const std::nothrow_t &) noexcept {
    return allocate(size, std::size_t(align), SITE);
}
void *operator new[](std::size_t size, std::align_val_t align, const std::nothrow_t &) noexcept {
    return allocate(size, std::size_t(align), SITE);
}

void operator delete(void *p) noexcept { release(p); }
void operator delete[](void *p) noexcept { release(p); }
void operator delete(void *p, std::size_t) noexcept { release(p); }
void operator delete[](void *p, std::size_t) noexcept { release(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { release(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { release(p); }
void operator delete(void *p, std::align_val_t) noexcept { release(p); }
void operator delete[](void *p, std::align_val_t) noexcept { release(p); }
void operator delete(void *p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept { release(p); }
void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept { release(p); }
