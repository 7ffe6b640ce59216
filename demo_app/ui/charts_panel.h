// Live charts of a run (QtCharts): tokens per second over time, tokens per speculative round (tau), how often the accepted
// path reached each draft depth, and where the time went (prompt, drafting, verification, plain decoding). Fed from the
// token stream; redrawn once a second (and at the end) so drawing does not compete with generation.
#pragma once

#include "../engine/run_types.h"

#include <QWidget>

class QTimer;
class QLabel;
QT_FORWARD_DECLARE_CLASS(QChartView)
QT_FORWARD_DECLARE_CLASS(QLineSeries)
QT_FORWARD_DECLARE_CLASS(QBarSet)
QT_FORWARD_DECLARE_CLASS(QBarSeries)
QT_FORWARD_DECLARE_CLASS(QHorizontalBarSeries)
QT_FORWARD_DECLARE_CLASS(QValueAxis)
QT_FORWARD_DECLARE_CLASS(QBarCategoryAxis)

namespace demo {

class ChartsPanel : public QWidget {
    Q_OBJECT
public:
    explicit ChartsPanel(QWidget *parent = nullptr);

    void reset();
    void add(const std::vector<StreamedToken> &tokens, const std::vector<RoundSample> &rounds);
    void set_running_stats(const specula_stats &at_start, const specula_stats &now);
    void finish(const RunStats &stats);
    void redraw();

private:
    void mark_dirty();

    QTimer *timer_;
    bool dirty_ = false;
    std::vector<double> token_times_;   // ms since the request
    std::vector<RoundSample> rounds_;
    RunStats totals_;
    bool have_totals_ = false;

    QChartView *speed_view_, *tau_view_, *depth_view_, *split_view_;
    QLineSeries *speed_series_, *tau_series_, *tau_mean_series_;
    QValueAxis *speed_x_, *speed_y_, *tau_x_, *tau_y_, *depth_y_;
    QBarSet *depth_set_;
    QBarSeries *depth_series_;
    QBarCategoryAxis *depth_x_;
    QBarSet *split_set_;
    QHorizontalBarSeries *split_series_;
    QValueAxis *split_x_;
};

}  // namespace demo
