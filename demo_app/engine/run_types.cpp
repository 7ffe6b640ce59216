#include "run_types.h"

namespace demo {

RunStats stats_between(const specula_stats &before, const specula_stats &after) {
    RunStats r;
    r.generated = after.n_generated - before.n_generated;
    r.evaluated_tokens = after.n_prompt_tokens - before.n_prompt_tokens;
    r.rounds = after.n_spec_rounds - before.n_spec_rounds;
    r.drafted = after.n_drafted - before.n_drafted;
    r.accepted = after.n_accepted - before.n_accepted;
    for (int d = 0; d < 16; ++d) r.accepted_at_depth[d] = after.accepted_at_depth[d] - before.accepted_at_depth[d];
    r.prompt_ms = after.prompt_ms - before.prompt_ms;
    r.decode_ms = after.decode_ms - before.decode_ms;
    r.draft_ms = after.draft_ms - before.draft_ms;
    r.verify_ms = after.verify_ms - before.verify_ms;
    r.drafter_bytes = after.drafter_bytes;
    return r;
}

}  // namespace demo
