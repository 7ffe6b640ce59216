// Header-only helpers that find real text on the machine (Python sources, licences) in a deterministic order,
// shared by the tokenizer and speculative benchmarks and the tokenizer round-trip test.
#pragma once

#include <algorithm>
#include <cstdio>
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

// The standard library of the `python3` on PATH, as `python3 -c "import sysconfig;
// print(sysconfig.get_paths()['stdlib'])"` prints it (with pyenv, a folder that also holds site-packages/). This
// is the folder code-7m was trained on (its README). Falls back to python_stdlib_dir() when there is no python3 or
// what it prints holds no os.py.
inline std::filesystem::path python3_sysconfig_stdlib_dir() {
    namespace fs = std::filesystem;
    std::string out;
    if (FILE *p = popen("python3 -c \"import sysconfig; print(sysconfig.get_paths()['stdlib'])\" 2>/dev/null", "r")) {
        char buf[512];
        while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
        pclose(p);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    std::error_code ec;
    if (!out.empty() && fs::is_regular_file(fs::path(out) / "os.py", ec)) return fs::path(out);
    return python_stdlib_dir();
}

}  // namespace specula_apps
