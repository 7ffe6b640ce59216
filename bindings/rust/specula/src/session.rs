//! Sessions: a context on a model, generation (callback, pull and iterator styles), cancellation, stats,
//! snapshots.
use std::any::Any;
use std::fmt;
use std::mem;
use std::os::raw::{c_char, c_void};
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use specula_sys as sys;

use crate::error::{ffi, ffi_status, Error, Result, Status};
use crate::model::{Model, TokenizeFlags};
use crate::options::{CGenerateOptions, GenerateOptions, SamplerOptions, SessionOptions, SnapshotOptions};
use crate::speculative::SpeculativeOptions;
use crate::util;
use crate::Token;

/// Why generation stopped (`specula_stop_reason`, less `SPECULA_STOP_NONE`, which is `None` in
/// [`TokenEvent::stop`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// `max_tokens` were generated.
    MaxTokens,
    /// An end-of-generation token was sampled (it is not added to the context or emitted).
    Eos,
    /// A stop string appeared; text from it on is not emitted.
    StopString,
    /// [`Session::cancel`] or a [`CancelHandle`] stopped it.
    Cancelled,
    /// The context has no room for another token.
    ContextFull,
    /// The token callback returned `false`.
    Callback,
    /// A reason this version of the bindings does not know.
    Other(u32),
}

impl StopReason {
    /// `None` for `SPECULA_STOP_NONE` (not stopped).
    pub fn from_raw(raw: sys::specula_stop_reason) -> Option<StopReason> {
        Some(match raw {
            sys::specula_stop_reason_SPECULA_STOP_NONE => return None,
            sys::specula_stop_reason_SPECULA_STOP_MAX_TOKENS => StopReason::MaxTokens,
            sys::specula_stop_reason_SPECULA_STOP_EOS => StopReason::Eos,
            sys::specula_stop_reason_SPECULA_STOP_STOP_STRING => StopReason::StopString,
            sys::specula_stop_reason_SPECULA_STOP_CANCELLED => StopReason::Cancelled,
            sys::specula_stop_reason_SPECULA_STOP_CONTEXT_FULL => StopReason::ContextFull,
            sys::specula_stop_reason_SPECULA_STOP_CALLBACK => StopReason::Callback,
            other => StopReason::Other(other),
        })
    }

    pub fn to_raw(self) -> sys::specula_stop_reason {
        match self {
            StopReason::MaxTokens => sys::specula_stop_reason_SPECULA_STOP_MAX_TOKENS,
            StopReason::Eos => sys::specula_stop_reason_SPECULA_STOP_EOS,
            StopReason::StopString => sys::specula_stop_reason_SPECULA_STOP_STOP_STRING,
            StopReason::Cancelled => sys::specula_stop_reason_SPECULA_STOP_CANCELLED,
            StopReason::ContextFull => sys::specula_stop_reason_SPECULA_STOP_CONTEXT_FULL,
            StopReason::Callback => sys::specula_stop_reason_SPECULA_STOP_CALLBACK,
            StopReason::Other(raw) => raw,
        }
    }

