// The `--format jsonl` output of `specula generate`: one JSON object per line, written by hand so that we control
// number formatting (logits with 9 significant digits, i.e. exact float round-trip) and UTF-8 handling.
#pragma once

#include <specula/specula.h>

#include <string>
#include <string_view>

namespace specula_cli {

// `text` as a quoted JSON string: quotes, backslashes and control characters escaped, non-ASCII kept as UTF-8.
// Invalid UTF-8 (the library promises none, but a line of JSON must stay valid) becomes U+FFFD.
std::string json_string(std::string_view text);

// A JSON number with 9 significant digits (enough to round-trip a float); `null` for NaN and infinities,
// which JSON cannot express.
std::string json_number(double value);

// {"id":395,"text":" dog"} plus "top":[[id,logit],...] when the event carries top logits, plus
// "accepted":true|false (the token was drafted and accepted) when `speculative`.
std::string json_token_line(const specula_token_event &event, bool speculative = false);

// {"stats":{"prompt_tokens":..,"prompt_tokens_per_s":..,"generated_tokens":..,"decode_tokens_per_s":..,
//  "ttft_ms":..,"stop_reason":"max_tokens"}}; with a drafter (drafter non-empty) also "drafter":"ngram","tree":"auto:ngram:8",
//  "tau":..,"rounds":..,"drafted":..,"accepted":..,"accept_per_depth":[..] (rounds whose accepted path reached
//  depth 1, 2, ...; up to the deepest reached),"draft_ms":..,"verify_ms":..,"drafter_bytes":..
std::string json_stats_line(const specula_stats &stats, specula_stop_reason reason, const std::string &drafter = {},
                            const std::string &tree = {});

}  // namespace specula_cli
