// The files of /slots/{id}?action=save|restore (llama-server's --slot-save-path): a request names a file, never a
// path. A name is refused (400 "Invalid filename", llama-server's answer) unless it is 1-255 bytes of letters,
// digits, '-', '_', '.' and UTF-8 beyond ASCII, does not start with '.' (no "..", no hidden files), and names no
// symbolic link in the folder: whatever a request sends, the file read or written is a plain file directly inside
// the folder.
#pragma once

#include <filesystem>
#include <string>

namespace specula_serve {

// "" when name may name a slot file, else why not.
std::string slot_filename_problem(const std::string &name);

// folder / name, after the checks above (throws HttpError 400 when they fail). for_reading: the file must exist
// and be a regular file (not a link, a folder or a device).
std::filesystem::path slot_file_path(const std::string &folder, const std::string &name, bool for_reading);

}  // namespace specula_serve
