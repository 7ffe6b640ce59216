// What the model panel chooses for one task of the demo: the model, its drafters and where it runs. Each task (Summarize,
// Complete) has its own, persisted by settings.h, so the code task can use a code model while documents use another.
#pragma once

#include <specula/specula.h>

#include <QString>

namespace demo {

enum class Task { Summarize = 0, Complete = 1 };
constexpr int kTaskCount = 2;

inline const char *task_key(Task t) { return t == Task::Summarize ? "summarize" : "complete"; }

struct ModelConfig {
    QString model_path;     // a GGUF model
    QString draft_path;     // a LongSpec draft or a draft model with the same vocabulary (told apart at load); "" = none
    bool ngram = true;      // n-gram drafting (prompt lookup + token reuse), alone or merged with the draft's tree
    QString tree;           // the draft tree's level widths, "1,1,1" for a chain; "" = the demo's default (kDefaultTree)
    int backend = SPECULA_BACKEND_AUTO;
    int threads = 0;        // 0 = the library's default (cores, at most 8)
    int n_ctx = 0;          // 0 = the library's default (min(trained context, 4096))

    bool operator==(const ModelConfig &) const = default;
};

// The draft tree the demo uses unless the user sets one. The library's default tree (4,16,16,16,16: 69 nodes) pays on a
// GPU, but on a few CPU cores a 69-node verification costs tens of decode steps of a small model (0.19x on code-7m), so
// a short chain is the shape that gains there: a chain of 4 measured best on code-7m with its trained draft (docs/demo.md).
inline constexpr const char *kDefaultTree = "1,1,1,1";
// Tree nodes for n-gram candidates (the library's default is 16, sized for a GPU): 3 measured best of 2/3/4/8/16 on
// code-7m. n-gram drafting is off by default (default_models.cpp): on this CPU it lost to plain decoding at every size.
inline constexpr int kDefaultNgramNodes = 3;

}  // namespace demo
