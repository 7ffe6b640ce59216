#include "server.h"

#include "client_watch.h"
#include "completion.h"
#include "http_error.h"
#include "http_server.h"
#include "infill_prompt.h"
#include "request_body.h"
#include "responses.h"
#include "slot_files.h"
#include "web_page.h"

#include <httplib.h>

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <functional>
#include <unordered_set>

namespace specula_serve {

namespace {

constexpr const char *kJson = "application/json; charset=utf-8";

void send_json(httplib::Response &res, const json &body, int status = 200) {
    res.status = status;
    res.set_content(dump(body), kJson);
}

json parse_body(const httplib::Request &req) { return parse_json_body(req.body); }

bool write_event(httplib::DataSink &sink, const json &data) {
    const std::string event = "data: " + dump(data) + "\n\n";
    return sink.write(event.data(), event.size());
}

// The GGUF's tokenizer.chat_template ("" without one).
std::string model_chat_template(const specula::Model &model) {
    for (int32_t i = 0; i < model.meta_count(); ++i)
        if (model.meta_key(i) == "tokenizer.chat_template") return model.meta_value(i);
    return std::string();
}

ErrorType status_error_type(specula_status status) {
    switch (status) {
    case SPECULA_ERR_INVALID_ARGUMENT:
    case SPECULA_ERR_INVALID_TOKEN:
    case SPECULA_ERR_CONTEXT_FULL:
    case SPECULA_ERR_UNSUPPORTED: return ErrorType::InvalidRequest;
    default: return ErrorType::Server;
    }
}

}  // namespace

Server::Server(const ServeConfig &config, specula::Model model) : config_(config), model_(std::move(model)) {
    alias_ = config_.model_alias.empty() ? std::filesystem::path(config_.model_path).filename().string() : config_.model_alias;
    // llama-server's build_info ("b<build>-<commit>"): clients check the "b" of system_fingerprint.
    build_info_ = std::string("b") + specula_version_string() + "-specula";
    // Without a template of its own a model chats in ChatML, as llama-server's default template.
    chat_template_ = config_.chat_template;
    if (chat_template_.empty() && model_chat_template(model_).empty()) chat_template_ = "chatml";
    if (config_.jinja) {
        // As llama-server: a template whose Jinja does not parse is replaced by ChatML's, once, at start.
        try {
            model_.apply_chat_template({{"user", "test"}}, chat_template_, true, std::nullopt, true);
        } catch (const specula::Error &e) {
            if (e.status() != SPECULA_ERR_UNSUPPORTED) throw;
            chat_note_ = std::string("the chat template cannot be used as Jinja (") + e.what() + "): chats use chatml";
            chat_template_ = "chatml";
        }
    }
    pool_ = std::make_unique<SlotPool>(model_, config_);
    policy_.bound_host = config_.host;
    for (const std::string &h : config_.allowed_hosts) policy_.allowed_hosts.push_back(host_of(h) == "" ? h : host_of(h));
    policy_.cors_origins = config_.cors_origins;
    char name[256] = {0};
    if (gethostname(name, sizeof name - 1) == 0) policy_.machine_name = host_of(name);
    ConnectionLimits limits;
    limits.max_connections = config_.max_connections;
    limits.max_per_client = config_.max_connections_per_client;
    limits.request_timeout_s = config_.request_timeout_s;
    limits.keep_alive_s = config_.keep_alive_s;
    limits.io_timeout_s = config_.timeout_s;
    http_ = std::make_unique<HttpServer>(limits);
    register_routes();
}

Server::~Server() = default;

int Server::bind() {
    int port = config_.port;
    if (port == 0) {
        port = http_->bind_to_any_port(config_.host);
    } else if (!http_->bind_to_port(config_.host, port)) {
        port = -1;
    }
    if (port <= 0)
        throw std::runtime_error("cannot listen on " + config_.host + ":" + std::to_string(config_.port) +
                                 " (address in use, or not an address of this machine?)");
    if (listen_fd_ >= 0) ::listen(listen_fd_, SOMAXCONN);  // a longer accept queue (see register_routes)
    return port;
}

bool Server::run() { return http_->listen_after_bind(); }

void Server::stop() {
    stopping_ = true;
    pool_->cancel_all();
    http_->stop_serving();
}

bool Server::authorized(const httplib::Request &req) const {
    if (config_.api_key.empty()) return true;
    // llama-server: "Authorization: Bearer KEY", or the key alone, or X-Api-Key when Authorization is absent.
    std::string key = req.get_header_value("Authorization");
    if (key.empty()) key = req.get_header_value("X-Api-Key");
    const std::string bearer = "Bearer ";
    if (key.compare(0, bearer.size(), bearer) == 0) key = key.substr(bearer.size());
    return constant_time_equals(key, config_.api_key);
}

bool Server::admit_request(const httplib::Request &req, httplib::Response &res) {
    // Refused before the body is read: what follows on the connection is that body, so the connection closes.
    auto refuse = [&](ErrorType type, const std::string &message) {
        send_json(res, error_json(type, message), error_status(type));
        res.set_header("Connection", "close");
        metrics_.error(error_status(type));
        HttpServer::close_after_response();
        return false;
    };
    const std::string host = req.get_header_value("Host");
    if (!policy_.host_allowed(host))
        return refuse(ErrorType::Permission, "the Host header '" + host.substr(0, 256) +
                                                 "' names neither this server's address nor a loopback name (refused against DNS "
                                                 "rebinding; start with --allow-host NAME to serve it)");
    const std::string origin = req.get_header_value("Origin");
    if (!origin.empty()) {
        if (!policy_.origin_allowed(origin))
            return refuse(ErrorType::Permission, "requests from the browser origin '" + origin.substr(0, 256) +
                                                     "' are refused (start with --cors-origin ORIGIN to allow a page)");
        res.set_header("Access-Control-Allow-Origin", origin);
        res.set_header("Access-Control-Allow-Credentials", "true");
        res.set_header("Vary", "Origin");
    }
    if (req.method == "OPTIONS") {  // a preflight from an allowed origin (or none)
        res.set_header("Access-Control-Allow-Methods", "GET, POST");
        res.set_header("Access-Control-Allow-Headers", "*");
        res.status = 200;
        return false;
    }
    if (req.method == "POST") {
        // A POST with neither Content-Length nor Transfer-Encoding has no body (RFC 9112 6.3), but cpp-httplib 0.11
        // reads one until the client closes: `curl -X POST .../slots/0?action=erase` waited for the request timeout.
        // The request object is httplib's own non-const one, handed to this hook as const.
        if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding"))
            const_cast<httplib::Request &>(req).set_header("Content-Length", "0");
        const std::string length = req.get_header_value("Content-Length");
        const bool has_body = (!length.empty() && length != "0") || req.has_header("Transfer-Encoding");
        const std::string type = req.get_header_value("Content-Type");
        // No Content-Type at all is accepted from clients that are not browsers (no Origin): curl --data-binary,
        // scripts; a page can send a typeless Blob body without a preflight, so with an Origin it must say JSON.
        if (has_body && !is_json_content_type(type) && (!type.empty() || !origin.empty()))
            return refuse(ErrorType::MediaType, "POST bodies must be JSON: send 'Content-Type: application/json'" +
                                                    (type.empty() ? std::string() : " (got '" + type.substr(0, 128) + "')"));
    }
    static const std::unordered_set<std::string> public_paths = {"/health", "/v1/health", "/models", "/v1/models"};
    if (!config_.api_key.empty() && public_paths.count(req.path) == 0) {
        const int wait = auth_throttle_.retry_after(req.remote_addr);
        if (wait > 0) {
            res.set_header("Retry-After", std::to_string(wait));
            return refuse(ErrorType::RateLimited, "too many invalid API keys from " + req.remote_addr + ": try again in " +
                                                      std::to_string(wait) + " s");
        }
        if (!authorized(req)) {
            auth_throttle_.failed(req.remote_addr);
            return refuse(ErrorType::Authentication, "Invalid API Key");
        }
    }
    return true;
}

void Server::register_routes() {
    HttpServer &svr = *http_;  // connections, timeouts and their threads: http_server.h
    svr.set_payload_max_length(config_.max_body_bytes);
    svr.set_tcp_nodelay(true);
    // cpp-httplib 0.11 listens with a backlog of 5 (compiled into Debian's library): a burst of editors' requests
    // overflows it and some connections stall or reset. The listening socket is taken here (this replaces httplib's
    // default options, whose SO_REUSEADDR is kept) and listen() is called again with the system's maximum in bind().
    svr.set_socket_options([this](int sock) {
        const int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        if (listen_fd_ < 0) listen_fd_ = sock;
    });  // without it Nagle holds back the body behind the headers: +40 ms per response

    svr.set_pre_routing_handler([this](const httplib::Request &req, httplib::Response &res) {
        metrics_.request(req.path);
        return admit_request(req, res) ? httplib::Server::HandlerResponse::Unhandled : httplib::Server::HandlerResponse::Handled;
    });
    // httplib's own errors (unknown route, body over the limit, unparsable request) get llama-server's JSON shape.
    svr.set_error_handler([this](const httplib::Request &, httplib::Response &res) {
        const std::string timeout = HttpServer::take_timeout_answer();
        if (!timeout.empty()) {  // the request's headers or body did not arrive in time (--request-timeout)
            send_json(res, error_json(ErrorType::Timeout, timeout), 408);
            res.set_header("Connection", "close");
            metrics_.error(408);
            return;
        }
        if (!res.body.empty()) return;
        metrics_.error(res.status);
        if (res.status == 404) {
            send_json(res, error_json(ErrorType::NotFound, "File Not Found"), 404);
        } else if (res.status == 413) {
            send_json(res, error_json(ErrorType::InvalidRequest, "the request body is larger than " +
                                                                     std::to_string(config_.max_body_bytes) + " bytes (--max-body)"),
                      413);
        } else if (res.status >= 400) {
            const int status = res.status;
            send_json(res, error_json(status >= 500 ? ErrorType::Server : ErrorType::InvalidRequest,
                                      "the request could not be read (HTTP " + std::to_string(status) + ")"),
                      status);
        }
    });
    svr.set_exception_handler([this](const httplib::Request &, httplib::Response &res, std::exception_ptr ep) {
        std::string message = "unknown error";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception &e) {
            message = e.what();
        } catch (...) {
        }
        metrics_.error(500);
        send_json(res, error_json(ErrorType::Server, message), 500);
    });

