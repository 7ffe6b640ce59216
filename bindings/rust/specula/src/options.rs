//! Options of sessions, sampling, generation and snapshots. Every `Default` starts from the library's own
//! `*_init()` defaults; the C structs are rebuilt from these at each call (with `struct_size` of the header the
//! bindings were generated from, so a newer library keeps its defaults for fields appended later).
use std::ffi::CString;
use std::os::raw::c_char;

use specula_sys as sys;

use crate::error::Result;
use crate::util;

/// Where a session runs its target model (`specula_backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The first GPU backend built in whose usable device has room (CUDA, then Vulkan), else the CPU (the
    /// default).
    Auto,
    /// The CPU reference backend.
    Cpu,
    /// An NVIDIA GPU (compute capability 8.0 or newer).
    Cuda,
    /// A GPU through the Vulkan loader: AMD, Intel, integrated, or NVIDIA (since 0.9; a library built with
    /// `-DSPECULA_VULKAN=ON`; [`crate::backend_check`] says why not).
    Vulkan,
}

impl Backend {
    pub(crate) fn to_raw(self) -> i32 {
        (match self {
            Backend::Auto => sys::specula_backend_SPECULA_BACKEND_AUTO,
            Backend::Cpu => sys::specula_backend_SPECULA_BACKEND_CPU,
            Backend::Cuda => sys::specula_backend_SPECULA_BACKEND_CUDA,
            Backend::Vulkan => sys::specula_backend_SPECULA_BACKEND_VULKAN,
        }) as i32
    }

    pub(crate) fn from_raw(raw: i32) -> Backend {
        if raw == sys::specula_backend_SPECULA_BACKEND_CPU as i32 {
            Backend::Cpu
        } else if raw == sys::specula_backend_SPECULA_BACKEND_CUDA as i32 {
            Backend::Cuda
        } else if raw == sys::specula_backend_SPECULA_BACKEND_VULKAN as i32 {
            Backend::Vulkan
        } else {
            Backend::Auto
        }
    }
}

/// The element type of the target's key/value cache (`specula_kv_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvType {
    /// F16, as llama.cpp (the default).
    Default,
    F32,
    F16,
    /// ggml's 32-value blocks; the model's `n_embd_kv` must be a multiple of 32.
    Q8_0,
}

impl KvType {
    pub(crate) fn to_raw(self) -> i32 {
        (match self {
            KvType::Default => sys::specula_kv_type_SPECULA_KV_DEFAULT,
            KvType::F32 => sys::specula_kv_type_SPECULA_KV_F32,
            KvType::F16 => sys::specula_kv_type_SPECULA_KV_F16,
            KvType::Q8_0 => sys::specula_kv_type_SPECULA_KV_Q8_0,
        }) as i32
    }

    pub(crate) fn from_raw(raw: i32) -> KvType {
        match raw {
            r if r == sys::specula_kv_type_SPECULA_KV_F32 as i32 => KvType::F32,
            r if r == sys::specula_kv_type_SPECULA_KV_F16 as i32 => KvType::F16,
            r if r == sys::specula_kv_type_SPECULA_KV_Q8_0 as i32 => KvType::Q8_0,
            _ => KvType::Default,
        }
    }
}

/// How a sampled token is drawn for a seed (`specula_draw_rule`, since 0.16). Either way a seed fixes the text, and
/// speculative decoding gives plain sampling's tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DrawRule {
    /// An exponential race keyed per output position: sampled drafts agree with the target as often as a coupling
    /// can (the default).
    #[default]
    Race,
    /// llama.cpp's dist sampler (`std::mt19937` seeded with the seed's low 32 bits, `std::discrete_distribution`
    /// over the candidates in logit order): llama.cpp's text for the same model, prompt, seed and settings.
    LlamaCpp,
}

impl DrawRule {
    pub(crate) fn to_raw(self) -> i32 {
        (match self {
            DrawRule::Race => sys::specula_draw_rule_SPECULA_DRAW_RACE,
            DrawRule::LlamaCpp => sys::specula_draw_rule_SPECULA_DRAW_LLAMA_CPP,
        }) as i32
    }

    pub(crate) fn from_raw(raw: i32) -> DrawRule {
        if raw == sys::specula_draw_rule_SPECULA_DRAW_LLAMA_CPP as i32 {
            DrawRule::LlamaCpp
        } else {
            DrawRule::Race
        }
    }
}

