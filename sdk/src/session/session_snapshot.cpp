// Session snapshots: what a session's state is, section by section, and how it is put back.
//
// Sections (snapshot/snapshot_file.h has the container): SESS (context, evaluation point, last logits; for a Full
// snapshot also the stream's held-back text, the run counters and the stats), SAMP (Full: sampler settings and the
// generator's position), SPEC (Full: drafter set, speculative stats, a round's accepted tokens not emitted yet with
// the logits rows that follow them, and the drafters' state), then the KV chunks of the target's filled slots and
// of a draft model's own cache.
//
// Loading runs in two passes over bytes already in memory. The first decodes and checks everything (fingerprints,
// sizes, every section, every KV chunk, the drafters' state) into locals and touches nothing; only then does the
// second write the KV rows and swap the locals in. Small KV sets are kept decoded from the first pass; large ones
// are decoded again in the second (bounded memory, twice the decompression).
#include "session/session.h"

#include "core/thread_pool.h"
#include "core/error.h"
#include "core/timer.h"
#include "core/byte_stream.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace specula::internal {
namespace {

constexpr size_t kStageBudget = size_t(256) << 20;  // KV rows kept decoded between the two load passes
constexpr size_t kMaxHeldText = size_t(1) << 20;    // bound for the stream's held-back text
constexpr int32_t kMaxReady = 64;                   // a round's tokens (depth <= 32, plus the bonus)

void put_sampler(ByteWriter &w, const SamplerConfig &c) {
    w.put<float>(c.temperature);
    w.put<int32_t>(c.top_k);
    w.put<float>(c.top_p);
    w.put<float>(c.min_p);
    w.put<float>(c.repeat_penalty);
    w.put<float>(c.presence_penalty);
    w.put<float>(c.frequency_penalty);
    w.put<int32_t>(c.penalty_last_n);
    w.put<float>(c.context_penalty);
    w.put<int32_t>(c.context_penalty_window);
    w.put<uint64_t>(c.seed);
}

SamplerConfig get_sampler(ByteReader &r) {
    SamplerConfig c;
    c.temperature = r.get<float>();
    c.top_k = r.get<int32_t>();
    c.top_p = r.get<float>();
    c.min_p = r.get<float>();
    c.repeat_penalty = r.get<float>();
    c.presence_penalty = r.get<float>();
    c.frequency_penalty = r.get<float>();
    c.penalty_last_n = r.get<int32_t>();
    c.context_penalty = r.get<float>();
    c.context_penalty_window = r.get<int32_t>();
    c.seed = r.get<uint64_t>();
    // A sampler a session could never have had is damage: the C ABI's ranges, and finite numbers.
    const std::string problem = sampler_config_problem(c);
    r.check(problem.empty(), "the sampler settings are out of range (" + problem + ")");
    r.check(std::isfinite(c.temperature) && std::isfinite(c.top_p) && std::isfinite(c.min_p) && std::isfinite(c.repeat_penalty) &&
                std::isfinite(c.presence_penalty) && std::isfinite(c.frequency_penalty),
            "the sampler settings are not finite numbers");
    return c;
}

void put_ngram(ByteWriter &w, const NgramConfig &c) {
    for (int32_t v : {c.lookup_min, c.lookup_max, c.max_chain, c.table_n, c.table_topk, c.lag}) w.put<int32_t>(v);
}

NgramConfig get_ngram(ByteReader &r) {
    NgramConfig c;
    for (int32_t *v : {&c.lookup_min, &c.lookup_max, &c.max_chain, &c.table_n, &c.table_topk, &c.lag}) *v = r.get<int32_t>();
    return c;
}

// A runner's cache as the snapshot writer and reader see it.
KvRows kv_rows_of(TargetRunner &runner) {
    KvRows rows;
    rows.type = runner.kv_type();
    rows.row_width = runner.kv_row_width();
    rows.read = [&runner](const KvChunkId &c, void *dst) { runner.read_kv(int32_t(c.layer), KvPart(c.kind), c.first, c.count, dst); };
    rows.write = [&runner](const KvChunkId &c, const void *src) { runner.write_kv(int32_t(c.layer), KvPart(c.kind), c.first, c.count, src); };
    return rows;
}

// Slots per KV chunk for a runner's rows.
int32_t chunk_slots_of(const TargetRunner &runner) { return kv_chunk_slots_for(kv_row_bytes(runner.kv_type(), runner.kv_row_width())); }

// The chunks of a draft model's own cache (cache 1) holding `slots` slots; its layers are the draft model's.
std::vector<KvChunkId> own_cache_plan(const SpeculativeConfig &spec, const TargetRunner &own, int32_t slots) {
    return kv_chunk_plan(1, spec.draft_model ? spec.draft_model->hparams().n_layer : 0, slots, chunk_slots_of(own));
}

// The attached draft's file fingerprint (LongSpec draft or draft model), empty without one.
Fingerprint draft_fingerprint(const SpeculativeConfig &spec, ThreadPool &pool) {
    if (spec.longspec) return spec.longspec->fingerprint(&pool);
    if (spec.draft_model) return spec.draft_model->fingerprint(&pool);
    return {};
}

}  // namespace

