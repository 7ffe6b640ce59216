// specula_synthetic_*: random-weight models of real model shapes, for speed measurements.
#include "handles.h"

#include <specula/specula_experimental.h>

#include "model/synthetic_model.h"

using namespace specula::internal;

extern "C" {

const char *specula_synthetic_shape(int32_t index) {
    const auto &shapes = synthetic_shapes();
    return index >= 0 && size_t(index) < shapes.size() ? shapes[size_t(index)].name.c_str() : nullptr;
}

void specula_synthetic_options_init_sized(specula_synthetic_options *opts, size_t struct_size) {
    init_options_sized(opts, struct_size, [](specula_synthetic_options *opts) {
        const SyntheticOptions d;
        opts->weight_type = nullptr;  // = synthetic_type_name(d.type), Q8_0
        opts->seed = d.seed;
        opts->n_layer = d.n_layer;
        opts->progress = nullptr;
        opts->progress_user_data = nullptr;
    });
}

// The function that applications built against the headers up to 0.16 call: their struct ends at progress_user_data.
void (specula_synthetic_options_init)(specula_synthetic_options *opts) { specula_synthetic_options_init_sized(opts, SPECULA_OPTIONS_END(specula_synthetic_options, progress_user_data)); }

specula_status specula_synthetic_model_write(const char *shape, const char *vocab_path, const char *path,
                                             const specula_synthetic_options *opts, specula_error **err) {
    return guarded(err, [&] {
        require_arg(shape != nullptr, "shape is NULL");
        require_arg(vocab_path != nullptr, "vocab_path is NULL");
        require_arg(path != nullptr, "path is NULL");
        specula_synthetic_options defaults;
        specula_synthetic_options_init(&defaults);
        const specula_synthetic_options o = read_options(opts, defaults, "opts");

        const SyntheticShape *s = find_synthetic_shape(shape);
        if (s == nullptr) {
            std::string known;
            for (const SyntheticShape &k : synthetic_shapes()) known += (known.empty() ? "" : ", ") + k.name;
            throw Error(SPECULA_ERR_INVALID_ARGUMENT, std::string("invalid argument: unknown shape '") + shape + "' (built in: " + known + ")");
        }
        SyntheticOptions options;
        if (o.weight_type != nullptr) {
            const auto type = parse_synthetic_type(o.weight_type);
            if (!type)
                throw Error(SPECULA_ERR_INVALID_ARGUMENT, std::string("invalid argument: unknown weight type '") + o.weight_type +
                                                              "' (f32, f16, q8_0, q4_0, q4_k_m)");
            options.type = *type;
        }
        require_arg(o.n_layer >= 0 && o.n_layer <= 4096, "opts->n_layer must be in [0, 4096]");
        options.seed = o.seed;
        options.n_layer = o.n_layer;
        if (o.progress != nullptr) {
            const specula_progress_fn fn = o.progress;
            void *user = o.progress_user_data;
            options.progress = [fn, user](float p) { return fn(p, user) != 0; };
        }
        write_synthetic_model(*s, vocab_path, path, options);
    });
}

}  // extern "C"
