#include "stats_line.h"

#include <cstdio>
#include <string>

namespace specula_cli {

std::string stats_line(const specula_stats &stats, specula_stop_reason reason, const std::string &drafter, const std::string &tree) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "prompt: %d tok, %.1f tok/s | decode: %d tok, %.1f tok/s | ttft %.1f ms | stop: %s",
                  stats.n_prompt_tokens, stats.prompt_tokens_per_s, stats.n_generated, stats.decode_tokens_per_s,
                  stats.ttft_ms, specula_stop_reason_string(reason));
    std::string line = buf;
    if (stats.n_restored_tokens > 0) line += " | restored " + std::to_string(stats.n_restored_tokens) + " tok";
    if (stats.n_context_shifts > 0)
        line += " | " + std::to_string(stats.n_context_shifts) + " context shifts (" + std::to_string(stats.n_discarded_tokens) + " tok dropped)";
    if (!drafter.empty()) {
        std::snprintf(buf, sizeof buf, ": tau %.2f, rounds %d, accepted %d/%d drafted, draft %.1fms verify %.1fms",
                      stats.tau, stats.n_spec_rounds, stats.n_accepted, stats.n_drafted, stats.draft_ms, stats.verify_ms);
        line += " | spec " + drafter + (tree.empty() ? "" : " (tree " + tree + ")") + buf;
        if (stats.n_grammar_drafted > 0 || stats.n_grammar_pruned > 0)
            line += ", grammar drafted " + std::to_string(stats.n_grammar_drafted) + " (accepted " + std::to_string(stats.n_grammar_accepted) +
                    "), pruned " + std::to_string(stats.n_grammar_pruned);
    }
    return line;
}

}  // namespace specula_cli
