// A private temporary folder for one test case, removed with everything in it when the case ends. Header-only and
// public-API-free, for the unit and the API tests.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <system_error>

namespace test_fixtures {

struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string &prefix) {
        static std::atomic<int> counter{0};
        path = std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        std::filesystem::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    TempDir(const TempDir &) = delete;
    TempDir &operator=(const TempDir &) = delete;
    std::string file(const std::string &name) const { return (path / name).string(); }
};

}  // namespace test_fixtures
