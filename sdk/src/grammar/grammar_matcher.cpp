#include "grammar/grammar_matcher.h"

#include "core/error.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

#include <algorithm>
#include <numeric>

namespace specula::internal {
namespace {

bool ends_sequence(const GrammarElement *e) { return e->op == GrammarOp::kEnd || e->op == GrammarOp::kAlt; }

// Whether the class starting at e matches cp; *next is the element after the class.
bool match_class(const GrammarElement *e, uint32_t cp, const GrammarElement **next) {
    if (e->op == GrammarOp::kCharAny) {
        *next = e + 1;
        return true;
    }
    const bool positive = e->op == GrammarOp::kChar;
    bool found = false;
    do {
        if (e[1].op == GrammarOp::kCharRangeUpper) {
            found = found || (e->value <= cp && cp <= e[1].value);
            e += 2;
        } else {
            found = found || e->value == cp;
            e += 1;
        }
    } while (e->op == GrammarOp::kCharAlt);
    *next = e;
    return found == positive;
}

// Whether the class starting at e may match some code point in [lo, hi] (an open UTF-8 sequence's possibilities).
bool may_match_range(const GrammarElement *e, uint32_t lo, uint32_t hi) {
    if (e->op == GrammarOp::kCharAny) return true;
    const bool positive = e->op == GrammarOp::kChar;
    bool intersects = false, covers = false;
    do {
        uint32_t a = e->value, b = e->value;
        if (e[1].op == GrammarOp::kCharRangeUpper) {
            b = e[1].value;
            e += 2;
        } else {
            e += 1;
        }
        intersects = intersects || (a <= hi && lo <= b);
        covers = covers || (a <= lo && hi <= b);
    } while (e->op == GrammarOp::kCharAlt);
    return positive ? intersects : !covers;
}

}  // namespace

GrammarVocab::GrammarVocab(const Vocab &vocab) {
    const int32_t n = vocab.n_tokens();
    pieces_.resize(size_t(n));
    eog_.resize(size_t(n));
    ordinary_.resize(size_t(n));
    for (int32_t t = 0; t < n; ++t) {
        pieces_[size_t(t)] = vocab.token_to_piece(t, true);
        eog_[size_t(t)] = vocab.is_eog(t);
        ordinary_[size_t(t)] = !vocab.is_eog(t) && !vocab.is_control(t);
    }
    index();
}

GrammarVocab::GrammarVocab(std::vector<std::string> pieces, std::vector<bool> eog) : pieces_(std::move(pieces)), eog_(std::move(eog)) {
    eog_.resize(pieces_.size(), false);
    ordinary_.resize(pieces_.size());
    for (size_t t = 0; t < pieces_.size(); ++t) ordinary_[t] = !eog_[t];
    index();
}

int32_t GrammarVocab::longest_prefix_token(std::string_view text, size_t &length) const {
    for (size_t n = std::min(text.size(), longest_piece_); n > 0; --n) {
        const auto it = by_piece_.find(text.substr(0, n));
        if (it != by_piece_.end()) {
            length = n;
            return it->second;
        }
    }
    length = 0;
    return -1;
}

void GrammarVocab::index() {
    by_piece_.clear();
    longest_piece_ = 0;
    for (int32_t t = 0; t < int32_t(pieces_.size()); ++t) {
        const std::string &p = pieces_[size_t(t)];
        if (!ordinary_[size_t(t)] || p.empty()) continue;
        by_piece_.emplace(std::string_view(p), t);  // the first (lowest) id keeps its place
        longest_piece_ = std::max(longest_piece_, p.size());
    }
    sorted_.clear();
    for (int32_t t = 0; t < int32_t(pieces_.size()); ++t)
        if (!eog_[size_t(t)] && !pieces_[size_t(t)].empty()) sorted_.push_back(t);
    std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) { return pieces_[size_t(a)] < pieces_[size_t(b)]; });
    shared_.assign(sorted_.size(), 0);
    for (size_t i = 1; i < sorted_.size(); ++i) {
        const std::string &a = pieces_[size_t(sorted_[i - 1])], &b = pieces_[size_t(sorted_[i])];
        uint32_t k = 0;
        while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
        shared_[i] = k;
    }
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, const GrammarMatchLimits &limits)
    : grammar_(std::move(grammar)), limits_(limits) {
    require(grammar_ != nullptr, SPECULA_ERR_INVALID_ARGUMENT, "grammar: no grammar");
    // The root's alternatives, each expanded until a character class is on top.
    const std::vector<GrammarElement> &root = grammar_->rule(grammar_->root());
    const GrammarElement *alt = root.data();
    for (;;) {
        Stack s;
        if (!ends_sequence(alt)) s.push_back(alt);
        expand(std::move(s), state_.stacks);
        while (!ends_sequence(alt)) ++alt;
        if (alt->op != GrammarOp::kAlt) break;
        ++alt;
    }
    std::sort(state_.stacks.begin(), state_.stacks.end());
    state_.stacks.erase(std::unique(state_.stacks.begin(), state_.stacks.end()), state_.stacks.end());
}

