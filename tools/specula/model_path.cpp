// Default-model lookup. The build tree knows the absolute path of the bundled model (compile definition); an
// installed binary finds it relative to itself, so a relocated install prefix keeps working.
#include "model_path.h"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace fs = std::filesystem;

namespace specula_cli {
namespace {

fs::path executable_dir() {
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);  // Linux; argv[0] is unreliable ($PATH lookups)
    return ec ? fs::path() : exe.parent_path();
}

bool is_file(const fs::path &p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec);
}

}  // namespace

std::string resolve_model_path(const std::string &explicit_path) {
    if (!explicit_path.empty()) return explicit_path;
    if (const char *env = std::getenv("SPECULA_MODEL"); env != nullptr && *env != '\0') return env;

    std::vector<fs::path> candidates;
#ifdef SPECULA_DEFAULT_MODEL_PATH
    candidates.emplace_back(SPECULA_DEFAULT_MODEL_PATH);
#endif
    if (fs::path dir = executable_dir(); !dir.empty())
        candidates.push_back(dir / ".." / "share" / "specula" / "models" / "stories260K.gguf");

    std::string tried;
    for (const fs::path &p : candidates) {
        if (is_file(p)) return p.lexically_normal().string();
        tried += "\n  " + p.lexically_normal().string();
    }
    throw std::runtime_error("no model given (-m or $SPECULA_MODEL) and the bundled model was not found at:" +
                             tried);
}

}  // namespace specula_cli
