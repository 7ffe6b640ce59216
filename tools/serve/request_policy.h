// Who may use `specula serve`, decided from a request's headers before its body is read (docs/server.md, "Who may
// connect"). The server runs on developers' machines beside their browser, so any web page can send it requests:
//   - Host: a page on a name the attacker controls can rebind that name to 127.0.0.1 (DNS rebinding) and then read
//     the answers as same-origin; its requests still carry the attacker's name in Host. Served by default: no Host
//     (non-browser clients), loopback names and addresses, the address the server is bound to, and, when bound to
//     every interface, any IP address and this machine's name; more with --allow-host (or `*`).
//   - Origin: browsers send it with every cross-origin request and with POSTs. Served by default: loopback origins
//     only (a page served from this machine); others with --cors-origin ORIGIN (repeatable; `*`: any, llama-server's
//     behaviour). A refused origin gets 403 and no CORS headers, so the page can neither send nor read.
//   - Content-Type: a POST with a body must declare JSON (application/json or +json). A page can send text/plain,
//     form or multipart bodies without a preflight ("simple" requests); JSON needs one, which the Origin rule answers.
//   - API key: compared in constant time; an address that fails it too often is refused (429) for a while.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace specula_serve {

struct RequestPolicy {
    std::string bound_host;                  // --host as given
    std::vector<std::string> allowed_hosts;  // --allow-host (lower-case names; "*": every Host)
    std::vector<std::string> cors_origins;   // --cors-origin (as browsers send them; "*": every origin)
    std::string machine_name;                // gethostname(), lower-case (for servers bound to every interface)

    // Whether a request with this Host header (empty: none) is served.
    bool host_allowed(const std::string &host_header) const;
    // Whether a request with this Origin header (non-empty) is served.
    bool origin_allowed(const std::string &origin) const;
};

// The host part of a Host header ("[::1]:8080" -> "::1", "Example.COM:80" -> "example.com").
std::string host_of(const std::string &host_header);
// Whether host (as host_of gives it) is a loopback name or address: localhost, *.localhost, 127.0.0.0/8, ::1.
bool is_loopback_host(const std::string &host);
// Whether text is an IPv4 or IPv6 address literal.
bool is_ip_literal(const std::string &host);
// Whether an Origin ("http://localhost:5173") is a loopback one (http or https).
bool is_loopback_origin(const std::string &origin);
// Whether a Content-Type declares JSON: application/json or a +json type, parameters and case ignored.
bool is_json_content_type(const std::string &content_type);
// a == b in time that depends only on b's length (b: the configured key).
bool constant_time_equals(const std::string &a, const std::string &b);

// Failed API keys per client address: after max_failures within window, the address is refused until the window
// of its oldest failure has passed. Bounded memory: addresses whose failures have all expired are forgotten.
class AuthThrottle {
public:
    using Clock = std::chrono::steady_clock;
    explicit AuthThrottle(int max_failures = 10, std::chrono::seconds window = std::chrono::seconds(60))
        : max_failures_(max_failures), window_(window) {}
    // Seconds until addr may try again (0: it may now).
    int retry_after(const std::string &addr, Clock::time_point now = Clock::now());
    void failed(const std::string &addr, Clock::time_point now = Clock::now());

private:
    void forget_expired(Clock::time_point now);
    const int max_failures_;
    const std::chrono::seconds window_;
    std::mutex mutex_;
    std::map<std::string, std::vector<Clock::time_point>> failures_;
};

}  // namespace specula_serve
