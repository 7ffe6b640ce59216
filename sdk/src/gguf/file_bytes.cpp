#include "file_bytes.h"

#include "core/error.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace specula::internal {
namespace {

struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

std::string errno_text(const std::string &what, const std::string &path) {
    return what + " '" + path + "': " + std::strerror(errno);
}

}  // namespace

void FileBytes::release_pages(const uint8_t *p, size_t n) const noexcept {
    if (!mapped_ || p < data_ || p + n > data_ + size_) return;
    const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (uintptr_t(p) + page - 1) & ~(page - 1), end = (uintptr_t(p) + n) & ~(page - 1);
    if (end > begin) ::madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
}

FileBytes FileBytes::open(const std::string &path, bool use_mmap, const Progress &progress) {
    Fd file;
    file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    require(file.fd >= 0, SPECULA_ERR_IO, errno_text("cannot open", path));
    struct stat st {};
    require(::fstat(file.fd, &st) == 0, SPECULA_ERR_IO, errno_text("cannot stat", path));
    require(S_ISREG(st.st_mode), SPECULA_ERR_IO, "not a regular file: '" + path + "'");
    const size_t size = static_cast<size_t>(st.st_size);

    FileBytes bytes;
    if (size == 0) return bytes;
    if (use_mmap) {
        void *addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd, 0);
        require(addr != MAP_FAILED, SPECULA_ERR_IO, errno_text("cannot mmap", path));
        bytes.data_ = static_cast<const uint8_t *>(addr);
        bytes.size_ = size;
        bytes.mapped_ = true;
        return bytes;
    }
    try {
        bytes.owned_.resize(size);
    } catch (const std::bad_alloc &) {
        throw Error(SPECULA_ERR_OUT_OF_MEMORY, "cannot allocate " + std::to_string(size) + " bytes for '" + path + "'");
    }
    size_t done = 0;
    constexpr size_t kChunk = size_t(8) << 20;
    while (done < size) {
        const ssize_t n = ::read(file.fd, bytes.owned_.data() + done, std::min(kChunk, size - done));
        if (n < 0 && errno == EINTR) continue;
        require(n > 0, SPECULA_ERR_IO, n == 0 ? "file shrank while reading '" + path + "'" : errno_text("cannot read", path));
        done += static_cast<size_t>(n);
        if (progress && !progress(float(done) / float(size))) throw Error(SPECULA_ERR_CANCELLED, "model load cancelled");
    }
    bytes.data_ = bytes.owned_.data();
    bytes.size_ = size;
    return bytes;
}

FileBytes FileBytes::from_vector(std::vector<uint8_t> v) {
    FileBytes bytes;
    bytes.owned_ = std::move(v);
    bytes.data_ = bytes.owned_.data();
    bytes.size_ = bytes.owned_.size();
    return bytes;
}

FileBytes::FileBytes(FileBytes &&other) noexcept { *this = std::move(other); }

FileBytes &FileBytes::operator=(FileBytes &&other) noexcept {
    if (this != &other) {
        unmap();
        owned_ = std::move(other.owned_);
        mapped_ = other.mapped_;
        size_ = other.size_;
        data_ = mapped_ ? other.data_ : owned_.data();
        other.data_ = nullptr;
        other.size_ = 0;
        other.mapped_ = false;
    }
    return *this;
}

FileBytes::~FileBytes() { unmap(); }

void FileBytes::unmap() noexcept {
    if (mapped_ && data_ != nullptr) ::munmap(const_cast<uint8_t *>(data_), size_);
    data_ = nullptr;
    size_ = 0;
    mapped_ = false;
}

}  // namespace specula::internal
