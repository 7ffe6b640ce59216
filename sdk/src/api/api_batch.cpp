// The C API of batch groups (specula.h, "A batch group"): continuous batching of sessions' forward passes.
#include "api/handles.h"

#include "backend/session_batch.h"
#include "core/thread_pool.h"

#include <algorithm>

using namespace specula::internal;

struct specula_batch {
    std::shared_ptr<BatchGroup> group;
};

extern "C" {

void specula_batch_options_init_sized(specula_batch_options *opts, size_t struct_size) {
    init_options_sized(opts, struct_size, [](specula_batch_options *) {});  // every default is zero
}

// The function that applications built against the headers up to 0.16 call: their struct ends at n_threads.
void (specula_batch_options_init)(specula_batch_options *opts) { specula_batch_options_init_sized(opts, SPECULA_OPTIONS_END(specula_batch_options, n_threads)); }

specula_status specula_batch_create(specula_model *model, const specula_batch_options *opts, specula_batch **out, specula_error **err) {
    if (out != nullptr) *out = nullptr;
    return guarded(err, [&] {
        require_arg(model != nullptr && model->model != nullptr, "model is NULL");
        require_arg(out != nullptr, "out is NULL");
        specula_batch_options defaults;
        specula_batch_options_init(&defaults);
        const specula_batch_options o = read_options(opts, defaults, "opts");
        require_arg(o.n_threads >= 0 && o.n_threads <= 512, "opts->n_threads must be in [0, 512]");
        auto handle = std::make_unique<specula_batch>();
        handle->group = std::make_shared<BatchGroup>();
        handle->group->model = model->model;
        handle->group->n_threads = o.n_threads > 0 ? o.n_threads : default_thread_count();
        *out = handle.release();
    });
}

void specula_batch_free(specula_batch *batch) { delete batch; }

specula_status specula_session_join_batch(specula_session *session, specula_batch *batch, specula_error **err) {
    return guarded(err, [&] {
        Session &s = session_of(session);
        if (batch == nullptr) {
            s.leave_batch();
            return;
        }
        require_arg(batch->group != nullptr, "batch is not a batch group");
        s.join_batch(*batch->group);
    });
}

specula_status specula_batch_get_stats(const specula_batch *batch, specula_batch_stats *stats, specula_error **err) {
    return guarded(err, [&] {
        require_arg(batch != nullptr && batch->group != nullptr, "batch is NULL");
        require_arg(stats != nullptr && stats->struct_size >= sizeof(uint32_t), "stats is NULL or its struct_size is unset");
        specula_batch_stats full{};
        full.struct_size = stats->struct_size;
        std::shared_ptr<SessionBatch> b;
        {
            std::lock_guard<std::mutex> lock(batch->group->mutex);
            b = batch->group->batch;
        }
        if (b) {
            const SessionBatch::Stats s = b->stats();
            full.passes = s.passes;
            full.requests = s.requests;
            full.rows = s.rows;
            full.widest = s.widest;
        }
        std::memcpy(stats, &full, std::min<size_t>(stats->struct_size, sizeof full));
    });
}

}  // extern "C"
