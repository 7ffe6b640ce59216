#include "charts_panel.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QGridLayout>
#include <QLineSeries>
#include <QHorizontalBarSeries>
#include <QTimer>
#include <QValueAxis>
#include <algorithm>

namespace demo {

namespace {

QChartView *make_view(QChart *chart, QWidget *parent) {
    chart->legend()->setVisible(false);
    chart->setMargins(QMargins(4, 4, 4, 4));
    chart->setBackgroundRoundness(0);
    auto *view = new QChartView(chart, parent);
    view->setRenderHint(QPainter::Antialiasing);
    view->setMinimumSize(220, 170);
    return view;
}

constexpr int kDepths = 8;  // depths shown in the acceptance chart

}  // namespace

ChartsPanel::ChartsPanel(QWidget *parent) : QWidget(parent) {
    // Tokens per second over time.
    auto *speed = new QChart;
    speed->setTitle(tr("tokens/s"));
    speed_series_ = new QLineSeries;
    speed->addSeries(speed_series_);
    speed_x_ = new QValueAxis;
    speed_x_->setTitleText(tr("seconds"));
    speed_x_->setLabelFormat(QStringLiteral("%.2g"));
    speed_y_ = new QValueAxis;
    speed_y_->setLabelFormat(QStringLiteral("%.0f"));
    speed->addAxis(speed_x_, Qt::AlignBottom);
    speed->addAxis(speed_y_, Qt::AlignLeft);
    speed_series_->attachAxis(speed_x_);
    speed_series_->attachAxis(speed_y_);
    speed_view_ = make_view(speed, this);

    // Tokens per round.
    auto *tau = new QChart;
    tau->setTitle(tr("tokens per round (tau)"));
    tau_series_ = new QLineSeries;
    tau_mean_series_ = new QLineSeries;
    QPen mean_pen(Qt::darkRed);
    mean_pen.setWidth(2);
    tau_mean_series_->setPen(mean_pen);
    tau->addSeries(tau_series_);
    tau->addSeries(tau_mean_series_);
    tau_x_ = new QValueAxis;
    tau_x_->setTitleText(tr("round"));
    tau_x_->setLabelFormat(QStringLiteral("%d"));
    tau_y_ = new QValueAxis;
    tau_y_->setLabelFormat(QStringLiteral("%.0f"));
    tau->addAxis(tau_x_, Qt::AlignBottom);
    tau->addAxis(tau_y_, Qt::AlignLeft);
    for (QLineSeries *s : {tau_series_, tau_mean_series_}) {
        s->attachAxis(tau_x_);
        s->attachAxis(tau_y_);
    }
    tau_view_ = make_view(tau, this);

    // Acceptance by depth.
    auto *depth = new QChart;
    depth->setTitle(tr("rounds accepting depth d (%)"));
    depth_set_ = new QBarSet(tr("accepted"));
    depth_series_ = new QBarSeries;
    depth_series_->append(depth_set_);
    depth->addSeries(depth_series_);
    depth_x_ = new QBarCategoryAxis;
    QStringList cats;
    for (int d = 1; d <= kDepths; ++d) cats << QString::number(d);
    depth_x_->append(cats);
    depth_y_ = new QValueAxis;
    depth_y_->setRange(0, 100);
    depth_y_->setLabelFormat(QStringLiteral("%.0f"));
    depth->addAxis(depth_x_, Qt::AlignBottom);
    depth->addAxis(depth_y_, Qt::AlignLeft);
    depth_series_->attachAxis(depth_x_);
    depth_series_->attachAxis(depth_y_);
    depth_view_ = make_view(depth, this);

    // Where the time went.
    auto *split = new QChart;
    split->setTitle(tr("time split (ms)"));
    split_set_ = new QBarSet(tr("ms"));
    split_series_ = new QHorizontalBarSeries;
    split_series_->append(split_set_);
    split_series_->setLabelsVisible(true);
    split_series_->setLabelsPosition(QAbstractBarSeries::LabelsInsideBase);
    split_series_->setLabelsPrecision(4);
    split->addSeries(split_series_);
    auto *split_y = new QBarCategoryAxis;
    split_y->append({tr("decode"), tr("verify"), tr("draft"), tr("prompt")});  // bottom to top: prompt on top
    split_x_ = new QValueAxis;
    split_x_->setLabelFormat(QStringLiteral("%.0f"));
    split->addAxis(split_y, Qt::AlignLeft);
    split->addAxis(split_x_, Qt::AlignBottom);
    split_series_->attachAxis(split_y);
    split_series_->attachAxis(split_x_);
    split_view_ = make_view(split, this);

    auto *grid = new QGridLayout(this);
    grid->setContentsMargins(0, 0, 0, 0);
    grid->addWidget(speed_view_, 0, 0);
    grid->addWidget(tau_view_, 0, 1);
    grid->addWidget(depth_view_, 0, 2);
    grid->addWidget(split_view_, 0, 3);

    timer_ = new QTimer(this);
    timer_->setInterval(1000);  // charts are the costliest thing to draw: once a second while a run streams
    connect(timer_, &QTimer::timeout, this, [this] {
        if (dirty_) redraw();
    });
    timer_->start();
    reset();
}

void ChartsPanel::reset() {
    token_times_.clear();
    rounds_.clear();
    totals_ = RunStats{};
    have_totals_ = false;
    dirty_ = true;  // redrawn by the timer: a new run does not wait for the charts
}

void ChartsPanel::mark_dirty() { dirty_ = true; }

void ChartsPanel::add(const std::vector<StreamedToken> &tokens, const std::vector<RoundSample> &rounds) {
    for (const StreamedToken &t : tokens)
        if (t.id != SPECULA_TOKEN_NULL) token_times_.push_back(t.t_ms);
    rounds_.insert(rounds_.end(), rounds.begin(), rounds.end());
    if (!tokens.empty() || !rounds.empty()) mark_dirty();
}

void ChartsPanel::set_running_stats(const specula_stats &at_start, const specula_stats &now) {
    totals_ = stats_between(at_start, now);
    have_totals_ = true;
    mark_dirty();
}

void ChartsPanel::finish(const RunStats &stats) {
    totals_ = stats;
    have_totals_ = true;
    redraw();
}

void ChartsPanel::redraw() {
    dirty_ = false;
    // Tokens per second at each token, over its last 16 tokens and at least 10 ms: speculative rounds emit their tokens
    // in bursts microseconds apart, which a rate over fixed windows, or over too short a span, would draw as spikes.
    QList<QPointF> speed;
    double peak = 1;
    constexpr size_t kSpan = 16;
    constexpr double kMinMs = 10;
    for (size_t i = 1; i < token_times_.size(); ++i) {
        size_t from = i >= kSpan ? i - kSpan : 0;
        while (from > 0 && token_times_[i] - token_times_[from] < kMinMs) --from;
        const double dt = token_times_[i] - token_times_[from];
        if (dt < kMinMs) continue;  // the run's first 10 ms
        const double rate = double(i - from) * 1000.0 / dt;
        speed.append(QPointF((token_times_[i] - token_times_.front()) / 1000.0, rate));
        peak = std::max(peak, rate);
    }
    speed_series_->replace(speed);
    speed_x_->setRange(0, speed.isEmpty() ? 1.0 : std::max(0.01, speed.back().x()));
    speed_y_->setRange(0, peak * 1.15);

    // Tokens per round and the running mean (tau so far).
    QList<QPointF> tau, mean;
    double sum = 0, top = 2;
    for (size_t i = 0; i < rounds_.size(); ++i) {
        tau.append(QPointF(double(rounds_[i].round), rounds_[i].tokens));
        sum += rounds_[i].tokens;
        mean.append(QPointF(double(rounds_[i].round), sum / double(i + 1)));
        top = std::max(top, double(rounds_[i].tokens));
    }
    tau_series_->replace(tau);
    tau_mean_series_->replace(mean);
    tau_x_->setRange(0, std::max(1.0, rounds_.empty() ? 1.0 : double(rounds_.back().round)));
    tau_y_->setRange(0, top + 1);
    tau_view_->chart()->setTitle(rounds_.empty() ? tr("tokens per round (tau): no speculation")
                                                 : tr("tokens per round (tau %1)").arg(sum / double(rounds_.size()), 0, 'f', 2));

    // Acceptance by depth: share of rounds whose accepted path reached depth d.
    depth_set_->remove(0, depth_set_->count());
    for (int d = 0; d < kDepths; ++d)
        depth_set_->append(have_totals_ && totals_.rounds > 0 ? 100.0 * totals_.accepted_at_depth[d] / totals_.rounds : 0.0);

    // Time split: prompt evaluation, drafting, verification, and the rest of decoding (sampling, plain steps).
    split_set_->remove(0, split_set_->count());
    double longest = 1;
    if (have_totals_) {
        const double other = std::max(0.0, totals_.decode_ms - totals_.draft_ms - totals_.verify_ms);
        for (const double ms : {other, totals_.verify_ms, totals_.draft_ms, totals_.prompt_ms}) {
            split_set_->append(ms);
            longest = std::max(longest, ms);
        }
    }
    split_x_->setRange(0, longest * 1.1);
}

}  // namespace demo
