// Following a grammar (grammar.h) through generated text, and which tokens may come next.
//
// The state is the set of parse stacks llama.cpp's grammar sampler keeps: each stack holds, innermost rule last, the
// element each enclosing rule continues with, its top always a character class (rule references are expanded into
// every alternative as soon as they reach the top); an empty stack means the root rule is complete. A code point
// advances every stack whose top class matches it and drops the others; no stack left means the text is rejected.
// Text arrives as the bytes of tokens, so a token may end inside a UTF-8 sequence: the state keeps the sequence's
// first bytes, and a token ending so is allowed when some stack could still match a code point that starts with them.
// UTF-8 is read strictly: overlong forms (F0 80 81 BB for "{", which byte tokens can spell), surrogates and code
// points above U+10FFFF are rejected, so constrained text is always valid UTF-8.
//
// Bounded: a step that would expand more than GrammarMatchLimits::max_expansions stack entries, keep more than
// max_stacks stacks (ambiguous grammars multiply them) or a stack deeper than max_depth (text nested that deep)
// throws Error(UNSUPPORTED, "grammar: ...") instead of running on.
// Not thread-safe for one object; copies are independent (a speculative tree keeps one per node it explores).
#pragma once

#include "grammar/grammar.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace specula::internal {

class Vocab;

// Far above what real grammars need (llama.cpp's JSON grammar keeps a handful of stacks, a few elements per nesting
// level), low enough that one character costs milliseconds at most.
struct GrammarMatchLimits {
    size_t max_stacks = 1024;
    size_t max_expansions = size_t(1) << 16;  // per code point
    size_t max_depth = size_t(1) << 14;       // elements of one stack (nesting of the text)
};

// A vocabulary as the matcher reads it: each token's bytes (Vocab::token_to_piece with special tokens rendered, as
// llama.cpp's grammar sampler reads them), which tokens end generation, and the tokens sorted by their bytes so
// that tokens sharing a prefix are matched through it once.
class GrammarVocab {
public:
    explicit GrammarVocab(const Vocab &vocab);
    // For tests: the pieces of a made-up vocabulary, and which of them end generation.
    GrammarVocab(std::vector<std::string> pieces, std::vector<bool> eog);

    int32_t size() const { return int32_t(pieces_.size()); }
    const std::string &piece(int32_t token) const { return pieces_[size_t(token)]; }
    bool is_eog(int32_t token) const { return eog_[size_t(token)]; }
    // The token whose text is the longest start of `text` among the ordinary tokens (not control or end tokens;
    // the lowest id among equal texts), and its length in bytes; -1 and 0 when none.
    int32_t longest_prefix_token(std::string_view text, size_t &length) const;

private:
    friend class GrammarMatcher;
    void index();
    std::vector<std::string> pieces_;
    std::vector<bool> eog_;
    std::vector<bool> ordinary_;  // may spell forced text: not a control token
    std::unordered_map<std::string_view, int32_t> by_piece_;  // ordinary tokens by their text (views into pieces_)
    size_t longest_piece_ = 0;
    std::vector<int32_t> sorted_;     // tokens with a non-empty piece that do not end generation, by their bytes
    std::vector<uint32_t> shared_;    // shared_[i]: bytes sorted_[i] shares with sorted_[i - 1] at its start
};

class GrammarMatcher {
public:
    explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar, const GrammarMatchLimits &limits = GrammarMatchLimits{});

    const Grammar &grammar() const { return *grammar_; }

    // Whether the grammar can continue with these bytes (a token's text), and advancing by them. accept() returns
    // false and leaves the state unchanged when it cannot.
    bool accepts(std::string_view bytes) const;
    bool accept(std::string_view bytes);
    // The text so far is a whole match of the root rule (no UTF-8 sequence left open): generation may end here.
    bool can_end() const;
    // The text the grammar admits next in exactly one way (each next code point the only one possible, and the
    // grammar not complete before it), at most max_bytes: JSON punctuation, a schema's fixed keys. "" when the next
    // character is a choice.
    std::string forced_text(size_t max_bytes) const;
    // No character can come next (only the end): the grammar is done.
    bool finished() const;

    // The token's text may come next: an end-of-generation token when can_end(), another token when its bytes are
    // accepted; a token whose text is empty never.
    bool allows(const GrammarVocab &vocab, int32_t token) const;
    bool accept_token(const GrammarVocab &vocab, int32_t token);
    // allowed[t] = allows(vocab, t) for every token, tokens with a common prefix matched through it once.
    void allowed_tokens(const GrammarVocab &vocab, std::vector<uint8_t> &allowed) const;

    size_t n_stacks() const { return state_.stacks.size(); }

    // The state as numbers, for snapshots: the open UTF-8 sequence (bits, bytes to come | its length << 8), the number
    // of stacks, then
    // each stack's depth and its elements as (rule id, index in the rule). restore() reads them back for the same
    // grammar and checks that every element is one a matcher could hold there; Error(FORMAT) when not.
    std::vector<uint32_t> save() const;
    static GrammarMatcher restore(std::shared_ptr<const Grammar> grammar, const std::vector<uint32_t> &words,
                                  const GrammarMatchLimits &limits = GrammarMatchLimits{});
    // The most words save() gives: restore() refuses more.
    static constexpr size_t kMaxSavedWords = size_t(1) << 22;

private:
    using Stack = std::vector<const GrammarElement *>;
    struct State {
        std::vector<Stack> stacks;
        uint32_t partial = 0;   // the bits of an open UTF-8 sequence
        uint8_t pending = 0;    // its continuation bytes still to come
        uint8_t length = 0;     // its length in bytes (2-4): the code points it may encode without overlong forms
    };

    std::shared_ptr<const Grammar> grammar_;
    GrammarMatchLimits limits_;
    State state_;

    void expand(Stack stack, std::vector<Stack> &out) const;
    void step_codepoint(const State &in, uint32_t cp, State &out) const;
    // One byte of text: false when the text is rejected there (out is then unspecified).
    bool step_byte(const State &in, uint8_t byte, State &out) const;
    bool open_sequence_possible(const State &s) const;
    bool run(const State &from, std::string_view bytes, State &out) const;
};

}  // namespace specula::internal
