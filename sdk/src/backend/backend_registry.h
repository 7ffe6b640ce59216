// The registry of backends, in the manner of ggml-backend's (ggml/src/ggml-backend-reg.cpp): each backend built
// into the library is one BackendDesc, with its device list, the graph operations it implements and the factory of
// its target runner (which makes the executors of other graphs beside it: TargetRunner::make_executor, and draft
// model runners: make_draft_runner). The core finds backends only here; it includes no backend's header, and adding
// a backend adds an entry, not a change to the core (beyond naming its kind for the C ABI: BackendKind, and
// gpu_backend_kinds() for AUTO's order).
//
// builtin_backends() is defined in one place outside the core, backends/registry.cpp, which names every backend
// this build has (an explicit list, not static self-registration: a static library drops objects nothing refers
// to, and an explicit list keeps what a build has in plain sight).
#pragma once

#include "backend/device_info.h"
#include "backend/kv_type.h"
#include "backend/target_runner.h"
#include "graph/graph.h"

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace specula::internal {

class Model;
class ThreadPool;

// Every backend the C ABI can name (specula_backend), built into this library or not.
enum class BackendKind { Auto, Cpu, Cuda, Vulkan };

// What a backend's factory is asked to make: a runner for `model` with n_ctx slots on `device`, computing on
// `pool`'s threads where it computes on the CPU (the pool belongs to the session and outlives the runner).
struct RunnerRequest {
    std::shared_ptr<const Model> model;
    std::shared_ptr<const Graph> graph;  // the model's graph (graph/model_graph.h), which the runner executes
    int32_t n_ctx = 0;
    ThreadPool *pool = nullptr;
    int32_t device = 0;
    std::optional<KvType> kv_type;  // unset: the backend's default (F16 everywhere)
    // The session asked for AUTO: a backend may then decline a device that would be slower than the CPU backend
    // (Vulkan on a software implementation such as lavapipe), which it still serves when asked for by name.
    bool automatic = false;
};

struct BackendDesc {
    BackendKind kind;
    const char *name;  // "cpu", "cuda", "vulkan": TargetRunner::backend() of its runners
    bool has_devices;  // a GPU backend whose devices are listed and chosen by index (the CPU has none)
    // The devices usable now, or an empty list with *reason set (no driver, no device, ...). Thread-safe.
    std::vector<DeviceInfo> (*devices)(std::string *reason);
    // A runner, or Error with the reason it cannot: UNSUPPORTED (no such device, a KV type it does not keep),
    // INVALID_ARGUMENT (a device index that does not exist), OUT_OF_MEMORY (with the sizes).
    std::unique_ptr<TargetRunner> (*make_runner)(const RunnerRequest &request);
    // Whether the backend implements the operation (as ggml's supports_op): a graph with one it lacks is not given
    // to it, and the session falls back with the reason. Thread-safe.
    bool (*supports_op)(const Op &op);
};

// The first operation of `graph` the backend lacks, or nullptr.
const Op *unsupported_op(const BackendDesc &backend, const Graph &graph);

// The backends of this build: GPU backends first (in AUTO's order), the CPU last (always present).
std::span<const BackendDesc> builtin_backends();
// Every GPU kind the C ABI knows, built into this library or not, in the order AUTO tries them: CUDA, then Vulkan.
// AUTO tries the built ones and names the others' not-built reason (backend/backend_choice.cpp), and
// specula_backend_check(AUTO) reports on all of them.
std::span<const BackendKind> gpu_backend_kinds();
// The entry of a kind, or nullptr when this build does not have it.
const BackendDesc *find_backend(BackendKind kind);
// "CPU", "CUDA", "Vulkan": the name messages give a kind (also for kinds this build lacks).
const char *backend_kind_label(BackendKind kind);
// The devices of a backend, or an empty list with *reason set (also when the build lacks the backend: then the
// reason says how to configure a build that has it).
std::vector<DeviceInfo> list_devices(BackendKind kind, std::string *reason);

}  // namespace specula::internal
