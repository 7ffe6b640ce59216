// Session snapshots: what a session's state is, section by section, and how it is put back.
//
// Sections (snapshot/snapshot_file.h has the container): TOKS (the context), SESS, SAMP and SPEC (each written and
// read by one pair of functions: session_state.h), then the KV chunks of the target's filled slots and of a draft
// model's own cache. Here: what each part holds of this session (capture), and putting it back (apply).
//
// Loading runs in two passes over bytes already in memory. The first decodes and checks everything (fingerprints,
// sizes, every section, every KV chunk, the drafters' state) into locals and touches nothing; only then does the
// second write the KV rows and swap the locals in. Small KV sets are kept decoded from the first pass; large ones
// are decoded again in the second (bounded memory, twice the decompression).
#include "session/session.h"

#include "session/session_state.h"

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
        write_session_part(w, session_part(full), full);
        parts.session = w.take();
    }
    if (!full) return parts;

    ByteWriter w;
    write_sampler_part(w, sampler_);
    parts.sampler = w.take();

    TargetRunner *own = drafter_state ? spec_.drafter()->own_cache() : nullptr;
    const int32_t own_slots = own ? spec_.drafter()->own_cache_slots() : 0;
    if (own != nullptr && own_slots > 0) {
        parts.own = own;
        parts.own_plan = own_cache_plan(spec_.config(), *own, own_slots);
    }
    SpeculativePart sp;
    if (drafter_state) {
        sp.drafter = spec_.drafter()->name();
        sp.has_ngram = spec_.config().ngram;
        sp.ngram = spec_.config().ngram_config;
        sp.drafter_state = spec_.drafter()->save_state();
        sp.own_slots = own_slots;
    }
    sp.stats = spec_.stats();
    sp.ready = pending;
    sp.ready_rows.resize(pending.size() * size_t(n_vocab));
    for (size_t i = 0; i < pending.size(); ++i)
        std::memcpy(sp.ready_rows.data() + i * size_t(n_vocab), logits_.path_row(spec_.next_index() + i), size_t(n_vocab) * sizeof(float));
    ByteWriter spw;
    write_speculative_part(spw, sp, n_vocab);
    parts.speculative = spw.take();
    return parts;
}