    /// The library's stable lower-case name: "max_tokens", "eos", "stop_string", "cancelled", ...
    pub fn name(self) -> &'static str {
        let p = unsafe { sys::specula_stop_reason_string(self.to_raw()) };
        if p.is_null() {
            return "unknown";
        }
        unsafe { std::ffi::CStr::from_ptr(p) }.to_str().unwrap_or("unknown")
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Running statistics of a session (`specula_stats`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Stats {
    /// Tokens evaluated as prompt since the session began.
    pub n_prompt_tokens: i32,
    /// Tokens generated since the session began.
    pub n_generated: i32,
    /// Tokens in the context now.
    pub n_ctx_used: i32,
    pub load_ms: f64,
    pub prompt_ms: f64,
    pub decode_ms: f64,
    /// Time to first token of the last run.
    pub ttft_ms: f64,
    pub prompt_tokens_per_s: f64,
    pub decode_tokens_per_s: f64,
    /// Speculative draft + verify rounds.
    pub n_spec_rounds: i32,
    /// Tokens the drafters proposed.
    pub n_drafted: i32,
    /// Drafted tokens the target accepted.
    pub n_accepted: i32,
    /// Mean tokens per round; 0 when no round ran.
    pub tau: f64,
    pub draft_ms: f64,
    pub verify_ms: f64,
    /// `[d]`: rounds whose accepted path reached depth d + 1.
    pub accepted_at_depth: [i32; 16],
    /// Memory the attached drafter holds now.
    pub drafter_bytes: usize,
    /// Context tokens restored from snapshots or a prompt cache instead of being evaluated.
    pub n_restored_tokens: i32,
    /// Context shifts ([`crate::ContextPolicy::Shift`]) since the session began.
    pub n_context_shifts: i32,
    /// Tokens those shifts dropped.
    pub n_discarded_tokens: i64,
    /// Under a grammar (since 0.13): tokens it drafted (text it forces; counted in `n_drafted` too).
    pub n_grammar_drafted: i32,
    /// Those the target accepted (counted in `n_accepted` too).
    pub n_grammar_accepted: i32,
    /// Drafted tokens the grammar rejected, dropped before verification.
    pub n_grammar_pruned: i32,
    /// Tokens of the context whose keys and values are in the cache (since 0.16).
    pub n_ctx_evaluated: i32,
}

impl Stats {
    /// Copies a library-owned `specula_stats`, reading only the bytes its `struct_size` covers (a library
    /// older than the header has a shorter struct; the rest stays 0).
    unsafe fn from_library(p: *const sys::specula_stats) -> Option<Stats> {
        if p.is_null() {
            return None;
        }
        let mut c: sys::specula_stats = mem::zeroed();
        let theirs = (*p).struct_size as usize;
        if theirs < mem::size_of::<u32>() {
            return None;
        }
        let n = theirs.min(mem::size_of::<sys::specula_stats>());
        ptr::copy_nonoverlapping(p as *const u8, &mut c as *mut sys::specula_stats as *mut u8, n);
        Some(Stats::from_c(&c))
    }

    fn from_c(c: &sys::specula_stats) -> Stats {
        Stats {
            n_prompt_tokens: c.n_prompt_tokens,
            n_generated: c.n_generated,
            n_ctx_used: c.n_ctx_used,
            load_ms: c.load_ms,
            prompt_ms: c.prompt_ms,
            decode_ms: c.decode_ms,
            ttft_ms: c.ttft_ms,
            prompt_tokens_per_s: c.prompt_tokens_per_s,
            decode_tokens_per_s: c.decode_tokens_per_s,
            n_spec_rounds: c.n_spec_rounds,
            n_drafted: c.n_drafted,
            n_accepted: c.n_accepted,
            tau: c.tau,
            draft_ms: c.draft_ms,
            verify_ms: c.verify_ms,
            accepted_at_depth: c.accepted_at_depth,
            drafter_bytes: c.drafter_bytes,
            n_restored_tokens: c.n_restored_tokens,
            n_context_shifts: c.n_context_shifts,
            n_discarded_tokens: c.n_discarded_tokens,
            n_grammar_drafted: c.n_grammar_drafted,
            n_grammar_accepted: c.n_grammar_accepted,
            n_grammar_pruned: c.n_grammar_pruned,
            n_ctx_evaluated: c.n_ctx_evaluated,
        }
    }
}

/// One step of generation (`specula_token_event`), copied out of the library's borrowed event.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenEvent {
    /// The generated token; `None` for an event that only flushes held-back text at the end of a run.
    pub token: Option<Token>,
    /// Complete UTF-8 made available by this token (may be empty while a character or a possible stop string
    /// is incomplete). The text of all events of a run is the whole generated text.
    pub text: String,
    /// The K largest raw logits of the distribution the token came from (with `top_logits` > 0), largest first.
    pub top: Vec<(Token, f32)>,
    /// log(sum(exp(logit))) over the vocabulary (with `top_logits` > 0): a raw logit minus it is that token's
    /// log-probability before sampling.
    pub logsumexp: f32,
    /// The token's raw logit (with `top_logits` > 0).
    pub token_logit: f32,
    /// The K most likely tokens after the sampler chain, with their probabilities (with `top_probs` > 0), most
    /// likely first; tokens the chain removed have 0.
    pub top_probs: Vec<(Token, f32)>,
    /// The probability the token was drawn with (with `top_probs` > 0).
    pub token_prob: f32,
    /// The token was proposed by a drafter and accepted by the target (speculative decoding).
    pub drafted: bool,
    /// `Some` on the event that ends the run (which may still carry a last token or text).
    pub stop: Option<StopReason>,
    /// Running stats after this step.
    pub stats: Option<Stats>,
}

impl TokenEvent {
    /// Copies an event the library passed to a callback (library memory, valid during the call): only the bytes
    /// its `struct_size` covers are read (the library sets it to its own sizeof; an older library's is shorter).
    unsafe fn from_library(p: *const sys::specula_token_event) -> TokenEvent {
        let mut ev: sys::specula_token_event = mem::zeroed();
        ev.token = sys::SPECULA_TOKEN_NULL;
        let theirs = (*p).struct_size as usize;
        let n = theirs.min(mem::size_of::<sys::specula_token_event>());
        ptr::copy_nonoverlapping(p as *const u8, &mut ev as *mut sys::specula_token_event as *mut u8, n);
        TokenEvent::from_c(&ev)
    }

