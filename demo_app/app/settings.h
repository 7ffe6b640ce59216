// What the demo remembers between launches (QSettings: ~/.config/Specula/specula-demo.conf on Linux): each task's model
// configuration, the recent models, the last document and repository, generation settings and the window's geometry.
// A first launch has nothing stored and gets the bundled defaults (default_models.h).
#pragma once

#include "../engine/model_config.h"

#include <QSettings>
#include <QStringList>

namespace demo {

struct GenerationSettings {
    int n_predict = 128;
    double temperature = 0.0;  // greedy by default: what makes "compare" able to check identical outputs
    quint64 seed = 1;
};

class Settings {
public:
    explicit Settings(QSettings &store) : s_(store) {}

    // The stored configuration of a task, or `fallback` for what was never stored.
    ModelConfig model_config(Task task, const ModelConfig &fallback) const;
    void set_model_config(Task task, const ModelConfig &config);

    GenerationSettings generation(Task task) const;
    void set_generation(Task task, const GenerationSettings &g);

    QStringList recent_models() const;
    void add_recent_model(const QString &path);  // most recent first, at most 10, no duplicates

    QString value(const QString &key) const { return s_.value(key).toString(); }
    void set_value(const QString &key, const QVariant &v) { s_.setValue(key, v); }
    QByteArray bytes(const QString &key) const { return s_.value(key).toByteArray(); }

    void sync() { s_.sync(); }

private:
    QSettings &s_;
};

}  // namespace demo
