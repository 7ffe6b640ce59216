// Byte-level BPE (tokenizer.ggml.model = "gpt2"), as llama.cpp's llm_tokenizer_bpe_session does it: split the
// text into words with the pre-tokenizer, map each word's bytes to GPT-2's printable characters, then merge
// adjacent symbols by rank (lowest first, leftmost on ties) within each word.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace specula::internal {

struct VocabData;

// Appends the tokens of plain text (no special-token handling, no BOS/EOS) to out.
void bpe_tokenize(const VocabData &vocab, std::string_view text, std::vector<int32_t> &out);

}  // namespace specula::internal
