// Session.cs - a generation context: prompts, token streams, cancellation, speculative decoding, snapshots.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Threading;

namespace Specula
{
    /// <summary>Running statistics of a session (specula_stats).</summary>
    public sealed class Stats
    {
        /// <summary>Tokens evaluated as prompt (not generated) since the session began.</summary>
        public int NPromptTokens { get; internal set; }
        /// <summary>Tokens generated since the session began.</summary>
        public int NGenerated { get; internal set; }
        /// <summary>Tokens in the context now.</summary>
        public int NCtxUsed { get; internal set; }
        public double LoadMs { get; internal set; }
        public double PromptMs { get; internal set; }
        public double DecodeMs { get; internal set; }
        /// <summary>Time to first token of the last generate/next run.</summary>
        public double TtftMs { get; internal set; }
        public double PromptTokensPerS { get; internal set; }
        public double DecodeTokensPerS { get; internal set; }
        /// <summary>Draft + verify rounds (0 without a drafter).</summary>
        public int NSpecRounds { get; internal set; }
        /// <summary>Tokens the drafters proposed (tree nodes, the root not counted).</summary>
        public int NDrafted { get; internal set; }
        /// <summary>Drafted tokens the target accepted.</summary>
        public int NAccepted { get; internal set; }
        /// <summary>Mean tokens per round: (NAccepted + NSpecRounds) / NSpecRounds; 0 when no round ran.</summary>
        public double Tau { get; internal set; }
        public double DraftMs { get; internal set; }
        public double VerifyMs { get; internal set; }
        /// <summary>[d]: rounds whose accepted path reached depth d + 1 (16 entries).</summary>
        public int[] AcceptedAtDepth { get; internal set; }
        /// <summary>Memory the attached drafter holds now.</summary>
        public ulong DrafterBytes { get; internal set; }
        /// <summary>Context tokens restored from snapshots or a prompt cache instead of being evaluated.</summary>
        public int NRestoredTokens { get; internal set; }
        /// <summary>Context shifts (ContextPolicy.Shift) since the session began, and the tokens they dropped.</summary>
        public int NContextShifts { get; internal set; }
        public long NDiscardedTokens { get; internal set; }
        /// <summary>Under a grammar (since 0.13): tokens it drafted (text it forces), those accepted, and drafted
        /// tokens it rejected before verification.</summary>
        public int NGrammarDrafted { get; internal set; }
        public int NGrammarAccepted { get; internal set; }
        public int NGrammarPruned { get; internal set; }
        /// <summary>Tokens of the context whose keys and values are in the cache (since 0.16).</summary>
        public int NCtxEvaluated { get; internal set; }

        /// <summary>
        /// Copies library-owned stats, reading only the bytes its struct_size says are there (an older library
        /// writes fewer fields: the rest stay 0; a newer one more: they are ignored).
        /// </summary>
        internal static unsafe Stats FromNative(NativeMethods.specula_stats* p)
        {
            if (p == null) return null;
            NativeMethods.specula_stats c = default(NativeMethods.specula_stats);
            long n = Math.Min(p->struct_size, (uint)sizeof(NativeMethods.specula_stats));
            Buffer.MemoryCopy(p, &c, sizeof(NativeMethods.specula_stats), n);
            var depth = new int[16];
            for (int i = 0; i < 16; ++i) depth[i] = c.accepted_at_depth[i];
            return new Stats
            {
                NPromptTokens = c.n_prompt_tokens, NGenerated = c.n_generated, NCtxUsed = c.n_ctx_used,
                LoadMs = c.load_ms, PromptMs = c.prompt_ms, DecodeMs = c.decode_ms, TtftMs = c.ttft_ms,
                PromptTokensPerS = c.prompt_tokens_per_s, DecodeTokensPerS = c.decode_tokens_per_s,
                NSpecRounds = c.n_spec_rounds, NDrafted = c.n_drafted, NAccepted = c.n_accepted, Tau = c.tau,
                DraftMs = c.draft_ms, VerifyMs = c.verify_ms, AcceptedAtDepth = depth,
                DrafterBytes = c.drafter_bytes.ToUInt64(), NRestoredTokens = c.n_restored_tokens,
                NContextShifts = c.n_context_shifts, NDiscardedTokens = c.n_discarded_tokens,
                NGrammarDrafted = c.n_grammar_drafted, NGrammarAccepted = c.n_grammar_accepted, NGrammarPruned = c.n_grammar_pruned,
                NCtxEvaluated = c.n_ctx_evaluated,
            };
        }
    }