    /// Copies an event in our own memory (specula_session_next writes up to the struct_size we set; the rest stays
    /// as we initialised it). Its pointers must still be valid.
    unsafe fn from_c(ev: &sys::specula_token_event) -> TokenEvent {
        let text = if ev.text.is_null() || ev.text_len == 0 {
            String::new()
        } else {
            let bytes = std::slice::from_raw_parts(ev.text as *const u8, ev.text_len);
            String::from_utf8_lossy(bytes).into_owned()
        };
        // (id, value) pairs from the event's parallel arrays (none when either is NULL).
        unsafe fn pairs(n: i32, ids: *const i32, values: *const f32) -> Vec<(Token, f32)> {
            if n <= 0 || ids.is_null() || values.is_null() {
                return Vec::new();
            }
            let ids = std::slice::from_raw_parts(ids, n as usize);
            let values = std::slice::from_raw_parts(values, n as usize);
            ids.iter().copied().zip(values.iter().copied()).collect()
        }
        let top = pairs(ev.n_top, ev.top_ids, ev.top_logits);
        let top_probs = pairs(ev.n_top_probs, ev.top_prob_ids, ev.top_probs);
        TokenEvent {
            token: if ev.token < 0 { None } else { Some(ev.token) },
            text,
            top,
            logsumexp: ev.logsumexp,
            token_logit: ev.token_logit,
            top_probs,
            token_prob: ev.token_prob,
            drafted: ev.drafted != 0,
            stop: StopReason::from_raw(ev.stop),
            stats: Stats::from_library(ev.stats),
        }
    }
}

/// The state a [`Session`] shares with its [`CancelHandle`]s: the session pointer, and a count of cancel calls
/// in flight plus a "closed" bit, so that the session is never destroyed while a cancel runs on it (specula.h:
/// "No other call on the session may run during or after [specula_session_destroy], specula_session_cancel()
/// included"). Lock-free, so that a cancel is async-signal-safe as the C function is.
struct CancelShared {
    session: *mut sys::specula_session,
    state: AtomicUsize,
}

const CLOSED: usize = 1 << (usize::BITS - 1);

// SAFETY: `session` is only passed to specula_session_cancel, which is thread-safe and callable from any thread
// while the session exists; `state` guarantees that it exists.
unsafe impl Send for CancelShared {}
unsafe impl Sync for CancelShared {}

impl CancelShared {
    fn cancel(&self) -> bool {
        let before = self.state.fetch_add(1, Ordering::SeqCst);
        let open = before & CLOSED == 0;
        if open {
            unsafe { sys::specula_session_cancel(self.session) };
        }
        self.state.fetch_sub(1, Ordering::SeqCst);
        open
    }

