#include "speculative/ngram_drafter.h"

#include "core/error.h"
#include "core/byte_stream.h"

#include <algorithm>
#include <array>
#include <climits>
#include <unordered_map>
#include <vector>

namespace specula::internal {
namespace {

uint64_t mix(uint64_t h) {  // splitmix64's finalizer
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h;
}
uint64_t combine(uint64_t h, int32_t token) { return mix(h + 0x9e3779b97f4a7c15ULL + uint64_t(uint32_t(token))); }

// Open addressing (linear probing, load <= 1/2) from a 64-bit key hash to a non-negative int32 value. The keys
// themselves are n-grams of the context and are never stored: the caller decides key equality from the value
// (a position in the context), so hash collisions cost a comparison, never a wrong answer.
class FlatIndex {
public:
    struct Slot {
        uint64_t hash = 0;
        int32_t value = -1;  // -1: empty
    };

    // The slot holding the key (value >= 0) or, when absent, the empty slot where it belongs (value == -1; fill
    // it in and call inserted()). Call reserve_one() first whenever the key may be inserted.
    template <class Same>
    Slot &probe(uint64_t hash, Same same) {
        const size_t mask = slots_.size() - 1;
        for (size_t i = size_t(hash) & mask;; i = (i + 1) & mask) {
            Slot &s = slots_[i];
            if (s.value < 0 || (s.hash == hash && same(s.value))) return s;
        }
    }
    // The value stored for the key, or -1.
    template <class Same>
    int32_t find(uint64_t hash, Same same) const {
        if (slots_.empty()) return -1;
        const size_t mask = slots_.size() - 1;
        for (size_t i = size_t(hash) & mask;; i = (i + 1) & mask) {
            const Slot &s = slots_[i];
            if (s.value < 0) return -1;
            if (s.hash == hash && same(s.value)) return s.value;
        }
    }
    void reserve_one() {
        if (2 * (used_ + 1) > slots_.size()) rehash(std::max<size_t>(64, slots_.size() * 2));
    }
    void inserted() { ++used_; }
    void clear() {
        slots_.clear();
        slots_.shrink_to_fit();
        used_ = 0;
    }
    size_t bytes() const { return slots_.capacity() * sizeof(Slot); }

private:
    void rehash(size_t capacity) {
        std::vector<Slot> old(capacity);
        old.swap(slots_);
        const size_t mask = capacity - 1;
        for (const Slot &s : old) {
            if (s.value < 0) continue;
            size_t i = size_t(s.hash) & mask;
            while (slots_[i].value >= 0) i = (i + 1) & mask;
            slots_[i] = s;
        }
    }

    std::vector<Slot> slots_;
    size_t used_ = 0;
};

class NgramDrafter final : public Drafter {
public:
    explicit NgramDrafter(const NgramConfig &config) : config_(config) {
        require(config.max_chain >= 0, SPECULA_ERR_INVALID_ARGUMENT, "ngram drafter: max_chain must be >= 0");
        require(config.lookup_min >= 1 && config.lookup_max >= config.lookup_min && config.lookup_max <= 64,
                SPECULA_ERR_INVALID_ARGUMENT, "ngram drafter: need 1 <= lookup_min <= lookup_max <= 64");
        require(config.table_topk >= 0, SPECULA_ERR_INVALID_ARGUMENT, "ngram drafter: table_topk must be >= 0");
        require(config.table_topk == 0 || (config.table_n >= 2 && config.table_n <= 64), SPECULA_ERR_INVALID_ARGUMENT,
                "ngram drafter: table_n must be in [2, 64]");
        require(config.lag >= 0, SPECULA_ERR_INVALID_ARGUMENT, "ngram drafter: lag must be >= 0");
        lookup_enabled_ = config.max_chain > 0;
        table_enabled_ = config.table_topk > 0;
        lookup_.resize(size_t(config.lookup_max - config.lookup_min + 1));
    }

    const char *name() const override { return "ngram"; }