    /// <summary>
    /// One step of generation (specula_token_event), copied out of the library: unlike the C event, it stays
    /// valid forever. The event that ends a run has Stop != StopReason.None and may still carry a token (e.g. the
    /// last one max_tokens allowed) or only flushed text (Token == Model.TokenNull); concatenating Text of all
    /// events gives the whole generated text, always complete UTF-8.
    /// </summary>
    public sealed class TokenEvent
    {
        /// <summary>The generated token id, or Model.TokenNull for an event that carries no token.</summary>
        public int Token { get; internal set; }
        /// <summary>Text this token completed (may be "" while a character or a possible stop string is pending).</summary>
        public string Text { get; internal set; }
        /// <summary>Ids of the K largest raw logits of the distribution the token came from (GenerateOptions.TopLogits).</summary>
        public int[] TopIds { get; internal set; }
        /// <summary>Those logits, largest first.</summary>
        public float[] TopLogits { get; internal set; }
        /// <summary>log(sum(exp(logit))) over the vocabulary (with GenerateOptions.TopLogits): a raw logit minus it is
        /// that token's log-probability before sampling.</summary>
        public float LogSumExp { get; internal set; }
        /// <summary>The token's raw logit (with GenerateOptions.TopLogits).</summary>
        public float TokenLogit { get; internal set; }
        /// <summary>The most likely tokens after the sampler chain (GenerateOptions.TopProbs), most likely first.</summary>
        public int[] TopProbIds { get; internal set; }
        /// <summary>Their probabilities (tokens the chain removed: 0).</summary>
        public float[] TopProbs { get; internal set; }
        /// <summary>The probability the token was drawn with (with GenerateOptions.TopProbs).</summary>
        public float TokenProb { get; internal set; }
        /// <summary>True when a drafter proposed the token and the target accepted it.</summary>
        public bool Drafted { get; internal set; }
        /// <summary>None while generation goes on; otherwise why it stopped.</summary>
        public StopReason Stop { get; internal set; }
        /// <summary>Running stats at this event (null if the library gave none).</summary>
        public Stats Stats { get; internal set; }

        public bool HasToken { get { return Token != Model.TokenNull; } }

        public override string ToString()
        {
            return "TokenEvent(" + Token + ", \"" + Text + "\"" + (Drafted ? ", drafted" : "") +
                   (Stop != StopReason.None ? ", stop " + Stop : "") + ")";
        }

        internal static unsafe TokenEvent FromNative(NativeMethods.specula_token_event* p)
        {
            // Read only what the library says it wrote (struct versioning), the rest stays zero.
            NativeMethods.specula_token_event c = default(NativeMethods.specula_token_event);
            long n = Math.Min(p->struct_size, (uint)sizeof(NativeMethods.specula_token_event));
            Buffer.MemoryCopy(p, &c, sizeof(NativeMethods.specula_token_event), n);
            if (n < 8) c.token = Model.TokenNull;
            int nTop = Math.Max(0, c.n_top);
            var ids = new int[c.top_ids != IntPtr.Zero ? nTop : 0];
            var logits = new float[c.top_logits != IntPtr.Zero ? nTop : 0];
            if (ids.Length > 0) Marshal.Copy(c.top_ids, ids, 0, ids.Length);
            if (logits.Length > 0) Marshal.Copy(c.top_logits, logits, 0, logits.Length);
            int nProbs = Math.Max(0, c.n_top_probs);
            var probIds = new int[c.top_prob_ids != IntPtr.Zero && c.top_probs != IntPtr.Zero ? nProbs : 0];
            var probs = new float[probIds.Length];
            if (probIds.Length > 0)
            {
                Marshal.Copy(c.top_prob_ids, probIds, 0, probIds.Length);
                Marshal.Copy(c.top_probs, probs, 0, probs.Length);
            }
            return new TokenEvent
            {
                LogSumExp = c.logsumexp,
                TokenLogit = c.token_logit,
                TopProbIds = probIds,
                TopProbs = probs,
                TokenProb = c.token_prob,
                Token = c.token,
                Text = Utf8.FromNative(c.text, (int)c.text_len.ToUInt64()),
                TopIds = ids,
                TopLogits = logits,
                Drafted = c.drafted != 0,
                Stop = c.stop,
                Stats = Stats.FromNative((NativeMethods.specula_stats*)c.stats),
            };
        }
    }

