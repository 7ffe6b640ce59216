// `specula devices`: the GPUs this build can run on, or why there are none.
#include "cli.h"

#include <specula/specula.hpp>

#include <CLI/CLI.hpp>

#include <cstdio>

namespace specula_cli {

Command add_devices_command(CLI::App &parent) {
    CLI::App *cmd = parent.add_subcommand("devices", "List the GPUs sessions can run on (--backend cuda), or why there are none");
    return Command{cmd, [] {
                       std::printf("cpu: always available\n");
                       const std::string why = specula::backend_unavailable_reason(SPECULA_BACKEND_CUDA);
                       if (!why.empty()) {
                           std::printf("cuda: unavailable: %s\n", why.c_str());
                           return int(kExitOk);
                       }
                       for (const specula::DeviceInfo &d : specula::devices())
                           std::printf("cuda:%d %s, compute %d.%d, %d SMs, %.1f GiB (%.1f GiB free), peak %.0f GB/s\n", d.index, d.name,
                                       d.compute_capability / 10, d.compute_capability % 10, d.multiprocessors,
                                       double(d.total_memory) / double(1ull << 30), double(d.free_memory) / double(1ull << 30),
                                       d.peak_bandwidth_gbs);
                       return int(kExitOk);
                   }};
}

}  // namespace specula_cli