    /// After this returns no cancel runs and none will.
    fn close(&self) {
        self.state.fetch_or(CLOSED, Ordering::SeqCst);
        while self.state.load(Ordering::SeqCst) & !CLOSED != 0 {
            std::hint::spin_loop();
            std::thread::yield_now();
        }
    }
}

/// Cancels a [`Session`]'s generation from any thread (`specula_session_cancel`): `Send + Sync + Clone + 'static`.
///
/// A cancel asks the running (or the next) generate/next/evaluate call to stop at the next step boundary; that
/// call then reports [`StopReason::Cancelled`] and consumes the request. A handle may outlive its session: it then
/// does nothing. [`CancelHandle::cancel`] takes no lock and allocates nothing.
#[derive(Clone)]
pub struct CancelHandle {
    shared: Arc<CancelShared>,
}

impl CancelHandle {
    /// Requests cancellation; `false` if the session no longer exists.
    pub fn cancel(&self) -> bool {
        self.shared.cancel()
    }

    /// Whether the session still exists.
    pub fn is_alive(&self) -> bool {
        self.shared.state.load(Ordering::SeqCst) & CLOSED == 0
    }
}

impl fmt::Debug for CancelHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelHandle").field("alive", &self.is_alive()).finish()
    }
}

/// A generation context on a model (`specula_session`), borrowing the [`Model`] it was created from.
///
/// # Threads
/// `Session` is `Send` but not `Sync`. specula.h: "A specula_session is single-threaded: call its functions from
/// one thread at a time. The one exception is specula_session_cancel(), which any thread (or a signal handler)
/// may call at any time." One thread at a time is not one thread for ever, so a session may move to another
/// thread; but no two threads may use it at once, not even through `&Session` (its const getters included), so
/// it is not `Sync`. To cancel from elsewhere use a [`CancelHandle`] ([`Session::cancel_handle`]).
///
/// The library keeps its own reference to the model, the drafters and their files; the `'m` borrow only makes
/// the Rust side simple to reason about.
pub struct Session<'m> {
    raw: NonNull<sys::specula_session>,
    model: &'m Model,
    cancel: Arc<CancelShared>,
}

// SAFETY: see the type's documentation: a session has no affinity to the thread that created it, only the rule
// that one thread at a time calls it, which `&mut`/`!Sync` enforce. `&'m Model` is Send because Model is Sync.
unsafe impl<'m> Send for Session<'m> {}

impl<'m> Drop for Session<'m> {
    fn drop(&mut self) {
        // No cancel may run during or after the destroy: close the handles first (waits for one in flight).
        self.cancel.close();
        unsafe { sys::specula_session_destroy(self.raw.as_ptr()) }
    }
}

impl<'m> fmt::Debug for Session<'m> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session").field("n_ctx", &self.n_ctx()).field("n_tokens", &self.n_tokens()).finish()
    }
}

/// A token closure as a C `specula_token_fn`; a panic is caught, stops generation and is resumed afterwards.
struct TokenCallback<'f> {
    f: &'f mut dyn FnMut(&TokenEvent) -> bool,
    panic: Option<Box<dyn Any + Send + 'static>>,
}

unsafe extern "C" fn token_trampoline(event: *const sys::specula_token_event, user_data: *mut c_void) -> i32 {
    let state = &mut *(user_data as *mut TokenCallback);
    if state.panic.is_some() || event.is_null() {
        return 0;
    }
    let f = &mut state.f;
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        let ev = TokenEvent::from_library(event);
        (f)(&ev)
    }));
    match result {
        Ok(true) => 1,
        Ok(false) => 0,
        Err(payload) => {
            state.panic = Some(payload);
            0
        }
    }
}

/// CANCELLED and CONTEXT_FULL are outcomes of generation, not failures: they become stop reasons (as in
/// specula.hpp).
fn outcome(status: sys::specula_status, error: Option<Error>, reason: Option<StopReason>) -> Result<Option<StopReason>> {
    match error {
        None => Ok(reason),
        Some(_) if status == sys::specula_status_SPECULA_ERR_CANCELLED => Ok(Some(reason.unwrap_or(StopReason::Cancelled))),
        Some(_) if status == sys::specula_status_SPECULA_ERR_CONTEXT_FULL => Ok(Some(reason.unwrap_or(StopReason::ContextFull))),
        Some(e) => Err(e),
    }
}

