// Entry point of the Vulkan tests: without a usable device (no loader, no driver: install mesa-vulkan-drivers for
// Mesa's lavapipe) every test would fail for want of one, so the executable says why and exits with 77, which ctest
// reports as "Skipped". After the tests, the Vulkan validation layer (enabled by SPECULA_VULKAN_VALIDATION=1,
// which ctest sets) must have reported no error: a test run with errors fails even if every assertion passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "backends/vulkan/vulkan_api.h"
#include "backends/vulkan/vulkan_device.h"
#include "common/skip.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char **argv) {
    for (int i = 1; i < argc; ++i)  // test discovery lists names only: no device needed
        if (std::strncmp(argv[i], "--list", 6) == 0) return Catch::Session().run(argc, argv);
    std::string reason;
    const auto devices = specula::internal::vulkan::list_devices(&reason);
    if (devices.empty()) {
        std::printf("SKIPPED: the Vulkan tests need a Vulkan device (Mesa's lavapipe will do: mesa-vulkan-drivers): %s\n", reason.c_str());
        return 77;
    }
    // On stderr: test discovery (catch_discover_tests) reads the list of test names from stdout.
    for (const auto &d : devices)
        std::fprintf(stderr, "Vulkan device %d: %s, %.1f GiB\n", d.index, d.name.c_str(), double(d.total_memory) / (1 << 30));
    const specula::internal::vulkan::Instance *inst = specula::internal::vulkan::instance(nullptr);
    const bool validating = inst != nullptr && inst->validation;
    const char *want = std::getenv("SPECULA_VULKAN_VALIDATION");
    if (want != nullptr && std::strcmp(want, "0") != 0 && !validating)
        std::fprintf(stderr, "note: validation asked for, but VK_LAYER_KHRONOS_validation is not installed (vulkan-validationlayers)\n");
    const int status = Catch::Session().run(argc, argv);
    const int errors = specula::internal::vulkan::validation_errors();
    if (validating) std::fprintf(stderr, "Vulkan validation layer: %d error(s)\n", errors);
    if (errors > 0) {
        std::fprintf(stderr, "FAILED: the Vulkan validation layer reported %d error(s); the last: %s\n", errors,
                     specula::internal::vulkan::last_validation_error().c_str());
        return 1;
    }
    return test_fixtures::exit_status(status);
}
