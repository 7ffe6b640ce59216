// The bytes of a file, either memory-mapped read-only (no copy) or read into memory. Immutable once built.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace specula::internal {

class FileBytes {
public:
    // Progress callback for the non-mmap read path: fraction in [0,1]; return false to cancel.
    using Progress = std::function<bool(float)>;

    // Throws Error(IO) when the file cannot be opened, mapped or read; Error(CANCELLED) if progress says so.
    static FileBytes open(const std::string &path, bool use_mmap, const Progress &progress = {});
    // Wraps bytes already in memory (tests, in-memory models). Takes ownership of the vector.
    static FileBytes from_vector(std::vector<uint8_t> bytes);

    FileBytes() = default;
    FileBytes(FileBytes &&other) noexcept;
    FileBytes &operator=(FileBytes &&other) noexcept;
    FileBytes(const FileBytes &) = delete;
    FileBytes &operator=(const FileBytes &) = delete;
    ~FileBytes();

    const uint8_t *data() const { return data_; }
    size_t size() const { return size_; }
    bool mapped() const { return mapped_; }
    // Tells the OS that the mapped pages inside [p, p + n) are not needed now (madvise DONTNEED): they leave the
    // process's resident memory and are read from the file again if touched. The bytes do not change. Used for
    // weights the CPU backend has repacked. No effect on bytes read into memory.
    void release_pages(const uint8_t *p, size_t n) const noexcept;

private:
    void unmap() noexcept;

    const uint8_t *data_ = nullptr;
    size_t size_ = 0;
    bool mapped_ = false;
    std::vector<uint8_t> owned_;
};

}  // namespace specula::internal
