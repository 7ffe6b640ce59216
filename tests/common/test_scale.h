// How long the longest lossless runs are under the sanitizers.
//
// Built with AddressSanitizer or ThreadSanitizer, the model's float loops run 5-7x slower, and the few tests that
// generate hundreds of tokens with every drafter took most of CI's sanitizer pass. There they generate fewer
// tokens (still crossing every window, ring and shift they are about): the sanitizers check memory and races on the
// same code paths, and the plain build, whose results are the same code's, runs the full lengths.
#pragma once

#include <cstdint>

namespace test_scale {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThreadSanitized = true;
#else
inline constexpr bool kThreadSanitized = false;
#endif
#else
inline constexpr bool kThreadSanitized = false;
#endif

// `full` in a plain build, `sanitized` under a sanitizer.
constexpr int32_t count(int32_t full, int32_t sanitized) { return kSanitized ? sanitized : full; }

}  // namespace test_scale
