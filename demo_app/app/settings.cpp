#include "settings.h"

namespace demo {

ModelConfig Settings::model_config(Task task, const ModelConfig &fallback) const {
    const QString g = QString::fromLatin1(task_key(task)) + '/';
    if (!s_.contains(g + "model")) return fallback;
    ModelConfig c;
    c.model_path = s_.value(g + "model").toString();
    c.draft_path = s_.value(g + "draft").toString();
    c.ngram = s_.value(g + "ngram", fallback.ngram).toBool();
    c.tree = s_.value(g + "tree").toString();
    c.backend = s_.value(g + "backend", fallback.backend).toInt();
    c.threads = s_.value(g + "threads", fallback.threads).toInt();
    c.n_ctx = s_.value(g + "n_ctx", fallback.n_ctx).toInt();
    return c;
}

void Settings::set_model_config(Task task, const ModelConfig &c) {
    const QString g = QString::fromLatin1(task_key(task)) + '/';
    s_.setValue(g + "model", c.model_path);
    s_.setValue(g + "draft", c.draft_path);
    s_.setValue(g + "ngram", c.ngram);
    s_.setValue(g + "tree", c.tree);
    s_.setValue(g + "backend", c.backend);
    s_.setValue(g + "threads", c.threads);
    s_.setValue(g + "n_ctx", c.n_ctx);
}

GenerationSettings Settings::generation(Task task) const {
    const QString g = QString::fromLatin1(task_key(task)) + '/';
    GenerationSettings d;
    if (task == Task::Complete) d.n_predict = 64;
    d.n_predict = s_.value(g + "n_predict", d.n_predict).toInt();
    d.temperature = s_.value(g + "temperature", d.temperature).toDouble();
    d.seed = s_.value(g + "seed", d.seed).toULongLong();
    return d;
}

void Settings::set_generation(Task task, const GenerationSettings &gs) {
    const QString g = QString::fromLatin1(task_key(task)) + '/';
    s_.setValue(g + "n_predict", gs.n_predict);
    s_.setValue(g + "temperature", gs.temperature);
    s_.setValue(g + "seed", gs.seed);
}

QStringList Settings::recent_models() const { return s_.value("recent_models").toStringList(); }

void Settings::add_recent_model(const QString &path) {
    if (path.isEmpty()) return;
    QStringList r = recent_models();
    r.removeAll(path);
    r.prepend(path);
    while (r.size() > 10) r.removeLast();
    s_.setValue("recent_models", r);
}

}  // namespace demo