    /// <summary>
    /// A generation context on a model (specula_session). A Session is single-threaded: call its members, and step
    /// its token streams, from one thread at a time (which thread may change between calls). The one exception is
    /// <see cref="Cancel"/> (and the CancellationTokens wired to it), which any thread may use at any time, also
    /// while the session is being disposed.
    /// The session keeps its model alive (the library retains it): the Model object may be disposed first.
    /// Dispose frees the session; the finalizer does it if you forget.
    /// </summary>
    public sealed class Session : IDisposable
    {
        private readonly SessionHandle handle;
        private readonly Model model;  // this session's own reference (specula_model_retain), for Model/NVocab

        /// <summary>
        /// Creates a session on model. Throws SpeculaException: InvalidArgument (e.g. a vocab-only model, bad
        /// options), Unsupported or OutOfMemory (a backend that cannot be used without fallback). Thread-safe with
        /// respect to the model.
        /// </summary>
        public unsafe Session(Model model, SessionOptions options = null, SamplerOptions sampler = null)
        {
            if (model == null) throw new ArgumentNullException("model");
            NativeMethods.specula_session_options o = (options ?? new SessionOptions()).Native;
            SamplerOptions so = sampler ?? new SamplerOptions();
            NativeMethods.specula_sampler_options s = so.Native;
            SessionHandle session;
            ErrorHandle err;
            Status st;
            byte[] grammar = Utf8.Z(so.Grammar), root = Utf8.Z(so.GrammarRoot);
            fixed (byte* g = grammar)
            fixed (byte* r = root)
            {
                s.grammar = (IntPtr)g;  // null arrays pin as null pointers
                s.grammar_root = (IntPtr)r;
                st = NativeMethods.specula_session_create(model.Handle, &o, &s, out session, out err);
            }
            if (st != Status.Ok)
            {
                if (session != null) session.Dispose();
                throw SpeculaException.FromError(st, err);
            }
            SpeculaException.Discard(err);
            handle = session;
            this.model = model.AddReference();
        }

        /// <summary>The SafeHandle owning the session, for interop with other native code.</summary>
        public SessionHandle Handle { get { return handle; } }

        /// <summary>The model of this session (its own reference: valid while the session is, whatever happened to
        /// the Model passed to the constructor).</summary>
        public Model Model { get { return model; } }

        public void Dispose()
        {
            handle.Dispose();
            model.Dispose();
        }

        public bool IsDisposed { get { return handle.IsClosed; } }

        // ---- settings -------------------------------------------------------------------------------------------

        /// <summary>Replaces the sampler settings (and reseeds).</summary>
        public unsafe void SetSampler(SamplerOptions sampler)
        {
            if (sampler == null) throw new ArgumentNullException("sampler");
            NativeMethods.specula_sampler_options s = sampler.Native;
            ErrorHandle err;
            Status st;
            byte[] grammar = Utf8.Z(sampler.Grammar), root = Utf8.Z(sampler.GrammarRoot);
            fixed (byte* g = grammar)
            fixed (byte* r = root)
            {
                s.grammar = (IntPtr)g;
                s.grammar_root = (IntPtr)r;
                st = NativeMethods.specula_session_set_sampler(handle, &s, out err);
            }
            SpeculaException.Check(st, err);
        }

