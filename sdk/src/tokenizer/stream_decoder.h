// Turns a stream of token pieces into valid UTF-8. A piece may end in the middle of a character (byte-level
// BPE and SentencePiece byte fallback split emoji and CJK across tokens), so the decoder holds back an
// incomplete trailing sequence until the bytes that complete it arrive. Bytes that can never form valid UTF-8
// become U+FFFD, one per maximal ill-formed subpart (the Unicode-recommended substitution), so what comes out
// is always valid UTF-8 and concatenating every output equals the valid input.
#pragma once

#include <string>
#include <string_view>

namespace specula::internal {

class StreamDecoder {
public:
    // The longest complete, valid UTF-8 text available after appending bytes; an incomplete sequence at the
    // end is kept for the next push.
    std::string push(std::string_view bytes);
    // What is held back, as U+FFFD (it can no longer be completed); resets the decoder.
    std::string flush();
    void reset();
    // The bytes held back, and putting them back (snapshots of a session between two tokens).
    const std::string &pending() const { return pending_; }
    void restore(std::string pending) { pending_ = std::move(pending); }

private:
    std::string pending_;  // at most 3 bytes: a prefix of a valid sequence
};

}  // namespace specula::internal
