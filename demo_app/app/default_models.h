// The models a first launch uses, with nothing chosen: for documents the bundled stories260K and its trained LongSpec
// draft; for code the vendored code-7m (F16) and its trained draft (models/README.md). Found beside the source tree in a
// build, or under <prefix>/share/specula/models when installed.
#pragma once

#include "../engine/model_config.h"

#include <QString>

namespace demo {

// The bundled models folder, or "" when it cannot be found.
QString bundled_models_dir();

// The first-launch configuration of a task (empty paths when the files are missing).
ModelConfig default_model_config(Task task);

}  // namespace demo
