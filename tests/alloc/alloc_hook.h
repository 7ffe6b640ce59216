// Allocation-failure injection for the alloc tests (tests/alloc/alloc_hook.cpp replaces the global operator new and
// delete, every variant, of the whole process: the test program, libspecula.so and libstdc++ all allocate through it).
//
// Arming is per thread: alloc_hook::arm(n) on a thread counts the allocations that thread makes through operator new
// from then on, and makes the n-th of them fail (std::bad_alloc, or nullptr from the nothrow variants); every other
// allocation succeeds. Allocations on other threads (the library's thread pools) are neither counted nor failed.
// The hook also keeps the number of live allocations of the whole process (news minus deletes), for leak checks
// around a call once every thread the call started has finished.
#pragma once

#include <cstddef>
#include <cstdint>

namespace alloc_hook {

// Counts this thread's allocations from now on and fails the fail_at-th (1-based); fail_at = 0: count only.
void arm(int64_t fail_at);
// Stops counting on this thread; returns the number of allocations counted since arm().
int64_t disarm();
// Whether the armed allocation has failed since arm().
bool fired();
// The return address of the allocation that failed last (the allocation site, for counting distinct sites).
void *fired_site();
// Live allocations of the whole process made through operator new (news minus deletes).
int64_t live();

}  // namespace alloc_hook
