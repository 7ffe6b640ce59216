//! Models: [`Model::load`], model information, the vocabulary and tokenization.
use std::fmt;
use std::os::raw::c_char;
use std::path::Path;
use std::ptr::{self, NonNull};

use specula_sys as sys;

use crate::error::{ffi, ffi_status, Error, Result};
use crate::util::{self, Progress, ProgressCallback};
use crate::Token;

/// Flags of [`Model::tokenize`] and [`Session::append_text`](crate::Session::append_text)
/// (`SPECULA_TOKENIZE_*`). Combine them with `|`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TokenizeFlags(u32);

impl TokenizeFlags {
    /// Plain text: no BOS/EOS, control tokens written in the text stay text.
    pub const NONE: TokenizeFlags = TokenizeFlags(0);
    /// Add BOS/EOS as the model's metadata asks (for a session: BOS only when the context is empty).
    pub const ADD_SPECIAL: TokenizeFlags = TokenizeFlags(sys::SPECULA_TOKENIZE_ADD_SPECIAL as u32);
    /// Recognise control tokens such as `<s>` or `<|im_start|>` written in the text.
    pub const PARSE_SPECIAL: TokenizeFlags = TokenizeFlags(sys::SPECULA_TOKENIZE_PARSE_SPECIAL as u32);

    /// The raw flag bits.
    pub fn bits(self) -> u32 {
        self.0
    }

    /// Whether every flag of `other` is set.
    pub fn contains(self, other: TokenizeFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for TokenizeFlags {
    type Output = TokenizeFlags;
    fn bitor(self, rhs: TokenizeFlags) -> TokenizeFlags {
        TokenizeFlags(self.0 | rhs.0)
    }
}

/// Kind of a vocabulary entry (`specula_token_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenKind {
    /// Not a valid id.
    Invalid,
    Normal,
    Unknown,
    /// BOS, EOS, `<|im_start|>`...: not rendered as text by default.
    Control,
    UserDefined,
    Unused,
    /// SentencePiece byte-fallback token `<0xNN>`.
    Byte,
    /// A kind this version of the bindings does not know.
    Other(u32),
}

impl TokenKind {
    fn from_raw(raw: sys::specula_token_kind) -> TokenKind {
        match raw {
            sys::specula_token_kind_SPECULA_TOKEN_KIND_INVALID => TokenKind::Invalid,
            sys::specula_token_kind_SPECULA_TOKEN_KIND_NORMAL => TokenKind::Normal,
            sys::specula_token_kind_SPECULA_TOKEN_KIND_UNKNOWN => TokenKind::Unknown,
            sys::specula_token_kind_SPECULA_TOKEN_KIND_CONTROL => TokenKind::Control,
            sys::specula_token_kind_SPECULA_TOKEN_KIND_USER_DEFINED => TokenKind::UserDefined,
            sys::specula_token_kind_SPECULA_TOKEN_KIND_UNUSED => TokenKind::Unused,
            sys::specula_token_kind_SPECULA_TOKEN_KIND_BYTE => TokenKind::Byte,
            other => TokenKind::Other(other),
        }
    }
}

/// Fill-in-the-middle tokens (`specula_fim_token`), see [`Model::fim_token`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FimToken {
    /// Before the prefix.
    Prefix,
    /// Before the suffix.
    Suffix,
    /// Where the middle is generated.
    Middle,
    Pad,
    /// Repository name (repository-level FIM).
    Repo,
    /// File separator (repository-level FIM).
    Sep,
}

impl FimToken {
    fn to_raw(self) -> sys::specula_fim_token {
        match self {
            FimToken::Prefix => sys::specula_fim_token_SPECULA_FIM_PRE,
            FimToken::Suffix => sys::specula_fim_token_SPECULA_FIM_SUF,
            FimToken::Middle => sys::specula_fim_token_SPECULA_FIM_MID,
            FimToken::Pad => sys::specula_fim_token_SPECULA_FIM_PAD,
            FimToken::Repo => sys::specula_fim_token_SPECULA_FIM_REP,
            FimToken::Sep => sys::specula_fim_token_SPECULA_FIM_SEP,
        }
    }
}