    // Every handler answers errors as JSON, whatever they come from.
    auto guarded = [this](std::function<void(const httplib::Request &, httplib::Response &)> fn) {
        return [this, fn](const httplib::Request &req, httplib::Response &res) {
            try {
                fn(req, res);
                return;
            } catch (const HttpError &e) {
                send_json(res, error_json(e.type, e.what()), error_status(e.type));
                metrics_.error(error_status(e.type));
            } catch (const specula::Error &e) {
                const ErrorType t = status_error_type(e.status());
                send_json(res, error_json(t, e.what()), error_status(t));
                metrics_.error(error_status(t));
            } catch (const std::bad_alloc &) {
                send_json(res, error_json(ErrorType::Server, "out of memory"), 500);
                metrics_.error(500);
            } catch (const std::exception &e) {
                send_json(res, error_json(ErrorType::Server, e.what()), 500);
                metrics_.error(500);
            }
        };
    };

    auto health = guarded([](const httplib::Request &, httplib::Response &res) { send_json(res, {{"status", "ok"}}); });
    if (config_.webui) {
        // The chat page. Its Content-Security-Policy allows the page's own inline script and style and requests to
        // this server only: no external resource can be loaded into it.
        auto page = [](const httplib::Request &, httplib::Response &res) {
            res.set_header("Content-Security-Policy",
                           "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; "
                           "form-action 'none'; frame-ancestors 'none'");
            res.set_header("X-Content-Type-Options", "nosniff");
            const std::string_view html = web_page_html();
            res.set_content(html.data(), html.size(), "text/html; charset=utf-8");
        };
        svr.Get("/", page);
        svr.Get("/index.html", page);
    }
    svr.Get("/health", health);
    svr.Get("/v1/health", health);
    svr.Get("/props", guarded([this](const httplib::Request &, httplib::Response &res) { handle_props(res); }));
    svr.Post("/props", guarded([](const httplib::Request &, httplib::Response &) {
                 throw HttpError(ErrorType::NotSupported, "changing the server's properties is not supported");
             }));
    auto models = guarded([this](const httplib::Request &, httplib::Response &res) { handle_models(res); });
    svr.Get("/models", models);
    svr.Get("/v1/models", models);
    svr.Get("/slots", guarded([this](const httplib::Request &, httplib::Response &res) { handle_slots(res); }));
    svr.Post(R"(/slots/(-?\d{1,9}))", guarded([this](const httplib::Request &q, httplib::Response &r) {
                 handle_slot_action(q, r, std::stoi(q.matches[1].str()));
             }));
    svr.Get("/metrics", guarded([this](const httplib::Request &, httplib::Response &res) { handle_metrics(res); }));
    auto completion = guarded([this](const httplib::Request &q, httplib::Response &r) { handle_generation(q, r, Api::Completion); });
    svr.Post("/completion", completion);
    svr.Post("/completions", completion);
    svr.Post("/infill", guarded([this](const httplib::Request &q, httplib::Response &r) { handle_generation(q, r, Api::Infill); }));
    svr.Post("/v1/completions",
             guarded([this](const httplib::Request &q, httplib::Response &r) { handle_generation(q, r, Api::OaiCompletion); }));
    auto chat = guarded([this](const httplib::Request &q, httplib::Response &r) { handle_generation(q, r, Api::OaiChat); });
    svr.Post("/chat/completions", chat);
    svr.Post("/v1/chat/completions", chat);
    svr.Post("/tokenize", guarded([this](const httplib::Request &q, httplib::Response &r) { handle_tokenize(q, r); }));
    svr.Post("/detokenize", guarded([this](const httplib::Request &q, httplib::Response &r) { handle_detokenize(q, r); }));
    svr.Post("/apply-template", guarded([this](const httplib::Request &q, httplib::Response &r) { handle_apply_template(q, r); }));
}

