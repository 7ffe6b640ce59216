// Header-only parser of a draft tree written as level widths ("4,16,16,16,16"; a chain: "1,1,1,1"), and of the
// --tree option around it (auto, fixed or widths), shared by the apps (the CLI's generate and serve, the
// benchmarks), which see only the public API.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace specula_apps {

// 1..32 comma-separated levels of widths 1..256 (the library's limits). Throws std::invalid_argument with a
// message that names the option.
inline std::vector<int32_t> parse_tree_widths(const std::string &text, const std::string &option = "--tree") {
    std::vector<int32_t> widths;
    std::string item;
    std::istringstream in(text);
    while (std::getline(in, item, ',')) {
        size_t used = 0;
        long v = 0;
        try {
            v = std::stol(item, &used, 10);
        } catch (const std::exception &) {
            used = 0;
        }
        if (used == 0 || used != item.size() || v < 1 || v > 256)
            throw std::invalid_argument(option + ": '" + item + "' is not a level width in [1, 256] (expected e.g. 4,16,16,16,16)");
        widths.push_back(static_cast<int32_t>(v));
    }
    if (widths.empty() || widths.size() > 32 || (!text.empty() && text.back() == ','))
        throw std::invalid_argument(option + ": expected 1 to 32 comma-separated level widths, e.g. 4,16,16,16,16 (a chain: 1,1,1,1)");
    return widths;
}

// The apps' --tree: "auto" (each round the session chooses the tree), "fixed" (the library's default tree every
// round) or level widths (that tree every round). Throws std::invalid_argument as parse_tree_widths.
struct TreeOption {
    bool fixed = false;
    std::vector<int32_t> widths;  // empty: the library's default tree
};

inline TreeOption parse_tree_option(const std::string &text, const std::string &option = "--tree") {
    if (text == "auto") return {};
    if (text == "fixed") return {true, {}};
    return {true, parse_tree_widths(text, option)};
}

}  // namespace specula_apps