        /// <summary>
        /// Attaches drafters (speculative decoding), replacing those attached before; null options, or options with
        /// no draft, no draft model and Ngram off, detach them. Takes effect at the next token; the context is kept.
        /// The session keeps its own references to the draft and draft model. Throws SpeculaException:
        /// InvalidArgument (both a draft and a draft model, bad tree or n-gram settings), Incompatible (a draft loaded
        /// for another Model, a draft model with another vocabulary); on failure the previous drafters stay.
        /// </summary>
        public unsafe void SetSpeculative(SpeculativeOptions options)
        {
            ErrorHandle err;
            Status st;
            if (options == null)
            {
                st = NativeMethods.specula_session_set_speculative(handle, null, out err);
                SpeculaException.Check(st, err);
                return;
            }
            // The struct holds raw pointers: keep the SafeHandles referenced (not released) for the call.
            SafeHandle draft = options.Draft != null ? options.Draft.Handle : null;
            SafeHandle draftModel = options.DraftModel != null ? options.DraftModel.Handle : null;
            bool draftRef = false, draftModelRef = false;
            try
            {
                if (draft != null) draft.DangerousAddRef(ref draftRef);
                if (draftModel != null) draftModel.DangerousAddRef(ref draftModelRef);
                int[] tree = options.TreeWidths;
                fixed (int* widths = tree)
                {
                    NativeMethods.specula_speculative_options c;
                    NativeMethods.specula_speculative_options_init(&c);
                    c.draft = draft != null ? draft.DangerousGetHandle() : IntPtr.Zero;
                    c.draft_model = draftModel != null ? draftModel.DangerousGetHandle() : IntPtr.Zero;
                    c.ngram = options.Ngram ? 1 : 0;
                    c.grammar = options.Grammar ? 1 : 0;
                    c.tree_widths = (IntPtr)widths;
                    c.n_tree_levels = tree != null ? tree.Length : 0;
                    c.ngram_nodes = options.NgramNodes;
                    c.ngram_lookup_min = options.NgramLookupMin;
                    c.ngram_lookup_max = options.NgramLookupMax;
                    c.ngram_max_chain = options.NgramMaxChain;
                    c.ngram_table_n = options.NgramTableN;
                    c.ngram_table_topk = options.NgramTableTopK;
                    c.ngram_lag = options.NgramLag;
                    c.tree_mode = (int)options.TreeMode;
                    c.sampled_drafts = (int)options.SampledDrafts;
                    st = NativeMethods.specula_session_set_speculative(handle, &c, out err);
                }
            }
            finally
            {
                if (draftModelRef) draftModel.DangerousRelease();
                if (draftRef) draft.DangerousRelease();
            }
            SpeculaException.Check(st, err);
        }

        /// <summary>Convenience: a LongSpec draft, optionally merged with n-gram drafting.</summary>
        public void SetSpeculative(Draft draft, bool ngram = false)
        {
            SetSpeculative(new SpeculativeOptions { Draft = draft, Ngram = ngram });
        }

        /// <summary>Detaches every drafter: plain autoregressive decoding again.</summary>
        public void ClearSpeculative() { SetSpeculative((SpeculativeOptions)null); }

        /// <summary>Name of the attached drafter ("ngram", "longspec", "longspec+ngram", ...), "" when none.</summary>
        public string DrafterName { get { return Utf8.FromNative(NativeMethods.specula_session_drafter_name(handle)); } }

        /// <summary>The tree the last speculative round drafted ("auto:1,1,1,1", "auto:plain", "4,16,16,16,16"), ""
        /// before the first round or without drafters.</summary>
        public string TreeShape { get { return Utf8.FromNative(NativeMethods.specula_session_tree_shape(handle)); } }

        /// <summary>For every tree level any round reached (up to 32), the rounds whose accepted path reached it:
        /// [d] counts depth d + 1 (Stats.AcceptedAtDepth holds the first 16).</summary>
        public int[] AcceptedAtDepth
        {
            get
            {
                int n = NativeMethods.specula_session_accepted_at_depth(handle, null, 0);
                var counts = new int[n];
                NativeMethods.specula_session_accepted_at_depth(handle, counts, n);
                return counts;
            }
        }

