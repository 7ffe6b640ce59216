// What `specula serve` was started with: llama-server's basic flags plus Specula's speculation settings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace specula_serve {

struct ServeConfig {
    std::string model_path;
    std::string model_alias;       // the name /v1/models and responses report; default: the file's name
    std::string host = "127.0.0.1";  // loopback unless asked otherwise
    int port = 8080;               // 0: any free port (the listening line says which)
    int32_t n_ctx = 0;             // per slot; 0: min(trained, 4096)
    int32_t n_threads = 0;         // compute threads per slot; 0: cores / parallel (at least 1)
    int32_t n_parallel = 1;        // slots: sessions on the one shared model
    int32_t n_batch = 2048;        // llama-server's logical batch: the FIM prompt budgets are cut from it
    int32_t n_predict = -1;        // server-wide cap on generated tokens per request; -1: none
    int32_t max_queue = 16;        // requests that may wait for a slot; one more gets 503
    size_t max_body_bytes = 16u << 20;  // larger request bodies get 413
    int timeout_s = 600;           // socket read/write timeout
    int http_threads = 0;          // 0: parallel + max_queue + 4 (waiting requests hold a thread each)
    std::string api_key;           // non-empty: every endpoint but /health and /models needs it
    std::string backend = "auto";  // auto, cpu, cuda, vulkan (backend_option.h)
    std::string kv_type = "f16";   // f16, f32, q8_0
    // Speculation (lossless: only the speed changes).
    bool ngram = true;             // n-gram drafting (prompt lookup + token reuse); on by default
    int32_t ngram_nodes = -1;      // tree nodes for n-gram candidates; -1: measured at start (ngram_calibration.h)
    std::string draft;             // LongSpec draft file
    std::string draft_model;       // independent draft model of the same vocabulary
    std::vector<int32_t> tree;     // draft tree widths; empty: the library's default
    bool fixed_tree = false;       // draft the same tree (widths, or the default) every round instead of auto
    std::string chat_template;     // a built-in template name or Jinja text; empty: the model's own
};

}  // namespace specula_serve
