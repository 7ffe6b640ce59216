// Whether two models can speculate for each other: the drafter's token ids must mean the same text as the
// target's. Used for LongSpec draft files (which store the target's fingerprint) and for independent draft
// models (compared directly).
#pragma once

#include "model/model.h"

#include <string>

namespace specula::internal {

// A stable 64-bit FNV-1a hash over the vocabulary (tokenizer model name, token count, every token's text and
// kind, BOS/EOS ids), as 16 lower-case hex digits. Equal vocabularies give equal fingerprints.
std::string tokenizer_fingerprint(const Vocab &vocab);

// Throws Error(INCOMPATIBLE) unless `draft` can draft for `target`: same tokenizer model, same BOS/EOS, the
// same token text for every id the two share, and vocabulary sizes differing by at most 128 (llama.cpp's
// rule; the extra ids of the larger vocabulary must not be generated, so the draft's larger ids are masked).
// The message names the first difference.
void check_draft_vocab(const Model &target, const Model &draft);

}  // namespace specula::internal