/// Options of [`Session::new`](crate::Session::new) (`specula_session_options`).
/// What generation does when the context is full (`specula_context_policy`, since 0.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContextPolicy {
    /// The run stops with [`crate::StopReason::ContextFull`] (the default).
    #[default]
    Stop,
    /// Drop `n_discard` tokens after the first `n_keep` and go on: attention sinks plus a recent window, keys
    /// re-rotated to their new positions. Greedy speculative output still equals plain greedy output.
    Shift,
}

impl ContextPolicy {
    pub(crate) fn to_raw(self) -> i32 {
        (match self {
            ContextPolicy::Stop => sys::specula_context_policy_SPECULA_CONTEXT_STOP,
            ContextPolicy::Shift => sys::specula_context_policy_SPECULA_CONTEXT_SHIFT,
        }) as i32
    }

    pub(crate) fn from_raw(raw: i32) -> ContextPolicy {
        if raw == sys::specula_context_policy_SPECULA_CONTEXT_SHIFT as i32 {
            ContextPolicy::Shift
        } else {
            ContextPolicy::Stop
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SessionOptions {
    /// Context length in tokens; 0 = min(n_ctx_train, 4096).
    pub n_ctx: i32,
    /// Compute threads; 0 = number of cores (at most 8).
    pub n_threads: i32,
    /// Prompt tokens evaluated per forward pass; 0 = 64.
    pub n_batch: i32,
    pub backend: Backend,
    /// Device index for GPU backends (see [`crate::devices`]).
    pub device: i32,
    /// When the backend cannot be used, run on the CPU and say why in
    /// [`Session::backend_note`](crate::Session::backend_note) (default); `false`: fail instead.
    pub allow_fallback: bool,
    /// Element type of the KV cache (since 0.8); CUDA and Vulkan keep F16 only.
    pub kv_type: KvType,
    /// What generation does when the context is full (since 0.9); default [`ContextPolicy::Stop`].
    pub context_policy: ContextPolicy,
    /// With [`ContextPolicy::Shift`]: leading tokens always kept (attention sinks, a system prompt); default 4.
    pub n_keep: i32,
    /// With [`ContextPolicy::Shift`]: tokens dropped per shift; 0 (default) = half of those after `n_keep`.
    pub n_discard: i32,
}

impl Default for SessionOptions {
    fn default() -> Self {
        let c = SessionOptions::init();
        SessionOptions {
            n_ctx: c.n_ctx,
            n_threads: c.n_threads,
            n_batch: c.n_batch,
            backend: Backend::from_raw(c.backend),
            device: c.device,
            allow_fallback: c.allow_fallback != 0,
            kv_type: KvType::from_raw(c.kv_type),
            context_policy: ContextPolicy::from_raw(c.context_policy),
            n_keep: c.n_keep,
            n_discard: c.n_discard,
        }
    }
}

impl SessionOptions {
    fn init() -> sys::specula_session_options {
        let mut c: sys::specula_session_options = unsafe { std::mem::zeroed() };
        unsafe { sys::specula_session_options_init_sized(&mut c, std::mem::size_of_val(&c)) };
        c
    }

    pub(crate) fn to_c(&self) -> sys::specula_session_options {
        let mut c = SessionOptions::init();
        c.n_ctx = self.n_ctx;
        c.n_threads = self.n_threads;
        c.n_batch = self.n_batch;
        c.backend = self.backend.to_raw();
        c.device = self.device;
        c.allow_fallback = self.allow_fallback as i32;
        c.kv_type = self.kv_type.to_raw();
        c.context_policy = self.context_policy.to_raw();
        c.n_keep = self.n_keep;
        c.n_discard = self.n_discard;
        c
    }
}

/// Sampler settings (`specula_sampler_options`). `temperature <= 0` is greedy decoding.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerOptions {
    /// <= 0: greedy (argmax, ties to the lowest id). Default 0.8.
    pub temperature: f32,
    /// <= 0: off. Default 40.
    pub top_k: i32,
    /// >= 1: off. Default 0.95.
    pub top_p: f32,
    /// <= 0: off. Default 0.05.
    pub min_p: f32,
    /// 1: off (default).
    pub repeat_penalty: f32,
    /// 0: off (default).
    pub presence_penalty: f32,
    /// 0: off (default).
    pub frequency_penalty: f32,
    /// Window of recent tokens the penalties look at; -1 = the whole context. Default 64.
    pub penalty_last_n: i32,
    /// Random seed: same seed + same inputs = same output.
    pub seed: u64,
    /// TokenSwift's contextual penalty theta; 1 = off (default); must be > 0.
    pub context_penalty: f32,
    /// Tokens of history the contextual penalty looks at; -1 = all, 0 = off. Default 1024.
    pub context_penalty_window: i32,
    /// A GBNF grammar (llama.cpp's format, docs/grammars.md) the generated text must follow; `None` (default): none.
    /// Tokens it cannot continue with are never drawn; an end-of-generation token only where it is complete. One that
    /// does not parse is `InvalidArgument` with the parser's message when the sampler is set. Since 0.13.
    pub grammar: Option<String>,
    /// The grammar's start rule; `None` (default): "root".
    pub grammar_root: Option<String>,
    /// How a sampled token is drawn for the seed; `DrawRule::Race` (default). Since 0.16.
    pub draw: DrawRule,
}

impl Default for SamplerOptions {
    fn default() -> Self {
        let c = SamplerOptions::init();
        SamplerOptions {
            temperature: c.temperature,
            top_k: c.top_k,
            top_p: c.top_p,
            min_p: c.min_p,
            repeat_penalty: c.repeat_penalty,
            presence_penalty: c.presence_penalty,
            frequency_penalty: c.frequency_penalty,
            penalty_last_n: c.penalty_last_n,
            seed: c.seed,
            context_penalty: c.context_penalty,
            context_penalty_window: c.context_penalty_window,
            grammar: None,
            grammar_root: None,
            draw: DrawRule::from_raw(c.draw),
        }
    }
}

impl SamplerOptions {
    /// Greedy decoding (argmax): the library's defaults with temperature 0.
    pub fn greedy() -> SamplerOptions {
        SamplerOptions { temperature: 0.0, ..SamplerOptions::default() }
    }

    fn init() -> sys::specula_sampler_options {
        let mut c: sys::specula_sampler_options = unsafe { std::mem::zeroed() };
        unsafe { sys::specula_sampler_options_init_sized(&mut c, std::mem::size_of_val(&c)) };
        c
    }

    pub(crate) fn to_c(&self) -> Result<CSamplerOptions> {
        let grammar = self.grammar.as_deref().map(|g| util::cstring(g, "grammar")).transpose()?;
        let root = self.grammar_root.as_deref().map(|r| util::cstring(r, "grammar root")).transpose()?;
        let mut c = SamplerOptions::init();
        c.temperature = self.temperature;
        c.top_k = self.top_k;
        c.top_p = self.top_p;
        c.min_p = self.min_p;
        c.repeat_penalty = self.repeat_penalty;
        c.presence_penalty = self.presence_penalty;
        c.frequency_penalty = self.frequency_penalty;
        c.penalty_last_n = self.penalty_last_n;
        c.seed = self.seed;
        c.context_penalty = self.context_penalty;
        c.context_penalty_window = self.context_penalty_window;
        c.grammar = grammar.as_ref().map_or(std::ptr::null(), |g| g.as_ptr());
        c.grammar_root = root.as_ref().map_or(std::ptr::null(), |r| r.as_ptr());
        c.draw = self.draw.to_raw();
        Ok(CSamplerOptions { c, _grammar: grammar, _root: root })
    }
}

/// A `specula_sampler_options` whose grammar pointers point into the strings it owns (heap buffers: moving it keeps
/// them valid).
pub(crate) struct CSamplerOptions {
    pub(crate) c: sys::specula_sampler_options,
    _grammar: Option<CString>,
    _root: Option<CString>,
}

/// Options of one generation run (`specula_generate_options`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerateOptions {
    /// Tokens to generate; < 0: until the context is full. Default 256. For
    /// [`Session::generate_iter`](crate::Session::generate_iter) / [`Session::next_token`](crate::Session::next_token)
    /// it counts since the last append or rewind.
    pub max_tokens: i32,
    /// Stop when an end-of-generation token is sampled (default).
    pub stop_at_eog: bool,
    /// Generation stops before the first occurrence of any of these.
    pub stop_strings: Vec<String>,
    /// Report the K largest raw logits with each token, and their log-sum-exp (0 = none, at most 64).
    pub top_logits: i32,
    /// Report the K most likely tokens after the sampler chain, with their probabilities (0 = none, at most 64).
    pub top_probs: i32,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        let c = GenerateOptions::init();
        GenerateOptions {
            max_tokens: c.max_tokens,
            stop_at_eog: c.stop_at_eog != 0,
            stop_strings: Vec::new(),
            top_logits: c.top_logits,
            top_probs: c.top_probs,
        }
    }
}

