// Writing a file so that nobody ever sees a part of it: the bytes go to a temporary file beside the target, which
// is renamed over the target once complete (rename is atomic within a directory). Readers, in this process or
// another, find the old file or the whole new one; a failed write leaves the old file and no temporary.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace specula::internal {

using ByteSink = std::function<void(const void *data, size_t n)>;

// `produce` writes the file's bytes through the sink it is given. Throws Error(IO) naming the file when it cannot be
// written; an exception from `produce` propagates after the temporary is removed.
void write_file_atomically(const std::string &path, const std::function<void(const ByteSink &)> &produce);

}  // namespace specula::internal