// Replaces rule references on top of the stack by each of the rule's alternatives (the reference's continuation
// below them) until a character class is on top or the stack is empty; appends the results to out.
void GrammarMatcher::expand(Stack stack, std::vector<Stack> &out) const {
    std::vector<Stack> todo;
    todo.push_back(std::move(stack));
    size_t expansions = 0;
    while (!todo.empty()) {
        Stack s = std::move(todo.back());
        todo.pop_back();
        if (s.empty() || s.back()->op != GrammarOp::kRuleRef) {
            out.push_back(std::move(s));
            if (out.size() > limits_.max_stacks * 4)
                throw Error(SPECULA_ERR_UNSUPPORTED, "grammar: the grammar is too ambiguous (more than " +
                                                         std::to_string(limits_.max_stacks) + " parse stacks at once)");
            continue;
        }
        const GrammarElement *ref = s.back();
        s.pop_back();
        if (!ends_sequence(ref + 1)) s.push_back(ref + 1);
        if (s.size() >= limits_.max_depth)
            throw Error(SPECULA_ERR_UNSUPPORTED, "grammar: the text is nested deeper than the grammar matcher follows (" +
                                                     std::to_string(limits_.max_depth) + " levels of rules)");
        const std::vector<GrammarElement> &rule = grammar_->rule(ref->value);
        const GrammarElement *alt = rule.data();
        for (;;) {
            if (++expansions > limits_.max_expansions)
                throw Error(SPECULA_ERR_UNSUPPORTED, "grammar: the grammar is too ambiguous (more than " +
                                                         std::to_string(limits_.max_expansions) + " rule expansions for one character)");
            Stack n = s;
            if (!ends_sequence(alt)) n.push_back(alt);
            todo.push_back(std::move(n));
            while (!ends_sequence(alt)) ++alt;
            if (alt->op != GrammarOp::kAlt) break;
            ++alt;
        }
    }
}

void GrammarMatcher::step_codepoint(const State &in, uint32_t cp, State &out) const {
    out.stacks.clear();
    out.partial = 0;
    out.pending = 0;
    out.length = 0;
    for (const Stack &s : in.stacks) {
        if (s.empty()) continue;  // the root is complete there: no character may follow on this stack
        const GrammarElement *next = nullptr;
        if (!match_class(s.back(), cp, &next)) continue;
        Stack n(s.begin(), s.end() - 1);
        if (!ends_sequence(next)) n.push_back(next);
        expand(std::move(n), out.stacks);
    }
    if (out.stacks.size() > 1) {
        std::sort(out.stacks.begin(), out.stacks.end());
        out.stacks.erase(std::unique(out.stacks.begin(), out.stacks.end()), out.stacks.end());
    }
    if (out.stacks.size() > limits_.max_stacks)
        throw Error(SPECULA_ERR_UNSUPPORTED, "grammar: the grammar is too ambiguous (more than " + std::to_string(limits_.max_stacks) +
                                                 " parse stacks at once)");
}

// The smallest code point a UTF-8 sequence of `length` bytes encodes (shorter forms of smaller ones are overlong).
static uint32_t min_code_point(uint8_t length) { return length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000; }

bool GrammarMatcher::open_sequence_possible(const State &s) const {
    uint32_t lo = s.partial << (6 * s.pending), hi = lo | ((uint32_t(1) << (6 * s.pending)) - 1);
    lo = std::max(lo, min_code_point(s.length));
    hi = std::min(hi, uint32_t(0x10FFFF));
    if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return false;
    for (const Stack &st : s.stacks)
        if (!st.empty() && may_match_range(st.back(), lo, hi)) return true;
    return false;
}

