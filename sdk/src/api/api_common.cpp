// Versions, status strings, error objects and logging.
#include "handles.h"

#include "core/log.h"

using namespace specula::internal;

extern "C" {

uint32_t specula_version(void) { return (SPECULA_VERSION_MAJOR << 16) | (SPECULA_VERSION_MINOR << 8) | SPECULA_VERSION_PATCH; }

const char *specula_version_string(void) {
#define SPECULA_STR2(x) #x
#define SPECULA_STR(x) SPECULA_STR2(x)
    return SPECULA_STR(SPECULA_VERSION_MAJOR) "." SPECULA_STR(SPECULA_VERSION_MINOR) "." SPECULA_STR(SPECULA_VERSION_PATCH);
}

uint32_t specula_abi_version(void) { return SPECULA_ABI_VERSION; }

const char *specula_status_string(specula_status status) {
    switch (c_enum_value(status)) {
    case SPECULA_OK: return "SPECULA_OK";
    case SPECULA_ERR_INVALID_ARGUMENT: return "SPECULA_ERR_INVALID_ARGUMENT";
    case SPECULA_ERR_IO: return "SPECULA_ERR_IO";
    case SPECULA_ERR_FORMAT: return "SPECULA_ERR_FORMAT";
    case SPECULA_ERR_UNSUPPORTED: return "SPECULA_ERR_UNSUPPORTED";
    case SPECULA_ERR_OUT_OF_MEMORY: return "SPECULA_ERR_OUT_OF_MEMORY";
    case SPECULA_ERR_CANCELLED: return "SPECULA_ERR_CANCELLED";
    case SPECULA_ERR_CONTEXT_FULL: return "SPECULA_ERR_CONTEXT_FULL";
    case SPECULA_ERR_INVALID_TOKEN: return "SPECULA_ERR_INVALID_TOKEN";
    case SPECULA_ERR_INCOMPATIBLE: return "SPECULA_ERR_INCOMPATIBLE";
    case SPECULA_ERR_BUFFER_TOO_SMALL: return "SPECULA_ERR_BUFFER_TOO_SMALL";
    case SPECULA_ERR_BACKEND: return "SPECULA_ERR_BACKEND";
    case SPECULA_ERR_INTERNAL: return "SPECULA_ERR_INTERNAL";
    }
    return "SPECULA_ERR_UNKNOWN";
}

specula_status specula_error_status(const specula_error *err) { return err ? err->status : SPECULA_OK; }
const char *specula_error_message(const specula_error *err) { return err ? err->message.c_str() : ""; }
void specula_error_destroy(specula_error *err) { delete err; }

void specula_log_set(specula_log_fn fn, specula_log_level min_level, void *user_data) {
    try {
        log_set(fn, c_enum_value(min_level), user_data);  // any int a C caller passes (core/log.h)
    } catch (...) {
    }
}

}  // extern "C"
