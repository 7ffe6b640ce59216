// What the opaque C handles are, and the firewall every exported function runs its body in.
#pragma once

#include "core/error.h"
#include "model/model.h"
#include "session/session.h"
#include "session/prompt_cache.h"

#include <specula/specula.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <string>

struct specula_error {
    specula_status status;
    std::string message;
};

// The handle owns one reference of the shared model per retain; sessions hold their own shared_ptr, so the
// model outlives every handle and session that uses it.
struct specula_model {
    std::shared_ptr<const specula::internal::Model> model;
    std::atomic<int32_t> handle_refs{1};
};

// A LongSpec draft: refcounted like specula_model; sessions it is attached to hold their own shared_ptr.
struct specula_draft {
    std::shared_ptr<const specula::internal::LongSpecDraft> draft;
    std::atomic<int32_t> handle_refs{1};
};

struct specula_session {
    std::unique_ptr<specula::internal::Session> session;
    specula::internal::StepResult last_step;  // backs the borrowed pointers of specula_session_next's event
    specula_stats last_stats{};
};

struct specula_prompt_cache {
    std::unique_ptr<specula::internal::PromptCache> cache;
};

namespace specula::internal {

// Stores a new error object in *err (if err is not NULL) and returns the status. Never throws.
inline specula_status report(specula_error **err, specula_status status, const char *message) noexcept {
    if (err != nullptr) {
        try {
            *err = new specula_error{status, message};
        } catch (...) {
            *err = nullptr;  // no memory even for the message: the status still tells what happened
        }
    }
    return status;
}

// Runs body() and turns every exception into a status (+ error object). The one way exported functions that can
// fail are written, so nothing ever unwinds into C.
template <typename Body> specula_status guarded(specula_error **err, Body &&body) noexcept {
    if (err != nullptr) *err = nullptr;
    try {
        body();
        return SPECULA_OK;
    } catch (const Error &e) {
        return report(err, e.status(), e.what());
    } catch (const std::bad_alloc &) {
        return report(err, SPECULA_ERR_OUT_OF_MEMORY, "out of memory");
    } catch (const std::exception &e) {
        return report(err, SPECULA_ERR_INTERNAL, e.what());
    } catch (...) {
        return report(err, SPECULA_ERR_INTERNAL, "unknown exception");
    }
}

// For getters that cannot report errors: the value of body(), or fallback if it throws.
template <typename T, typename Body> T guarded_value(T fallback, Body &&body) noexcept {
    try {
        return body();
    } catch (...) {
        return fallback;
    }
}

// The int a C caller passed as an enum parameter. A C enum object holds any int, while C++ may assume an enum holds
// only values in its enumerators' range (loading 99 as a specula_fim_token is undefined; clang's -fsanitize=enum
// reports it): the bytes are copied, not loaded as the enum, so an unknown value reaches the library's own check.
template <typename E> int c_enum_value(const E &e) noexcept {
    static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
    int v;
    std::memcpy(&v, &e, sizeof v);
    return v;
}

inline void require_arg(bool ok, const char *what) {
    if (!ok) throw Error(SPECULA_ERR_INVALID_ARGUMENT, std::string("invalid argument: ") + what);
}

// The session behind a handle; INVALID_ARGUMENT for a NULL handle.
inline Session &session_of(specula_session *s) {
    require_arg(s != nullptr && s->session != nullptr, "session is NULL");
    return *s->session;
}

// Reads a caller's versioned options struct: fields beyond the caller's struct_size keep the defaults, fields
// the caller has and this library does not know are ignored.
template <typename T> T read_options(const T *user, const T &defaults, const char *what) {
    T out = defaults;
    if (user == nullptr) return out;
    require_arg(user->struct_size >= sizeof(uint32_t), (std::string(what) + "->struct_size is too small (use the *_init function)").c_str());
    std::memcpy(&out, user, std::min<size_t>(user->struct_size, sizeof(T)));
    out.struct_size = sizeof(T);
    return out;
}

// The *_init_sized functions (and the *_init ones kept for applications built before 0.17): the library's defaults,
// which `fill` writes into a zeroed struct, copied into the caller's first `size` bytes and never more than the
// library's own struct; struct_size then says how many. An application built against an older header passes its
// own, smaller sizeof and gets no write past its struct (the library's sizeof would overflow it); the fields it does
// not have keep their defaults when read_options reads it. A size below 4 writes nothing.
template <typename T, typename Fill> void init_options_sized(T *opts, size_t size, Fill fill) noexcept {
    if (opts == nullptr || size < sizeof(uint32_t)) return;
    T full{};
    fill(&full);
    const size_t n = std::min(size, sizeof(T));
    full.struct_size = uint32_t(n);
    std::memcpy(static_cast<void *>(opts), &full, n);
}

// Where `field` ends in T: the size the legacy *_init functions write, their struct as of 0.16 (the last header
// that declared them as the functions applications call).
#define SPECULA_OPTIONS_END(T, field) (offsetof(T, field) + sizeof(static_cast<T *>(nullptr)->field))

// Two-call pattern for text outputs.
inline void copy_text(const std::string &text, char *buf, size_t buf_size, size_t *len) {
    if (len != nullptr) *len = text.size();
    if (buf_size <= text.size()) {
        if (buf != nullptr && buf_size > 0) buf[0] = '\0';
        throw Error(SPECULA_ERR_BUFFER_TOO_SMALL, "buffer of " + std::to_string(buf_size) + " bytes is too small for " + std::to_string(text.size() + 1));
    }
    require_arg(buf != nullptr, "buf is NULL");
    std::memcpy(buf, text.data(), text.size());
    buf[text.size()] = '\0';
}

}  // namespace specula::internal
