// Tells whether the client of a request has gone away, so that its generation stops instead of running on for
// nobody: polls the request's connection (HttpServer::current_socket(): the handler runs on its connection's thread,
// and the socket stays open while it does) for a hang-up. Linux only (POLLRDHUP); elsewhere gone() is always false
// and a stream still stops at its next write.
#pragma once

namespace specula_serve {

class ClientWatch {
public:
    // socket: the connection's socket; -1 watches nothing (gone() stays false).
    explicit ClientWatch(int socket) : fd_(socket) {}
    // True once the peer closed or reset the connection. Cheap: one poll() with no wait.
    bool gone() const;

private:
    int fd_ = -1;
};

}  // namespace specula_serve