/// Options of [`Model::load`] (`specula_model_options`). `Default` gives the library's defaults.
pub struct ModelOptions<'a> {
    /// Map the file read-only without copying it (default); `false` reads it into memory.
    pub use_mmap: bool,
    /// Load only the tokenizer and metadata (vocab-only GGUFs too): tokenization and chat templates work,
    /// sessions refuse the model, the hyperparameter getters return 0 (`n_vocab` excepted).
    pub vocab_only: bool,
    /// Called during the load with progress in `[0, 1]`; see [`Progress`] and [`ModelOptions::progress`].
    pub progress: Option<Progress<'a>>,
}

impl<'a> Default for ModelOptions<'a> {
    fn default() -> Self {
        let mut c: sys::specula_model_options = unsafe { std::mem::zeroed() };
        unsafe { sys::specula_model_options_init_sized(&mut c, std::mem::size_of_val(&c)) };
        ModelOptions { use_mmap: c.use_mmap != 0, vocab_only: c.vocab_only != 0, progress: None }
    }
}

impl<'a> fmt::Debug for ModelOptions<'a> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelOptions")
            .field("use_mmap", &self.use_mmap)
            .field("vocab_only", &self.vocab_only)
            .field("progress", &self.progress)
            .finish()
    }
}

impl<'a> ModelOptions<'a> {
    /// Sets a progress closure, called during the load (on the loading thread) with progress in `[0, 1]`;
    /// returning `false` cancels the load ([`Status::Cancelled`](crate::Status::Cancelled)). A panic in it
    /// cancels the load and is resumed from [`Model::load`] once the library has returned.
    pub fn progress<F: FnMut(f32) -> bool + 'a>(mut self, f: F) -> Self {
        self.progress = Some(Progress::new(f));
        self
    }

    /// Builder form of `use_mmap`.
    pub fn use_mmap(mut self, yes: bool) -> Self {
        self.use_mmap = yes;
        self
    }

    /// Builder form of `vocab_only`.
    pub fn vocab_only(mut self, yes: bool) -> Self {
        self.vocab_only = yes;
        self
    }
}

/// One tensor of the model file (`specula_tensor_info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// "F32", "Q4_0", ...
    pub type_name: String,
    /// ggml order: `dims[0]` is the contiguous (row) dimension.
    pub dims: Vec<i64>,
    /// Byte offset of the data in the file.
    pub offset: u64,
    pub n_bytes: u64,
}

/// A loaded GGUF model (`specula_model`): immutable, reference counted; `Clone` adds a reference
/// (`specula_model_retain`), `Drop` releases one.
///
/// # Threads
/// `Model` is `Send + Sync`. specula.h: "A specula_model is immutable after load and reference counted. Every
/// specula_model_* function is thread-safe; many sessions on many threads may share one model."
/// `specula_session_create` and `specula_draft_load` are thread-safe with respect to the model, tokenization and
/// chat templates are "thread-safe on a shared model", and `specula_model_retain` / `specula_model_destroy` are
/// thread-safe, so a handle may be used, cloned and dropped on any thread. Sessions hold their own reference.
pub struct Model {
    raw: NonNull<sys::specula_model>,
}

// SAFETY: see the type's documentation: every function taking a specula_model is thread-safe (specula.h's
// threading contract), the model is immutable after load and its reference count is atomic.
unsafe impl Send for Model {}
unsafe impl Sync for Model {}

