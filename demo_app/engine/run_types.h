// The values that travel between the demo's engine thread and its window: requests, streamed tokens, per-round samples
// and the results of a run. Plain data; the engine fills them, the UI only reads them.
#pragma once

#include "model_config.h"

#include <specula/specula.hpp>

#include <QByteArray>
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

namespace demo {

// A prompt built on the engine thread from the task's model (tokenizer, template, FIM tokens) and its context size.
struct BuiltPrompt {
    std::vector<int32_t> tokens;
    QString note;         // what was done to fit it ("the document's middle 1,203 tokens were left out"), "" when nothing
    QStringList context;  // what went into it, for the window ("utils/io.py: imported, 120 tokens")
};
using PromptBuilder = std::function<BuiltPrompt(const specula::Model &model, int n_ctx)>;

// A prompt the builder cannot make as asked: longer than the context under the "refuse" policy, or a model that lacks
// what the task needs. The message is for the user.
struct PromptRefused : std::runtime_error {
    enum class Kind { TooLong, Other };
    PromptRefused(Kind k, const std::string &message, int tokens = 0, int room = 0)
        : std::runtime_error(message), kind(k), n_tokens(tokens), n_room(room) {}
    Kind kind;
    int n_tokens, n_room;
};

struct GenerateRequest {
    quint64 id = 0;
    Task task = Task::Summarize;
    PromptBuilder build;
    int n_predict = 128;
    specula::SamplerOptions sampler = specula::SamplerOptions::greedy();
    bool speculative = true;   // use the drafters the task's model was loaded with
    bool reuse_prefix = true;  // keep the evaluated prefix the new prompt shares with the session's context
};

struct StreamedToken {
    int32_t id = SPECULA_TOKEN_NULL;
    QByteArray text;     // complete UTF-8 (may be empty while a stop string or a character is incomplete)
    bool drafted = false;
    double t_ms = 0;     // since the run's request, on the engine's clock
};

// One speculative round, from the session's running stats.
struct RoundSample {
    int round = 0;        // index within the run
    int tokens = 0;       // tokens it produced: the accepted drafts plus the target's own
    double draft_ms = 0, verify_ms = 0;
    double t_ms = 0;
};

// Counters of one run: the difference of the session's stats after and before it.
struct RunStats {
    int prompt_tokens = 0;    // the prompt's length
    int cached_tokens = 0;    // kept from the previous run (prefix reuse)
    int evaluated_tokens = 0; // evaluated for this run
    int generated = 0, drafted_emitted = 0;
    int rounds = 0, drafted = 0, accepted = 0;
    int accepted_at_depth[16] = {};
    double prompt_ms = 0, decode_ms = 0, draft_ms = 0, verify_ms = 0;
    double build_ms = 0;      // building the prompt (reading related files, chat template, tokenization)
    double ttft_ms = 0;       // request to first token, engine clock (prompt building and evaluation included)
    double total_ms = 0;      // request to the end of the run
    size_t drafter_bytes = 0;
    double decode_tokens_per_s() const { return decode_ms > 0 ? generated * 1000.0 / decode_ms : 0; }
    double tau() const { return rounds > 0 ? double(accepted + rounds) / rounds : 0; }
};

// The counters of the session's running stats between two readings (generated, rounds, times, accepted depths...).
// prompt_tokens, cached_tokens, drafted_emitted, ttft_ms and total_ms are the run's own and are left 0.
RunStats stats_between(const specula_stats &before, const specula_stats &after);

struct RunResult {
    quint64 id = 0;
    Task task = Task::Summarize;
    specula_stop_reason stop = SPECULA_STOP_NONE;
    QByteArray text;                  // the whole generated text
    std::vector<int32_t> prompt, generated;
    RunStats stats;
    QString drafter;                  // "" = plain decoding
    QString note;                     // from the prompt builder
    QStringList context;              // likewise
};

struct CompareResult {
    quint64 id = 0;
    Task task = Task::Summarize;
    RunResult plain, speculative;
    bool identical = false;           // the same tokens, greedy (the lossless check)
    double speedup() const {
        const double p = plain.stats.decode_tokens_per_s(), s = speculative.stats.decode_tokens_per_s();
        return p > 0 ? s / p : 0;
    }
};

// A failed engine call, for the window: the SDK's status and message.
struct EngineError {
    quint64 id = 0;
    Task task = Task::Summarize;
    specula_status status = SPECULA_ERR_INTERNAL;
    QString message;
    bool too_long = false;            // a PromptRefused::TooLong: the window offers head-and-tail
    int n_tokens = 0, n_room = 0;
};

}  // namespace demo

Q_DECLARE_METATYPE(demo::GenerateRequest)
Q_DECLARE_METATYPE(demo::RunResult)
Q_DECLARE_METATYPE(demo::CompareResult)
Q_DECLARE_METATYPE(demo::EngineError)
Q_DECLARE_METATYPE(demo::ModelConfig)
Q_DECLARE_METATYPE(demo::Task)
