// The human-readable end-of-run summary of `specula generate`.
#pragma once

#include <specula/specula.h>

#include <string>

namespace specula_cli {

// "prompt: N tok, X tok/s | decode: N tok, Y tok/s | ttft Z ms | stop: reason", and when a drafter is attached
// (drafter non-empty) " | spec DRAFTER (tree TREE): tau X.XX, rounds N, accepted A/D drafted, draft Xms verify Yms",
// TREE being the last round's tree (specula_session_tree_shape; the parenthesis is left out when empty), then under a
// grammar ", grammar drafted G (accepted A), pruned P".
std::string stats_line(const specula_stats &stats, specula_stop_reason reason, const std::string &drafter = {},
                       const std::string &tree = {});

}  // namespace specula_cli