impl GenerateOptions {
    /// The defaults with `max_tokens` set.
    pub fn with_max_tokens(max_tokens: i32) -> GenerateOptions {
        GenerateOptions { max_tokens, ..GenerateOptions::default() }
    }

    fn init() -> sys::specula_generate_options {
        let mut c: sys::specula_generate_options = unsafe { std::mem::zeroed() };
        unsafe { sys::specula_generate_options_init_sized(&mut c, std::mem::size_of_val(&c)) };
        c
    }

    pub(crate) fn to_c(&self) -> Result<CGenerateOptions> {
        let strings = self
            .stop_strings
            .iter()
            .map(|s| util::cstring(s, "stop string"))
            .collect::<Result<Vec<CString>>>()?;
        let ptrs: Vec<*const c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        let n_stop = i32::try_from(ptrs.len()).map_err(|_| crate::Error::invalid_argument("too many stop strings"))?;
        let mut c = GenerateOptions::init();
        c.max_tokens = self.max_tokens;
        c.stop_at_eog = self.stop_at_eog as i32;
        c.n_stop_strings = n_stop;
        c.stop_strings = if ptrs.is_empty() { std::ptr::null() } else { ptrs.as_ptr() };
        c.top_logits = self.top_logits;
        c.top_probs = self.top_probs;
        Ok(CGenerateOptions { c, _strings: strings, _ptrs: ptrs })
    }
}

