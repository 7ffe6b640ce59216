#include "cuda_emulation.h"

#include "formats/half.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#if !defined(__x86_64__)
#error "the CUDA emulator's fibers are written for x86-64"
#endif

// Saves the callee-saved registers and the stack pointer into *save_sp, switches to load_sp and restores the
// registers found there (System V x86-64). A fresh fiber's stack is laid out so that the first switch "returns"
// into fiber_entry.
extern "C" void specula_emu_switch(void **save_sp, void *load_sp);
asm(R"(
    .text
    .globl specula_emu_switch
    .type specula_emu_switch, @function
specula_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size specula_emu_switch, .-specula_emu_switch
    .section .note.GNU-stack,"",@progbits
    .text
)");

__half __float2half_rn(float f) { return __half{specula::internal::float_to_half(f)}; }
float __half2float(__half h) { return specula::internal::half_to_float(h.bits); }

namespace cuda_emulation {
namespace {

constexpr size_t kStackStagger = 32 * 1024;
constexpr size_t kStackBytes = 128 * 1024 + kStackStagger;
constexpr int kWarpSize = 32;

enum class State { Ready, AtBlockBarrier, AtWarpBarrier, Done };

struct Fiber {
    void *sp = nullptr;
    State state = State::Ready;
    ThreadContext ctx;
    int warp = 0, lane = 0;
    uint64_t shuffles = 0;
};

// The block being run: its fibers, the scheduler's saved stack pointer and the body every fiber runs.
struct BlockRun {
    std::vector<Fiber> fibers;
    Fiber *current = nullptr;
    void *scheduler_sp = nullptr;
    const std::function<void()> *body = nullptr;
    std::vector<uint64_t> exchange;  // shuffle slots, one per thread
    std::vector<unsigned char> dynamic_shared;
};

thread_local BlockRun *run = nullptr;
thread_local std::vector<std::unique_ptr<char[]>> stacks;
std::atomic<uint64_t> launch_count{0};
std::atomic<uint64_t> graph_launch_count{0};

// Threads [first, last) of a warp: when all of them wait at the warp's barrier or are done, and at least one waits,
// the waiting ones are made ready and the first of them is returned; otherwise nothing changes and nullptr.
Fiber *release_warp(BlockRun &br, size_t first, size_t last) {
    bool any = false;
    for (size_t j = first; j < last; ++j) {
        const State s = br.fibers[j].state;
        if (s == State::AtWarpBarrier) any = true;
        else if (s != State::Done) return nullptr;
    }
    if (!any) return nullptr;
    Fiber *resume = nullptr;
    for (size_t j = first; j < last; ++j) {
        Fiber &f = br.fibers[j];
        if (f.state != State::AtWarpBarrier) continue;
        f.state = State::Ready;
        if (resume == nullptr) resume = &f;
    }
    return resume;
}

// The current fiber (its state already set: at a barrier or done) passes control on: straight to the next ready
// fiber of its warp, as the scheduler would (it skips fibers that are not ready), or back to the scheduler after the
// warp's last one. Half the switches of returning to the scheduler after each fiber: shuffle-heavy kernels spent most
// of their emulated time switching.
void yield_to_scheduler() {
    BlockRun &br = *run;
    Fiber *const me = br.current;
    const size_t n = br.fibers.size(), last = std::min(n, size_t(me->warp + 1) * kWarpSize);
    for (size_t j = size_t(me - br.fibers.data()) + 1; j < last; ++j) {
        Fiber &next = br.fibers[j];
        if (next.state != State::Ready) continue;
        br.current = &next;
        specula_emu_switch(&me->sp, next.sp);
        return;
    }
    // The warp's last fiber to arrive: when the whole warp waits at its barrier (or is done), release it here and
    // go on with its first fiber, as the scheduler would, without the round trip through it.
    if (Fiber *resume = release_warp(br, size_t(me->warp) * kWarpSize, last)) {
        if (resume == me) return;
        br.current = resume;
        specula_emu_switch(&me->sp, resume->sp);
        return;
    }
    specula_emu_switch(&me->sp, br.scheduler_sp);
}

[[noreturn]] void fiber_entry() {
    (*run->body)();
    run->current->state = State::Done;
    yield_to_scheduler();
    std::abort();  // a finished fiber is never resumed
}

// Stack i's top is moved down by a different multiple of 64 bytes (within kStackStagger): tops exactly kStackBytes
// apart would all fall in the same cache sets, and switching among a warp's fibers would miss on every switch.
void *init_stack(char *stack, size_t i) {
    auto top = (reinterpret_cast<uintptr_t>(stack + kStackBytes) - (i * 7 * 64) % kStackStagger) & ~uintptr_t(15);
    auto *sp = reinterpret_cast<void **>(top);
    *--sp = nullptr;                                     // fake return address of fiber_entry (it never returns)
    *--sp = reinterpret_cast<void *>(&fiber_entry);      // where the first switch's `ret` goes
    for (int i = 0; i < 6; ++i) *--sp = nullptr;         // rbp, rbx, r12..r15
    return sp;
}

void run_block(const std::function<void()> &body, dim3 grid, dim3 block, uint3 block_idx, size_t shared_bytes) {
    const size_t n = size_t(block.x) * block.y * block.z;
    if (n == 0 || n > 1024) throw std::runtime_error("CUDA emulator: a block of " + std::to_string(n) + " threads (1..1024)");
    BlockRun br;
    br.body = &body;
    br.fibers.resize(n);
    br.exchange.assign(2 * n, 0);
    br.dynamic_shared.assign(shared_bytes + 16, 0xA5);  // not zero: kernels must write what they read
    while (stacks.size() < n) stacks.push_back(std::make_unique<char[]>(kStackBytes));
    for (size_t i = 0; i < n; ++i) {
        Fiber &f = br.fibers[i];
        f.ctx.thread = uint3{unsigned(i % block.x), unsigned((i / block.x) % block.y), unsigned(i / (size_t(block.x) * block.y))};
        f.ctx.block = block_idx;
        f.ctx.block_dim = block;
        f.ctx.grid_dim = grid;
        f.warp = int(i / kWarpSize);
        f.lane = int(i % kWarpSize);
        f.sp = init_stack(stacks[i].get(), i);
    }
    BlockRun *outer = run;
    run = &br;
    const int n_warps = int((n + kWarpSize - 1) / kWarpSize);
    // Warps run one at a time, each until all its threads wait at the block's barrier or are done: a schedule a GPU
    // may choose (warps progress independently between block barriers), and one that keeps 32 fibers' stacks hot
    // and releases a warp's barrier (every shuffle is one) without scanning the whole block.
    for (;;) {
        for (int w = 0; w < n_warps; ++w) {
            const size_t first = size_t(w) * kWarpSize, last = std::min(n, first + kWarpSize);
            for (;;) {
                for (size_t i = first; i < last; ++i) {
                    Fiber &f = br.fibers[i];
                    if (f.state != State::Ready) continue;
                    br.current = &f;
                    specula_emu_switch(&br.scheduler_sp, f.sp);
                }
                if (release_warp(br, first, last) == nullptr) break;
            }
        }
        // Every warp now waits at the block's barrier, is done, or is stuck (threads at different barriers).
        bool all_done = true, block_ready = true;
        for (const Fiber &f : br.fibers) {
            if (f.state != State::Done) all_done = false;
            if (f.state != State::Done && f.state != State::AtBlockBarrier) block_ready = false;
        }
        if (all_done) break;
        if (!block_ready) {
            run = outer;
            throw std::runtime_error("CUDA emulator: deadlock: the threads of a block wait at different barriers");
        }
        for (Fiber &f : br.fibers)
            if (f.state == State::AtBlockBarrier) f.state = State::Ready;
    }
    run = outer;
}

struct Stream {
    bool capturing = false;
    std::vector<std::function<void()>> captured;
};

// Runs `op` now, or records it into the stream's capture.
cudaError_t issue(cudaStream_t stream, std::function<void()> op) {
    auto *s = reinterpret_cast<Stream *>(stream);
    if (s != nullptr && s->capturing) {
        s->captured.push_back(std::move(op));
        return cudaSuccess;
    }
    op();
    return cudaSuccess;
}

struct Graph {
    std::vector<std::function<void()>> ops;
};

std::mutex memory_mutex;
std::map<void *, size_t> allocations;
size_t allocated = 0;
// 8 GiB, or SPECULA_CUDA_EMULATION_MEMORY_MB (tests of the out-of-memory paths).
size_t device_memory() {
    const char *env = std::getenv("SPECULA_CUDA_EMULATION_MEMORY_MB");
    return env != nullptr ? size_t(std::strtoull(env, nullptr, 10)) << 20 : size_t(8) << 30;
}

bool no_device() {
    const char *env = std::getenv("SPECULA_CUDA_EMULATION_DEVICES");
    return env != nullptr && std::string(env) == "0";
}

}  // namespace

const ThreadContext &current() {
    if (run == nullptr || run->current == nullptr) throw std::runtime_error("CUDA emulator: threadIdx outside a kernel");
    return run->current->ctx;
}

void syncthreads() {
    run->current->state = State::AtBlockBarrier;
    yield_to_scheduler();
}

void syncwarp() {
    run->current->state = State::AtWarpBarrier;
    yield_to_scheduler();
}

// Two slot sets used alternately: a lane can only write a set again after the barrier of the shuffle between,
// which every lane passes after reading, so one barrier per shuffle is enough.
uint64_t shfl_xor_bits(uint64_t bits, int lane_mask) {
    Fiber *f = run->current;
    const size_t n = run->fibers.size(), me = size_t(f - run->fibers.data());
    const size_t set = (f->shuffles++ & 1) * n;
    run->exchange[set + me] = bits;
    syncwarp();
    const size_t other = size_t(f->warp) * kWarpSize + size_t(f->lane ^ lane_mask);
    return other < n ? run->exchange[set + other] : bits;
}

void *dynamic_shared() {
    auto p = reinterpret_cast<uintptr_t>(run->dynamic_shared.data());
    return reinterpret_cast<void *>((p + 15) & ~uintptr_t(15));
}

void launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, std::function<void()> body) {
    issue(stream, [grid, block, shared_bytes, body = std::move(body)]() {
        ++launch_count;
        for (unsigned z = 0; z < grid.z; ++z)
            for (unsigned y = 0; y < grid.y; ++y)
                for (unsigned x = 0; x < grid.x; ++x) run_block(body, grid, block, uint3{x, y, z}, shared_bytes);
    });
}

