// Helpers the benchmark programs share: wall clock, median of repeated runs, number formatting, CPU name.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace bench {

inline double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// "512,8192,32768" -> {512, 8192, 32768}.
inline std::vector<int32_t> parse_int_list(const std::string &s) {
    std::vector<int32_t> out;
    size_t at = 0;
    while (at <= s.size()) {
        const size_t comma = std::min(s.find(',', at), s.size());
        out.push_back(int32_t(std::stoi(s.substr(at, comma - at))));
        at = comma + 1;
    }
    return out;
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline std::string fmt(double v, const char *f = "%.2f") {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

// The "model name" line of /proc/cpuinfo.
inline std::string cpu_name() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("model name", 0) == 0) {
            const size_t colon = line.find(':');
            return colon == std::string::npos ? line : line.substr(line.find_first_not_of(' ', colon + 1));
        }
    return "unknown CPU";
}

}  // namespace bench
