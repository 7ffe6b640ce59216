// The human-readable end-of-run summary of `specula generate`.
#pragma once

#include <specula/specula.h>

#include <string>

namespace specula_cli {

// "prompt: N tok, X tok/s | decode: N tok, Y tok/s | ttft Z ms | stop: reason"
std::string stats_line(const specula_stats &stats, specula_stop_reason reason);

}  // namespace specula_cli