void Server::handle_generation(const httplib::Request &req, httplib::Response &res, Api api) {
    if (stopping_) throw HttpError(ErrorType::Unavailable, "the server is shutting down");
    const json body = parse_body(req);
    CompletionParams params = parse_completion_params(body, config_.sampling, config_.n_predict);
    const int32_t n_ctx = pool_->n_ctx();

    std::vector<std::vector<int32_t>> prompts;
    switch (api) {
    case Api::Completion: prompts = completion_prompts(model_, body, false); break;
    case Api::Infill: {
        const std::string missing = infill_unsupported_reason(model_);
        // llama-server answers 501 here; a request the model cannot serve is the client's to fix, so Specula says 400.
        if (!missing.empty()) throw bad_request("Infill is not supported by this model: " + missing);
        const InfillInput in = parse_infill_input(body);
        // The prompt leaves room for the completion asked for (at most a quarter of the context): extra context
        // beyond that is dropped, oldest chunk first (tools/common/fim_prompt.h).
        const int32_t room = std::clamp<int32_t>(params.n_predict > 0 ? params.n_predict : 1, 1, std::max(1, n_ctx / 4));
        prompts.push_back(format_infill(model_, in, InfillBudget{config_.n_batch, config_.n_predict, n_ctx, room}, &params.prompt_trimmed));
        break;
    }
    case Api::OaiCompletion: prompts = completion_prompts(model_, body, true); break;
    case Api::OaiChat: prompts.push_back(chat_prompt(model_, body, chat_template_, config_.jinja)); break;
    }
    if (prompts.empty()) throw bad_request("the prompt is empty");
    for (const std::vector<int32_t> &prompt : prompts) {
        if (prompt.empty()) throw bad_request("the prompt is empty");
        // With context shift a long prompt is cut to fit (CompletionRunner), as llama-server cuts it.
        if (int64_t(prompt.size()) >= n_ctx && !config_.context_shift) throw exceeds_context(prompt.size(), n_ctx);
    }

    ResponseContext ctx;
    // As llama-server: OpenAI responses name the model the request named, else the server's --alias, else
    // gpt-3.5-turbo; /completion names the alias (the file's name without one).
    if (api == Api::OaiCompletion || api == Api::OaiChat)
        ctx.model = body.contains("model") && body.at("model").is_string() ? body.at("model").get<std::string>()
                    : config_.model_alias.empty()                             ? std::string("gpt-3.5-turbo")
                                                                              : config_.model_alias;
    else
        ctx.model = alias_;
    ctx.build_info = build_info_;
    ctx.n_ctx = n_ctx;
    ctx.created = (long long)std::time(nullptr);
    ctx.id = random_id(api == Api::OaiChat ? "chatcmpl-" : "cmpl-");
    ctx.model_vocab = &model_;
    ctx.post_sampling_probs = params.post_sampling_probs;
    auto context_for = [&](size_t i) {
        ResponseContext c = ctx;
        c.index = int(i);
        if (api == Api::Completion || api == Api::Infill || config_.verbose) c.prompt_text = model_.detokenize(prompts[i], true);
        return c;
    };

    auto watch = std::make_shared<ClientWatch>(HttpServer::current_socket());
    auto gone = [watch, this] { return stopping_.load() || watch->gone(); };
    const CompletionRunner runner(model_, config_.context_shift);

    if (!params.stream) {
        // Several prompts are answered one after the other on the slot, in order, as one array.
        SlotPool::Lease slot = pool_->acquire(prompts[0], params.id_slot, gone);
        json answers = json::array();
        for (size_t i = 0; i < prompts.size(); ++i) {
            const CompletionResult r = runner.run(*slot, prompts[i], params, PieceSink(), gone);
            metrics_.completion(r);
            if (r.cancelled) {
                // Nobody is listening (or the server is stopping); answer something well-formed all the same.
                send_json(res, error_json(ErrorType::Unavailable, "the generation was cancelled"), 503);
                return;
            }
            const ResponseContext c = context_for(i);
            switch (api) {
            case Api::Completion:
            case Api::Infill: answers.push_back(completion_final(r, params, c)); break;
            case Api::OaiCompletion: answers.push_back(oai_completion_final(r, c)); break;
            case Api::OaiChat: answers.push_back(oai_chat_final(r, c)); break;
            }
            // llama-server's verbose extra: the result in /completion's shape (the prompt the model saw).
            if (config_.verbose && (api == Api::OaiCompletion || api == Api::OaiChat)) answers.back()["__verbose"] = completion_final(r, params, c);
        }
        send_json(res, answers.size() == 1 ? answers[0] : answers);
        return;
    }

    // Streams: the slot is taken before the response starts, so that a full queue is still a plain 503.
    const bool include_usage = body.contains("stream_options") && body.at("stream_options").is_object() &&
                               body.at("stream_options").value("include_usage", false);
    std::vector<ResponseContext> contexts;
    for (size_t i = 0; i < prompts.size(); ++i) contexts.push_back(context_for(i));
    auto slot = std::make_shared<SlotPool::Lease>(pool_->acquire(prompts[0], params.id_slot, gone));
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, slot, prompts, params, contexts, api, gone, runner, include_usage](size_t, httplib::DataSink &sink) {
            const bool oai = api == Api::OaiCompletion || api == Api::OaiChat;
            bool ok = true;
            for (size_t i = 0; i < prompts.size() && ok; ++i) {
                const ResponseContext &ctx = contexts[i];
                const std::vector<int32_t> &prompt = prompts[i];
                int32_t n_decoded = 0;
                // The role rides on the first chunk (OpenAI's first delta), or comes alone before the last.
                bool role_sent = false;
                const PieceSink piece = [&](const Piece &p) {
                    if (p.token >= 0) ++n_decoded;
                    json chunk;
                    switch (api) {
                    case Api::Completion:
                    case Api::Infill:
                        chunk = completion_partial(p.text, p.token, p.probs, n_decoded, int32_t(prompt.size()), (*slot)->id, ctx);
                        break;
                    case Api::OaiCompletion:
                        if (!p.text.empty() || p.probs) chunk = oai_completion_chunk(p.text, p.probs, ctx);
                        break;
                    case Api::OaiChat:
                        if (!p.text.empty() || p.probs) {
                            chunk = oai_chat_chunk(p.text, p.probs, ctx);
                            if (!role_sent) chunk["choices"][0]["delta"]["role"] = "assistant";
                            role_sent = true;
                        }
                        break;
                    }
                    if (chunk.is_null()) return ok;
                    if (p.timings) chunk["timings"] = p.timings->to_json();  // timings_per_token
                    ok = write_event(sink, chunk);
                    return ok;
                };
                CompletionResult r;
                try {
                    r = runner.run(**slot, prompt, params, ok ? piece : PieceSink(), gone);
                } catch (const HttpError &e) {
                    write_event(sink, error_json(e.type, e.what()));
                    sink.done();
                    return true;
                } catch (const std::exception &e) {
                    write_event(sink, error_json(ErrorType::Server, e.what()));
                    sink.done();
                    return true;
                }
                metrics_.completion(r);
                if (r.cancelled || !ok) {
                    sink.done();
                    return true;
                }
                switch (api) {
                case Api::Completion:
                case Api::Infill: ok = write_event(sink, completion_final(r, params, ctx)); break;
                case Api::OaiCompletion: ok = write_event(sink, oai_completion_last_chunk(r, ctx)); break;
                case Api::OaiChat:
                    if (!role_sent) {
                        json role = oai_chat_role_chunk(ctx);
                        if (params.timings_per_token) role["timings"] = r.timings.to_json();
                        ok = write_event(sink, role);
                    }
                    ok = ok && write_event(sink, oai_chat_last_chunk(r, ctx));
                    if (include_usage) ok = ok && write_event(sink, oai_usage_chunk(r, ctx, true));
                    break;
                }
            }
            if (oai && ok) {
                static const std::string done = "data: [DONE]\n\n";
                sink.write(done.data(), done.size());
            }
            sink.done();
            return true;
        },
        [slot](bool) mutable { slot.reset(); });  // the slot goes back as soon as the stream ends, whatever ended it
}

