#include "stats_line.h"

#include <cstdio>

namespace specula_cli {

std::string stats_line(const specula_stats &stats, specula_stop_reason reason) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "prompt: %d tok, %.1f tok/s | decode: %d tok, %.1f tok/s | ttft %.1f ms | stop: %s",
                  stats.n_prompt_tokens, stats.prompt_tokens_per_s, stats.n_generated, stats.decode_tokens_per_s,
                  stats.ttft_ms, specula_stop_reason_string(reason));
    return buf;
}

}  // namespace specula_cli
