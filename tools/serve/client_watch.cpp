#include "client_watch.h"

#include <poll.h>

namespace specula_serve {

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
