#include "log.h"

#include <cstdio>
#include <mutex>

namespace specula::internal {
namespace {

struct LogSink {
    std::mutex mutex;
    specula_log_fn fn = nullptr;
    int min_level = SPECULA_LOG_INFO;  // an int: a C caller may pass any value (log.h)
    void *user_data = nullptr;
};

LogSink &sink() {
    static LogSink instance;
    return instance;
}

}  // namespace

void log_set(specula_log_fn fn, int min_level, void *user_data) {
    LogSink &s = sink();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.fn = fn;
    s.min_level = min_level;
    s.user_data = user_data;
}

void log(specula_log_level level, const char *format, ...) {
    LogSink &s = sink();
    specula_log_fn fn;
    void *user_data;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (s.fn == nullptr || int(level) < s.min_level) return;
        fn = s.fn;
        user_data = s.user_data;
    }
    char buffer[1024];
    va_list args;
    va_start(args, format);
    std::vsnprintf(buffer, sizeof buffer, format, args);
    va_end(args);
    fn(level, buffer, user_data);  // outside the lock: a callback may call specula_log_set
}

}  // namespace specula::internal
