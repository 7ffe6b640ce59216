// The one Catch2 main shared by the test executables. A test case that skipped for want of data makes the process
// exit with 77 (ctest: "Skipped") unless something failed (common/skip.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "common/skip.h"

int main(int argc, char **argv) {
    return test_fixtures::exit_status(Catch::Session().run(argc, argv));
}
