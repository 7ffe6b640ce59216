#include "progress_bar.h"

#include <unistd.h>

#include <cstdio>
#include <string>

namespace specula_cli {

ProgressBar::ProgressBar(const char *label) : label_(label), enabled_(isatty(STDERR_FILENO) == 1) {}

ProgressBar::~ProgressBar() { clear(); }

void ProgressBar::update(float progress) {
    if (!enabled_) return;
    if (!(progress >= 0.0f)) progress = 0.0f;  // also catches NaN
    if (progress > 1.0f) progress = 1.0f;
    const int percent = static_cast<int>(progress * 100.0f + 0.5f);
    if (percent == last_percent_) return;
    last_percent_ = percent;

    constexpr int kWidth = 30;
    const int filled = percent * kWidth / 100;
    std::string bar(static_cast<size_t>(filled), '=');
    if (filled < kWidth) bar += '>';
    bar.resize(kWidth, ' ');
    std::fprintf(stderr, "\r%s [%s] %3d%%", label_, bar.c_str(), percent);
    std::fflush(stderr);
    drawn_ = true;
}

void ProgressBar::clear() {
    if (!drawn_) return;
    std::fputs("\r\033[2K", stderr);  // carriage return + erase line
    std::fflush(stderr);
    drawn_ = false;
    last_percent_ = -1;
}

}  // namespace specula_cli
