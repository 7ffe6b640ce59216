#include "default_models.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>

namespace demo {

QString bundled_models_dir() {
    QStringList candidates;
    const QByteArray env = qgetenv("SPECULA_DEMO_MODELS");
    if (!env.isEmpty()) candidates << QString::fromLocal8Bit(env);
#ifdef SPECULA_DEMO_MODELS_DIR
    candidates << QStringLiteral(SPECULA_DEMO_MODELS_DIR);
#endif
    candidates << QCoreApplication::applicationDirPath() + QStringLiteral("/../share/specula/models");
    for (const QString &c : candidates)
        if (QFileInfo(c + QStringLiteral("/stories260K.gguf")).isFile()) return QDir(c).canonicalPath();
    return QString();
}

ModelConfig default_model_config(Task task) {
    ModelConfig c;
    c.ngram = false;  // n-gram drafting lost to plain decoding on a CPU at every tree size measured (model_config.h)
    const QString dir = bundled_models_dir();
    if (dir.isEmpty()) return c;
    auto existing = [](const QString &p) { return QFileInfo(p).isFile() ? p : QString(); };
    if (task == Task::Complete && QFileInfo(dir + QStringLiteral("/code-7m-f16.gguf")).isFile()) {
        c.model_path = dir + QStringLiteral("/code-7m-f16.gguf");
        c.draft_path = existing(dir + QStringLiteral("/drafts/code-7m.longspec.gguf"));
        c.n_ctx = 1024;  // code-7m was trained on 1024-token sequences
    } else {
        c.model_path = existing(dir + QStringLiteral("/stories260K.gguf"));
        c.draft_path = existing(dir + QStringLiteral("/drafts/stories260K.longspec.gguf"));
    }
    return c;
}

}  // namespace demo
