// What `specula serve` was started with: llama-server's basic flags plus Specula's speculation settings.
#pragma once

#include <specula/specula.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace specula_serve {

// The sampling a request gets for the fields it leaves out: llama-server's --temp, --top-k, ... and --seed. Unless
// given, the library's defaults, which are llama-server's (common_params_sampling).
// The library's sampler defaults, drawing as llama.cpp (SPECULA_DRAW_LLAMA_CPP): a seeded request gets llama-server's
// text (`--draw race`: the coupled race, more accepted sampled drafts).
inline specula::SamplerOptions llama_server_sampler() {
    specula::SamplerOptions s;
    s.draw = SPECULA_DRAW_LLAMA_CPP;
    return s;
}

struct SamplingDefaults {
    specula::SamplerOptions sampler = llama_server_sampler();  // its seed is unused: requests are seeded from `seed`
    int64_t seed = -1;                                         // -1: a fresh random seed per request
};

struct ServeConfig {
    std::string model_path;
    std::string model_alias;       // the name /v1/models and responses report; default: the file's name
    std::string host = "127.0.0.1";  // loopback unless asked otherwise
    int port = 8080;               // 0: any free port (the listening line says which)
    int32_t n_ctx = 0;             // per slot; 0: min(trained, 4096) (`specula serve -c N` sets N / slots here, -c 0 trained / slots)
    int32_t n_threads = 0;         // compute threads per slot; 0: cores / parallel (at least 1)
    int32_t n_parallel = 1;        // slots: sessions on the one shared model
    int32_t n_batch = 2048;        // llama-server's logical batch: the FIM prompt budgets are cut from it
    int32_t n_predict = -1;        // server-wide cap on generated tokens per request; -1: none
    int32_t max_queue = 16;        // requests that may wait for a slot; one more gets 503
    size_t max_body_bytes = 16u << 20;  // larger request bodies get 413
    int timeout_s = 600;           // socket read/write timeout
    int http_threads = 0;          // llama-server's --threads-http: accepted, unused (each connection has its thread)
    std::string api_key;           // non-empty: every endpoint but /health and /models needs it
    // Connections and who may connect (http_server.h, request_policy.h, docs/server.md "Who may connect").
    int request_timeout_s = 30;    // a whole request must arrive within this (408 past it)
    int keep_alive_s = 5;          // idle seconds between two requests on one connection
    int max_connections = 1024;    // open connections in total (503 past it)
    int max_connections_per_client = 512;  // open connections from one address (503 past it)
    std::vector<std::string> cors_origins;   // --cors-origin: browser origins served besides loopback ones ("*": all)
    std::vector<std::string> allowed_hosts;  // --allow-host: Host names served besides loopback and the bound address
    std::string slot_save_path;    // --slot-save-path: the folder of /slots/{id}?action=save|restore files ("": none)
    std::string backend = "auto";  // auto, cpu, cuda, vulkan (backend_option.h)
    std::string kv_type = "f16";   // f16, f32, q8_0
    // Speculation (lossless: only the speed changes).
    bool ngram = true;             // n-gram drafting (prompt lookup + token reuse); on by default
    int32_t ngram_nodes = -1;      // tree nodes for n-gram candidates; -1: measured at start (ngram_calibration.h)
    std::string draft;             // LongSpec draft file
    std::string draft_model;       // independent draft model of the same vocabulary
    std::vector<int32_t> tree;     // draft tree widths; empty: the library's default
    bool fixed_tree = false;       // draft the same tree (widths, or the default) every round instead of auto
    std::string chat_template;     // a built-in template name or Jinja text; empty: the model's own (chatml without one)
    bool jinja = false;            // --jinja: render the template's own Jinja (llama-server's --jinja), not its built-in family
    bool webui = true;             // GET / serves the chat page (webui/index.html); --no-webui: 404, as llama-server
    SamplingDefaults sampling;     // what requests that do not say get
    bool endpoint_slots = false;   // GET /slots (llama-server's --slots; off by default there too)
    bool endpoint_metrics = false; // GET /metrics (--metrics)
    bool verbose = false;          // -v: OpenAI responses carry llama-server's "__verbose" (the /completion-shaped result)
    bool context_shift = true;     // a full context drops its older half and goes on (--no-context-shift: stop)
    bool cont_batching = true;     // the slots' forward passes run together (specula_batch; --no-cont-batching: apart)
};

}  // namespace specula_serve
