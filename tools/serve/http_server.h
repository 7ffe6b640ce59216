// The HTTP layer of `specula serve`: cpp-httplib's request parsing and routing, with the connections handled so that
// slow or idle clients cannot starve it (issue 44). cpp-httplib serves each connection on a worker of a fixed
// thread pool and reads a request with only a per-read timeout, so 64 connections that send a header line every
// 2 s held every worker forever and /health went unanswered. Here:
//   - every connection has its own thread (ConnectionThreads), so a connection being read never delays another;
//     the number of open connections is capped in total and per client address, and one over a cap gets a 503
//     (JSON, Connection: close) at once;
//   - a request (request line, headers and body) must arrive within a deadline counted from the connection's start
//     (or, on a kept-alive connection, from the request's first byte): past it the client gets 408 and is closed;
//   - a kept-alive connection may be idle between requests for keep_alive_s, and serves at most keep_alive_max;
//   - stop() wakes every connection that is waiting for a request at once.
// Generation is bounded elsewhere (SlotPool's slots and queue); a handler runs on its connection's thread.
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

namespace specula_serve {

struct ConnectionLimits {
    int max_connections = 1024;    // open connections in total (each holds a thread); more get 503
    int max_per_client = 512;      // open connections from one client address; more get 503
    int request_timeout_s = 30;    // a whole request (line, headers, body) must arrive within this; else 408
    int keep_alive_s = 5;          // idle seconds allowed between two requests of a connection
    int keep_alive_max = 1000;     // requests served on one connection
    int io_timeout_s = 600;        // one read or write of a response (llama-server's --timeout)
};

class HttpServer : public httplib::Server {
public:
    explicit HttpServer(const ConnectionLimits &limits);
    ~HttpServer() override;

    // Stops listening and wakes the connections that wait for a request (those generating are cancelled by their
    // owner). Thread-safe.
    void stop_serving();

    // For handlers, on their connection's thread:
    // the connection's socket (-1 on other threads): ClientWatch polls it for a hang-up;
    static int current_socket();
    // when the request being read ran past its deadline, the message of the 408 the error handler answers with
    // (and the connection then closes); "" otherwise;
    static std::string take_timeout_answer();
    // ask for the connection to be closed after this response (a request refused before its body was read: what
    // follows on the connection is that body, not a request).
    static void close_after_response();

    struct Counts {
        int open = 0;
        long long refused_total = 0, refused_per_client = 0, timed_out = 0;
    };
    Counts counts() const;

private:
    bool process_and_close_socket(int sock) override;
    void serve_connection(int sock);
    void warm_up();
    // Admits a connection from `addr`, or says why not.
    std::string admit(const std::string &addr);
    void leave(const std::string &addr);

    ConnectionLimits limits_;
    int wake_[2] = {-1, -1};  // a pipe: readable once stop_serving() was called
    std::atomic<bool> stopping_{false};
    mutable std::mutex mutex_;
    std::map<std::string, int> per_client_;
    Counts counts_;
};

}  // namespace specula_serve