impl<'m> Session<'m> {
    /// Creates a session on `model` (`specula_session_create`). Statuses: `InvalidArgument` (e.g. a vocab-only
    /// model, bad options), `OutOfMemory`, `Unsupported` (a backend that cannot be used, without fallback).
    pub fn new(model: &'m Model, opts: &SessionOptions, sampler: &SamplerOptions) -> Result<Session<'m>> {
        let o = opts.to_c();
        let s = sampler.to_c()?;
        let mut out: *mut sys::specula_session = ptr::null_mut();
        ffi(|err| unsafe { sys::specula_session_create(model.as_raw(), &o, &s.c, &mut out, err) })?;
        let raw = NonNull::new(out).ok_or_else(|| Error::new(Status::Internal, "specula_session_create returned no session"))?;
        Ok(Session { raw, model, cancel: Arc::new(CancelShared { session: out, state: AtomicUsize::new(0) }) })
    }

    /// A session with the library's default options and sampler.
    pub fn with_defaults(model: &'m Model) -> Result<Session<'m>> {
        Session::new(model, &SessionOptions::default(), &SamplerOptions::default())
    }

    /// The model the session runs.
    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// The raw handle (still owned by this session). Calls through it must follow the session's threading rule.
    pub fn as_raw(&self) -> *mut sys::specula_session {
        self.raw.as_ptr()
    }

    fn p(&self) -> *mut sys::specula_session {
        self.raw.as_ptr()
    }

    /// Replaces the sampler settings (and reseeds).
    pub fn set_sampler(&mut self, sampler: &SamplerOptions) -> Result<()> {
        let s = sampler.to_c()?;
        ffi(|err| unsafe { sys::specula_session_set_sampler(self.p(), &s.c, err) })
    }

    /// Appends UTF-8 text to the context, tokenized with `flags` ([`TokenizeFlags::ADD_SPECIAL`] adds BOS only
    /// when the context is empty). Evaluated lazily by the next generation. `ContextFull`: nothing appended.
    pub fn append_text(&mut self, text: &str, flags: TokenizeFlags) -> Result<()> {
        ffi(|err| unsafe { sys::specula_session_append_text(self.p(), text.as_ptr() as *const c_char, text.len(), flags.bits() as i32, err) })
    }

    /// Appends token ids. `InvalidToken` (an id outside `[0, n_vocab)`) or `ContextFull`: nothing appended.
    pub fn append_tokens(&mut self, tokens: &[Token]) -> Result<()> {
        ffi(|err| unsafe { sys::specula_session_append_tokens(self.p(), tokens.as_ptr(), tokens.len(), err) })
    }

    /// Truncates the context to its first `n_tokens` tokens (0 clears it), keeping their cached keys/values.
    pub fn rewind(&mut self, n_tokens: usize) -> Result<()> {
        let n = i32::try_from(n_tokens).map_err(|_| Error::invalid_argument("rewind: n_tokens out of range"))?;
        ffi(|err| unsafe { sys::specula_session_rewind(self.p(), n, err) })
    }

    /// Evaluates the pending context (a prompt) without generating. `Cancelled` when cancelled (what was
    /// evaluated stays evaluated).
    pub fn evaluate(&mut self) -> Result<()> {
        ffi(|err| unsafe { sys::specula_session_evaluate(self.p(), err) })
    }

    /// Context length in tokens.
    pub fn n_ctx(&self) -> usize {
        let n = unsafe { sys::specula_session_n_ctx(self.p()) };
        n.max(0) as usize
    }

    /// Tokens in the context now.
    pub fn n_tokens(&self) -> usize {
        let n = unsafe { sys::specula_session_n_tokens(self.p()) };
        n.max(0) as usize
    }

    /// The backend running the target: "cpu", "cuda" or "vulkan".
    pub fn backend(&self) -> String {
        unsafe { util::string_from(sys::specula_session_backend(self.p())) }
    }

    /// Why the session does not run on the backend asked for; "" when it does (with [`crate::Backend::Auto`]: when
    /// it runs on a GPU), else each refusal's reason joined by "; " (e.g. "CUDA: ...; Vulkan: ...; running on the
    /// CPU").
    pub fn backend_note(&self) -> String {
        unsafe { util::string_from(sys::specula_session_backend_note(self.p())) }
    }

    /// The context's token ids.
    pub fn tokens(&self) -> Result<Vec<Token>> {
        let mut out: Vec<Token> = vec![0; self.n_tokens()];
        loop {
            let mut n: usize = 0;
            let (status, error) = ffi_status(|err| unsafe { sys::specula_session_tokens(self.p(), out.as_mut_ptr(), out.len(), &mut n, err) });
            match error {
                None => {
                    out.truncate(n.min(out.len()));
                    return Ok(out);
                }
                Some(_) if status == sys::specula_status_SPECULA_ERR_BUFFER_TOO_SMALL && n > out.len() => out = vec![0; n],
                Some(e) => return Err(e),
            }
        }
    }

    /// Evaluates pending context, then generates, calling `on_token` for each event (`specula_session_generate`);
    /// returning `false` from it stops generation ([`StopReason::Callback`]). Returns why generation stopped:
    /// cancellation and a full context are stop reasons, not errors. A panic in `on_token` stops generation and
    /// is resumed here once the library has returned (it never unwinds through the library).
    pub fn generate<F>(&mut self, opts: &GenerateOptions, mut on_token: F) -> Result<StopReason>
    where
        F: FnMut(&TokenEvent) -> bool,
    {
        let c = opts.to_c()?;
        let mut state = TokenCallback { f: &mut on_token, panic: None };
        let user = &mut state as *mut TokenCallback as *mut c_void;
        let mut reason: sys::specula_stop_reason = sys::specula_stop_reason_SPECULA_STOP_NONE;
        let (status, error) =
            ffi_status(|err| unsafe { sys::specula_session_generate(self.p(), &c.c, Some(token_trampoline), user, &mut reason, err) });
        if let Some(payload) = state.panic.take() {
            panic::resume_unwind(payload);
        }
        let reason = outcome(status, error, StopReason::from_raw(reason))?;
        // The library always ends a run with a reason; Other(0) would mean it did not say.
        Ok(reason.unwrap_or(StopReason::Other(0)))
    }

    /// Generates without a callback and returns the generated tokens and why it stopped.
    pub fn generate_tokens(&mut self, opts: &GenerateOptions) -> Result<(Vec<Token>, StopReason)> {
        let mut tokens = Vec::new();
        let stop = self.generate(opts, |ev| {
            if let Some(t) = ev.token {
                tokens.push(t);
            }
            true
        })?;
        Ok((tokens, stop))
    }

    fn next_c(&mut self, c: &CGenerateOptions) -> Result<TokenEvent> {
        let mut ev: sys::specula_token_event = unsafe { mem::zeroed() };
        ev.struct_size = mem::size_of::<sys::specula_token_event>() as u32;
        ev.token = sys::SPECULA_TOKEN_NULL;
        let (status, error) = ffi_status(|err| unsafe { sys::specula_session_next(self.p(), &c.c, &mut ev, err) });
        // The event's pointers are valid until the next call on the session: copy it now.
        let mut event = unsafe { TokenEvent::from_c(&ev) };
        event.stop = outcome(status, error, event.stop)?;
        Ok(event)
    }

    /// Pull-style generation (`specula_session_next`): at most one token. `event.stop == None` means a token was
    /// produced and more may follow; otherwise the run has ended (the event may still carry a last token or
    /// text). `max_tokens` counts since the last append or rewind.
    pub fn next_token(&mut self, opts: &GenerateOptions) -> Result<TokenEvent> {
        let c = opts.to_c()?;
        self.next_c(&c)
    }

    /// An iterator over the events of one run, by `specula_session_next`. Every event is yielded, the last one
    /// being the one with `stop != None` (it may carry a last token, or only flushed text, or nothing); then the
    /// iterator ends. A failure is yielded as `Err` and ends it too. Dropping it early leaves the session usable.
    pub fn generate_iter<'s>(&'s mut self, opts: &GenerateOptions) -> TokenIter<'s, 'm> {
        match opts.to_c() {
            Ok(c) => TokenIter { session: self, opts: Some(c), pending_error: None, stop: None, done: false },
            Err(e) => TokenIter { session: self, opts: None, pending_error: Some(e), stop: None, done: false },
        }
    }

    /// Requests that the running (or next) generation of this session stop at the next step boundary.
    pub fn cancel(&self) {
        unsafe { sys::specula_session_cancel(self.p()) }
    }

    /// A handle that cancels this session from any thread, and does nothing once the session is dropped.
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle { shared: Arc::clone(&self.cancel) }
    }

