#include "model.h"

#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"
#include "grammar/grammar_matcher.h"

#include <map>

namespace specula::internal {
namespace {

// llama.cpp's `enum llama_ftype` (general.file_type): how the file was quantized as a whole.
const char *file_type_name(int64_t ftype) {
    static const std::map<int64_t, const char *> names = {
        {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},    {8, "Q5_0"},    {9, "Q5_1"},
        {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"}, {13, "Q3_K_L"}, {14, "Q4_K_S"}, {15, "Q4_K_M"}, {16, "Q5_K_S"},
        {17, "Q5_K_M"}, {18, "Q6_K"},   {19, "IQ2_XXS"}, {20, "IQ2_XS"}, {21, "Q2_K_S"}, {22, "IQ3_XS"}, {23, "IQ3_XXS"},
        {24, "IQ1_S"},  {25, "IQ4_NL"}, {26, "IQ3_S"},  {27, "IQ3_M"},  {28, "IQ2_S"},  {29, "IQ2_M"},  {30, "IQ4_XS"},
        {31, "IQ1_M"},  {32, "BF16"},   {36, "TQ1_0"},  {37, "TQ2_0"},
    };
    auto it = names.find(ftype);
    return it == names.end() ? nullptr : it->second;
}

}  // namespace

Model::~Model() = default;

std::shared_ptr<const GrammarVocab> Model::grammar_vocab() const {
    std::lock_guard<std::mutex> lock(grammar_vocab_mutex_);
    if (!grammar_vocab_) grammar_vocab_ = std::make_shared<const GrammarVocab>(vocab_);
    return grammar_vocab_;
}

std::shared_ptr<const Model> Model::load(const std::string &path, const LoadOptions &options) {
    const double t0 = now_ms();
    // Progress: reading the bytes is 0..0.8 of the work without mmap; parsing and binding the rest.
    auto report = [&](float p) {
        if (options.progress && !options.progress(p)) throw Error(SPECULA_ERR_CANCELLED, "model load cancelled");
    };
    report(0.0f);
    FileBytes bytes = FileBytes::open(path, options.use_mmap, options.progress ? [&](float p) { return options.progress(0.8f * p); } : FileBytes::Progress{});
    return build(std::move(bytes), options, path, t0);
}

std::shared_ptr<const Model> Model::load_bytes(FileBytes bytes, const LoadOptions &options, const std::string &label) {
    const double t0 = now_ms();
    if (options.progress && !options.progress(0.0f)) throw Error(SPECULA_ERR_CANCELLED, "model load cancelled");
    return build(std::move(bytes), options, label, t0);
}

std::shared_ptr<const Model> Model::build(FileBytes bytes, const LoadOptions &options, const std::string &label, double t0) {
    auto report = [&](float p) {
        if (options.progress && !options.progress(p)) throw Error(SPECULA_ERR_CANCELLED, "model load cancelled");
    };
    std::shared_ptr<Model> model(new Model());
    model->file_ = GgufFile::parse(std::move(bytes));
    report(0.85f);
    const GgufFile &file = model->file_;
    model->vocab_only_ = options.vocab_only;
    if (options.vocab_only) {
        model->hparams_.arch_name = file.get_string("general.architecture").value_or("");
    } else {
        model->hparams_ = read_hparams(file);
        model->weights_ = bind_weights(file, model->hparams_);
    }
    report(0.9f);
    model->vocab_ = Vocab::load(file);
    if (options.vocab_only) model->hparams_.n_vocab = model->vocab_.n_tokens();
    require(model->vocab_.n_tokens() == model->hparams_.n_vocab, SPECULA_ERR_FORMAT,
            "model: the tokenizer has " + std::to_string(model->vocab_.n_tokens()) + " tokens but the embedding has " +
                std::to_string(model->hparams_.n_vocab) + " rows");
    model->name_ = file.get_string("general.name").value_or("");

    // Parameter count and the weight type: the file's declared quantization, else the type holding most bytes.
    std::map<uint32_t, uint64_t> bytes_by_type;
    for (const TensorInfo &t : file.tensors()) {
        model->n_params_ += uint64_t(t.n_elements());
        bytes_by_type[t.type] += t.n_bytes;
    }
    uint64_t most = 0;
    for (const auto &[type, n] : bytes_by_type)
        if (n > most) {
            most = n;
            model->weight_type_ = tensor_type_name(type);
        }
    if (const Value *ftype = file.find("general.file_type"); ftype != nullptr && ftype->is_integer())
        if (const char *name = file_type_name(*file.get_int("general.file_type"))) model->weight_type_ = name;
    report(1.0f);
    model->load_ms_ = now_ms() - t0;
    log(SPECULA_LOG_INFO, "loaded %s: %s, %d layers, n_embd %d, vocab %d, %s, %.1f ms", label.c_str(), model->hparams_.arch_name.c_str(),
        model->hparams_.n_layer, model->hparams_.n_embd, model->hparams_.n_vocab, model->weight_type_, model->load_ms_);
    return model;
}

}  // namespace specula::internal