/// A `specula_generate_options` whose `stop_strings` point into the strings it owns. Moving it keeps them valid
/// (the pointers are to heap buffers).
pub(crate) struct CGenerateOptions {
    pub(crate) c: sys::specula_generate_options,
    _strings: Vec<CString>,
    _ptrs: Vec<*const c_char>,
}

// SAFETY: the raw pointers point into the heap buffers owned by the same value; nothing else refers to them.
unsafe impl Send for CGenerateOptions {}
unsafe impl Sync for CGenerateOptions {}

/// What a snapshot holds (`specula_snapshot_scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SnapshotScope {
    /// Everything: an exact resume (context, keys/values, sampler and RNG, drafters, stats). The default.
    Full,
    /// The context only: tokens, keys/values, last logits (what a prompt cache keeps).
    Context,
}

/// Options of snapshot saves and [`Session::fork_into`](crate::Session::fork_into) (`specula_snapshot_options`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotOptions {
    pub scope: SnapshotScope,
    /// zstd level: 1 (default, fast) .. 19 (smaller, slower); negative: faster still; 0: uncompressed.
    pub compression_level: i32,
}

impl Default for SnapshotOptions {
    fn default() -> Self {
        let c = SnapshotOptions::init();
        SnapshotOptions {
            scope: if c.scope == sys::specula_snapshot_scope_SPECULA_SNAPSHOT_CONTEXT as i32 {
                SnapshotScope::Context
            } else {
                SnapshotScope::Full
            },
            compression_level: c.compression_level,
        }
    }
}

impl SnapshotOptions {
    /// The defaults with the Context scope.
    pub fn context() -> SnapshotOptions {
        SnapshotOptions { scope: SnapshotScope::Context, ..SnapshotOptions::default() }
    }

    fn init() -> sys::specula_snapshot_options {
        let mut c: sys::specula_snapshot_options = unsafe { std::mem::zeroed() };
        unsafe { sys::specula_snapshot_options_init_sized(&mut c, std::mem::size_of_val(&c)) };
        c
    }

    pub(crate) fn to_c(&self) -> sys::specula_snapshot_options {
        let mut c = SnapshotOptions::init();
        c.scope = (match self.scope {
            SnapshotScope::Full => sys::specula_snapshot_scope_SPECULA_SNAPSHOT_FULL,
            SnapshotScope::Context => sys::specula_snapshot_scope_SPECULA_SNAPSHOT_CONTEXT,
        }) as i32;
        c.compression_level = self.compression_level;
        c
    }
}