uint64_t launches() { return launch_count.load(); }
uint64_t graph_launches() { return graph_launch_count.load(); }

}  // namespace cuda_emulation

using namespace cuda_emulation;

cudaError_t cudaGetDeviceCount(int *count) {
    *count = no_device() ? 0 : 1;
    return no_device() ? cudaErrorNoDevice : cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
    if (no_device() || device != 0) return cudaErrorInvalidDevice;
    std::memset(prop, 0, sizeof *prop);
    std::strncpy(prop->name, "specula CUDA emulator (CPU)", sizeof prop->name - 1);
    prop->totalGlobalMem = device_memory();
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 1;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr, int) {
    *value = 0;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 && !no_device() ? cudaSuccess : cudaErrorInvalidDevice; }

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    std::lock_guard<std::mutex> lock(memory_mutex);
    *total_bytes = device_memory();
    *free_bytes = device_memory() - std::min(allocated, device_memory());
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
    std::lock_guard<std::mutex> lock(memory_mutex);
    if (allocated + bytes > device_memory()) return cudaErrorMemoryAllocation;
    void *p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
    if (p == nullptr) return cudaErrorMemoryAllocation;
    std::memset(p, 0xA5, bytes);  // device memory is not zeroed: poison it so unwritten reads show
    allocations[p] = bytes;
    allocated += bytes;
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr) {
    if (ptr == nullptr) return cudaSuccess;
    std::lock_guard<std::mutex> lock(memory_mutex);
    auto it = allocations.find(ptr);
    if (it == allocations.end()) return cudaErrorInvalidValue;
    allocated -= it->second;
    allocations.erase(it);
    std::free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t bytes) {
    *ptr = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
    return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void *ptr) {
    std::free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind) {
    if (bytes) std::memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height, cudaMemcpyKind) {
    for (size_t r = 0; r < height; ++r) std::memmove(static_cast<char *>(dst) + r * dpitch, static_cast<const char *>(src) + r * spitch, width);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind, cudaStream_t stream) {
    return issue(stream, [dst, src, bytes]() {
        ++launch_count;
        if (bytes) std::memmove(dst, src, bytes);
    });
}