void Server::handle_tokenize(const httplib::Request &req, httplib::Response &res) {
    send_json(res, tokenize_response(model_, parse_body(req)));
}

void Server::handle_detokenize(const httplib::Request &req, httplib::Response &res) {
    send_json(res, detokenize_response(model_, parse_body(req)));
}

void Server::handle_apply_template(const httplib::Request &req, httplib::Response &res) {
    const json body = parse_body(req);
    send_json(res, {{"prompt", chat_text(model_, body, chat_template_, config_.jinja)}});
}

void Server::handle_props(httplib::Response &res) {
    const int32_t bos = model_.token_bos(), eos = model_.token_eos();
    send_json(res, {{"default_generation_settings", {{"params", default_generation_settings()}, {"n_ctx", pool_->n_ctx()}}},
                    {"total_slots", pool_->size()},
                    {"model_alias", alias_},
                    {"model_path", config_.model_path},
                    {"modalities", {{"vision", false}, {"audio", false}}},
                    {"endpoint_slots", config_.endpoint_slots},
                    {"endpoint_props", false},
                    {"endpoint_metrics", config_.endpoint_metrics},
                    {"chat_template", model_chat_template(model_)},
                    {"bos_token", bos >= 0 ? model_.token_to_piece(bos, true) : std::string()},
                    {"eos_token", eos >= 0 ? model_.token_to_piece(eos, true) : std::string()},
                    {"build_info", build_info_},
                    {"speculative", {{"drafter", pool_->drafter_name()}, {"lossless", true}, {"calibration", pool_->spec_report()}}},
                    {"infill", infill_unsupported_reason(model_).empty()}});
}

