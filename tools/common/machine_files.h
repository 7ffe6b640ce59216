// Header-only helpers that find real text on the machine (Python sources, licences) in a deterministic order,
// shared by the tokenizer benchmark and the tokenizer round-trip test.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace specula_apps {

// Regular files (not symlinks) under dir whose name ends with suffix, sorted by path; directories named in
// skip_dirs are not entered.
inline std::vector<std::filesystem::path> sorted_files(const std::filesystem::path &dir, const std::string &suffix,
                                                       const std::vector<std::string> &skip_dirs = {}) {
    namespace fs = std::filesystem;
    std::vector<fs::path> out;
    std::error_code ec;
    fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
        const fs::directory_entry &e = *it;
        if (e.is_symlink(ec)) continue;
        if (e.is_directory(ec)) {
            if (std::find(skip_dirs.begin(), skip_dirs.end(), e.path().filename().string()) != skip_dirs.end())
                it.disable_recursion_pending();
            continue;
        }
        const std::string name = e.path().filename().string();
        if (e.is_regular_file(ec) && name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
            out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

// The Python standard library: the first (sorted) /usr/lib/python3.N or /usr/local/lib/python3.N holding os.py;
// empty if there is none.
inline std::filesystem::path python_stdlib_dir() {
    namespace fs = std::filesystem;
    std::vector<fs::path> candidates;
    for (const char *root : {"/usr/lib", "/usr/local/lib"}) {
        std::error_code ec;
        for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
            if (it->path().filename().string().rfind("python3", 0) == 0) candidates.push_back(it->path());
    }
    std::sort(candidates.begin(), candidates.end());
    for (const fs::path &dir : candidates)
        if (fs::is_regular_file(dir / "os.py")) return dir;
    return {};
}

}  // namespace specula_apps