    /// Running statistics.
    pub fn stats(&self) -> Result<Stats> {
        let mut c: sys::specula_stats = unsafe { mem::zeroed() };
        c.struct_size = mem::size_of::<sys::specula_stats>() as u32;
        ffi(|err| unsafe { sys::specula_session_stats(self.p(), &mut c, err) })?;
        Ok(Stats::from_c(&c))
    }

    /// Raw logits (n_vocab floats) of the last evaluated position; `None` when there are none (nothing
    /// evaluated yet, or after a rewind). Borrowed until the next call on the session, hence `&mut self`.
    pub fn logits(&mut self) -> Option<&[f32]> {
        let p = unsafe { sys::specula_session_logits(self.p()) };
        if p.is_null() {
            None
        } else {
            Some(unsafe { std::slice::from_raw_parts(p, self.model.n_vocab()) })
        }
    }

    /// Attaches drafters for speculative decoding (replacing any attached before); options with no drafter
    /// detach them. The output is unchanged (exact verification), only the speed differs. The session keeps its
    /// own references: the [`Draft`](crate::Draft) and draft [`Model`] may be dropped right after.
    /// Statuses: `InvalidArgument`, `Incompatible` (a draft for another model), `OutOfMemory`.
    pub fn set_speculative(&mut self, opts: &SpeculativeOptions<'_>) -> Result<()> {
        let c = opts.to_c(&opts.tree_widths)?;
        ffi(|err| unsafe { sys::specula_session_set_speculative(self.p(), &c, err) })
    }

