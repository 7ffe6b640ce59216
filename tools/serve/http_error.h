// Errors a handler answers with, in llama-server's shape:
//   {"error": {"code": 400, "message": "...", "type": "invalid_request_error"}}
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace specula_serve {

enum class ErrorType {
    InvalidRequest, Authentication, NotFound, Server, Permission, Unavailable, NotSupported, ExceedContext,
    Timeout,       // 408: the request did not arrive in time
    MediaType,     // 415: a POST body that is not declared JSON
    RateLimited,   // 429: too many failed API keys from one address
};

struct HttpError : std::runtime_error {
    HttpError(ErrorType t, const std::string &message) : std::runtime_error(message), type(t) {}
    ErrorType type;
};

inline HttpError bad_request(const std::string &message) { return HttpError(ErrorType::InvalidRequest, message); }

// The HTTP status and llama-server's type name of an error type.
int error_status(ErrorType type);
const char *error_type_name(ErrorType type);
nlohmann::ordered_json error_json(ErrorType type, const std::string &message);

}  // namespace specula_serve