        /// <summary>
        /// The attached LongSpec draft's raw logits (NVocab floats) for the token after the context, as the first
        /// step of a speculative round computes them. Throws InvalidArgument (no drafter, empty context) or
        /// Unsupported (a drafter without one distribution: n-gram, merged, draft model).
        /// </summary>
        public float[] DraftLogits()
        {
            var logits = new float[model.NVocab];
            ErrorHandle err;
            Status st = NativeMethods.specula_session_draft_logits(handle, logits, (UIntPtr)logits.Length, out err);
            SpeculaException.Check(st, err);
            return logits;
        }

        // ---- context --------------------------------------------------------------------------------------------

        /// <summary>
        /// Appends UTF-8 text, tokenized with flags (AddSpecial adds BOS only when the context is empty); evaluated
        /// lazily by the next generation. Throws Status.ContextFull (nothing appended) if it does not fit.
        /// </summary>
        public void AppendText(string text, TokenizeFlags flags = TokenizeFlags.AddSpecial)
        {
            if (text == null) throw new ArgumentNullException("text");
            int len;
            byte[] bytes = Utf8.Bytes(text, out len);
            ErrorHandle err;
            Status st = NativeMethods.specula_session_append_text(handle, bytes, (UIntPtr)len, (int)flags, out err);
            SpeculaException.Check(st, err);
        }

        /// <summary>Appends token ids. Throws InvalidToken (an id outside the vocabulary) or ContextFull; nothing is
        /// appended then.</summary>
        public void AppendTokens(params int[] tokens)
        {
            if (tokens == null) throw new ArgumentNullException("tokens");
            ErrorHandle err;
            Status st = NativeMethods.specula_session_append_tokens(handle, tokens, (UIntPtr)tokens.Length, out err);
            SpeculaException.Check(st, err);
        }

        public void AppendTokens(IEnumerable<int> tokens)
        {
            if (tokens == null) throw new ArgumentNullException("tokens");
            AppendTokens(new List<int>(tokens).ToArray());
        }

        /// <summary>
        /// Evaluates the context's pending tokens without generating (a prompt warm-up). ct is wired to
        /// <see cref="Cancel"/>; a cancelled evaluation throws SpeculaException with Status.Cancelled (the tokens
        /// evaluated until then stay evaluated).
        /// </summary>
        public void Evaluate(CancellationToken ct = default(CancellationToken))
        {
            using (var run = new CancelRun(this, ct))
            {
                run.Settle();
                ErrorHandle err;
                Status st = NativeMethods.specula_session_evaluate(handle, out err);
                run.Observed(st);
                SpeculaException.Check(st, err);
            }
        }

        /// <summary>Truncates the context to its first nTokens tokens (0 clears it); cached keys/values are kept.
        /// Also resets the streaming text state and the token stream's counter of MaxTokens.</summary>
        public void Rewind(int nTokens)
        {
            ErrorHandle err;
            Status st = NativeMethods.specula_session_rewind(handle, nTokens, out err);
            SpeculaException.Check(st, err);
        }

        /// <summary>Context length in tokens.</summary>
        public int NCtx { get { return NativeMethods.specula_session_n_ctx(handle); } }
        /// <summary>The backend running the target: "cpu", "cuda" or "vulkan".</summary>
        public string BackendName { get { return Utf8.FromNative(NativeMethods.specula_session_backend(handle)); } }
        /// <summary>Why the session does not run on the backend asked for; "" when it does.</summary>
        public string BackendNote { get { return Utf8.FromNative(NativeMethods.specula_session_backend_note(handle)); } }
        /// <summary>Tokens in the context.</summary>
        public int NTokens { get { return NativeMethods.specula_session_n_tokens(handle); } }

        /// <summary>The context's token ids.</summary>
        public int[] Tokens()
        {
            var tokens = new int[Math.Max(0, NTokens)];
            for (int attempt = 0; ; ++attempt)
            {
                UIntPtr n;
                ErrorHandle err;
                Status st = NativeMethods.specula_session_tokens(handle, tokens, (UIntPtr)tokens.Length, out n, out err);
                if (st == Status.Ok)
                {
                    SpeculaException.Discard(err);
                    Array.Resize(ref tokens, (int)n.ToUInt64());
                    return tokens;
                }
                if (st != Status.BufferTooSmall || attempt == 1) throw SpeculaException.FromError(st, err);
                SpeculaException.Discard(err);
                tokens = new int[(int)n.ToUInt64()];
            }
        }

