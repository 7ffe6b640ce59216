// How long the longest lossless runs are under the sanitizers.
//
// Built with AddressSanitizer or ThreadSanitizer, the model's float loops run 5-7x slower, and the few tests that
// generate hundreds of tokens with every drafter took most of CI's sanitizer pass. There they generate fewer
// tokens (still crossing every window, ring and shift they are about): the sanitizers check memory and races on the
// same code paths, and the plain build, whose results are the same code's, runs the full lengths.
#pragma once

#include <cstdint>

namespace test_scale {

// gcc 12 says __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__, clang 14 only __has_feature (which gcc 12 lacks).
#if defined(__has_feature)
#define SPECULA_TEST_HAS_FEATURE(x) __has_feature(x)
#else
#define SPECULA_TEST_HAS_FEATURE(x) 0
#endif

#if defined(__SANITIZE_THREAD__) || SPECULA_TEST_HAS_FEATURE(thread_sanitizer)
inline constexpr bool kThreadSanitized = true;
#else
inline constexpr bool kThreadSanitized = false;
#endif
#if defined(__SANITIZE_ADDRESS__) || SPECULA_TEST_HAS_FEATURE(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = kThreadSanitized;
#endif

// `full` in a plain build, `sanitized` under a sanitizer.
constexpr int32_t count(int32_t full, int32_t sanitized) { return kSanitized ? sanitized : full; }

}  // namespace test_scale
