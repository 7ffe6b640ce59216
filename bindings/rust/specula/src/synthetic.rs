//! Synthetic models (`specula_synthetic_*`): random-weight GGUFs of real model shapes, for speed measurements.
use std::ffi::CString;
use std::fmt;
use std::path::Path;

use specula_sys as sys;

use crate::error::{ffi, Result};
use crate::util::{self, Progress, ProgressCallback};

/// Names of the built-in shapes ("llama-3.2-1b", "qwen2.5-0.5b", "tiny-llama", ...).
pub fn shapes() -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(name) = unsafe { util::opt_string_from(sys::specula_synthetic_shape(i)) } {
        out.push(name);
        i += 1;
    }
    out
}

/// Options of [`write_model`] (`specula_synthetic_options`).
pub struct SyntheticOptions<'a> {
    /// "f32", "f16", "q8_0", "q4_0", "q4_k_m" (any case); `None` = "q8_0".
    pub weight_type: Option<String>,
    /// Same seed, shape and type: the same file. Default 1.
    pub seed: u64,
    /// > 0: this many layers instead of the shape's. Default 0.
    pub n_layer: i32,
    /// Called with the fraction written; see [`Progress`].
    pub progress: Option<Progress<'a>>,
}

impl<'a> Default for SyntheticOptions<'a> {
    fn default() -> Self {
        let mut c: sys::specula_synthetic_options = unsafe { std::mem::zeroed() };
        unsafe { sys::specula_synthetic_options_init_sized(&mut c, std::mem::size_of_val(&c)) };
        SyntheticOptions { weight_type: None, seed: c.seed, n_layer: c.n_layer, progress: None }
    }
}

impl<'a> fmt::Debug for SyntheticOptions<'a> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyntheticOptions")
            .field("weight_type", &self.weight_type)
            .field("seed", &self.seed)
            .field("n_layer", &self.n_layer)
            .finish()
    }
}

impl<'a> SyntheticOptions<'a> {
    /// Called with the fraction written; returning `false` cancels (`Cancelled`). A panic cancels and is resumed.
    pub fn progress<F: FnMut(f32) -> bool + 'a>(mut self, f: F) -> Self {
        self.progress = Some(Progress::new(f));
        self
    }
}

/// Writes a synthetic model of the built-in `shape` to `path` with the tokenizer of the GGUF at `vocab_path`.
/// On failure no partial file is left.
pub fn write_model<P: AsRef<Path>, Q: AsRef<Path>>(shape: &str, vocab_path: P, path: Q, opts: &SyntheticOptions<'_>) -> Result<()> {
    let cshape = util::cstring(shape, "shape")?;
    let cvocab = util::path_cstring(vocab_path.as_ref())?;
    let cpath = util::path_cstring(path.as_ref())?;
    let ctype: Option<CString> = match &opts.weight_type {
        Some(t) => Some(util::cstring(t, "weight type")?),
        None => None,
    };
    let mut c: sys::specula_synthetic_options = unsafe { std::mem::zeroed() };
    unsafe { sys::specula_synthetic_options_init_sized(&mut c, std::mem::size_of_val(&c)) };
    c.weight_type = ctype.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
    c.seed = opts.seed;
    c.n_layer = opts.n_layer;
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
    let result = ffi(|err| unsafe { sys::specula_synthetic_model_write(cshape.as_ptr(), cvocab.as_ptr(), cpath.as_ptr(), &c, err) });
    if let Some(cb) = callback {
        cb.finish();
    }
    result
}