    void draft(const DraftRequest &request, DraftTree &tree) override {
        const std::span<const int32_t> tokens = request.tokens;
        if (tokens.empty()) return;
        sync(tokens);
        const int32_t budget = request.node_budget;
        if (tree.size() >= budget) return;

        // Adds a chain under the root, merging with what is there; false once the tree is full.
        auto add_chain = [&](const int32_t *chain, int32_t length) {
            int32_t node = 0;
            for (int32_t i = 0; i < length; ++i) {
                int32_t child = tree.find_child(node, chain[i]);
                if (child < 0) {
                    if (tree.size() >= budget) return false;
                    child = tree.add(node, chain[i]);
                }
                node = child;
            }
            return tree.size() < budget;
        };

        const int32_t n_tokens = int32_t(tokens.size());
        if (lookup_enabled_) {
            const int32_t match = lookup(tokens);
            if (match >= 0) {
                // What followed the match, continued by itself where it runs into the root, as an LZ77 copy whose
                // source overlaps its output: a match d tokens back says the text repeats with period d, so the
                // chain goes on repeating, up to max_chain. Cut at the root instead, a text looping over 3 tokens
                // (code often does: repeated lines, a greedy model's loops) was proposed 3 tokens a round, and a
                // draft chain of 8 ran 1.3x faster than every n-gram share (asyncio/runners.py, widened 1B pair).
                const int32_t after = n_tokens - 1 - match;  // tokens after the match, the root included (>= 1)
                // (No path under the root holds more than budget - 1 tokens: up to 1024 copied for a share of 2.)
                const int32_t length = std::min(config_.max_chain, budget - 1);
                chain_.resize(size_t(length));
                for (int32_t i = 0; i < length; ++i) chain_[size_t(i)] = i < after ? tokens[size_t(match + 1 + i)] : chain_[size_t(i - after)];
                if (!add_chain(chain_.data(), length)) return;
            }
        }
        if (table_enabled_) {
            auto it = by_first_.find(tokens.back());
            if (it == by_first_.end()) return;
            ranked_ = it->second;
            const size_t k = std::min(ranked_.size(), size_t(config_.table_topk));
            // Most frequent first; ties: the most recently seen first (deterministic: no two n-grams share a
            // latest start).
            std::partial_sort(ranked_.begin(), ranked_.begin() + ptrdiff_t(k), ranked_.end(), [&](int32_t a, int32_t b) {
                const Gram &x = grams_[size_t(a)], &y = grams_[size_t(b)];
                return x.count != y.count ? x.count > y.count : x.last > y.last;
            });
            for (size_t i = 0; i < k; ++i)
                if (!add_chain(tokens.data() + grams_[size_t(ranked_[i])].start + 1, config_.table_n - 1)) return;
        }
    }

    void rewind(int32_t n_tokens) override { valid_ = std::min(valid_, std::max(n_tokens, 0)); }

    // The tables are a function of the context alone: every token is indexed once, in context order, and a
    // rewind into them rebuilds them from the start. So a snapshot records only how far they reach, and loading
    // clears them: the next round rebuilds them from the restored context with the same insertions in the same
    // order, which gives the same tables, bucket for bucket (tested), without storing megabytes of hash slots.
    std::vector<uint8_t> save_state() const override {
        ByteWriter w;
        const bool cut = covered() > valid_;  // a rewind cut into the tables: the next round rebuilds them anyway
        w.put<int32_t>(cut ? 0 : lookup_end_);
        w.put<int32_t>(cut ? 0 : table_end_);
        return w.take();
    }
    int32_t check_state(std::span<const uint8_t> state, int32_t n_tokens) const override {
        ByteReader r(state, "snapshot: n-gram tables");
        const int32_t lookup_end = r.get<int32_t>(), table_end = r.get<int32_t>();
        r.check(lookup_end >= 0 && lookup_end <= n_tokens && table_end >= 0 && table_end <= n_tokens,
                "they reach past the context (" + std::to_string(lookup_end) + ", " + std::to_string(table_end) + " of " + std::to_string(n_tokens) + " tokens)");
        r.expect_end();
        return 0;
    }
    void load_state(std::span<const uint8_t>) override {
        clear();
        valid_ = INT32_MAX;
    }

    size_t allocated_bytes() const override {
        size_t bytes = sizeof(*this);
        for (const FlatIndex &ix : lookup_) bytes += ix.bytes();
        bytes += gram_index_.bytes() + grams_.capacity() * sizeof(Gram) + (ranked_.capacity() + chain_.capacity()) * sizeof(int32_t);
        // unordered_map: the bucket array, one node per key (key, vector, next pointer, cached hash) and the lists.
        bytes += by_first_.bucket_count() * sizeof(void *);
        bytes += by_first_.size() * (sizeof(std::pair<const int32_t, std::vector<int32_t>>) + 2 * sizeof(void *));
        return bytes + by_first_list_bytes_;
    }

private:
    struct Gram {
        int32_t start;  // where it first occurred (to read its tokens)
        int32_t count;  // occurrences counted
        int32_t last;   // where it last occurred (tie-break)
    };

    // Tokens [0, covered()) have been read into the tables.
    int32_t covered() const {
        int32_t n = lookup_end_;
        if (table_end_ > 0) n = std::max(n, table_end_ + config_.table_n - 1);
        return n;
    }

    void clear() {
        for (FlatIndex &ix : lookup_) ix.clear();
        lookup_end_ = 0;
        gram_index_.clear();
        grams_.clear();
        grams_.shrink_to_fit();
        by_first_.clear();
        by_first_list_bytes_ = 0;
        ranked_.clear();
        ranked_.shrink_to_fit();
        table_end_ = 0;
    }

    // Brings the tables up to date with the context: drops them when a rewind cut into what they were built
    // from (or the context is shorter than that), then indexes only the tokens not seen yet.
    void sync(std::span<const int32_t> tokens) {
        const int32_t n_tokens = int32_t(tokens.size());
        if (covered() > valid_ || covered() > n_tokens) clear();
        valid_ = INT32_MAX;
        if (lookup_enabled_) {
            // n-grams ending before the root: a match is then always an earlier occurrence, never the suffix.
            for (; lookup_end_ < n_tokens - 1; ++lookup_end_) index_lookup(tokens, lookup_end_);
        }
        if (table_enabled_) {
            // n-grams whose tokens all lie before position n_tokens - lag.
            const int32_t limit = n_tokens - config_.lag - config_.table_n + 1;
            for (; table_end_ < limit; ++table_end_) index_table(tokens, table_end_);
        }
    }

