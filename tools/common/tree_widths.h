// Header-only parser of a draft tree written as level widths ("4,16,16,16,16"; a chain: "1,1,1,1"), shared by the
// apps (the CLI's --tree and the benchmarks' --tree), which see only the public API.
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

}  // namespace specula_apps
