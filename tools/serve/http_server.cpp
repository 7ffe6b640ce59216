#include "http_server.h"

#include "http_error.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>

namespace specula_serve {

namespace {

using Clock = std::chrono::steady_clock;

thread_local int t_socket = -1;
thread_local bool t_timed_out = false;        // the request being read ran past its deadline
thread_local bool t_timeout_answered = false;  // ... and the error handler has answered it 408
thread_local bool t_close_after = false;
thread_local int t_request_timeout_s = 0;

// One thread per connection. At most `max_threads` run; beyond that (only past every connection cap, since a
// connection over a cap is answered and closed at once) accepted connections wait for a thread in arrival order.
class ConnectionThreads : public httplib::TaskQueue {
public:
    explicit ConnectionThreads(int max_threads) : max_threads_(max_threads) {}

    void enqueue(std::function<void()> fn) override {
        std::lock_guard<std::mutex> lock(mutex_);
        if (running_ >= max_threads_) {
            pending_.push_back(std::move(fn));
            return;
        }
        ++running_;
        try {
            std::thread([this, fn = std::move(fn)]() mutable { run(std::move(fn)); }).detach();
        } catch (const std::system_error &) {
            --running_;  // no thread to be had: the connection waits for one that ends
            pending_.push_back(std::move(fn));
        }
    }
    // Returns when every connection has ended (httplib calls it after the listening loop, before the queue goes).
    void shutdown() override {
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [&] { return running_ == 0 && pending_.empty(); });
    }

private:
    void run(std::function<void()> fn) {
        for (;;) {
            fn();
            std::lock_guard<std::mutex> lock(mutex_);
            if (pending_.empty()) {
                --running_;
                done_.notify_all();  // under the lock: shutdown() cannot return (and free this) before it is released
                return;
            }
            fn = std::move(pending_.front());
            pending_.pop_front();
        }
    }

    const int max_threads_;
    std::mutex mutex_;
    std::condition_variable done_;
    std::deque<std::function<void()>> pending_;
    int running_ = 0;
};

std::string describe(const sockaddr_storage &ss, int &port) {
    char buf[INET6_ADDRSTRLEN] = {0};
    if (ss.ss_family == AF_INET) {
        const auto *a = reinterpret_cast<const sockaddr_in *>(&ss);
        inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
        port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        const auto *a = reinterpret_cast<const sockaddr_in6 *>(&ss);
        inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
        port = ntohs(a->sin6_port);
    }
    return buf;
}

// The connection as httplib's request reader sees it: reads wait for at most the per-read timeout and never past
// the request's deadline (then they fail, and the request is answered 408); writes wait for the write timeout.
// Reads and waits also end when the server stops (the wake pipe becomes readable).
class ConnectionStream : public httplib::Stream {
public:
    ConnectionStream(int sock, int wake_fd, int io_timeout_s) : sock_(sock), wake_fd_(wake_fd), io_timeout_s_(io_timeout_s) {}