        // ---- generation -----------------------------------------------------------------------------------------

        /// <summary>
        /// Token stream (pull style, specula_session_next): each MoveNext evaluates pending context if needed and
        /// produces one event; the last event has Stop != StopReason.None, then the stream ends. Nothing runs before
        /// the enumeration starts. maxTokens (&lt; 0: until the context is full) counts, as specula_session_next
        /// does, the tokens generated since the last AppendText/AppendTokens/Rewind: right after appending a prompt,
        /// Generate(n) yields n tokens; calling it again without appending continues up to n in total. End-of-
        /// generation tokens stop the stream (use the GenerateOptions overload to change that).
        /// Cancelling ct (from any thread) calls specula_session_cancel: the stream ends with an event whose Stop
        /// is StopReason.Cancelled (no exception), and the session stays usable. Breaking out of the loop early
        /// is fine (the enumerator's Dispose clears the registration and any cancel request left pending).
        /// </summary>
        public IEnumerable<TokenEvent> Generate(int maxTokens, CancellationToken ct = default(CancellationToken))
        {
            return Generate(new GenerateOptions(maxTokens), ct);
        }

        /// <summary>The token stream with all generation options (see Generate(int, CancellationToken)).</summary>
        public IEnumerable<TokenEvent> Generate(GenerateOptions options, CancellationToken ct = default(CancellationToken))
        {
            if (options == null) throw new ArgumentNullException("options");
            if (handle.IsClosed) throw new ObjectDisposedException("Session");
            return Stream(options, ct);
        }

        private IEnumerable<TokenEvent> Stream(GenerateOptions options, CancellationToken ct)
        {
            NativeBuffer strings;
            NativeMethods.specula_generate_options c = options.ToNative(out strings);
            using (strings)
            using (var run = new CancelRun(this, ct))
            {
                for (;;)
                {
                    run.Settle();
                    TokenEvent ev = NextCore(c, run);
                    yield return ev;
                    if (ev.Stop != StopReason.None) yield break;
                }
            }
        }

        /// <summary>
        /// Produces at most one token (specula_session_next): Stop == StopReason.None means a token was produced
        /// and more may follow. Cancelled and ContextFull are reported as the event's Stop, not thrown.
        /// </summary>
        public TokenEvent Next(GenerateOptions options = null)
        {
            NativeBuffer strings;
            NativeMethods.specula_generate_options c = (options ?? new GenerateOptions()).ToNative(out strings);
            using (strings) return NextCore(c, null);
        }

        private unsafe TokenEvent NextCore(NativeMethods.specula_generate_options c, CancelRun run)
        {
            NativeMethods.specula_token_event ev = default(NativeMethods.specula_token_event);
            ev.struct_size = (uint)sizeof(NativeMethods.specula_token_event);
            ev.token = Model.TokenNull;
            ErrorHandle err;
            Status st = NativeMethods.specula_session_next(handle, &c, &ev, out err);
            if (run != null) run.Observed(st);
            ev.stop = Finish(st, err, ev.stop);
            // The event's pointers are valid until the next call on the session: copy them now.
            return TokenEvent.FromNative(&ev);
        }

        /// <summary>
        /// Push-style generation (specula_session_generate): evaluates pending context, then generates up to
        /// options.MaxTokens tokens in this call, calling onToken (may be null) on this thread for each event;
        /// return false from it to stop (StopReason.Callback). Returns why generation stopped: Cancelled (ct or
        /// Cancel()) and ContextFull are returned, not thrown. If onToken throws, generation stops and the
        /// exception is rethrown here. onToken must not call into this session (it may call Cancel()).
        /// While the library runs, the callback is reachable only through a static delegate and a GCHandle held
        /// for the duration of the call (Callbacks.cs), so a garbage collection during the call is safe.
        /// </summary>
        public unsafe StopReason Generate(GenerateOptions options, Func<TokenEvent, bool> onToken,
                                          CancellationToken ct = default(CancellationToken))
        {
            NativeBuffer strings;
            NativeMethods.specula_generate_options c = (options ?? new GenerateOptions()).ToNative(out strings);
            using (strings)
            using (var run = new CancelRun(this, ct))
            {
                run.Settle();
                TokenState state = onToken != null ? new TokenState { Fn = onToken } : null;
                GCHandle gch = state != null ? GCHandle.Alloc(state) : default(GCHandle);
                try
                {
                    StopReason reason;
                    ErrorHandle err;
                    Status st = NativeMethods.specula_session_generate(
                        handle, &c, state != null ? Callbacks.Token : null,
                        state != null ? GCHandle.ToIntPtr(gch) : IntPtr.Zero, out reason, out err);
                    run.Observed(st);
                    if (state != null && state.Error != null)
                    {
                        SpeculaException.Discard(err);
                        state.Error.Throw();
                    }
                    return Finish(st, err, reason);
                }
                finally
                {
                    if (gch.IsAllocated) gch.Free();
                }
            }
        }

