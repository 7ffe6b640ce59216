// Library logging: silent by default, routed to the host's callback when one is set (never stdout).
#pragma once

#include <specula/specula.h>

#include <cstdarg>

namespace specula::internal {

void log_set(specula_log_fn fn, specula_log_level min_level, void *user_data);
void log(specula_log_level level, const char *format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace specula::internal
