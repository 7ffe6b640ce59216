// The shape of a speculation tree: how many nodes each level keeps (beam width per depth). LongSpec's default
// is [4, 16, 16, 16, 16] (68 drafted nodes); a chain is [1, 1, ..., 1].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace specula::internal {

struct TreeShape {
    std::vector<int32_t> widths{4, 16, 16, 16, 16};

    int32_t depth() const { return int32_t(widths.size()); }
    // Drafted nodes when every level is full (the root not counted).
    int32_t max_nodes() const {
        int32_t n = 0;
        for (int32_t w : widths) n += w;
        return n;
    }
    bool is_chain() const {
        for (int32_t w : widths)
            if (w != 1) return false;
        return true;
    }
    static TreeShape chain(int32_t length) { return TreeShape{std::vector<int32_t>(size_t(length), 1)}; }
    // Parses "4,16,16,16,16" (1..32 levels, widths 1..256). Throws Error(INVALID_ARGUMENT).
    static TreeShape parse(const std::string &text);
    std::string to_string() const;
};

}  // namespace specula::internal
