#include "stop_strings.h"

#include <algorithm>

namespace specula::internal {

std::string StopStrings::push(std::string_view text, bool &stopped) {
    stopped = false;
    pending_ += text;
    size_t cut = std::string::npos;
    for (const std::string &s : stops_) {
        if (s.empty()) continue;
        cut = std::min(cut, pending_.find(s));
    }
    if (cut != std::string::npos) {
        stopped = true;
        std::string out = pending_.substr(0, cut);
        pending_.clear();
        return out;
    }
    // Hold back the longest suffix that is a proper prefix of some stop string.
    size_t hold = 0;
    for (const std::string &s : stops_)
        for (size_t len = std::min(s.size() - (s.empty() ? 0 : 1), pending_.size()); len > hold; --len)
            if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
                hold = len;
                break;
            }
    std::string out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
    return out;
}

std::string StopStrings::flush() {
    std::string out;
    out.swap(pending_);
    return out;
}

}  // namespace specula::internal
