#include "tokenizer/bpe_tokenizer.h"

#include "tokenizer/merge_symbol.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab_data.h"

#include <algorithm>
#include <queue>
#include <string>

namespace specula::internal {
namespace {

using Symbol = MergeSymbol;

struct Bigram {
    int left;
    int right;
    std::string text;  // the two symbols' texts when the pair was queued, to spot stale entries
    int rank;
};

// Lowest rank first; among equal ranks the leftmost pair (llama.cpp's llm_bigram_bpe::comparator).
struct BigramOrder {
    bool operator()(const Bigram &l, const Bigram &r) const { return l.rank > r.rank || (l.rank == r.rank && l.left > r.left); }
};

class WordMerger {
public:
    WordMerger(const VocabData &vocab, const std::string &word) : vocab_(vocab), word_(word) {}

    void run(std::vector<int32_t> &out) {
        if (vocab_.ignore_merges && vocab_.text_to_token(word_) != kNoToken) {
            symbols_.push_back({-1, -1, 0, word_.size()});
        } else {
            // One symbol per UTF-8 character of the byte-encoded word (a truncated tail counts as one).
            size_t offset = 0;
            int index = 0;
            while (offset < word_.size()) {
                const size_t n = std::min(word_.size() - offset, utf8_sequence_length(uint8_t(word_[offset])));
                symbols_.push_back({index - 1, offset + n == word_.size() ? -1 : index + 1, offset, n});
                offset += n;
                ++index;
            }
            for (int i = 1; i < int(symbols_.size()); ++i) queue_pair(i - 1, i);
            merge();
        }
        emit(out);
    }

private:
    std::string_view text(const Symbol &s) const { return std::string_view(word_).substr(s.offset, s.n); }

    void queue_pair(int left, int right) {
        if (left == -1 || right == -1) return;
        const std::string_view l = text(symbols_[size_t(left)]), r = text(symbols_[size_t(right)]);
        const int32_t rank = vocab_.bpe_rank(l, r);
        if (rank < 0) return;
        Bigram b{left, right, std::string(l).append(r), rank};
        queue_.push(std::move(b));
    }

    void merge() {
        while (!queue_.empty()) {
            const Bigram bigram = queue_.top();
            queue_.pop();
            Symbol &left = symbols_[size_t(bigram.left)];
            Symbol &right = symbols_[size_t(bigram.right)];
            if (left.n == 0 || right.n == 0) continue;
            // Stale: one side has grown since the pair was queued.
            if (left.n + right.n != bigram.text.size() || word_.compare(left.offset, left.n + right.n, bigram.text) != 0) continue;
            left.n += right.n;
            right.n = 0;
            left.next = right.next;
            if (right.next >= 0) symbols_[size_t(right.next)].prev = bigram.left;
            queue_pair(left.prev, bigram.left);
            queue_pair(bigram.left, left.next);
        }
    }

    void emit(std::vector<int32_t> &out) const {
        for (const Symbol &s : symbols_) {
            if (s.n == 0) continue;
            const std::string_view piece = text(s);
            const int32_t id = vocab_.text_to_token(piece);
            if (id != kNoToken) {
                out.push_back(id);
                continue;
            }
            // Not a token: llama.cpp looks each single byte of the symbol up as a token and drops misses.
            for (const char c : piece) {
                const int32_t byte_id = vocab_.text_to_token(std::string_view(&c, 1));
                if (byte_id != kNoToken) out.push_back(byte_id);
            }
        }
    }

    const VocabData &vocab_;
    const std::string &word_;
    std::vector<Symbol> symbols_;
    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
};

}  // namespace

void bpe_tokenize(const VocabData &vocab, std::string_view text, std::vector<int32_t> &out) {
    for (const std::string &word : vocab.pretokenizer.split(text)) {
        std::string encoded;
        encoded.reserve(word.size() * 2);
        for (const char c : word) encoded += gpt2_byte_to_utf8(uint8_t(c));
        WordMerger(vocab, encoded).run(out);
    }
}

}  // namespace specula::internal
