#include "core/atomic_file.h"

#include "core/error.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace specula::internal {

void write_file_atomically(const std::string &path, const std::function<void(const ByteSink &)> &produce) {
    static std::atomic<uint64_t> counter{0};  // several writers of one path in this process
    const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    std::FILE *f = std::fopen(tmp.c_str(), "wb");
    // The messages are built only on failure: require()'s message argument is built before the check, and a
    // bad_alloc building it right after the fopen left the temporary file behind and the FILE open (found by
    // tests/alloc); after the rename it would have reported a failure for a file that was written.
    if (f == nullptr) throw Error(SPECULA_ERR_IO, "cannot write '" + tmp + "': " + std::strerror(errno));
    try {
        produce([&](const void *data, size_t n) {
            if (n != 0 && std::fwrite(data, 1, n, f) != n) throw Error(SPECULA_ERR_IO, "cannot write '" + tmp + "': " + std::strerror(errno));
        });
        const int closed = std::fclose(f);
        f = nullptr;
        if (closed != 0) throw Error(SPECULA_ERR_IO, "cannot write '" + tmp + "': " + std::strerror(errno));
        if (std::rename(tmp.c_str(), path.c_str()) != 0) throw Error(SPECULA_ERR_IO, "cannot write '" + path + "': " + std::strerror(errno));
    } catch (...) {
        if (f != nullptr) std::fclose(f);
        std::remove(tmp.c_str());
        throw;
    }
}

}  // namespace specula::internal
