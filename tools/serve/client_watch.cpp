#include "client_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

namespace specula_serve {

namespace {
// Port and printable address of a socket address (IPv4 or IPv6).
bool describe(const sockaddr_storage &ss, std::string &addr, int &port) {
    char buf[INET6_ADDRSTRLEN] = {0};
    if (ss.ss_family == AF_INET) {
        const auto *a = reinterpret_cast<const sockaddr_in *>(&ss);
        inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
        port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        const auto *a = reinterpret_cast<const sockaddr_in6 *>(&ss);
        inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
        port = ntohs(a->sin6_port);
    } else {
        return false;
    }
    addr = buf;
    return true;
}
}  // namespace

ClientWatch::ClientWatch(const std::string &remote_addr, int remote_port, int local_port) {
#if defined(__linux__)
    DIR *dir = opendir("/proc/self/fd");
    if (dir == nullptr) return;
    while (const dirent *e = readdir(dir)) {
        char *end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
        struct stat st {};
        if (fstat(int(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
        sockaddr_storage peer{}, self{};
        socklen_t lp = sizeof peer, ls = sizeof self;
        if (getpeername(int(fd), reinterpret_cast<sockaddr *>(&peer), &lp) != 0) continue;
        if (getsockname(int(fd), reinterpret_cast<sockaddr *>(&self), &ls) != 0) continue;
        std::string peer_addr, self_addr;
        int peer_port = 0, self_port = 0;
        if (!describe(peer, peer_addr, peer_port) || !describe(self, self_addr, self_port)) continue;
        if (peer_port == remote_port && self_port == local_port && peer_addr == remote_addr) {
            fd_ = int(fd);
            break;
        }
    }
    closedir(dir);
#else
    (void)remote_addr, (void)remote_port, (void)local_port;
#endif
}

bool ClientWatch::gone() const {
#if defined(__linux__)
    if (fd_ < 0) return false;
    pollfd p{fd_, short(POLLRDHUP), 0};
    if (poll(&p, 1, 0) <= 0) return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
#else
    return false;
#endif
}

}  // namespace specula_serve
