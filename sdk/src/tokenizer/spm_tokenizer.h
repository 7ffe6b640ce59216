// SentencePiece BPE (tokenizer.ggml.model = "llama"), as llama.cpp's llm_tokenizer_spm_session does it: start
// from single UTF-8 characters, repeatedly merge the adjacent pair whose concatenation is the highest-scoring
// token (leftmost on ties), and spell whatever is left that is not a token as byte-fallback tokens <0xAB>.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace specula::internal {

struct VocabData;

// Appends the tokens of text, whose spaces must already be escaped as U+2581, to out. A byte with no token
// of its own becomes the unknown token (llama.cpp would throw; SentencePiece itself emits <unk>); throws
// Error(UNSUPPORTED) if the vocabulary has neither.
void spm_tokenize(const VocabData &vocab, const std::string &text, std::vector<int32_t> &out);

}  // namespace specula::internal
