// Entry point of the CUDA tests: without a usable device every test would fail for want of hardware, so the
// executable says why and exits with 77, which ctest reports as "Skipped" (SKIP_RETURN_CODE).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "backends/cuda/cuda_devices.h"
#include "common/skip.h"

#include <cstdio>

int main(int argc, char **argv) {
    std::string reason;
    const auto devices = specula::internal::cuda::list_devices(&reason);
    if (devices.empty()) {
        std::printf("SKIPPED: the CUDA tests need a GPU: %s\n", reason.c_str());
        return 77;
    }
    // On stderr: test discovery (catch_discover_tests) reads the list of test names from stdout.
    for (const auto &d : devices)
        std::fprintf(stderr, "CUDA device %d: %s, compute %d.%d, %d SMs, %.1f GiB (%.1f GiB free), peak %.0f GB/s\n", d.index, d.name.c_str(),
                    d.compute_major, d.compute_minor, d.multiprocessors, double(d.total_memory) / (1 << 30), double(d.free_memory) / (1 << 30),
                    d.peak_bandwidth_gbs);
    return test_fixtures::exit_status(Catch::Session().run(argc, argv));
}