    // Records the n-grams ending at `end` (n in [lookup_min, lookup_max]) as last seen there.
    void index_lookup(std::span<const int32_t> tokens, int32_t end) {
        uint64_t h = 0;
        for (int32_t n = 1; n <= config_.lookup_max && end - n + 1 >= 0; ++n) {
            h = combine(h, tokens[size_t(end - n + 1)]);
            if (n < config_.lookup_min) continue;
            FlatIndex &ix = lookup_[size_t(n - config_.lookup_min)];
            ix.reserve_one();
            FlatIndex::Slot &slot = ix.probe(h, [&](int32_t p) { return same_ending(tokens, p, end, n); });
            if (slot.value < 0) {
                slot.hash = h;
                ix.inserted();
            }
            slot.value = end;
        }
    }

    // The end of the most recent earlier occurrence of the longest matching suffix, or -1.
    int32_t lookup(std::span<const int32_t> tokens) const {
        const int32_t end = int32_t(tokens.size()) - 1;
        std::array<uint64_t, 64> hashes;  // hashes[n - 1]: the suffix of length n (lookup_max <= 64)
        uint64_t h = 0;
        for (int32_t n = 1; n <= config_.lookup_max && end - n + 1 >= 0; ++n) {
            h = combine(h, tokens[size_t(end - n + 1)]);
            hashes[size_t(n - 1)] = h;
        }
        for (int32_t n = std::min(config_.lookup_max, end + 1); n >= config_.lookup_min; --n) {
            const FlatIndex &ix = lookup_[size_t(n - config_.lookup_min)];
            const int32_t p = ix.find(hashes[size_t(n - 1)], [&](int32_t q) { return same_ending(tokens, q, end, n); });
            if (p >= 0) return p;
        }
        return -1;
    }

    // Counts the n-gram starting at `start`.
    void index_table(std::span<const int32_t> tokens, int32_t start) {
        const int32_t n = config_.table_n;
        uint64_t h = 0;
        for (int32_t i = 0; i < n; ++i) h = combine(h, tokens[size_t(start + i)]);
        gram_index_.reserve_one();
        FlatIndex::Slot &slot = gram_index_.probe(h, [&](int32_t g) {
            return std::equal(tokens.begin() + grams_[size_t(g)].start, tokens.begin() + grams_[size_t(g)].start + n,
                              tokens.begin() + start);
        });
        if (slot.value >= 0) {
            Gram &g = grams_[size_t(slot.value)];
            ++g.count;
            g.last = start;
            return;
        }
        // The allocations come before the index records the n-gram: a bad_alloc after recording it left a slot
        // pointing past grams_, read out of bounds by the next round (a crash; found by tests/alloc).
        const int32_t id = int32_t(grams_.size());
        std::vector<int32_t> &list = by_first_[tokens[size_t(start)]];
        const size_t capacity = list.capacity();
        list.push_back(id);
        by_first_list_bytes_ += (list.capacity() - capacity) * sizeof(int32_t);
        try {
            grams_.push_back({start, 1, start});
        } catch (...) {
            list.pop_back();
            throw;
        }
        slot.hash = h;
        slot.value = id;
        gram_index_.inserted();
    }

    // Whether the n tokens ending at a equal the n tokens ending at b.
    static bool same_ending(std::span<const int32_t> tokens, int32_t a, int32_t b, int32_t n) {
        for (int32_t i = 0; i < n; ++i)
            if (tokens[size_t(a - i)] != tokens[size_t(b - i)]) return false;
        return true;
    }

    NgramConfig config_;
    bool lookup_enabled_ = true, table_enabled_ = true;
    // Prompt lookup: lookup_[n - lookup_min] maps each n-gram ending at a position in [0, lookup_end_) to the
    // last position it ended at.
    std::vector<FlatIndex> lookup_;
    int32_t lookup_end_ = 0;
    // Reuse table: every n-gram (n = table_n) starting in [0, table_end_), counted; by_first_ lists them by first
    // token (indices into grams_, in order of first occurrence).
    FlatIndex gram_index_;
    std::vector<Gram> grams_;
    std::unordered_map<int32_t, std::vector<int32_t>> by_first_;
    // The capacity of by_first_'s lists in bytes, kept as they grow: the stats that every generated token's event
    // carries ask for allocated_bytes(), and summing the lists there cost a walk of the map per token.
    size_t by_first_list_bytes_ = 0;
    int32_t table_end_ = 0;
    std::vector<int32_t> ranked_;  // scratch
    std::vector<int32_t> chain_;   // scratch: the prompt-lookup chain
    // The context was cut to this many tokens since the last draft (INT32_MAX: not cut).
    int32_t valid_ = INT32_MAX;
};

}  // namespace

std::unique_ptr<Drafter> make_ngram_drafter(const NgramConfig &config) { return std::make_unique<NgramDrafter>(config); }

}  // namespace specula::internal
