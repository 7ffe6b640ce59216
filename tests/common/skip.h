// Skipping a test whose data is absent, so that ctest reports it as "Skipped", never as passed.
//
// Catch2 v2 has no SKIP. A test that lacks its data calls SPECULA_SKIP(why): it prints "SKIPPED: why" on stdout
// (tests/report_skips.cmake lists those lines after ctest's summary), warns through Catch, and counts the skip;
// the caller then returns. The shared main (tests/catch_main.cpp) exits with 77 when the run passed but something
// was skipped, and ctest maps 77 to "Skipped" (SKIP_RETURN_CODE). A failure still fails: skips never hide one.
#pragma once

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <sstream>
#include <string>

namespace test_fixtures {

inline std::atomic<int> &skip_count() {
    static std::atomic<int> count{0};
    return count;
}

inline void note_skip(const std::string &why) {
    std::printf("SKIPPED: %s\n", why.c_str());
    std::fflush(stdout);
    skip_count().fetch_add(1);
}

// The exit status of a test process: Catch's own on failure (77 is moved to 78: it would read as a skip), 77 when
// it passed with something skipped, 0 when everything ran.
inline int exit_status(int catch_status) {
    if (catch_status == 77) return 78;
    if (catch_status != 0) return catch_status;
    return skip_count().load() > 0 ? 77 : 0;
}

}  // namespace test_fixtures

#define SPECULA_SKIP(message)                                                                                     \
    do {                                                                                                          \
        std::ostringstream specula_skip_why_;                                                                     \
        specula_skip_why_ << message;                                                                             \
        test_fixtures::note_skip(specula_skip_why_.str());                                                        \
        WARN("SKIPPED: " << specula_skip_why_.str());                                                             \
    } while (0)
