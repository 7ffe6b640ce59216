// A compact hash table from strings to ints, built once: all keys in one arena, open addressing with linear
// probing over a power-of-two table. Used for the BPE merge ranks (hundreds of thousands of entries), where
// std::unordered_map's node per key made loading a vocabulary slow.
#pragma once

#include "core/error.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace specula::internal {

class StringIndex {
public:
    void reserve(size_t n) {
        size_t capacity = 16;
        while (capacity < n * 2) capacity *= 2;
        if (capacity > slots_.size()) rehash(capacity);
        arena_.reserve(n * 8);
    }

    // Inserts key -> value unless key is already present (the first value wins). Returns whether it inserted.
    bool insert(std::string_view key, int32_t value) {
        if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 16 : slots_.size() * 2);
        const uint64_t h = hash(key);
        for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
            Slot &slot = slots_[i];
            if (slot.length == kEmpty) {
                if (arena_.size() + key.size() >= kEmpty) throw Error(SPECULA_ERR_FORMAT, "tokenizer: more than 4 GiB of keys");
                slot = {h, uint32_t(arena_.size()), uint32_t(key.size()), value};
                arena_.append(key);
                ++size_;
                return true;
            }
            if (slot.hash == h && text(slot) == key) return false;
        }
    }

    // The value for key, or missing.
    int32_t find(std::string_view key, int32_t missing = -1) const {
        if (slots_.empty()) return missing;
        const uint64_t h = hash(key);
        for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
            const Slot &slot = slots_[i];
            if (slot.length == kEmpty) return missing;
            if (slot.hash == h && text(slot) == key) return slot.value;
        }
    }

    size_t size() const { return size_; }

private:
    static constexpr uint32_t kEmpty = UINT32_MAX;
    struct Slot {
        uint64_t hash = 0;
        uint32_t offset = 0;
        uint32_t length = kEmpty;
        int32_t value = 0;
    };

    static uint64_t hash(std::string_view key) { return std::hash<std::string_view>{}(key); }
    std::string_view text(const Slot &slot) const { return std::string_view(arena_).substr(slot.offset, slot.length); }

    void rehash(size_t capacity) {
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(capacity, Slot{});
        for (const Slot &slot : old) {
            if (slot.length == kEmpty) continue;
            size_t i = slot.hash & (capacity - 1);
            while (slots_[i].length != kEmpty) i = (i + 1) & (capacity - 1);
            slots_[i] = slot;
        }
    }

    std::vector<Slot> slots_;
    std::string arena_;
    size_t size_ = 0;
};

}  // namespace specula::internal
