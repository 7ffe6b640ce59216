// Library logging: silent by default, routed to the host's callback when one is set (never stdout).
#pragma once

#include <specula/specula.h>

#include <cstdarg>

namespace specula::internal {

// Messages whose level is at least min_level reach fn. min_level is an int, not the enum: a C caller may pass any
// value (above SPECULA_LOG_ERROR: nothing is delivered; below SPECULA_LOG_DEBUG: everything), and loading a value
// outside the enumerators as the C++ enum would be undefined behaviour.
void log_set(specula_log_fn fn, int min_level, void *user_data);
void log(specula_log_level level, const char *format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace specula::internal
