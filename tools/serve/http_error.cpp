#include "http_error.h"

namespace specula_serve {

int error_status(ErrorType type) {
    switch (type) {
    case ErrorType::InvalidRequest: return 400;
    case ErrorType::ExceedContext: return 400;
    case ErrorType::Authentication: return 401;
    case ErrorType::Permission: return 403;
    case ErrorType::NotFound: return 404;
    case ErrorType::Server: return 500;
    case ErrorType::NotSupported: return 501;
    case ErrorType::Unavailable: return 503;
    case ErrorType::Timeout: return 408;
    case ErrorType::MediaType: return 415;
    case ErrorType::RateLimited: return 429;
    }
    return 500;
}

const char *error_type_name(ErrorType type) {
    switch (type) {
    case ErrorType::InvalidRequest: return "invalid_request_error";
    case ErrorType::ExceedContext: return "exceed_context_size_error";
    case ErrorType::Authentication: return "authentication_error";
    case ErrorType::Permission: return "permission_error";
    case ErrorType::NotFound: return "not_found_error";
    case ErrorType::Server: return "server_error";
    case ErrorType::NotSupported: return "not_supported_error";
    case ErrorType::Unavailable: return "unavailable_error";
    case ErrorType::Timeout: return "timeout_error";
    case ErrorType::MediaType: return "invalid_request_error";
    case ErrorType::RateLimited: return "rate_limit_error";
    }
    return "server_error";
}

nlohmann::ordered_json error_json(ErrorType type, const std::string &message) {
    return {{"error", {{"code", error_status(type)}, {"message", message}, {"type", error_type_name(type)}}}};
}

}  // namespace specula_serve
