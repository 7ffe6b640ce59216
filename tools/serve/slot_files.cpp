#include "slot_files.h"

#include "http_error.h"
#include "utf8_check.h"

namespace specula_serve {

std::string slot_filename_problem(const std::string &name) {
    if (name.empty()) return "the name is empty";
    if (name.size() > 255) return "the name is longer than 255 bytes";
    if (name[0] == '.') return "the name starts with '.'";
    if (!specula_apps::valid_utf8(name)) return "the name is not UTF-8";
    for (const char ch : name) {
        const unsigned char c = static_cast<unsigned char>(ch);
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                        c == '.' || c >= 0x80;
        if (!ok) return "the name holds a character other than letters, digits, '-', '_' and '.'";
    }
    return "";
}

std::filesystem::path slot_file_path(const std::string &folder, const std::string &name, bool for_reading) {
    const std::string problem = slot_filename_problem(name);
    if (!problem.empty()) throw bad_request("Invalid filename: " + problem + " (a file name inside --slot-save-path, not a path)");
    const std::filesystem::path path = std::filesystem::path(folder) / name;
    std::error_code ec;
    const std::filesystem::file_status st = std::filesystem::symlink_status(path, ec);
    if (std::filesystem::is_symlink(st)) throw bad_request("Invalid filename: " + name + " is a symbolic link");
    if (for_reading) {
        if (!std::filesystem::exists(st)) throw bad_request("no slot file named " + name + " in --slot-save-path");
        if (!std::filesystem::is_regular_file(st)) throw bad_request("Invalid filename: " + name + " is not a regular file");
    } else if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
        throw bad_request("Invalid filename: " + name + " is not a regular file");
    }
    return path;
}

}  // namespace specula_serve