impl Clone for Model {
    fn clone(&self) -> Model {
        let raw = unsafe { sys::specula_model_retain(self.raw.as_ptr()) };
        Model { raw: NonNull::new(raw).expect("specula_model_retain returned NULL") }
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        unsafe { sys::specula_model_destroy(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Model").field("arch", &self.arch()).field("name", &self.name()).field("n_vocab", &self.n_vocab()).finish()
    }
}

fn count(n: i32) -> usize {
    if n > 0 {
        n as usize
    } else {
        0
    }
}

fn opt_token(t: i32) -> Option<Token> {
    if t == sys::SPECULA_TOKEN_NULL || t < 0 {
        None
    } else {
        Some(t)
    }
}

impl Model {
    /// Loads a GGUF model (`specula_model_load`).
    /// Statuses: `Io` (missing, unreadable), `Format`, `Unsupported`, `OutOfMemory`, `Cancelled` (by the progress
    /// closure), `InvalidArgument` (a path with a NUL byte).
    pub fn load<P: AsRef<Path>>(path: P, opts: &ModelOptions<'_>) -> Result<Model> {
        let cpath = util::path_cstring(path.as_ref())?;
        let mut c: sys::specula_model_options = unsafe { std::mem::zeroed() };
        unsafe { sys::specula_model_options_init_sized(&mut c, std::mem::size_of_val(&c)) };
        c.use_mmap = opts.use_mmap as i32;
        c.vocab_only = opts.vocab_only as i32;

        // The closure is borrowed for the call (a re-entrant load with the same options is refused).
        let mut guard = match &opts.progress {
            Some(p) => Some(p.borrow()?),
            None => None,
        };
        let mut callback = guard.as_mut().map(|g| ProgressCallback::new(&mut ***g));
        if let Some(cb) = callback.as_mut() {
            let (f, user) = cb.as_c();
            c.progress = f;
            c.progress_user_data = user;
        }
        let mut out: *mut sys::specula_model = ptr::null_mut();
        let result = ffi(|err| unsafe { sys::specula_model_load(cpath.as_ptr(), &c, &mut out, err) });
        // Owned from here: if the closure panicked, resuming the panic drops it.
        let model = if result.is_ok() { NonNull::new(out).map(|raw| Model { raw }) } else { None };
        if let Some(cb) = callback {
            cb.finish();
        }
        result?;
        model.ok_or_else(|| Error::new(crate::Status::Internal, "specula_model_load returned no model"))
    }

    /// Adopts a handle the caller owns one reference of.
    ///
    /// # Safety
    /// `raw` must be a live `specula_model` handle whose reference the caller gives up.
    pub unsafe fn from_raw(raw: *mut sys::specula_model) -> Option<Model> {
        NonNull::new(raw).map(|raw| Model { raw })
    }

    /// The raw handle (still owned by this `Model`).
    pub fn as_raw(&self) -> *mut sys::specula_model {
        self.raw.as_ptr()
    }

    fn p(&self) -> *const sys::specula_model {
        self.raw.as_ptr()
    }

    /// Architecture: "llama", "qwen2", ...
    pub fn arch(&self) -> String {
        unsafe { util::string_from(sys::specula_model_arch(self.p())) }
    }
    /// `general.name`, or "".
    pub fn name(&self) -> String {
        unsafe { util::string_from(sys::specula_model_name(self.p())) }
    }
    /// The weight format: the declared quantization ("Q4_K_M", "F16", ...) or the dominant tensor type.
    pub fn weight_type(&self) -> String {
        unsafe { util::string_from(sys::specula_model_weight_type(self.p())) }
    }
    pub fn n_vocab(&self) -> usize {
        count(unsafe { sys::specula_model_n_vocab(self.p()) })
    }
    pub fn n_ctx_train(&self) -> usize {
        count(unsafe { sys::specula_model_n_ctx_train(self.p()) })
    }
    pub fn n_layer(&self) -> usize {
        count(unsafe { sys::specula_model_n_layer(self.p()) })
    }
    pub fn n_embd(&self) -> usize {
        count(unsafe { sys::specula_model_n_embd(self.p()) })
    }
    pub fn n_head(&self) -> usize {
        count(unsafe { sys::specula_model_n_head(self.p()) })
    }
    pub fn n_head_kv(&self) -> usize {
        count(unsafe { sys::specula_model_n_head_kv(self.p()) })
    }
    pub fn n_ff(&self) -> usize {
        count(unsafe { sys::specula_model_n_ff(self.p()) })
    }
    pub fn n_params(&self) -> u64 {
        unsafe { sys::specula_model_n_params(self.p()) }
    }
    pub fn file_size(&self) -> u64 {
        unsafe { sys::specula_model_file_size(self.p()) }
    }

    /// Number of tensors in the file.
    pub fn tensor_count(&self) -> usize {
        count(unsafe { sys::specula_model_tensor_count(self.p()) })
    }

    /// The tensor at `index` in `[0, tensor_count())`.
    pub fn tensor_info(&self, index: usize) -> Result<TensorInfo> {
        let index = i32::try_from(index).map_err(|_| Error::invalid_argument("tensor index out of range"))?;
        let mut info: sys::specula_tensor_info = unsafe { std::mem::zeroed() };
        info.struct_size = std::mem::size_of::<sys::specula_tensor_info>() as u32;
        ffi(|err| unsafe { sys::specula_model_tensor_info(self.p(), index, &mut info, err) })?;
        let n_dims = (info.n_dims.max(0) as usize).min(info.dims.len());
        Ok(TensorInfo {
            name: unsafe { util::string_from(info.name) },
            type_name: unsafe { util::string_from(info.type_) },
            dims: info.dims[..n_dims].to_vec(),
            offset: info.offset,
            n_bytes: info.n_bytes,
        })
    }

    /// Every tensor of the file.
    pub fn tensors(&self) -> Result<Vec<TensorInfo>> {
        (0..self.tensor_count()).map(|i| self.tensor_info(i)).collect()
    }

    /// Number of GGUF metadata entries.
    pub fn meta_count(&self) -> usize {
        count(unsafe { sys::specula_model_meta_count(self.p()) })
    }

    /// Key of metadata entry `index`; `None` out of range.
    pub fn meta_key(&self, index: usize) -> Option<String> {
        let index = i32::try_from(index).ok()?;
        unsafe { util::opt_string_from(sys::specula_model_meta_key(self.p(), index)) }
    }

    /// Value of metadata entry `index` rendered as text, arrays abbreviated after `max_array` items.
    pub fn meta_value(&self, index: usize, max_array: i32) -> Result<String> {
        let index = i32::try_from(index).map_err(|_| Error::invalid_argument("metadata index out of range"))?;
        util::fetch_text(|buf, size, len, err| unsafe { sys::specula_model_meta_value(self.p(), index, max_array, buf, size, len, err) })
    }

    /// Every metadata entry as (key, value) text, arrays abbreviated after `max_array` items.
    pub fn metadata(&self, max_array: i32) -> Result<Vec<(String, String)>> {
        (0..self.meta_count())
            .map(|i| Ok((self.meta_key(i).unwrap_or_default(), self.meta_value(i, max_array)?)))
            .collect()
    }

    /// The model file's fingerprint: 32 hex digits of XXH3-128 over the whole GGUF (read once, on first use).
    pub fn fingerprint(&self) -> Result<String> {
        util::fetch_text(|buf, size, len, err| unsafe { sys::specula_model_fingerprint(self.p(), buf, size, len, err) })
    }

    /// Beginning-of-sequence token, if the vocabulary has one.
    pub fn bos(&self) -> Option<Token> {
        opt_token(unsafe { sys::specula_model_token_bos(self.p()) })
    }
    /// End-of-sequence token, if any.
    pub fn eos(&self) -> Option<Token> {
        opt_token(unsafe { sys::specula_model_token_eos(self.p()) })
    }
    /// End-of-turn token (`<|eot_id|>`, `<|im_end|>`, ...), if any.
    pub fn eot(&self) -> Option<Token> {
        opt_token(unsafe { sys::specula_model_token_eot(self.p()) })
    }
    /// Whether tokenizing with [`TokenizeFlags::ADD_SPECIAL`] adds BOS.
    pub fn add_bos(&self) -> bool {
        unsafe { sys::specula_model_add_bos(self.p()) != 0 }
    }
    /// Whether tokenizing with [`TokenizeFlags::ADD_SPECIAL`] adds EOS.
    pub fn add_eos(&self) -> bool {
        unsafe { sys::specula_model_add_eos(self.p()) != 0 }
    }
    /// The model's fill-in-the-middle token of that kind, if it has one.
    pub fn fim_token(&self, which: FimToken) -> Option<Token> {
        opt_token(unsafe { sys::specula_model_token_fim(self.p(), which.to_raw()) })
    }
    /// Whether `token` ends generation (EOS, EOT and the like).
    pub fn is_eog(&self, token: Token) -> bool {
        unsafe { sys::specula_model_token_is_eog(self.p(), token) != 0 }
    }
    /// The token's text as stored in the vocabulary ("▁dog", "<0x0A>"); `None` for an invalid id.
    pub fn token_text(&self, token: Token) -> Option<String> {
        unsafe { util::opt_string_from(sys::specula_model_token_text(self.p(), token)) }
    }
    /// Kind of the vocabulary entry (`Invalid` for an id outside the vocabulary).
    pub fn token_kind(&self, token: Token) -> TokenKind {
        TokenKind::from_raw(unsafe { sys::specula_model_token_kind(self.p(), token) })
    }
    /// Tokenizer family: "llama" (SentencePiece), "gpt2" (byte-level BPE), ...
    pub fn tokenizer(&self) -> String {
        unsafe { util::string_from(sys::specula_model_tokenizer(self.p())) }
    }
    /// Pre-tokenizer of byte-level BPE vocabularies ("llama-bpe", "qwen2", ...), "" otherwise.
    pub fn pre_tokenizer(&self) -> String {
        unsafe { util::string_from(sys::specula_model_pre_tokenizer(self.p())) }
    }

    /// Tokenizes UTF-8 text.
    pub fn tokenize(&self, text: &str, flags: TokenizeFlags) -> Result<Vec<Token>> {
        let mut tokens: Vec<Token> = vec![0; text.len() + 4];
        loop {
            let mut n: usize = 0;
            let (status, error) = ffi_status(|err| unsafe {
                sys::specula_model_tokenize(
                    self.p(),
                    text.as_ptr() as *const c_char,
                    text.len(),
                    flags.bits() as i32,
                    tokens.as_mut_ptr(),
                    tokens.len(),
                    &mut n,
                    err,
                )
            });
            match error {
                None => {
                    tokens.truncate(n.min(tokens.len()));
                    return Ok(tokens);
                }
                Some(_) if status == sys::specula_status_SPECULA_ERR_BUFFER_TOO_SMALL && n > tokens.len() => {
                    tokens = vec![0; n];
                }
                Some(e) => return Err(e),
            }
        }
    }

    /// The text of a sequence of tokens; control tokens are rendered only with `render_special`.
    /// Invalid UTF-8 (a sequence cut inside a character) is replaced by U+FFFD.
    pub fn detokenize(&self, tokens: &[Token], render_special: bool) -> Result<String> {
        util::fetch_text(|buf, size, len, err| unsafe {
            sys::specula_model_detokenize(self.p(), tokens.as_ptr(), tokens.len(), render_special as i32, buf, size, len, err)
        })
    }

    /// The bytes of one token (llama.cpp's token-to-piece); may be an incomplete UTF-8 sequence.
    /// Statuses: `InvalidToken`.
    pub fn token_to_piece(&self, token: Token, render_special: bool) -> Result<Vec<u8>> {
        util::fetch_bytes(|buf, size, len, err| unsafe {
            sys::specula_model_token_to_piece(self.p(), token, render_special as i32, buf, size, len, err)
        })
    }

    /// Formats a conversation with the model's own chat template (see [`crate::chat::apply_template`]).
    pub fn apply_chat_template(&self, messages: &[crate::ChatMessage], add_assistant: bool) -> Result<String> {
        crate::chat::apply_template(Some(self), None, messages, add_assistant)
    }
}