cudaError_t cudaMemset(void *ptr, int value, size_t bytes) {
    std::memset(ptr, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned) {
    *stream = reinterpret_cast<cudaStream_t>(new Stream());
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    delete reinterpret_cast<Stream *>(stream);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    auto *s = reinterpret_cast<Stream *>(stream);
    return s != nullptr && s->capturing ? cudaErrorStreamCaptureUnsupported : cudaSuccess;  // illegal while capturing, as on a GPU
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
    auto *s = reinterpret_cast<Stream *>(stream);
    if (s == nullptr || s->capturing) return cudaErrorStreamCaptureUnsupported;
    s->capturing = true;
    s->captured.clear();
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
    auto *s = reinterpret_cast<Stream *>(stream);
    if (s == nullptr || !s->capturing) return cudaErrorInvalidValue;
    s->capturing = false;
    auto *g = new Graph();
    g->ops = std::move(s->captured);
    s->captured.clear();
    *graph = reinterpret_cast<cudaGraph_t>(g);
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long) {
    *exec = reinterpret_cast<cudaGraphExec_t>(new Graph(*reinterpret_cast<Graph *>(graph)));
    return cudaSuccess;
}

// As on a GPU, an update succeeds only when the new graph has the same nodes (here: as many operations).
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo *) {
    auto *e = reinterpret_cast<Graph *>(exec);
    const auto *g = reinterpret_cast<Graph *>(graph);
    if (e->ops.size() != g->ops.size()) return cudaErrorGraphExecUpdateFailure;
    e->ops = g->ops;
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    const auto *e = reinterpret_cast<Graph *>(exec);
    ++cuda_emulation::graph_launch_count;
    for (const auto &op : e->ops) issue(stream, op);
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    delete reinterpret_cast<Graph *>(graph);
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    delete reinterpret_cast<Graph *>(exec);
    return cudaSuccess;
}

cudaError_t cudaGetLastError() { return cudaSuccess; }

const char *cudaGetErrorName(cudaError_t error) {
    switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorGraphExecUpdateFailure: return "cudaErrorGraphExecUpdateFailure";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t error) { return error == cudaErrorNoDevice ? "no CUDA-capable device is detected (emulator)" : cudaGetErrorName(error); }
