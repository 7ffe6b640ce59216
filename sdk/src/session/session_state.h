// The parts of a session a snapshot holds, each written and read by one pair of functions (as llama.cpp's
// llama_state_get/set_data_internal call write_X / read_X pairs), so that a section's layout is written down once.
// The readers check everything a section can say on its own and throw Error(FORMAT) ("snapshot: ...") for damage;
// what needs the session (the drafters attached, the context's room) is checked by session_snapshot.cpp, which
// applies nothing before every part has been read and checked.
//
// Sections (snapshot/snapshot_file.h has the container and the section tags):
//   SESS  SessionPart      the evaluation point, the last logits, and (Full) the stream's held-back text, the run's
//                          counters and the stats
//   SAMP  the sampler      (Full) its settings and its generator's position
//   SPEC  SpeculativePart  (Full) the drafter set, the speculative stats, a round's tokens not emitted yet with the
//                          logits rows that follow them, the drafters' own state
// The byte layouts are those of snapshot format version 1, unchanged: snapshots written before load.
#pragma once

#include "core/byte_stream.h"
#include "sampling/sampler.h"
#include "session/speculative_round.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace specula::internal {

struct SessionPart {
    int32_t n_evaluated = 0;
    bool logits_valid = false;
    std::vector<float> logits;  // n_vocab floats when logits_valid
    bool last_token_generated = false;
    // Full snapshots only.
    int32_t n_run_generated = 0;
    bool run_first_token = true;
    std::string decoder_pending, stops_pending;
    int32_t n_prompt_tokens = 0, n_generated = 0, n_restored_tokens = 0;
    double prompt_ms = 0, decode_ms = 0, ttft_ms = 0;
};
void write_session_part(ByteWriter &w, const SessionPart &part, bool full);
// n_tokens / n_kv: the header's context and filled slots, which the evaluation point must fit.
SessionPart read_session_part(ByteReader &r, bool full, int32_t n_vocab, int32_t n_tokens, int32_t n_kv);
// The decoded size a SESS section may have (the logits and the held-back text dominate).
uint64_t session_part_bound(int32_t n_vocab);

// The most bytes a SAMP section holds: the settings and generator (well under 64 KiB) and a grammar with its state.
uint64_t sampler_part_bound();
void write_sampler_part(ByteWriter &w, const Sampler &sampler);
std::unique_ptr<Sampler> read_sampler_part(ByteReader &r);

struct SpeculativePart {
    std::string drafter;          // the attached drafter's name, empty when the snapshot holds no drafter state
    bool has_ngram = false;
    NgramConfig ngram;
    SpeculativeStats stats;
    std::vector<SpeculativeRound::Ready> ready;  // the round's tokens not emitted yet
    std::vector<float> ready_rows;               // ready.size() rows of n_vocab logits
    std::vector<uint8_t> drafter_state;          // Drafter::save_state()
    int32_t own_slots = 0;                       // filled slots of a draft model's own cache
};
void write_speculative_part(ByteWriter &w, const SpeculativePart &part, int32_t n_vocab);
SpeculativePart read_speculative_part(ByteReader &r, int32_t n_vocab);
uint64_t speculative_part_bound(int32_t n_vocab);

}  // namespace specula::internal