uint64_t Session::PreparedSnapshot::bound() const {
    // Every section is stored at most as its raw bytes (the writer keeps whichever is smaller).
    uint64_t n = kSnapshotHeaderBytes + 2 * kSectionHeaderBytes + tokens.size() + session.size();  // TOKS, SESS
    if (header.scope == SnapshotScope::Full) n += 2 * kSectionHeaderBytes + sampler.size() + speculative.size();
    auto kv = [&](const std::vector<KvChunkId> &chunks, size_t row_bytes) {
        uint64_t bytes = 0;
        for (const KvChunkId &c : chunks) bytes += kSectionHeaderBytes + kKvChunkHeaderBytes + uint64_t(c.count) * row_bytes;
        return bytes;
    };
    n += kv(plan, kv_row_bytes(header.kv_type, header.n_embd_kv));
    if (own != nullptr) n += kv(own_plan, kv_row_bytes(own->kv_type(), own->kv_row_width()));
    return n + kSectionHeaderBytes;  // END
}

Session::PreparedSnapshot Session::prepare_snapshot(const SnapshotOptions &options) {
    const HParams &hp = model_->hparams();
    ThreadPool &pool = *pool_;
    const bool full = options.scope == SnapshotScope::Full;
    const int32_t n_vocab = hp.n_vocab;
    PreparedSnapshot parts;
    parts.options = options;

    // The target's filled slots: the evaluated tokens and, in a Full snapshot, the accepted tokens of the last
    // round not emitted yet (their keys/values were committed by the round).
    std::vector<SpeculativeRound::Ready> pending;
    if (full) pending = spec_.pending();
    int32_t n_kv = n_evaluated_;
    for (const SpeculativeRound::Ready &r : pending) n_kv += r.accepted ? 1 : 0;
    const bool drafter_state = full && spec_.attached();

    SnapshotHeader &h = parts.header;
    h.model = model_->fingerprint(&pool);
    if (drafter_state) h.draft = draft_fingerprint(spec_.config(), pool);
    h.kv_type = runner_->kv_type();
    h.scope = options.scope;
    h.n_ctx = n_ctx();
    h.n_tokens = int32_t(tokens_.size());
    h.n_kv = n_kv;
    h.n_layer = hp.n_layer;
    h.n_embd_kv = runner_->kv_row_width();
    h.n_vocab = n_vocab;
    h.chunk_slots = chunk_slots_of(*runner_);
    h.flags = drafter_state ? SnapshotHeader::kFlagDrafterState : 0;
    h.backend = runner_->backend();
    parts.plan = kv_chunk_plan(0, h.n_layer, h.n_kv, h.chunk_slots);

    {
        ByteWriter w;
        w.put_array<int32_t>(tokens_);
        parts.tokens = w.take();
    }
    {
        ByteWriter w;
        w.put<int32_t>(n_evaluated_);
        w.put<uint8_t>(logits_valid_ ? 1 : 0);
        if (logits_valid_) w.put_raw(current_logits(), logits_.size() * sizeof(float));
        w.put<uint8_t>(last_token_generated_ ? 1 : 0);
        if (full) {
            w.put<int32_t>(n_run_generated_);
            w.put<uint8_t>(run_first_token_ ? 1 : 0);
            w.put_string(decoder_.pending());
            w.put_string(stops_.pending());
            w.put<int32_t>(n_prompt_tokens_);
            w.put<int32_t>(n_generated_);
            w.put<int32_t>(n_restored_tokens_);
            w.put<double>(prompt_ms_);
            w.put<double>(decode_ms_);
            w.put<double>(ttft_ms_);
        }
        parts.session = w.take();
    }
    if (!full) return parts;

    ByteWriter w;
    put_sampler(w, sampler_.config());
    w.put_string(sampler_.rng_state());
    parts.sampler = w.take();

    TargetRunner *own = drafter_state ? spec_.drafter()->own_cache() : nullptr;
    const int32_t own_slots = own ? spec_.drafter()->own_cache_slots() : 0;
    if (own != nullptr && own_slots > 0) {
        parts.own = own;
        parts.own_plan = own_cache_plan(spec_.config(), *own, own_slots);
    }
    ByteWriter sp;
    sp.put_string(drafter_state ? spec_.drafter()->name() : "");
    sp.put<uint8_t>(drafter_state && spec_.config().ngram ? 1 : 0);
    if (drafter_state && spec_.config().ngram) put_ngram(sp, spec_.config().ngram_config);
    const SpeculativeStats &st = spec_.stats();
    for (int32_t v : {st.rounds, st.drafted, st.accepted, st.produced}) sp.put<int32_t>(v);
    sp.put<double>(st.draft_ms);
    sp.put<double>(st.verify_ms);
    sp.put_array<int32_t>(st.accepted_at_depth);
    sp.put<uint64_t>(pending.size());
    for (size_t i = 0; i < pending.size(); ++i) {
        sp.put<int32_t>(pending[i].token);
        sp.put<uint8_t>(pending[i].accepted ? 1 : 0);
        sp.put_raw(spec_.row(spec_.next_index() + i), size_t(n_vocab) * sizeof(float));
    }
    sp.put_array<uint8_t>(drafter_state ? spec_.drafter()->save_state() : std::vector<uint8_t>{});
    sp.put<int32_t>(own_slots);
    parts.speculative = sp.take();
    return parts;
}

