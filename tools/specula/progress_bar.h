// Progress bar on stderr (model loading, writing a synthetic model), drawn only when stderr is a terminal (so logs
// and pipes stay clean).
#pragma once

namespace specula_cli {

class ProgressBar {
public:
    // label: what is in progress, shown before the bar.
    explicit ProgressBar(const char *label = "loading model");
    ~ProgressBar();  // erases the bar if it was drawn
    ProgressBar(const ProgressBar &) = delete;
    ProgressBar &operator=(const ProgressBar &) = delete;

    // Redraws the bar for progress in [0, 1]; cheap when the displayed percentage did not change.
    void update(float progress);
    // Erases the bar so that what follows starts on a clean line.
    void clear();

private:
    const char *label_;
    bool enabled_;
    bool drawn_ = false;
    int last_percent_ = -1;
};

}  // namespace specula_cli