bool GrammarMatcher::step_byte(const State &in, uint8_t b, State &out) const {
    if (in.pending > 0) {
        if ((b & 0xC0) != 0x80) return false;  // not a continuation byte: invalid UTF-8
        const uint32_t v = (in.partial << 6) | (b & 0x3Fu);
        if (in.pending == 1) {
            if (v < min_code_point(in.length) || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return false;  // not valid UTF-8
            step_codepoint(in, v, out);
            return !out.stacks.empty();
        }
        out.stacks = in.stacks;
        out.partial = v;
        out.pending = uint8_t(in.pending - 1);
        out.length = in.length;
        return open_sequence_possible(out);
    }
    if (b < 0x80) {
        step_codepoint(in, b, out);
        return !out.stacks.empty();
    }
    uint8_t pending;
    uint32_t bits;
    if ((b >> 5) == 0x6) {
        pending = 1;
        bits = b & 0x1Fu;
    } else if ((b >> 4) == 0xE) {
        pending = 2;
        bits = b & 0x0Fu;
    } else if ((b >> 3) == 0x1E) {
        pending = 3;
        bits = b & 0x07u;
    } else {
        return false;  // a continuation byte or 0xF8-0xFF where a sequence must start
    }
    out.stacks = in.stacks;
    out.partial = bits;
    out.pending = pending;
    out.length = uint8_t(pending + 1);
    return open_sequence_possible(out);
}

bool GrammarMatcher::run(const State &from, std::string_view bytes, State &out) const {
    if (bytes.empty()) {
        out = from;
        return true;
    }
    State buf[2];
    const State *cur = &from;
    int w = 0;
    for (const char c : bytes) {
        if (!step_byte(*cur, uint8_t(c), buf[w])) return false;
        cur = &buf[w];
        w ^= 1;
    }
    out = std::move(buf[w ^ 1]);
    return true;
}

bool GrammarMatcher::accepts(std::string_view bytes) const {
    State s;
    return run(state_, bytes, s);
}

bool GrammarMatcher::accept(std::string_view bytes) {
    State s;
    if (!run(state_, bytes, s)) return false;
    state_ = std::move(s);
    return true;
}

bool GrammarMatcher::can_end() const {
    if (state_.pending > 0) return false;
    for (const Stack &s : state_.stacks)
        if (s.empty()) return true;
    return false;
}

std::string GrammarMatcher::forced_text(size_t max_bytes) const {
    std::string out;
    State cur = state_, next;
    while (out.size() < max_bytes && cur.pending == 0) {
        uint32_t only = UINT32_MAX;
        bool single = !cur.stacks.empty();
        for (const Stack &s : cur.stacks) {
            // The end is a choice too; so is a class of more than one code point.
            if (s.empty()) {
                single = false;
                break;
            }
            const GrammarElement *top = s.back();
            uint32_t cp;
            if (top->op == GrammarOp::kChar && top[1].op != GrammarOp::kCharAlt && top[1].op != GrammarOp::kCharRangeUpper) cp = top->value;
            else if (top->op == GrammarOp::kChar && top[1].op == GrammarOp::kCharRangeUpper && top[1].value == top->value &&
                     top[2].op != GrammarOp::kCharAlt)
                cp = top->value;
            else {
                single = false;
                break;
            }
            if (only != UINT32_MAX && cp != only) {
                single = false;
                break;
            }
            only = cp;
        }
        if (!single || only > 0x10FFFF) break;
        step_codepoint(cur, only, next);
        if (next.stacks.empty()) break;
        append_utf8(out, only);  // only <= 0x10FFFF (checked above)
        std::swap(cur, next);
    }
    return out;
}

bool GrammarMatcher::finished() const {
    for (const Stack &s : state_.stacks)
        if (!s.empty()) return false;
    return state_.pending == 0;
}

bool GrammarMatcher::allows(const GrammarVocab &vocab, int32_t token) const {
    if (token < 0 || token >= vocab.size()) return false;
    if (vocab.is_eog(token)) return can_end();
    const std::string &piece = vocab.piece(token);
    return !piece.empty() && accepts(piece);
}

bool GrammarMatcher::accept_token(const GrammarVocab &vocab, int32_t token) {
    if (!allows(vocab, token)) return false;
    if (vocab.is_eog(token)) return true;  // the end: nothing to advance
    return accept(vocab.piece(token));
}

void GrammarMatcher::allowed_tokens(const GrammarVocab &vocab, std::vector<uint8_t> &allowed) const {
    allowed.assign(size_t(vocab.size()), 0);
    const bool end = can_end();
    for (int32_t t = 0; t < vocab.size(); ++t)
        if (vocab.is_eog(t)) allowed[size_t(t)] = end ? 1 : 0;
    // In byte order, a token reuses the states its predecessor reached through the bytes both start with; when the
    // predecessor was rejected within those bytes, so is this token.
    std::vector<State> at(1, state_);  // at[k]: the state after the first k bytes of the current token
    size_t valid = 0;                   // at[0..valid] hold the current prefix's states
    size_t dead_at = SIZE_MAX;          // the previous token was rejected at its dead_at-th byte
    for (size_t i = 0; i < vocab.sorted_.size(); ++i) {
        const int32_t t = vocab.sorted_[i];
        const std::string &piece = vocab.pieces_[size_t(t)];
        const size_t shared = i == 0 ? 0 : vocab.shared_[i];
        if (dead_at != SIZE_MAX && dead_at <= shared) continue;
        dead_at = SIZE_MAX;
        size_t k = std::min(valid, shared);
        if (at.size() < piece.size() + 1) at.resize(piece.size() + 1);
        bool ok = true;
        for (; k < piece.size(); ++k) {
            if (!step_byte(at[k], uint8_t(piece[k]), at[k + 1])) {
                dead_at = k + 1;
                ok = false;
                break;
            }
        }
        valid = k;
        if (ok) allowed[size_t(t)] = 1;
    }
}

std::vector<uint32_t> GrammarMatcher::save() const {
    std::vector<uint32_t> w{state_.partial, uint32_t(state_.pending) | uint32_t(state_.length) << 8, uint32_t(state_.stacks.size())};
    for (const Stack &s : state_.stacks) {
        w.push_back(uint32_t(s.size()));
        for (const GrammarElement *e : s) {
            // Which rule holds the element (rules are separate vectors).
            uint32_t rule = 0;
            while (rule < grammar_->n_rules()) {
                const auto &r = grammar_->rule(rule);
                if (e >= r.data() && e < r.data() + r.size()) break;
                ++rule;
            }
            w.push_back(rule);
            w.push_back(uint32_t(e - grammar_->rule(rule).data()));
        }
    }
    require(w.size() <= kMaxSavedWords, SPECULA_ERR_UNSUPPORTED, "grammar: the parse state is too large to save");
    return w;
}

GrammarMatcher GrammarMatcher::restore(std::shared_ptr<const Grammar> grammar, const std::vector<uint32_t> &words,
                                       const GrammarMatchLimits &limits) {
    GrammarMatcher m(std::move(grammar), limits);
    const Grammar &g = *m.grammar_;
    auto bad = [](const std::string &what) { return Error(SPECULA_ERR_FORMAT, "snapshot: the grammar's state " + what); };
    size_t at = 0;
    auto next = [&]() -> uint32_t {
        if (at >= words.size()) throw bad("ends early");
        return words[at++];
    };
    if (words.size() > kMaxSavedWords) throw bad("is too large");
    State s;
    s.partial = next();
    const uint32_t packed = next();
    const uint32_t pending = packed & 0xFF, length = packed >> 8;
    if (pending > 3 || s.partial >= (uint32_t(1) << 21) ||
        (pending == 0 ? (s.partial != 0 || length != 0) : (length < 2 || length > 4 || pending >= length)))
        throw bad("has a broken UTF-8 sequence");
    s.pending = uint8_t(pending);
    s.length = uint8_t(length);
    const uint32_t n = next();
    if (n > limits.max_stacks) throw bad("has too many stacks");
    for (uint32_t i = 0; i < n; ++i) {
        const uint32_t depth = next();
        if (depth > words.size() - at) throw bad("ends early");
        Stack st;
        for (uint32_t d = 0; d < depth; ++d) {
            const uint32_t rule = next(), index = next();
            if (rule >= g.n_rules() || index >= g.rule(rule).size()) throw bad("points outside the grammar");
            const GrammarElement *e = g.rule(rule).data() + index;
            const bool class_start = e->op == GrammarOp::kChar || e->op == GrammarOp::kCharNot || e->op == GrammarOp::kCharAny;
            // The top is a class to match next; the elements below continue rules after a reference.
            if (d + 1 == depth ? !class_start
                               : (ends_sequence(e) || e->op == GrammarOp::kCharAlt || e->op == GrammarOp::kCharRangeUpper || index == 0 ||
                                  g.rule(rule)[index - 1].op != GrammarOp::kRuleRef))
                throw bad("holds an element no parse could");
            st.push_back(e);
        }
        s.stacks.push_back(std::move(st));
    }
    if (at != words.size()) throw bad("has bytes after its end");
    m.state_ = std::move(s);
    return m;
}

}  // namespace specula::internal
