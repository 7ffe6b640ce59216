#include "backend/backend_choice.h"

#include "core/error.h"
#include "core/log.h"
#include "graph/model_graph.h"

#include <vector>

namespace specula::internal {
namespace {

// Why a GPU backend of a kind this build lacks cannot run a session.
std::string not_built_reason(BackendKind kind) {
    std::string why;
    list_devices(kind, &why);
    return std::string(backend_kind_label(kind)) + ": " + why;
}

// A runner of backend b for the request, refused with the reason when b lacks an operation of the model's graph.
std::unique_ptr<TargetRunner> make_runner(const BackendDesc &b, const RunnerRequest &request) {
    if (const Op *op = unsupported_op(b, *request.graph))
        throw Error(SPECULA_ERR_UNSUPPORTED, std::string(backend_kind_label(b.kind)) + ": the " + request.graph->name + " graph needs the operation '" +
                                                 op_kind_name(op->kind) + "', which this backend does not implement");
    return b.make_runner(request);
}

}  // namespace

std::unique_ptr<TargetRunner> make_target_runner(std::shared_ptr<const Model> model, int32_t n_ctx, ThreadPool &pool,
                                                 const BackendChoice &choice, std::string &note) {
    note.clear();
    RunnerRequest request{model, build_model_graph(model, n_ctx), n_ctx, &pool, choice.device, choice.kv_type};
    request.automatic = choice.kind == BackendKind::Auto;
    const BackendDesc *cpu = find_backend(BackendKind::Cpu);
    require(cpu != nullptr, SPECULA_ERR_INTERNAL, "backends: this build has no CPU backend");
    if (choice.kind == BackendKind::Cpu) return make_runner(*cpu, request);
    require(choice.device >= 0, SPECULA_ERR_INVALID_ARGUMENT, "session: device index must be >= 0");

    // The GPU backends to try: the one asked for, or (Auto) every GPU kind the ABI knows, in AUTO's order
    // (gpu_backend_kinds: CUDA, then Vulkan). A kind this build has is tried through the registry; a kind it lacks
    // only adds its not-built reason, so a CPU fallback says why each GPU was not used.
    std::vector<BackendKind> tries;
    if (choice.kind != BackendKind::Auto) tries.push_back(choice.kind);
    else tries.assign(gpu_backend_kinds().begin(), gpu_backend_kinds().end());
    std::string reasons;
    for (BackendKind kind : tries) {
        std::string reason;
        if (const BackendDesc *b = find_backend(kind); b != nullptr) {
            try {
                return make_runner(*b, request);
            } catch (const Error &e) {
                // A device index that does not exist is the caller's mistake when they named the backend.
                if (!choice.allow_fallback || (choice.kind == kind && e.status() == SPECULA_ERR_INVALID_ARGUMENT)) throw;
                reason = e.what();
            }
        } else {
            reason = not_built_reason(kind);
            require(choice.allow_fallback || choice.kind == BackendKind::Auto, SPECULA_ERR_UNSUPPORTED, reason);
        }
        reasons += (reasons.empty() ? "" : "; ") + reason;
    }
    std::unique_ptr<TargetRunner> runner = make_runner(*cpu, request);
    note = reasons + "; running on the CPU";
    log(choice.kind == BackendKind::Auto ? SPECULA_LOG_INFO : SPECULA_LOG_WARN, "%s", note.c_str());
    return runner;
}

std::unique_ptr<TargetRunner> make_draft_model_runner(TargetRunner &target, std::shared_ptr<const Model> draft, ThreadPool &pool) {
    if (std::unique_ptr<TargetRunner> beside = target.make_draft_runner(draft, target.n_ctx())) return beside;
    BackendChoice cpu;
    cpu.kind = BackendKind::Cpu;
    std::string note;
    return make_target_runner(std::move(draft), target.n_ctx(), pool, cpu, note);
}

}  // namespace specula::internal