    /// Detaches every drafter: plain autoregressive decoding again.
    pub fn clear_speculative(&mut self) -> Result<()> {
        ffi(|err| unsafe { sys::specula_session_set_speculative(self.p(), ptr::null(), err) })
    }

    /// Name of the attached drafter ("ngram", "longspec", "draft-model", "longspec+ngram", ...), "" when none.
    pub fn drafter_name(&self) -> String {
        unsafe { util::string_from(sys::specula_session_drafter_name(self.p())) }
    }

    /// The tree the last speculative round drafted (`"auto:1,1,1,1"`, `"auto:plain"`, `"4,16,16,16,16"`), empty
    /// before the first round or without drafters.
    pub fn tree_shape(&self) -> String {
        unsafe { util::string_from(sys::specula_session_tree_shape(self.p())) }
    }

    /// For every tree level any round reached (up to 32), the rounds whose accepted path reached it: `[d]` counts
    /// depth d + 1 (`Stats::accepted_at_depth` holds the first 16).
    pub fn accepted_at_depth(&self) -> Vec<i32> {
        let n = unsafe { sys::specula_session_accepted_at_depth(self.p(), std::ptr::null_mut(), 0) };
        let mut out = vec![0i32; n.max(0) as usize];
        unsafe { sys::specula_session_accepted_at_depth(self.p(), out.as_mut_ptr(), n) };
        out
    }

    /// The attached LongSpec draft's raw logits for the token after the context (`specula_session_draft_logits`).
    pub fn draft_logits(&mut self) -> Result<Vec<f32>> {
        let mut out = vec![0f32; self.model.n_vocab()];
        ffi(|err| unsafe { sys::specula_session_draft_logits(self.p(), out.as_mut_ptr(), out.len(), err) })?;
        Ok(out)
    }

