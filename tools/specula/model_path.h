// Which model file the CLI opens when the user names none.
#pragma once

#include <string>

namespace specula_cli {

// Returns explicit_path if non-empty; else $SPECULA_MODEL if set and non-empty; else the first existing file of
// the build-time default (SPECULA_DEFAULT_MODEL_PATH) and <exe dir>/../share/specula/models/stories260K.gguf
// (the installed layout). Throws std::runtime_error naming the places it looked when none exists.
std::string resolve_model_path(const std::string &explicit_path);

}  // namespace specula_cli
