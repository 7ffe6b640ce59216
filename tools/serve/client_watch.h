// Tells whether the client of a request has gone away, so that its generation stops instead of running on for
// nobody. cpp-httplib 0.11 (Debian 12's) has no Request::is_connection_closed, so this finds the connection's socket
// by its two addresses (the worker thread's own connection: it stays open while the handler runs) and polls it for
// a hang-up. Linux only (POLLRDHUP); elsewhere gone() is always false and a stream still stops at its next write.
#pragma once

#include <string>

namespace specula_serve {

class ClientWatch {
public:
    ClientWatch(const std::string &remote_addr, int remote_port, int local_port);
    // True once the peer closed or reset the connection. Cheap: one poll() with no wait.
    bool gone() const;

private:
    int fd_ = -1;
};

}  // namespace specula_serve