    /// Saves a snapshot to `path` (atomically: a temporary file renamed). The session is not changed.
    pub fn save_file<P: AsRef<Path>>(&mut self, path: P, opts: &SnapshotOptions) -> Result<()> {
        let cpath = util::path_cstring(path.as_ref())?;
        let o = opts.to_c();
        ffi(|err| unsafe { sys::specula_session_save_file(self.p(), cpath.as_ptr(), &o, err) })
    }

    /// Loads a snapshot file; on failure the session is left exactly as it was.
    pub fn load_file<P: AsRef<Path>>(&mut self, path: P) -> Result<()> {
        let cpath = util::path_cstring(path.as_ref())?;
        ffi(|err| unsafe { sys::specula_session_load_file(self.p(), cpath.as_ptr(), err) })
    }

    /// A snapshot as bytes.
    pub fn save_buffer(&mut self, opts: &SnapshotOptions) -> Result<Vec<u8>> {
        let o = opts.to_c();
        let mut bound: usize = 0;
        let (status, error) = ffi_status(|err| unsafe { sys::specula_session_save_buffer(self.p(), &o, ptr::null_mut(), 0, &mut bound, err) });
        match error {
            Some(_) if status == sys::specula_status_SPECULA_ERR_BUFFER_TOO_SMALL => {}
            Some(e) => return Err(e),
            None => return Ok(Vec::new()),
        }
        let mut out = vec![0u8; bound];
        let mut used: usize = 0;
        ffi(|err| unsafe { sys::specula_session_save_buffer(self.p(), &o, out.as_mut_ptr() as *mut c_void, out.len(), &mut used, err) })?;
        out.truncate(used.min(out.len()));
        Ok(out)
    }

    /// Loads a snapshot from bytes; on failure the session is left exactly as it was.
    pub fn load_buffer(&mut self, bytes: &[u8]) -> Result<()> {
        ffi(|err| unsafe { sys::specula_session_load_buffer(self.p(), bytes.as_ptr() as *const c_void, bytes.len(), err) })
    }

    /// Copies this session's state into `dst` (a session on the same model file), in memory.
    pub fn fork_into(&mut self, dst: &mut Session<'_>, opts: &SnapshotOptions) -> Result<()> {
        let o = opts.to_c();
        ffi(|err| unsafe { sys::specula_session_fork(self.p(), dst.p(), &o, err) })
    }
}

/// The iterator of [`Session::generate_iter`]: `Result<TokenEvent, Error>` per `specula_session_next` call.
pub struct TokenIter<'s, 'm> {
    session: &'s mut Session<'m>,
    opts: Option<CGenerateOptions>,
    pending_error: Option<Error>,
    stop: Option<StopReason>,
    done: bool,
}

impl<'s, 'm> fmt::Debug for TokenIter<'s, 'm> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenIter").field("stop", &self.stop).field("done", &self.done).finish()
    }
}

impl<'s, 'm> TokenIter<'s, 'm> {
    /// Why the run ended, once it has.
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.stop
    }

    /// The session (e.g. for its stats between events).
    pub fn session(&self) -> &Session<'m> {
        self.session
    }

    /// A handle to cancel the run from another thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        self.session.cancel_handle()
    }
}

impl<'s, 'm> Iterator for TokenIter<'s, 'm> {
    type Item = Result<TokenEvent>;

    fn next(&mut self) -> Option<Result<TokenEvent>> {
        if self.done {
            return None;
        }
        if let Some(e) = self.pending_error.take() {
            self.done = true;
            return Some(Err(e));
        }
        let c = self.opts.as_ref()?;
        let result = self.session.next_c(c);
        match &result {
            Ok(ev) if ev.stop.is_some() => {
                self.stop = ev.stop;
                self.done = true;
            }
            Ok(_) => {}
            Err(_) => self.done = true,
        }
        Some(result)
    }
}

impl<'s, 'm> std::iter::FusedIterator for TokenIter<'s, 'm> {}
