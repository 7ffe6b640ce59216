#include "model_panel.h"

#include <specula/specula.hpp>

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QToolButton>
#include <QVBoxLayout>

namespace demo {

namespace {
// The GPU backends, in the order AUTO tries them.
struct GpuBackend {
    specula_backend backend;
    const char *label;
};
constexpr GpuBackend kGpuBackends[] = {{SPECULA_BACKEND_CUDA, "CUDA"}, {SPECULA_BACKEND_VULKAN, "Vulkan"}};

QString backend_availability(int backend) {
    if (backend == SPECULA_BACKEND_CPU) return QObject::tr("CPU");
    // The backend asked for, or with auto the first usable one: its first device.
    for (const GpuBackend &g : kGpuBackends) {
        if (backend != SPECULA_BACKEND_AUTO && backend != g.backend) continue;
        if (!specula::backend_unavailable_reason(g.backend).empty()) continue;
        const auto devices = specula::devices(g.backend);
        return QObject::tr("%1: %2").arg(QString::fromLatin1(g.label),
                                         devices.empty() ? QString() : QString::fromUtf8(devices.front().name));
    }
    // None: why (with auto, every GPU backend's reason).
    const QString why = QString::fromStdString(specula::backend_unavailable_reason(static_cast<specula_backend>(backend)));
    if (backend == SPECULA_BACKEND_AUTO) return QObject::tr("no GPU usable (%1): the CPU runs it").arg(why);
    for (const GpuBackend &g : kGpuBackends)
        if (backend == g.backend) return QObject::tr("%1 unavailable (%2)").arg(QString::fromLatin1(g.label), why);
    return why;
}
}  // namespace

ModelPanel::ModelPanel(QWidget *parent) : QWidget(parent) {
    title_ = new QLabel(this);
    title_->setStyleSheet(QStringLiteral("font-weight: bold"));

    model_ = new QLineEdit(this);
    model_->setObjectName(QStringLiteral("modelPath"));
    model_->setPlaceholderText(tr("a GGUF model (drop one here)"));
    auto *open_model = new QPushButton(tr("Open…"), this);
    recent_ = new QToolButton(this);
    recent_->setText(tr("Recent"));
    recent_->setPopupMode(QToolButton::InstantPopup);
    recent_->setMenu(new QMenu(recent_));
    auto *model_row = new QHBoxLayout;
    model_row->addWidget(model_, 1);
    model_row->addWidget(open_model);
    model_row->addWidget(recent_);

    draft_ = new QLineEdit(this);
    draft_->setObjectName(QStringLiteral("draftPath"));
    draft_->setPlaceholderText(tr("none: LongSpec draft or draft model"));
    draft_->setClearButtonEnabled(true);
    auto *open_draft = new QPushButton(tr("Open…"), this);
    auto *draft_row = new QHBoxLayout;
    draft_row->addWidget(draft_, 1);
    draft_row->addWidget(open_draft);

    ngram_ = new QCheckBox(tr("n-gram drafting (prompt lookup + token reuse)"), this);
    tree_ = new QLineEdit(this);
    tree_->setPlaceholderText(QStringLiteral("%1 (default)").arg(kDefaultTree));
    tree_->setToolTip(tr("Nodes per level of the draft's tree: 1,1,1,1 is a chain of 4; 4,16,16 a tree"));

    backend_ = new QComboBox(this);
    backend_->addItem(tr("auto"), SPECULA_BACKEND_AUTO);
    backend_->addItem(tr("cpu"), SPECULA_BACKEND_CPU);
    backend_->addItem(tr("cuda"), SPECULA_BACKEND_CUDA);
    backend_->addItem(tr("vulkan"), SPECULA_BACKEND_VULKAN);
    backend_state_ = new QLabel(this);
    backend_state_->setWordWrap(true);
    backend_state_->setObjectName(QStringLiteral("backendState"));
    threads_ = new QSpinBox(this);
    threads_->setRange(0, 256);
    threads_->setSpecialValueText(tr("auto"));
    n_ctx_ = new QSpinBox(this);
    n_ctx_->setRange(0, 1 << 20);
    n_ctx_->setSingleStep(512);
    n_ctx_->setSpecialValueText(tr("model default"));

    load_ = new QPushButton(tr("Load"), this);
    load_->setObjectName(QStringLiteral("loadButton"));
    cancel_ = new QPushButton(tr("Cancel"), this);
    cancel_->setEnabled(false);
    progress_ = new QProgressBar(this);
    progress_->setRange(0, 1000);
    progress_->setTextVisible(false);
    auto *load_row = new QHBoxLayout;
    load_row->addWidget(load_);
    load_row->addWidget(progress_, 1);
    load_row->addWidget(cancel_);

    info_ = new QPlainTextEdit(this);
    info_->setObjectName(QStringLiteral("modelInfo"));
    info_->setReadOnly(true);
    info_->setLineWrapMode(QPlainTextEdit::WidgetWidth);

    auto *form = new QFormLayout;
    form->addRow(tr("Model"), model_row);
    form->addRow(tr("Draft"), draft_row);
    form->addRow(QString(), ngram_);
    form->addRow(tr("Tree"), tree_);
    form->addRow(tr("Backend"), backend_);
    form->addRow(QString(), backend_state_);
    form->addRow(tr("Threads"), threads_);
    form->addRow(tr("Context"), n_ctx_);
    auto *layout = new QVBoxLayout(this);
    layout->addWidget(title_);
    layout->addLayout(form);
    layout->addLayout(load_row);
    layout->addWidget(info_, 1);

    connect(open_model, &QPushButton::clicked, this, &ModelPanel::choose_model);
    connect(open_draft, &QPushButton::clicked, this, &ModelPanel::choose_draft);
    connect(load_, &QPushButton::clicked, this, &ModelPanel::loadRequested);
    connect(cancel_, &QPushButton::clicked, this, &ModelPanel::cancelRequested);
    connect(backend_, &QComboBox::currentIndexChanged, this,
            [this] { backend_state_->setText(backend_availability(backend_->currentData().toInt())); });
    backend_state_->setText(backend_availability(SPECULA_BACKEND_AUTO));
}

void ModelPanel::set_task_title(const QString &title) { title_->setText(title); }

void ModelPanel::set_config(const ModelConfig &c) {
    model_->setText(c.model_path);
    draft_->setText(c.draft_path);
    ngram_->setChecked(c.ngram);
    tree_->setText(c.tree);
    backend_->setCurrentIndex(std::max(0, backend_->findData(c.backend)));
    threads_->setValue(c.threads);
    n_ctx_->setValue(c.n_ctx);
}

ModelConfig ModelPanel::config() const {
    ModelConfig c;
    c.model_path = model_->text().trimmed();
    c.draft_path = draft_->text().trimmed();
    c.ngram = ngram_->isChecked();
    c.tree = tree_->text().trimmed();
    c.backend = backend_->currentData().toInt();
    c.threads = threads_->value();
    c.n_ctx = n_ctx_->value();
    return c;
}

void ModelPanel::set_recent(const QStringList &paths) {
    QMenu *menu = recent_->menu();
    menu->clear();
    for (const QString &p : paths) {
        QAction *a = menu->addAction(QFileInfo(p).fileName());
        a->setToolTip(p);
        connect(a, &QAction::triggered, this, [this, p] { set_model_path(p); });
    }
    recent_->setEnabled(!paths.isEmpty());
}

void ModelPanel::set_loading(bool loading) {
    load_->setEnabled(!loading);
    cancel_->setEnabled(loading);
    if (loading) progress_->setValue(0);
}

void ModelPanel::set_progress(float fraction) { progress_->setValue(int(fraction * 1000.0f)); }

void ModelPanel::show_summary(const ModelSummary &s) {
    info_->setPlainText(s.describe());
    progress_->setValue(1000);
    if (!s.backend_note.isEmpty()) backend_state_->setText(tr("running on %1: %2").arg(s.backend, s.backend_note));
    else backend_state_->setText(tr("running on %1").arg(s.backend));
}

void ModelPanel::show_unloaded(const QString &why) {
    info_->setPlainText(why);
    progress_->setValue(0);
}

void ModelPanel::choose_model() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open a GGUF model"), QFileInfo(model_->text()).absolutePath(),
                                                      tr("GGUF models (*.gguf);;All files (*)"));
    if (!path.isEmpty()) set_model_path(path);
}

void ModelPanel::choose_draft() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open a LongSpec draft or a draft model"),
                                                      QFileInfo(draft_->text().isEmpty() ? model_->text() : draft_->text()).absolutePath(),
                                                      tr("GGUF files (*.gguf);;All files (*)"));
    if (!path.isEmpty()) set_draft_path(path);
}

void ModelPanel::set_model_path(const QString &path) {
    if (model_->text() != path) draft_->clear();  // a draft belongs to one model
    model_->setText(path);
    emit loadRequested();
}

void ModelPanel::set_draft_path(const QString &path) {
    draft_->setText(path);
    emit loadRequested();
}

}  // namespace demo