        /// <summary>Generate(options, onToken) with just a token limit.</summary>
        public StopReason Generate(int maxTokens, Func<TokenEvent, bool> onToken,
                                   CancellationToken ct = default(CancellationToken))
        {
            return Generate(new GenerateOptions(maxTokens), onToken, ct);
        }

        // Cancelled and ContextFull are outcomes of generation, not failures: report them as stop reasons.
        private static StopReason Finish(Status st, ErrorHandle err, StopReason reason)
        {
            if (st == Status.Cancelled || st == Status.ContextFull)
            {
                SpeculaException.Discard(err);
                if (reason == StopReason.None)
                    reason = st == Status.Cancelled ? StopReason.Cancelled : StopReason.ContextFull;
                return reason;
            }
            SpeculaException.Check(st, err);
            return reason;
        }

        /// <summary>
        /// Asks the running (or next) generation, token stream step or evaluation to stop at the next step boundary
        /// (specula_session_cancel). Thread-safe: any thread may call it at any time. A no-op once the session is
        /// disposed: the SafeHandle guarantees specula_session_destroy never runs during or before a cancel call.
        /// </summary>
        public void Cancel()
        {
            try
            {
                NativeMethods.specula_session_cancel(handle);
            }
            catch (ObjectDisposedException)
            {
            }
        }

        /// <summary>
        /// Wires a CancellationToken to specula_session_cancel for one run, issuing at most one native cancel.
        /// The library keeps a cancel request until a generate/next/evaluate consumes it (returns Cancelled). Two
        /// races are closed here:
        ///   - CancellationTokenSource.Cancel marks the token cancelled before it runs the registrations, so a
        ///     stream that sees IsCancellationRequested may step before the registration has called the library.
        ///     Settle (before every step) then waits for the registration, or issues the cancel itself.
        ///   - A cancel issued after the last step (or while the consumer stops enumerating) would stay pending and
        ///     cancel the next, unrelated run: Dispose consumes it.
        /// </summary>
        private sealed class CancelRun : IDisposable
        {
            private readonly Session session;
            private readonly CancellationToken token;
            private CancellationTokenRegistration registration;
            private volatile bool fired;   // this run's native cancel was issued
            private bool consumed;         // a call of this run returned Cancelled after that
            private bool settled;

            internal CancelRun(Session session, CancellationToken ct)
            {
                this.session = session;
                token = ct;
                if (ct.CanBeCanceled)
                    registration = ct.Register(() =>
                    {
                        session.Cancel();
                        fired = true;
                    });
            }

            /// <summary>If the token is cancelled, makes sure the library has been told before the next call.</summary>
            internal void Settle()
            {
                if (settled || !token.IsCancellationRequested) return;
                registration.Dispose();  // returns once the callback has run, or when it never will
                settled = true;
                if (!fired)
                {
                    session.Cancel();
                    fired = true;
                }
            }

            internal void Observed(Status st)
            {
                if (st == Status.Cancelled && fired) consumed = true;
            }