json Server::default_generation_settings() const {
    return generation_settings(parse_completion_params(json::object(), config_.sampling, config_.n_predict), pool_->n_ctx());
}

void Server::handle_models(httplib::Response &res) {
    const json meta = {{"vocab_type", std::string(specula_model_tokenizer(model_.get())) == "llama" ? 1 : 2},
                       {"n_vocab", model_.n_vocab()},
                       {"n_ctx_train", model_.n_ctx_train()},
                       {"n_embd", model_.n_embd()},
                       {"n_params", model_.n_params()},
                       {"size", model_.file_size()}};
    send_json(res, {{"object", "list"},
                    {"data", json::array({{{"id", alias_}, {"object", "model"}, {"created", (long long)std::time(nullptr)},
                                           {"owned_by", "specula"}, {"meta", meta}}})}});
}

void Server::handle_slots(httplib::Response &res) {
    if (!config_.endpoint_slots)
        throw HttpError(ErrorType::NotSupported, "This server does not support slots endpoint. Start it with `--slots`");
    json slots = json::array();
    // "params": the settings a request gets by default (llama-server shows the slot's last request's).
    const json params = default_generation_settings();
    for (const SlotPool::SlotInfo &s : pool_->info())
        slots.push_back({{"id", s.id}, {"n_ctx", s.n_ctx}, {"is_processing", s.busy}, {"tokens_cached", s.n_cached}, {"params", params}});
    send_json(res, slots);
}