    void set_deadline(Clock::time_point deadline) { deadline_ = deadline; }
    bool expired() const { return expired_; }
    // Waits until the socket has data (true), or until `until`, a hang-up or the server's stop (false).
    bool wait_readable(Clock::time_point until) {
        if (buffered_ < filled_) return true;  // a pipelined request already read from the socket
        for (;;) {
            const auto now = Clock::now();
            if (now >= until) return false;
            pollfd p[2] = {{sock_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
            const int ms = int(std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count()) + 1;
            const int n = poll(p, wake_fd_ >= 0 ? 2 : 1, ms);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0 || (p[1].revents & POLLIN) != 0) return false;
            return (p[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
        }
    }

    bool is_readable() const override {
        if (buffered_ < filled_) return true;
        pollfd p{sock_, POLLIN, 0};
        return poll(&p, 1, 0) > 0;
    }
    bool is_writable() const override {
        pollfd p{sock_, POLLOUT, 0};
        return poll(&p, 1, io_timeout_s_ * 1000) > 0 && (p.revents & POLLOUT) != 0;
    }
    ssize_t read(char *ptr, size_t size) override { return read_buffered(ptr, size); }
    ssize_t read_socket(char *ptr, size_t size) {
        const auto per_read = Clock::now() + std::chrono::seconds(io_timeout_s_);
        const auto until = per_read < deadline_ ? per_read : deadline_;
        if (!wait_readable(until)) {
            if (Clock::now() >= deadline_) expired_ = t_timed_out = true;
            return -1;
        }
        ssize_t n;
        do {
            n = ::recv(sock_, ptr, size, 0);
        } while (n < 0 && errno == EINTR);
        return n;
    }
    // httplib reads a request's line and headers a byte at a time: served from a buffer filled a recv() at a time,
    // as httplib's own socket stream does.
    ssize_t read_buffered(char *ptr, size_t size) {
        if (buffered_ == filled_) {
            if (size >= sizeof buffer_) return read_socket(ptr, size);
            const ssize_t n = read_socket(buffer_, sizeof buffer_);
            if (n <= 0) return n;
            buffered_ = 0;
            filled_ = size_t(n);
        }
        const size_t n = std::min(size, filled_ - buffered_);
        std::memcpy(ptr, buffer_ + buffered_, n);
        buffered_ += n;
        return ssize_t(n);
    }
    ssize_t write(const char *ptr, size_t size) override {
        if (!is_writable()) return -1;
        ssize_t n;
        do {
            n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
        } while (n < 0 && errno == EINTR);
        return n;
    }
    void get_remote_ip_and_port(std::string &ip, int &port) const override {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        port = 0;
        ip = getpeername(sock_, reinterpret_cast<sockaddr *>(&ss), &len) == 0 ? describe(ss, port) : std::string();
    }
    void get_local_ip_and_port(std::string &ip, int &port) const override {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        port = 0;
        ip = getsockname(sock_, reinterpret_cast<sockaddr *>(&ss), &len) == 0 ? describe(ss, port) : std::string();
    }
    int socket() const override { return sock_; }

private:
    int sock_, wake_fd_, io_timeout_s_;
    Clock::time_point deadline_ = Clock::time_point::max();
    bool expired_ = false;
    char buffer_[4096];
    size_t buffered_ = 0, filled_ = 0;  // buffer_[buffered_, filled_) is read from the socket, not yet by httplib
};

void send_all(int sock, const std::string &text) {
    size_t at = 0;
    while (at < text.size()) {
        pollfd p{sock, POLLOUT, 0};
        if (poll(&p, 1, 1000) <= 0) return;
        const ssize_t n = ::send(sock, text.data() + at, text.size() - at, MSG_NOSIGNAL);
        if (n <= 0) return;
        at += size_t(n);
    }
}

// A whole response written straight to the socket, for connections that never reach httplib (over a cap) or whose
// request never arrived (408).
void send_error(int sock, int status, const char *reason, ErrorType type, const std::string &message) {
    const std::string body = error_json(type, message).dump();
    send_all(sock, "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\nContent-Type: application/json; charset=utf-8\r\n" +
                       "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n" +
                       (status == 503 ? "Retry-After: 1\r\n" : "") + "\r\n" + body);
}

// Closes so that the last response is not lost: closing a socket with unread data in it resets the connection, and
// the client may then drop the response it had not read yet. The write side is shut first, then what the client
// still sends is read and discarded for at most half a second.
void linger_close(int sock) {
    ::shutdown(sock, SHUT_WR);
    const auto until = Clock::now() + std::chrono::milliseconds(500);
    char buf[4096];
    size_t drained = 0;
    while (drained < (size_t(1) << 20)) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
        if (left <= 0) break;
        pollfd p{sock, POLLIN, 0};
        if (poll(&p, 1, int(left)) <= 0) break;
        const ssize_t n = ::recv(sock, buf, sizeof buf, 0);
        if (n <= 0) break;
        drained += size_t(n);
    }
    ::close(sock);
}

}  // namespace

HttpServer::HttpServer(const ConnectionLimits &limits) : limits_(limits) {
    if (pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
    // Threads: every admitted connection, plus a margin for the connections being refused at the caps.
    const int max_threads = limits_.max_connections + 64;
    new_task_queue = [max_threads] { return new ConnectionThreads(max_threads); };
    // What httplib's response headers announce (Keep-Alive: timeout=, max=) is what the loop below does.
    set_keep_alive_timeout(limits_.keep_alive_s);
    set_keep_alive_max_count(size_t(limits_.keep_alive_max));
    set_read_timeout(limits_.io_timeout_s, 0);
    set_write_timeout(limits_.io_timeout_s, 0);
    warm_up();
}

void HttpServer::warm_up() {
    // cpp-httplib builds function-local statics on its first request (the set of method names parse_request_line
    // checks against, ...). Two requests through a socket pair, here, before any connection thread exists and before
    // any handler is registered (they are answered 404 and touch nothing of the server's): the statics are then
    // built before every connection thread starts. Without this the first requests of two connections build and
    // read them concurrently, which the C++ static guard orders but ThreadSanitizer cannot see (the library is not
    // instrumented), and the concurrency pass reports a race.
    for (const char *request : {"GET /warm-up?a=b HTTP/1.1\r\nHost: localhost\r\nRange: bytes=0-1\r\nConnection: close\r\n\r\n",
                                "POST /warm-up HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                                "Content-Length: 2\r\nConnection: close\r\n\r\n{}"}) {
        int pair[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return;
        const std::string text = request;
        if (::send(pair[1], text.data(), text.size(), MSG_NOSIGNAL) == ssize_t(text.size())) {
            ConnectionStream strm(pair[0], -1, 1);
            strm.set_deadline(Clock::now() + std::chrono::seconds(1));
            bool closed = false;
            (void)process_request(strm, true, closed, nullptr);
        }
        ::close(pair[0]);
        ::close(pair[1]);
    }
}

HttpServer::~HttpServer() {
    for (const int fd : wake_)
        if (fd >= 0) ::close(fd);
}

void HttpServer::stop_serving() {
    stopping_ = true;
    if (wake_[1] >= 0) {
        const char c = 1;
        (void)!::write(wake_[1], &c, 1);
    }
    stop();
}

int HttpServer::current_socket() { return t_socket; }
std::string HttpServer::take_timeout_answer() {
    if (!t_timed_out) return "";
    t_timeout_answered = true;
    return "the request did not arrive within " + std::to_string(t_request_timeout_s) + " s (--request-timeout)";
}
void HttpServer::close_after_response() { t_close_after = true; }

HttpServer::Counts HttpServer::counts() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return counts_;
}

std::string HttpServer::admit(const std::string &addr) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (counts_.open >= limits_.max_connections) {
        ++counts_.refused_total;
        return "the server has " + std::to_string(counts_.open) + " open connections, its limit (--max-connections " +
               std::to_string(limits_.max_connections) + ")";
    }
    int &mine = per_client_[addr];
    if (mine >= limits_.max_per_client) {
        ++counts_.refused_per_client;
        return std::to_string(mine) + " connections from " + addr + " are open, the limit per client (--max-connections-per-client " +
               std::to_string(limits_.max_per_client) + ")";
    }
    ++mine;
    ++counts_.open;
    return "";
}

void HttpServer::leave(const std::string &addr) {
    std::lock_guard<std::mutex> lock(mutex_);
    --counts_.open;
    auto it = per_client_.find(addr);
    if (it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
}

bool HttpServer::process_and_close_socket(int sock) {
    // Nothing may escape a connection's thread (std::terminate would end the server): a failure here (out of memory
    // in the bookkeeping) closes this connection only.
    try {
        serve_connection(sock);
    } catch (...) {
        ::close(sock);
    }
    t_socket = -1;
    return true;
}

void HttpServer::serve_connection(int sock) {
    const int wake_fd = wake_[0];
    ConnectionStream strm(sock, wake_fd, limits_.io_timeout_s);
    std::string addr;
    int port = 0;
    strm.get_remote_ip_and_port(addr, port);
    const std::string refused = admit(addr);
    if (!refused.empty()) {
        send_error(sock, 503, "Service Unavailable", ErrorType::Unavailable, refused);
        linger_close(sock);
        return;
    }
    // From here the connection is counted: leave() runs however this ends.
    struct Leave {
        HttpServer *self;
        const std::string &addr;
        ~Leave() { self->leave(addr); }
    } leave_on_exit{this, addr};
    t_socket = sock;
    const auto request_time = std::chrono::seconds(limits_.request_timeout_s);
    // The first request's deadline counts from the connection's start: a client that connects and sends nothing
    // holds its thread no longer than one that sends slowly.
    Clock::time_point deadline = Clock::now() + request_time;
    for (int served = 0; served < limits_.keep_alive_max && !stopping_; ++served) {
        const Clock::time_point wait_until = served == 0 ? deadline : Clock::now() + std::chrono::seconds(limits_.keep_alive_s);
        if (!strm.wait_readable(wait_until)) {
            if (served == 0 && !stopping_ && Clock::now() >= deadline) {
                std::lock_guard<std::mutex> lock(mutex_);
                ++counts_.timed_out;
            }
            break;  // idle (or gone, or stopping): a connection that sent nothing gets no answer, as in httplib
        }
        if (served > 0) deadline = Clock::now() + request_time;
        strm.set_deadline(deadline);
        t_timed_out = t_timeout_answered = t_close_after = false;
        t_request_timeout_s = limits_.request_timeout_s;
        bool connection_closed = false;
        const bool ok = process_request(strm, served + 1 == limits_.keep_alive_max, connection_closed, nullptr);
        if (strm.expired()) {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                ++counts_.timed_out;
            }
            // Ran out of time in the request line (httplib answers nothing then); in the headers or the body the
            // error handler has answered 408 already (take_timeout_answer()).
            if (!t_timeout_answered) send_error(sock, 408, "Request Timeout", ErrorType::Timeout, take_timeout_answer());
            break;
        }
        if (!ok || connection_closed || t_close_after) break;
    }
    t_socket = -1;
    linger_close(sock);
}

}  // namespace specula_serve
