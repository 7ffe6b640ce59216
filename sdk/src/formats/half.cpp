#include "half.h"

#include <vector>

namespace specula::internal {

float half_to_float_lookup(uint16_t h) {
    static const std::vector<float> table = [] {
        std::vector<float> t(65536);
        for (uint32_t i = 0; i < 65536; ++i) t[i] = half_to_float(uint16_t(i));
        return t;
    }();
    return table[h];
}

}  // namespace specula::internal
