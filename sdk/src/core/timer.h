// Monotonic wall-clock milliseconds, for the stats the sessions report.
#pragma once

#include <chrono>

namespace specula::internal {

inline double now_ms() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

}  // namespace specula::internal
