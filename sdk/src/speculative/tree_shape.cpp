#include "tree_shape.h"

#include "core/error.h"

#include <algorithm>
#include <charconv>

namespace specula::internal {

TreeShape TreeShape::parse(const std::string &text) {
    TreeShape shape;
    shape.widths.clear();
    size_t i = 0;
    while (i <= text.size()) {
        const size_t comma = std::min(text.find(',', i), text.size());
        int32_t w = 0;
        const char *b = text.data() + i, *e = text.data() + comma;
        const auto [ptr, ec] = std::from_chars(b, e, w);
        require(ec == std::errc() && ptr == e && b != e && w >= 1 && w <= 256, SPECULA_ERR_INVALID_ARGUMENT,
                "tree shape '" + text + "': each level width must be an integer in [1, 256], e.g. 4,16,16,16,16");
        shape.widths.push_back(w);
        i = comma + 1;
    }
    require(!shape.widths.empty() && shape.widths.size() <= 32, SPECULA_ERR_INVALID_ARGUMENT,
            "tree shape '" + text + "': 1 to 32 levels");
    return shape;
}

std::string TreeShape::to_string() const {
    std::string s;
    for (size_t i = 0; i < widths.size(); ++i) s += (i ? "," : "") + std::to_string(widths[i]);
    return s;
}

}  // namespace specula::internal
