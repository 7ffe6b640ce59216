#include "tokenizer/spm_tokenizer.h"

#include "core/error.h"
#include "tokenizer/merge_symbol.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab_data.h"

#include <algorithm>
#include <queue>
#include <string_view>

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
        // One symbol per UTF-8 character; the text is then merged one segment at a time, cutting wherever no
        // token can span two neighbouring characters (see VocabData::adjacent_bytes). A bigram across such a
        // cut is never queued, so each segment evolves exactly as it would inside the whole text.
        size_t offset = 0;
        size_t segment_start = 0;
        while (offset < text_.size()) {
            const size_t n = std::min(text_.size() - offset, utf8_sequence_length(uint8_t(text_[offset])));
            if (offset > 0 && !vocab_.bytes_adjacent_in_a_token(uint8_t(text_[offset - 1]), uint8_t(text_[offset]))) {
                merge_segment(segment_start, out);
                segment_start = offset;
            }
            offset += n;
        }
        if (segment_start < text_.size()) merge_segment(segment_start, out);
    }

private:
    // llama.cpp's merge loop over the characters of text_[begin, end of segment): repeatedly merge the
    // highest-scoring neighbouring pair whose text is a token (leftmost first on ties), then emit the symbols.
    void merge_segment(size_t begin, std::vector<int32_t> &out) {
        symbols_.clear();
        size_t offset = begin;
        int index = 0;
        while (offset < text_.size()) {
            const size_t n = std::min(text_.size() - offset, utf8_sequence_length(uint8_t(text_[offset])));
            if (offset > begin && !vocab_.bytes_adjacent_in_a_token(uint8_t(text_[offset - 1]), uint8_t(text_[offset]))) break;
            symbols_.push_back({index - 1, index + 1, offset, n});
            offset += n;
            ++index;
        }
        symbols_.back().next = -1;
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
        for (int i = 0; i != -1; i = symbols_[size_t(i)].next) resegment(symbols_[size_t(i)], out);
    }

    void queue_pair(int left, int right) {
        if (left == -1 || right == -1) return;
        const size_t size = symbols_[size_t(left)].n + symbols_[size_t(right)].n;
        const int32_t id = vocab_.text_to_token(std::string_view(text_).substr(symbols_[size_t(left)].offset, size));
        if (id == kNoToken) return;
        queue_.push({left, right, vocab_.tokens[size_t(id)].score, size});
    }

    // A final symbol is a vocabulary token, or bytes. (llama.cpp also keeps a map from merged texts back to the
    // pair that formed them, but every merged text is itself a token, found by the lookup first, so the map is
    // never consulted; leaving it out changes no output.)
    void resegment(const Symbol &symbol, std::vector<int32_t> &out) const {
        const std::string_view text = std::string_view(text_).substr(symbol.offset, symbol.n);
        const int32_t id = vocab_.text_to_token(text);
        if (id != kNoToken) {
            out.push_back(id);
            return;
        }
        for (const char c : text) out.push_back(byte_token(uint8_t(c)));
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
};

}  // namespace

void spm_tokenize(const VocabData &vocab, const std::string &text, std::vector<int32_t> &out) { Session(vocab, text).run(out); }

}  // namespace specula::internal
