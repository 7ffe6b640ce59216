#include "backends/cpu/cpu_backend.h"

#include "backends/cpu/cpu_runner.h"
#include "core/error.h"

namespace specula::internal {
namespace {

std::vector<DeviceInfo> no_devices(std::string *reason) {
    if (reason) *reason = "not a GPU backend";
    return {};
}

std::unique_ptr<TargetRunner> make_runner(const RunnerRequest &r) {
    require(r.pool != nullptr, SPECULA_ERR_INTERNAL, "cpu: a runner needs the session's threads");
    return std::make_unique<CpuRunner>(r.model, r.n_ctx, *r.pool, r.kv_type.value_or(KvType::F16), r.graph);
}

bool supports_op(const Op &) { return true; }  // the reference implements every operation

}  // namespace

BackendDesc cpu_backend() { return BackendDesc{BackendKind::Cpu, "cpu", false, no_devices, make_runner, supports_op}; }

}  // namespace specula::internal