SessionPart Session::session_part(bool full) const {
    SessionPart p;
    p.n_evaluated = n_evaluated_;
    p.logits_valid = logits_.valid();
    if (p.logits_valid) p.logits.assign(logits_.current(), logits_.current() + logits_.n_vocab());
    p.last_token_generated = last_token_generated_;
    if (full) {
        p.n_run_generated = n_run_generated_;
        p.run_first_token = run_first_token_;
        p.decoder_pending = decoder_.pending();
        p.stops_pending = stops_.pending();
        p.n_prompt_tokens = n_prompt_tokens_;
        p.n_generated = n_generated_;
        p.n_restored_tokens = n_restored_tokens_;
        p.prompt_ms = prompt_ms_;
        p.decode_ms = decode_ms_;
        p.ttft_ms = ttft_ms_;
    }
    return p;
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

    std::vector<int32_t> tokens = decode_tokens(section(kTagTokens, "TOKS"), h.n_tokens, n_vocab);
    SessionPart session;
    {
        const std::vector<uint8_t> raw = decode_section(section(kTagSession, "SESS"), session_part_bound(n_vocab), "SESS");
        ByteReader r(raw, "snapshot: SESS section");
        session = read_session_part(r, full, n_vocab, h.n_tokens, h.n_kv);
    }
    std::unique_ptr<Sampler> sampler;
    SpeculativePart spec;
    if (full) {
        {
            const std::vector<uint8_t> raw = decode_section(section(kTagSampler, "SAMP"), sampler_part_bound(), "SAMP");
            ByteReader r(raw, "snapshot: SAMP section");
            sampler = read_sampler_part(r);
        }
        const std::vector<uint8_t> raw = decode_section(section(kTagSpeculative, "SPEC"), speculative_part_bound(n_vocab), "SPEC");
        ByteReader r(raw, "snapshot: SPEC section");
        spec = read_speculative_part(r, n_vocab);
        check_speculative_part(spec, h, session, tokens.size(), r);
    } else {
        require(h.flags == 0, SPECULA_ERR_FORMAT, "snapshot: a context snapshot with drafter state");
        require(h.n_kv == session.n_evaluated, SPECULA_ERR_FORMAT, "snapshot: a context snapshot's KV slots differ from its evaluated tokens");
    }

    // KV chunks: the target's, then a draft model's own cache.
    const std::vector<KvChunkId> plan = kv_chunk_plan(0, hp.n_layer, h.n_kv, h.chunk_slots);
    TargetRunner *own = spec.own_slots > 0 ? spec_.drafter()->own_cache() : nullptr;
    std::vector<KvChunkId> own_plan;
    if (own != nullptr) own_plan = own_cache_plan(spec_.config(), *own, spec.own_slots);
    const std::span<const SectionView> rest = std::span<const SectionView>(parsed.sections).subspan(next);
    for (const SectionView &s : rest) require(s.tag == kTagKvChunk, SPECULA_ERR_FORMAT, "snapshot: an unexpected section after the KV chunks");
    require(rest.size() == plan.size() + own_plan.size(), SPECULA_ERR_FORMAT,
            "snapshot: " + std::to_string(rest.size()) + " KV chunks where " + std::to_string(plan.size() + own_plan.size()) + " are expected");
    // Only the slots a partial restore keeps are needed: the ones before its last kept token (which is evaluated
    // again for its logits when the cut is inside the evaluated part).
    int32_t limit = h.n_kv;
    if (partial && keep < session.n_evaluated) limit = std::max(keep - 1, 0);
    if (partial) limit = std::min(limit, keep);
    StagedKv staged, own_staged;
    read_kv_chunks(rest.subspan(0, plan.size()), plan, h.kv_type, h.n_embd_kv, pool, nullptr, limit, kStageBudget, staged);
    if (own != nullptr)
        read_kv_chunks(rest.subspan(plan.size()), own_plan, own->kv_type(), own->kv_row_width(), pool, nullptr, spec.own_slots, kStageBudget, own_staged);

    // ---- pass 2: apply ----
    try {
        const KvRows rows = kv_rows_of(*runner_);
        read_kv_chunks(rest.subspan(0, plan.size()), plan, h.kv_type, h.n_embd_kv, pool, &rows, limit, 0, staged);
        if (own != nullptr) {
            const KvRows own_rows = kv_rows_of(*own);
            read_kv_chunks(rest.subspan(plan.size()), own_plan, own->kv_type(), own->kv_row_width(), pool, &own_rows, spec.own_slots, 0, own_staged);
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
        apply_session_part(std::move(session), full);
        drop_ready();
        if (full) {
            sampler_ = std::move(*sampler);
            if (sampler_.has_grammar()) sampler_.bind_vocab(model_->grammar_vocab());
            // The pending round: its rows become path nodes 0..k-1 of an otherwise empty tree.
            spec_.restore(std::move(spec.ready), std::move(spec.stats));
            logits_.restore_round(std::move(spec.ready_rows), spec_.pending().size());
            if (spec_.attached()) {
                if ((h.flags & SnapshotHeader::kFlagDrafterState) != 0)
                    spec_.drafter()->load_state(spec.drafter_state);
                else
                    spec_.drafter()->rewind(0);  // no state saved: the drafters catch up from the restored context
            }
        } else if (spec_.attached()) {
            spec_.drafter()->rewind(0);
        }
    } catch (...) {
        rewind(0);
        if (spec_.attached()) spec_.drafter()->rewind(0);
        throw;
    }
    if (keep < h.n_tokens) rewind(keep);
    drafter_behind_ = spec_.attached();  // (a restored drafter state makes its catch-up empty)
    n_restored_tokens_ += keep < h.n_tokens ? n_evaluated_ : h.n_kv;
    return keep;
}

// What SPEC says that only this session can check: its round fits the header and the context, and its drafter state
// belongs to the drafters attached (same names, same draft file, same n-gram settings, a state they accept).
void Session::check_speculative_part(const SpeculativePart &spec, const SnapshotHeader &h, const SessionPart &session, size_t n_tokens,
                                     const ByteReader &r) const {
    int32_t pending_accepted = 0;
    for (const SpeculativeRound::Ready &x : spec.ready) pending_accepted += x.accepted ? 1 : 0;
    r.check(session.n_evaluated + pending_accepted == h.n_kv,
            "the KV slots saved (" + std::to_string(h.n_kv) + ") do not match the evaluated and pending tokens");
    // A round's tree fits the context, so its pending tokens reach at most one past it: the bonus token after a path
    // that fills the context (never emitted: a full context stops the run first).
    r.check(n_tokens + spec.ready.size() <= size_t(n_ctx()) + 1 || spec.ready.empty(), "the pending tokens do not fit the context");
    const bool with_state = (h.flags & SnapshotHeader::kFlagDrafterState) != 0;
    r.check(with_state == !spec.drafter.empty(), "the drafter flag and the drafter name disagree");
    if (!with_state) {
        r.check(spec.drafter_state.empty() && spec.own_slots == 0 && !spec.has_ngram, "drafter state without the drafter flag");
        return;
    }
    const char *attached = spec_.attached() ? spec_.drafter()->name() : "";
    require(spec.drafter == attached, SPECULA_ERR_INCOMPATIBLE,
            "snapshot: saved with the '" + spec.drafter + "' drafter" +
                (spec_.attached() ? "; this session has '" + std::string(attached) + "'" : "; this session has none") +
                ": attach the same drafters before loading (or save with the context scope)");
    const Fingerprint draft_fp = draft_fingerprint(spec_.config(), *pool_);
    require(h.draft == draft_fp, SPECULA_ERR_INCOMPATIBLE,
            "snapshot: saved with another draft (file fingerprint " + h.draft.hex() + "; this session's draft is " + draft_fp.hex() + ")");
    require(spec.has_ngram == spec_.config().ngram && (!spec.has_ngram || spec.ngram == spec_.config().ngram_config), SPECULA_ERR_INCOMPATIBLE,
            "snapshot: saved with other n-gram drafting settings than this session's");
    const int32_t expect_own = spec_.drafter()->check_state(spec.drafter_state, h.n_tokens);
    r.check(spec.own_slots == expect_own && (spec.own_slots == 0 || spec_.drafter()->own_cache() != nullptr),
            "the drafter's own cache holds " + std::to_string(spec.own_slots) + " slots, its state says " + std::to_string(expect_own));
}

void Session::apply_session_part(SessionPart &&p, bool full) {
    n_evaluated_ = p.n_evaluated;
    // The loaded row replaces the round's.
    if (p.logits_valid) logits_.restore_plain(std::move(p.logits));
    else logits_.invalidate();
    last_token_generated_ = p.last_token_generated;
    decoder_.reset();
    stops_.reset();
    if (!full) {
        n_run_generated_ = 0;
        run_first_token_ = true;
        run_start_ms_ = now_ms();
        return;
    }
    n_run_generated_ = p.n_run_generated;
    run_first_token_ = p.run_first_token;
    decoder_.restore(std::move(p.decoder_pending));
    stops_.restore(std::move(p.stops_pending));
    n_prompt_tokens_ = p.n_prompt_tokens;
    n_generated_ = p.n_generated;
    n_restored_tokens_ = p.n_restored_tokens;
    prompt_ms_ = p.prompt_ms;
    decode_ms_ = p.decode_ms;
    ttft_ms_ = p.ttft_ms;
}

}  // namespace specula::internal
