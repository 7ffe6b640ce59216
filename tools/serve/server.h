// `specula serve`: the HTTP endpoints of llama-server on one shared model and --parallel slots (docs/server.md).
//
// Requests run on cpp-httplib's worker threads: a generation request takes a slot (SlotPool) and generates on
// its own thread, so N slots serve N requests at once; the others wait in the bounded queue. Streams are sent as
// server-sent events from the same thread. A client that goes away stops its generation (ClientWatch, failed writes).
#pragma once

#include "json_fields.h"
#include "metrics.h"
#include "request_policy.h"
#include "serve_config.h"
#include "slot_pool.h"

#include <specula/specula.hpp>

#include <atomic>
#include <memory>
#include <string>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace specula_serve {

class HttpServer;

class Server {
public:
    // Creates the slots (and loads the drafters): throws specula::Error when that fails.
    Server(const ServeConfig &config, specula::Model model);
    ~Server();
    Server(const Server &) = delete;
    Server &operator=(const Server &) = delete;

    // Binds config.host:config.port (port 0: any free one) and returns the port; throws std::runtime_error when the
    // address cannot be bound.
    int bind();
    // Serves until stop(). Returns false if the listening loop failed.
    bool run();
    // Stops accepting, cancels running generations; thread-safe, returns at once.
    void stop();
    // The drafter the slots use ("ngram", "longspec+ngram", "" for none) and what the start-up measured for it.
    std::string drafter_name() const { return pool_->drafter_name(); }
    std::string spec_report() const { return pool_->spec_report(); }
    int32_t n_ctx() const { return pool_->n_ctx(); }
    // The chat template in use: --chat-template, else "" for the model's own, else "chatml" (the model has none).
    const std::string &chat_template() const { return chat_template_; }
    // Why --jinja fell back to ChatML's template ("" when it did not).
    const std::string &chat_note() const { return chat_note_; }
    // Why the slots do not run on the backend asked for ("" when they do).
    std::string backend_note() const { return pool_->backend_note(); }
    std::string batch_note() const { return pool_->batch_note(); }

private:
    enum class Api { Completion, Infill, OaiCompletion, OaiChat };

    void register_routes();
    // The checks of request_policy.h before a request's body is read; false when it answered the request itself.
    bool admit_request(const httplib::Request &req, httplib::Response &res);
    bool authorized(const httplib::Request &req) const;
    void handle_generation(const httplib::Request &req, httplib::Response &res, Api api);
    void handle_tokenize(const httplib::Request &req, httplib::Response &res);
    void handle_detokenize(const httplib::Request &req, httplib::Response &res);
    void handle_apply_template(const httplib::Request &req, httplib::Response &res);
    void handle_props(httplib::Response &res);
    void handle_models(httplib::Response &res);
    void handle_slots(httplib::Response &res);
    void handle_slot_action(const httplib::Request &req, httplib::Response &res, int id_slot);
    void handle_metrics(httplib::Response &res);
    // What a request that sets nothing gets (the server's sampling flags and -n), in generation_settings' shape.
    json default_generation_settings() const;

    ServeConfig config_;
    specula::Model model_;
    std::string alias_;
    std::string build_info_;
    std::string chat_template_;  // --chat-template, else the model's own, else chatml
    std::string chat_note_;
    std::unique_ptr<SlotPool> pool_;
    RequestPolicy policy_;
    AuthThrottle auth_throttle_;
    std::unique_ptr<HttpServer> http_;
    Metrics metrics_;
    std::atomic<bool> stopping_{false};
    int listen_fd_ = -1;  // the listening socket, to lengthen its accept queue
};

}  // namespace specula_serve