            public void Dispose()
            {
                registration.Dispose();  // waits for a callback running on another thread to finish
                if (fired && !consumed && !session.IsDisposed)
                {
                    try
                    {
                        // A pending request makes this return Cancelled at once and consumes it. (Should the request
                        // have been consumed after all, this evaluates the context's pending tokens: no harm.)
                        ErrorHandle err;
                        NativeMethods.specula_session_evaluate(session.handle, out err);
                        SpeculaException.Discard(err);
                    }
                    catch (ObjectDisposedException)
                    {
                    }
                    consumed = true;
                }
            }
        }

        /// <summary>Running statistics of this session.</summary>
        public unsafe Stats GetStats()
        {
            NativeMethods.specula_stats c = default(NativeMethods.specula_stats);
            c.struct_size = (uint)sizeof(NativeMethods.specula_stats);
            ErrorHandle err;
            Status st = NativeMethods.specula_session_stats(handle, &c, out err);
            SpeculaException.Check(st, err);
            return Stats.FromNative(&c);
        }

        /// <summary>Raw logits (NVocab floats) of the last evaluated position (a copy), or null when none is available
        /// (nothing evaluated yet, or after a rewind).</summary>
        public float[] Logits()
        {
            int n = model.NVocab;
            IntPtr p = NativeMethods.specula_session_logits(handle);
            if (p == IntPtr.Zero) return null;
            var logits = new float[n];
            Marshal.Copy(p, logits, 0, n);
            return logits;
        }

        // ---- snapshots ------------------------------------------------------------------------------------------

        /// <summary>Saves a snapshot to path atomically (temporary file + rename). The session is not changed.</summary>
        public unsafe void SaveFile(string path, SnapshotOptions options = null)
        {
            if (path == null) throw new ArgumentNullException("path");
            NativeMethods.specula_snapshot_options o = (options ?? new SnapshotOptions()).Native;
            ErrorHandle err;
            Status st = NativeMethods.specula_session_save_file(handle, Utf8.Z(path), &o, out err);
            SpeculaException.Check(st, err);
        }

        /// <summary>
        /// Loads a snapshot file. Everything is checked before anything changes: on failure (Io, Format,
        /// Unsupported, Incompatible, ContextFull, ...) the session is exactly as it was.
        /// </summary>
        public void LoadFile(string path)
        {
            if (path == null) throw new ArgumentNullException("path");
            ErrorHandle err;
            Status st = NativeMethods.specula_session_load_file(handle, Utf8.Z(path), out err);
            SpeculaException.Check(st, err);
        }

        /// <summary>The snapshot as bytes.</summary>
        public unsafe byte[] Save(SnapshotOptions options = null)
        {
            NativeMethods.specula_snapshot_options o = (options ?? new SnapshotOptions()).Native;
            UIntPtr bound;
            ErrorHandle err;
            Status st = NativeMethods.specula_session_save_buffer(handle, &o, null, UIntPtr.Zero, out bound, out err);
            if (st != Status.BufferTooSmall) SpeculaException.Check(st, err);
            else SpeculaException.Discard(err);
            var buf = new byte[bound.ToUInt64()];
            UIntPtr used;
            st = NativeMethods.specula_session_save_buffer(handle, &o, buf, (UIntPtr)buf.Length, out used, out err);
            SpeculaException.Check(st, err);
            Array.Resize(ref buf, (int)used.ToUInt64());
            return buf;
        }

        /// <summary>Loads a snapshot from bytes (same checks and guarantees as LoadFile).</summary>
        public void Load(byte[] snapshot)
        {
            if (snapshot == null) throw new ArgumentNullException("snapshot");
            ErrorHandle err;
            Status st = NativeMethods.specula_session_load_buffer(handle, snapshot, (UIntPtr)snapshot.Length, out err);
            SpeculaException.Check(st, err);
        }

        /// <summary>
        /// Copies this session's state into destination (a session on the same model file), in memory. Neither
        /// session may be used by another thread during the call.
        /// </summary>
        public unsafe void ForkInto(Session destination, SnapshotOptions options = null)
        {
            if (destination == null) throw new ArgumentNullException("destination");
            NativeMethods.specula_snapshot_options o = (options ?? new SnapshotOptions()).Native;
            ErrorHandle err;
            Status st = NativeMethods.specula_session_fork(handle, destination.handle, &o, out err);
            SpeculaException.Check(st, err);
        }
    }
}
