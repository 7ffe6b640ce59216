// The one exception type the core throws. The C shims in sdk/src/api/ turn it into a specula_status and an
// error object; nothing else escapes the library.
#pragma once

#include <specula/specula.h>

#include <stdexcept>
#include <string>

namespace specula::internal {

class Error : public std::runtime_error {
public:
    Error(specula_status status, const std::string &message) : std::runtime_error(message), status_(status) {}
    specula_status status() const noexcept { return status_; }

private:
    specula_status status_;
};

// Throws Error(status, message) unless condition holds. Used for every check on untrusted input.
inline void require(bool condition, specula_status status, const std::string &message) {
    if (!condition) throw Error(status, message);
}

}  // namespace specula::internal