SnapshotReport Session::write_snapshot(const PreparedSnapshot &prepared, const std::function<void(const void *, size_t)> &sink) {
    const SnapshotHeader &h = prepared.header;
    SnapshotWriter out(sink, prepared.options.level, *pool_);
    out.write_header(h);
    out.write_section(kTagTokens, prepared.tokens);
    out.write_section(kTagSession, prepared.session);
    if (h.scope == SnapshotScope::Full) {
        out.write_section(kTagSampler, prepared.sampler);
        out.write_section(kTagSpeculative, prepared.speculative);
    }
    out.write_kv(prepared.plan, kv_rows_of(*runner_));
    if (prepared.own != nullptr) out.write_kv(prepared.own_plan, kv_rows_of(*prepared.own));
    out.write_end();
    return {out.bytes_written(), out.kv_raw_bytes()};
}

SnapshotReport Session::save_snapshot(const SnapshotOptions &options, const std::function<void(const void *, size_t)> &sink) {
    return write_snapshot(prepare_snapshot(options), sink);
}

int32_t Session::load_snapshot(std::span<const uint8_t> bytes, int32_t keep_tokens) {
    const HParams &hp = model_->hparams();
    ThreadPool &pool = *pool_;
    const int32_t n_vocab = hp.n_vocab;

    // ---- pass 1: decode and check everything; nothing of the session changes ----
    const ParsedSnapshot parsed = parse_snapshot(bytes);
    const SnapshotHeader &h = parsed.header;
    const bool full = h.scope == SnapshotScope::Full;
    const Fingerprint &mine = model_->fingerprint(&pool);
    require(h.model == mine, SPECULA_ERR_INCOMPATIBLE,
            "snapshot: saved with another model (file fingerprint " + h.model.hex() + "; this session's model is " + mine.hex() + ")");
    require(h.n_layer == hp.n_layer && h.n_vocab == n_vocab && h.n_embd_kv == runner_->kv_row_width(), SPECULA_ERR_FORMAT,
            "snapshot: the header's sizes do not match the model it names (damaged)");
    require(h.kv_type == runner_->kv_type(), SPECULA_ERR_INCOMPATIBLE,
            std::string("snapshot: saved from a ") + kv_type_name(h.kv_type) + " KV cache (backend " + h.backend + "); this session keeps its cache in " +
                kv_type_name(runner_->kv_type()) + " (backend " + runner_->backend() + ")");
    const bool partial = keep_tokens >= 0 && keep_tokens < h.n_tokens;
    const int32_t keep = partial ? keep_tokens : h.n_tokens;
    require(keep <= n_ctx() && (partial || h.n_kv <= n_ctx()), SPECULA_ERR_CONTEXT_FULL,
            "snapshot: its context of " + std::to_string(std::max(keep, partial ? 0 : h.n_kv)) + " tokens does not fit this session's n_ctx " +
                std::to_string(n_ctx()));

    size_t next = 0;
    auto section = [&](uint32_t tag, const char *what) -> const SectionView & {
        require(next < parsed.sections.size() && parsed.sections[next].tag == tag, SPECULA_ERR_FORMAT,
                std::string("snapshot: the ") + what + " section is missing or out of place");
        return parsed.sections[next++];
    };

    // TOKS, SESS
    std::vector<int32_t> tokens = decode_tokens(section(kTagTokens, "TOKS"), h.n_tokens, n_vocab);
    int32_t n_evaluated = 0, n_run_generated = 0, n_prompt = 0, n_generated = 0, n_restored = 0;
    bool logits_valid = false, last_generated = false, run_first = true;
    std::vector<float> logits;
    std::string decoder_pending, stops_pending;
    double prompt_ms = 0, decode_ms = 0, ttft_ms = 0;
    {
        const std::vector<uint8_t> raw =
            decode_section(section(kTagSession, "SESS"), 4096 + 4 * uint64_t(n_vocab) + 2 * kMaxHeldText, "SESS");
        ByteReader r(raw, "snapshot: SESS section");
        n_evaluated = r.get<int32_t>();
        r.check(n_evaluated >= 0 && n_evaluated <= h.n_tokens && n_evaluated <= h.n_kv, "the evaluated count " + std::to_string(n_evaluated) + " is out of range");
        logits_valid = r.get_bool();
        if (logits_valid) {
            logits.resize(size_t(n_vocab));
            std::memcpy(logits.data(), r.take(logits.size() * sizeof(float)), logits.size() * sizeof(float));
        }
        // Every token evaluated means the next one is sampled from these logits: they must be there.
        r.check(logits_valid || n_evaluated < h.n_tokens || h.n_tokens == 0, "the whole context is evaluated but its logits are missing");
        last_generated = r.get_bool();
        if (full) {
            n_run_generated = r.get<int32_t>();
            run_first = r.get_bool();
            decoder_pending = r.get_string(3);
            stops_pending = r.get_string(kMaxHeldText);
            n_prompt = r.get<int32_t>();
            n_generated = r.get<int32_t>();
            n_restored = r.get<int32_t>();
            prompt_ms = r.get<double>();
            decode_ms = r.get<double>();
            ttft_ms = r.get<double>();
            r.check(n_run_generated >= 0 && n_prompt >= 0 && n_generated >= 0 && n_restored >= 0, "negative counters");
        }
        r.expect_end();
    }

    // SAMP, SPEC
    std::unique_ptr<Sampler> sampler;
    std::string drafter_name;
    SpeculativeStats spec_stats;
    std::vector<SpeculativeRound::Ready> ready;
    std::vector<float> ready_rows;
    std::vector<uint8_t> drafter_blob;
    int32_t own_slots = 0;
    if (full) {
        {
            const std::vector<uint8_t> raw = decode_section(section(kTagSampler, "SAMP"), 1 << 16, "SAMP");
            ByteReader r(raw, "snapshot: SAMP section");
            sampler = std::make_unique<Sampler>(get_sampler(r));
            sampler->set_rng_state(r.get_string(16384));
            r.expect_end();
        }
        const std::vector<uint8_t> raw =
            decode_section(section(kTagSpeculative, "SPEC"), (uint64_t(1) << 30) + uint64_t(kMaxReady) * 4 * uint64_t(n_vocab), "SPEC");
        ByteReader r(raw, "snapshot: SPEC section");
        drafter_name = r.get_string(256);
        const bool has_ngram = r.get_bool();
        NgramConfig ngram;
        if (has_ngram) ngram = get_ngram(r);
        for (int32_t *v : {&spec_stats.rounds, &spec_stats.drafted, &spec_stats.accepted, &spec_stats.produced}) *v = r.get<int32_t>();
        spec_stats.draft_ms = r.get<double>();
        spec_stats.verify_ms = r.get<double>();
        spec_stats.accepted_at_depth = r.get_array<int32_t>(4096);
        const uint64_t n_ready = r.get<uint64_t>();
        r.check(n_ready <= uint64_t(kMaxReady), "a round with " + std::to_string(n_ready) + " pending tokens");
        ready_rows.resize(size_t(n_ready) * size_t(n_vocab));
        int32_t pending_accepted = 0;
        for (size_t i = 0; i < size_t(n_ready); ++i) {
            const int32_t token = r.get<int32_t>();
            const bool accepted = r.get_bool();
            r.check(token >= 0 && token < n_vocab, "a pending token id is outside the vocabulary");
            // A round's tokens: accepted ones, then the target's own (bonus) token last.
            r.check(accepted == (i + 1 < size_t(n_ready)), "the pending tokens are not a round's accepted path and bonus");
            ready.push_back({token, accepted});
            pending_accepted += accepted ? 1 : 0;
            std::memcpy(ready_rows.data() + i * size_t(n_vocab), r.take(size_t(n_vocab) * sizeof(float)), size_t(n_vocab) * sizeof(float));
        }
        r.check(n_evaluated + pending_accepted == h.n_kv, "the KV slots saved (" + std::to_string(h.n_kv) + ") do not match the evaluated and pending tokens");
        // A round's tree fits the context, so its pending tokens reach at most one past it: the bonus token after
        // a path that fills the context (never emitted: a full context stops the run first).
        r.check(tokens.size() + ready.size() <= size_t(n_ctx()) + 1 || ready.empty(), "the pending tokens do not fit the context");
        drafter_blob = r.get_array<uint8_t>(uint64_t(1) << 30);
        own_slots = r.get<int32_t>();
        r.expect_end();

        const bool with_state = (h.flags & SnapshotHeader::kFlagDrafterState) != 0;
        r.check(with_state == !drafter_name.empty(), "the drafter flag and the drafter name disagree");
        if (with_state) {
            const char *attached = spec_.attached() ? spec_.drafter()->name() : "";
            require(drafter_name == attached, SPECULA_ERR_INCOMPATIBLE,
                    "snapshot: saved with the '" + drafter_name + "' drafter" + (spec_.attached() ? "; this session has '" + std::string(attached) + "'" : "; this session has none") +
                        ": attach the same drafters before loading (or save with the context scope)");
            const Fingerprint draft_fp = draft_fingerprint(spec_.config(), pool);
            require(h.draft == draft_fp, SPECULA_ERR_INCOMPATIBLE,
                    "snapshot: saved with another draft (file fingerprint " + h.draft.hex() + "; this session's draft is " + draft_fp.hex() + ")");
            require(has_ngram == spec_.config().ngram && (!has_ngram || ngram == spec_.config().ngram_config), SPECULA_ERR_INCOMPATIBLE,
                    "snapshot: saved with other n-gram drafting settings than this session's");
            const int32_t expect_own = spec_.drafter()->check_state(drafter_blob, h.n_tokens);
            r.check(own_slots == expect_own && (own_slots == 0 || spec_.drafter()->own_cache() != nullptr),
                    "the drafter's own cache holds " + std::to_string(own_slots) + " slots, its state says " + std::to_string(expect_own));
        } else {
            r.check(drafter_blob.empty() && own_slots == 0 && !has_ngram, "drafter state without the drafter flag");
        }
    } else {
        require(h.flags == 0, SPECULA_ERR_FORMAT, "snapshot: a context snapshot with drafter state");
        require(h.n_kv == n_evaluated, SPECULA_ERR_FORMAT, "snapshot: a context snapshot's KV slots differ from its evaluated tokens");
    }

    // KV chunks: the target's, then a draft model's own cache.
    const std::vector<KvChunkId> plan = kv_chunk_plan(0, hp.n_layer, h.n_kv, h.chunk_slots);
    TargetRunner *own = own_slots > 0 ? spec_.drafter()->own_cache() : nullptr;
    std::vector<KvChunkId> own_plan;
    if (own != nullptr) own_plan = own_cache_plan(spec_.config(), *own, own_slots);
    const std::span<const SectionView> rest = std::span<const SectionView>(parsed.sections).subspan(next);
    for (const SectionView &s : rest) require(s.tag == kTagKvChunk, SPECULA_ERR_FORMAT, "snapshot: an unexpected section after the KV chunks");
    require(rest.size() == plan.size() + own_plan.size(), SPECULA_ERR_FORMAT,
            "snapshot: " + std::to_string(rest.size()) + " KV chunks where " + std::to_string(plan.size() + own_plan.size()) + " are expected");
    // Only the slots a partial restore keeps are needed: the ones before its last kept token (which is evaluated
    // again for its logits when the cut is inside the evaluated part).
    int32_t limit = h.n_kv;
    if (partial && keep < n_evaluated) limit = std::max(keep - 1, 0);
    if (partial) limit = std::min(limit, keep);
    StagedKv staged, own_staged;
    read_kv_chunks(rest.subspan(0, plan.size()), plan, h.kv_type, h.n_embd_kv, pool, nullptr, limit, kStageBudget, staged);
    if (own != nullptr)
        read_kv_chunks(rest.subspan(plan.size()), own_plan, own->kv_type(), own->kv_row_width(), pool, nullptr, own_slots, kStageBudget, own_staged);

    // ---- pass 2: apply ----
    try {
        const KvRows rows = kv_rows_of(*runner_);
        read_kv_chunks(rest.subspan(0, plan.size()), plan, h.kv_type, h.n_embd_kv, pool, &rows, limit, 0, staged);
        if (own != nullptr) {
            const KvRows own_rows = kv_rows_of(*own);
            read_kv_chunks(rest.subspan(plan.size()), own_plan, own->kv_type(), own->kv_row_width(), pool, &own_rows, own_slots, 0, own_staged);
        }
    } catch (...) {
        // The rows were checked in pass 1, so only the backend can fail here (a device error). What the cache holds
        // is no longer known: the session is left with an empty context rather than an inconsistent one.
        rewind(0);
        if (spec_.attached()) spec_.drafter()->rewind(0);
        throw;
    }
    // The rest of the apply phase allocates too (the pending round's path, the drafters' state): a bad_alloc there
    // left a half-loaded session (found by tests/alloc). As for a backend failure above, the session is then left
    // with an empty context rather than an inconsistent one.
    try {
        tokens_ = std::move(tokens);
        if (spec_.tuner()) spec_.tuner()->context_grew(int32_t(tokens_.size()));
        n_evaluated_ = n_evaluated;
        logits_valid_ = logits_valid;
        logits_row_ = -1;  // the loaded rows replace the round's
        if (logits_valid) logits_ = std::move(logits);
        last_token_generated_ = last_generated;
        decoder_.reset();
        stops_.reset();
        drop_ready();
        if (full) {
            sampler_ = std::move(*sampler);
            n_run_generated_ = n_run_generated;
            run_first_token_ = run_first;
            decoder_.restore(std::move(decoder_pending));
            stops_.restore(std::move(stops_pending));
            n_prompt_tokens_ = n_prompt;
            n_generated_ = n_generated;
            n_restored_tokens_ = n_restored;
            prompt_ms_ = prompt_ms;
            decode_ms_ = decode_ms;
            ttft_ms_ = ttft_ms;
            // The pending round: its rows become path nodes 0..k-1 of an otherwise empty tree.
            spec_.restore(std::move(ready), std::move(ready_rows), n_vocab, std::move(spec_stats));
            if (spec_.attached()) {
                if ((h.flags & SnapshotHeader::kFlagDrafterState) != 0)
                    spec_.drafter()->load_state(drafter_blob);
                else
                    spec_.drafter()->rewind(0);  // no state saved: the drafters catch up from the restored context
            }
        } else {
            if (spec_.attached()) spec_.drafter()->rewind(0);
            n_run_generated_ = 0;
            run_first_token_ = true;
            run_start_ms_ = now_ms();
        }
    } catch (...) {
        rewind(0);
        if (spec_.attached()) spec_.drafter()->rewind(0);
        throw;
    }
    if (keep < h.n_tokens) rewind(keep);
    n_restored_tokens_ += keep < h.n_tokens ? n_evaluated_ : h.n_kv;
    return keep;
}

}  // namespace specula::internal
