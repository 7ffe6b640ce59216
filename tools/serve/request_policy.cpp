#include "request_policy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace specula_serve {

namespace {

std::string lower(std::string s) {
    for (char &c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

bool ends_with(const std::string &s, const std::string &tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_wildcard_address(const std::string &host) { return host.empty() || host == "0.0.0.0" || host == "::" || host == "*"; }

bool listed(const std::vector<std::string> &list, const std::string &value) {
    return std::find(list.begin(), list.end(), value) != list.end();
}

}  // namespace

std::string host_of(const std::string &host_header) {
    std::string h = lower(host_header);
    while (!h.empty() && (h.back() == ' ' || h.back() == '\t')) h.pop_back();
    while (!h.empty() && (h.front() == ' ' || h.front() == '\t')) h.erase(h.begin());
    if (!h.empty() && h.front() == '[') {  // [v6]:port
        const size_t end = h.find(']');
        return end == std::string::npos ? h : h.substr(1, end - 1);
    }
    const size_t colon = h.find(':');
    if (colon != std::string::npos && h.find(':', colon + 1) == std::string::npos) h = h.substr(0, colon);  // name:port
    if (!h.empty() && h.back() == '.') h.pop_back();  // "localhost." is localhost
    return h;
}

bool is_ip_literal(const std::string &host) {
    unsigned char buf[16];
    return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

bool is_loopback_host(const std::string &host) {
    if (host == "localhost" || ends_with(host, ".localhost")) return true;
    unsigned char a[16];
    if (inet_pton(AF_INET, host.c_str(), a) == 1) return a[0] == 127;
    if (inet_pton(AF_INET6, host.c_str(), a) == 1) {
        static const unsigned char loop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        return std::equal(a, a + 16, loop6) || (std::equal(a, a + 12, mapped) && a[12] == 127);  // ::ffff:127.x
    }
    return false;
}

bool RequestPolicy::host_allowed(const std::string &host_header) const {
    if (host_header.empty()) return true;  // HTTP/1.0 tools; browsers always send Host
    if (listed(allowed_hosts, "*")) return true;
    const std::string host = host_of(host_header);
    if (is_loopback_host(host) || listed(allowed_hosts, host)) return true;
    const std::string bound = host_of(bound_host);
    if (!bound.empty() && host == bound) return true;
    // Bound to every interface: reached by this machine's addresses (an IP literal cannot be rebound) or its name.
    if (is_wildcard_address(bound_host) && (is_ip_literal(host) || (!machine_name.empty() && (host == machine_name || host == machine_name + ".local"))))
        return true;
    return false;
}

bool is_loopback_origin(const std::string &origin) {
    const std::string o = lower(origin);
    std::string rest;
    if (o.rfind("http://", 0) == 0) rest = o.substr(7);
    else if (o.rfind("https://", 0) == 0) rest = o.substr(8);
    else return false;
    if (rest.find('/') != std::string::npos || rest.find('@') != std::string::npos) return false;
    return is_loopback_host(host_of(rest));
}

bool RequestPolicy::origin_allowed(const std::string &origin) const {
    if (listed(cors_origins, "*")) return true;
    if (is_loopback_origin(origin)) return true;
    const std::string o = lower(origin);
    for (const std::string &allowed : cors_origins)
        if (lower(allowed) == o) return true;
    return false;
}

bool is_json_content_type(const std::string &content_type) {
    std::string t = lower(content_type.substr(0, content_type.find(';')));
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.pop_back();
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.erase(t.begin());
    if (t == "application/json") return true;
    return t.rfind("application/", 0) == 0 && ends_with(t, "+json");
}

bool constant_time_equals(const std::string &a, const std::string &b) {
    // Every byte of b is compared whatever a holds, and nothing branches on the data.
    volatile unsigned char diff = static_cast<unsigned char>(a.size() != b.size());
    for (size_t i = 0; i < b.size(); ++i) {
        const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
        diff = static_cast<unsigned char>(diff | (x ^ static_cast<unsigned char>(b[i])));
    }
    return diff == 0;
}

void AuthThrottle::forget_expired(Clock::time_point now) {
    for (auto it = failures_.begin(); it != failures_.end();) {
        auto &times = it->second;
        times.erase(std::remove_if(times.begin(), times.end(), [&](Clock::time_point t) { return now - t >= window_; }), times.end());
        it = times.empty() ? failures_.erase(it) : std::next(it);
    }
}

int AuthThrottle::retry_after(const std::string &addr, Clock::time_point now) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = failures_.find(addr);
    if (it == failures_.end()) return 0;
    auto &times = it->second;
    times.erase(std::remove_if(times.begin(), times.end(), [&](Clock::time_point t) { return now - t >= window_; }), times.end());
    if (int(times.size()) < max_failures_) return 0;
    const auto wait = window_ - (now - times.front());
    return std::max(1, int(std::chrono::duration_cast<std::chrono::seconds>(wait).count()) + 1);
}

void AuthThrottle::failed(const std::string &addr, Clock::time_point now) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failures_.size() > 4096) forget_expired(now);
    auto &times = failures_[addr];
    times.push_back(now);
    if (int(times.size()) > max_failures_) times.erase(times.begin());  // the newest max_failures are enough
}

}  // namespace specula_serve
