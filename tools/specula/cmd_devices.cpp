// `specula devices`: the GPUs this build can run on, or why there are none, for each GPU backend (CUDA, Vulkan).
#include "cli.h"

#include <specula/specula.hpp>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

namespace specula_cli {
namespace {

// One GPU backend: its devices ("cuda:0 ...", "vulkan:0 ..."), or "<prefix>: unavailable: <reason>".
void print_backend(specula_backend backend, const char *prefix) {
    const std::string why = specula::backend_unavailable_reason(backend);
    if (!why.empty()) {
        std::printf("%s: unavailable: %s\n", prefix, why.c_str());
        return;
    }
    for (const specula::DeviceInfo &d : specula::devices(backend)) {
        std::string line = std::string(prefix) + ":" + std::to_string(d.index) + " " + d.name;
        char part[128];
        if (d.compute_capability > 0) {  // CUDA's compute capability (0 for other backends)
            std::snprintf(part, sizeof part, ", compute %d.%d", d.compute_capability / 10, d.compute_capability % 10);
            line += part;
        }
        if (d.multiprocessors > 0) {
            std::snprintf(part, sizeof part, backend == SPECULA_BACKEND_CUDA ? ", %d SMs" : ", %d compute units", d.multiprocessors);
            line += part;
        }
        std::snprintf(part, sizeof part, ", %.1f GiB (%.1f GiB free)", double(d.total_memory) / double(1ull << 30),
                      double(d.free_memory) / double(1ull << 30));
        line += part;
        if (d.peak_bandwidth_gbs > 0) {
            std::snprintf(part, sizeof part, ", peak %.0f GB/s", d.peak_bandwidth_gbs);
            line += part;
        }
        std::printf("%s\n", line.c_str());
    }
}

}  // namespace

Command add_devices_command(CLI::App &parent) {
    CLI::App *cmd = parent.add_subcommand("devices", "List the GPUs sessions can run on (--backend cuda or vulkan), or why there are none");
    return Command{cmd, [] {
                       std::printf("cpu: always available\n");
                       print_backend(SPECULA_BACKEND_CUDA, "cuda");
                       print_backend(SPECULA_BACKEND_VULKAN, "vulkan");
                       return int(kExitOk);
                   }};
}

}  // namespace specula_cli