void Server::handle_slot_action(const httplib::Request &req, httplib::Response &res, int id_slot) {
    const std::string action = req.get_param_value("action");
    if (action != "save" && action != "restore" && action != "erase") throw bad_request("Invalid action");
    if (id_slot < 0 || id_slot >= pool_->size()) throw bad_request("Invalid slot ID");
    if (action != "erase" && config_.slot_save_path.empty())
        throw HttpError(ErrorType::NotSupported, "This server does not support slots action. Start it with `--slot-save-path`");
    std::filesystem::path path;
    if (action != "erase") {
        const json body = parse_body(req);
        if (!body.contains("filename") || !body.at("filename").is_string()) throw bad_request("\"filename\" must be a string");
        path = slot_file_path(config_.slot_save_path, body.at("filename").get<std::string>(), action == "restore");
    }
    auto watch = std::make_shared<ClientWatch>(HttpServer::current_socket());
    SlotPool::Lease slot = pool_->acquire({}, id_slot, [watch, this] { return stopping_.load() || watch->gone(); });
    const auto t0 = std::chrono::steady_clock::now();
    auto ms = [&] { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(); };
    if (action == "erase") {
        const int32_t n = slot->session.stats().n_ctx_evaluated;  // as n_saved: the tokens of the cache
        slot->session.rewind(0);
        send_json(res, {{"id_slot", id_slot}, {"n_erased", n}});
    } else if (action == "save") {
        slot->session.save_file(path.string());
        std::error_code ec;
        const auto bytes = std::filesystem::file_size(path, ec);
        send_json(res, {{"id_slot", id_slot},
                        {"filename", path.filename().string()},
                        {"n_saved", slot->session.stats().n_ctx_evaluated},  // llama-server: the tokens of its KV cache
                        {"n_written", ec ? 0 : (long long)bytes},
                        {"timings", {{"save_ms", ms()}}}});
    } else {
        slot->session.load_file(path.string());
        std::error_code ec;
        const auto bytes = std::filesystem::file_size(path, ec);
        send_json(res, {{"id_slot", id_slot},
                        {"filename", path.filename().string()},
                        {"n_restored", slot->session.stats().n_ctx_evaluated},
                        {"n_read", ec ? 0 : (long long)bytes},
                        {"timings", {{"restore_ms", ms()}}}});
    }
}

void Server::handle_metrics(httplib::Response &res) {
    if (!config_.endpoint_metrics)
        throw HttpError(ErrorType::NotSupported, "This server does not support metrics endpoint. Start it with `--metrics`");
    long long kv = 0, capacity = 0;
    for (const SlotPool::SlotInfo &s : pool_->info()) kv += (long long)s.n_cached, capacity += s.n_ctx;
    res.set_content(metrics_.prometheus(pool_->busy(), pool_->waiting(), kv, capacity, pool_->batch_stats()), "text/plain; version=0.0.4");
}

}  // namespace specula_serve
