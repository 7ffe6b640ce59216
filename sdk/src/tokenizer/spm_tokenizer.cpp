#include "tokenizer/spm_tokenizer.h"

#include "core/error.h"
#include "tokenizer/merge_symbol.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab_data.h"

#include <algorithm>
#include <map>
#include <queue>
#include <utility>

namespace specula::internal {
namespace {

using Symbol = MergeSymbol;

struct Bigram {
    int left;
    int right;
    float score;
    size_t size;
};

// Highest score first; among equal scores the leftmost pair (llama.cpp's llm_bigram_spm::comparator).
struct BigramOrder {
    bool operator()(const Bigram &l, const Bigram &r) const { return l.score < r.score || (l.score == r.score && l.left > r.left); }
};

class Session {
public:
    Session(const VocabData &vocab, const std::string &text) : vocab_(vocab), text_(text) {}

    void run(std::vector<int32_t> &out) {
        size_t offset = 0;
        int index = 0;
        while (offset < text_.size()) {
            const size_t n = std::min(text_.size() - offset, utf8_sequence_length(uint8_t(text_[offset])));
            symbols_.push_back({index - 1, offset + n == text_.size() ? -1 : index + 1, offset, n});
            offset += n;
            ++index;
        }
        for (int i = 1; i < int(symbols_.size()); ++i) queue_pair(i - 1, i);

        while (!queue_.empty()) {
            const Bigram bigram = queue_.top();
            queue_.pop();
            Symbol &left = symbols_[size_t(bigram.left)];
            Symbol &right = symbols_[size_t(bigram.right)];
            // Skip pairs one of whose symbols has been merged since the pair was queued.
            if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;
            left.n += right.n;
            right.n = 0;
            left.next = right.next;
            if (right.next >= 0) symbols_[size_t(right.next)].prev = bigram.left;
            queue_pair(left.prev, bigram.left);
            queue_pair(bigram.left, left.next);
        }

        if (symbols_.empty()) return;
        for (int i = 0; i != -1; i = symbols_[size_t(i)].next) resegment(symbols_[size_t(i)], out);
    }

private:
    void queue_pair(int left, int right) {
        if (left == -1 || right == -1) return;
        const size_t size = symbols_[size_t(left)].n + symbols_[size_t(right)].n;
        std::string text = text_.substr(symbols_[size_t(left)].offset, size);
        const int32_t id = vocab_.text_to_token(text);
        if (id == kNoToken) return;
        queue_.push({left, right, vocab_.tokens[size_t(id)].score, size});
        // Remembered by text; a later pair with the same text overwrites it (as in llama.cpp).
        rev_merge_[std::move(text)] = {left, right};
    }

    void resegment(const Symbol &symbol, std::vector<int32_t> &out) {
        const std::string text = text_.substr(symbol.offset, symbol.n);
        const int32_t id = vocab_.text_to_token(text);
        if (id != kNoToken) {
            out.push_back(id);
            return;
        }
        const auto it = rev_merge_.find(text);
        if (it == rev_merge_.end()) {
            for (const char c : text) out.push_back(byte_token(uint8_t(c)));
            return;
        }
        resegment(symbols_[size_t(it->second.first)], out);
        resegment(symbols_[size_t(it->second.second)], out);
    }

    int32_t byte_token(uint8_t byte) const {
        const int32_t id = vocab_.byte_to_token(byte);
        if (id != kNoToken) return id;
        if (vocab_.unk != kNoToken) return vocab_.unk;
        throw Error(SPECULA_ERR_UNSUPPORTED, "tokenizer: the vocabulary has no token for byte " + std::to_string(byte) + " and no unknown token");
    }

    const VocabData &vocab_;
    const std::string &text_;
    std::vector<Symbol> symbols_;
    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
    std::map<std::string, std::pair<int, int>> rev_merge_;
};

}  // namespace

void spm_tokenize(const VocabData &vocab, const std::string &text, std::vector<int32_t> &out) { Session(vocab, text).run(out); }

}  // namespace specula::internal
