// A loaded model: the parsed GGUF file (weights stay in the mapped bytes), its hyperparameters, weight views and
// tokenizer. Immutable after load, so any number of sessions on any threads may share one through shared_ptr.
#pragma once

#include "gguf/gguf_file.h"
#include "model/backend_cache.h"
#include "model/fingerprint.h"
#include "model/hparams.h"
#include "model/weights.h"
#include "tokenizer/vocab.h"

#include <functional>
#include <vector>
#include <memory>
#include <mutex>
#include <string>

namespace specula::internal {

class GrammarVocab;

struct LoadOptions {
    bool use_mmap = true;
    bool vocab_only = false;              // tokenizer and metadata only: no hyperparameters, no weights
    std::function<bool(float)> progress;  // return false to cancel
};

class Model {
public:
    // Throws Error (IO, FORMAT, UNSUPPORTED, OUT_OF_MEMORY, CANCELLED).
    static std::shared_ptr<const Model> load(const std::string &path, const LoadOptions &options);
    // The same from bytes already in memory (the fuzz targets of tests/fuzz); `label` names them in the log line.
    // options.use_mmap and the progress of reading do not apply.
    static std::shared_ptr<const Model> load_bytes(FileBytes bytes, const LoadOptions &options, const std::string &label = "<memory>");

    const GgufFile &file() const { return file_; }
    const HParams &hparams() const { return hparams_; }
    const ModelWeights &weights() const { return weights_; }
    const Vocab &vocab() const { return vocab_; }
    const std::string &name() const { return name_; }
    const char *weight_type() const { return weight_type_; }
    uint64_t n_params() const { return n_params_; }
    double load_ms() const { return load_ms_; }
    bool vocab_only() const { return vocab_only_; }
    // XXH3-128 of the whole GGUF file (model/fingerprint.h), computed on first use (on pool's threads when given).
    const Fingerprint &fingerprint(ThreadPool *pool = nullptr) const {
        return fingerprint_.get(file_.bytes().data(), file_.bytes().size(), pool);
    }

    // The vocabulary as grammars match it (grammar/grammar_matcher.h), made on first use (every token's text,
    // sorted) and shared by the sessions on this model. Thread-safe.
    std::shared_ptr<const GrammarVocab> grammar_vocab() const;

    // Data backends derive from the weights and keep while the model lives (the CPU's packed matrices).
    const BackendCache &backend_cache() const { return backend_cache_; }

    ~Model();

private:
    Model() = default;
    static std::shared_ptr<const Model> build(FileBytes bytes, const LoadOptions &options, const std::string &label, double t0);

    GgufFile file_;
    HParams hparams_;
    ModelWeights weights_;
    Vocab vocab_;
    std::string name_;
    const char *weight_type_ = "";
    uint64_t n_params_ = 0;
    double load_ms_ = 0;
    bool vocab_only_ = false;
    LazyFingerprint fingerprint_;
    BackendCache backend_cache_;
    mutable std::mutex grammar_vocab_mutex_;
    mutable std::shared_ptr<const GrammarVocab> grammar_vocab_;
};

}  // namespace specula::internal
