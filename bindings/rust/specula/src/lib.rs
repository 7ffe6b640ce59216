//! Safe Rust bindings of [Specula](https://github.com/), lossless speculative decoding for local LLMs, over its
//! stable C ABI (`specula.h`, raw declarations in the `specula-sys` crate).
//!
//! ```
//! use specula::{GenerateOptions, Model, ModelOptions, SamplerOptions, Session, SessionOptions, TokenizeFlags};
//! # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../models/stories260K.gguf");
//! # if !std::path::Path::new(path).exists() { return Ok(()); }
//!
//! let model = Model::load(path, &ModelOptions::default())?;
//! let mut session = Session::new(&model, &SessionOptions::default(), &SamplerOptions::greedy())?;
//! session.append_text("Once upon a time", TokenizeFlags::ADD_SPECIAL)?;
//! let mut text = String::new();
//! for event in session.generate_iter(&GenerateOptions::with_max_tokens(16)) {
//!     text.push_str(&event?.text);
//! }
//! assert!(!text.is_empty());
//! # Ok::<(), specula::Error>(())
//! ```
//!
//! # Ownership
//! Every handle frees itself on `Drop`. [`Model`] and [`Draft`] are reference counted (`Clone` adds a reference);
//! a [`Session`] borrows its model (`Session<'m>`), although the library also keeps its own references, so
//! drafters and draft models may be dropped right after [`Session::set_speculative`].
//!
//! # Threads
//! The rules are specula.h's:
//! * [`Model`] is `Send + Sync`: immutable after load, every `specula_model_*` function is thread-safe, so many
//!   threads may share one model, each with its own session.
//! * [`Session`] is `Send` but not `Sync`: one thread at a time (`&mut self` for everything that changes it).
//! * [`CancelHandle`] (from [`Session::cancel_handle`]) is `Send + Sync + 'static` and cancels the session's
//!   generation from any thread; it does nothing once the session is gone.
//! * [`Draft`] and [`PromptCache`] are `Send + Sync`.
//!
//! Callbacks (progress, token, log closures) run on the thread that made the call. A panic in one is caught
//! before it reaches the C library (unwinding through C is undefined behaviour), stops the call, and is resumed
//! once the library has returned (a log callback's panic is discarded).
//!
//! # Errors
//! Fallible calls return [`Result`]`<T>` = `Result<T, `[`Error`]`>`; an [`Error`] has the library's [`Status`] and
//! message. Cancellation and a full context end a generation normally: they are [`StopReason`]s, not errors.
//!
//! A session is not `Sync`:
//! ```compile_fail,E0277
//! fn is_sync<T: Sync>() {}
//! is_sync::<specula::Session<'static>>();
//! ```
//! and cannot outlive its model:
//! ```compile_fail,E0597
//! # use specula::*;
//! let session = {
//!     let model = Model::load("m.gguf", &ModelOptions::default()).unwrap();
//!     Session::with_defaults(&model).unwrap()
//! };
//! ```
//! while a cancel handle is `'static`:
//! ```no_run
//! # use specula::*;
//! let model = Model::load("model.gguf", &ModelOptions::default())?;
//! let mut session = Session::with_defaults(&model)?;
//! let cancel = session.cancel_handle();
//! std::thread::spawn(move || {
//!     std::thread::sleep(std::time::Duration::from_secs(1));
//!     cancel.cancel();
//! });
//! session.append_text("Once upon a time", TokenizeFlags::ADD_SPECIAL)?;
//! let stop = session.generate(&GenerateOptions::with_max_tokens(-1), |ev| {
//!     print!("{}", ev.text);
//!     true
//! })?;
//! println!("\nstopped: {}", stop);
//! # Ok::<(), specula::Error>(())
//! ```
#![warn(missing_debug_implementations)]

mod batch;
mod chat;
mod device;
mod error;
mod grammar;
mod log;
mod model;
mod options;
mod prompt_cache;
mod session;
mod speculative;
pub mod synthetic;
mod util;

pub use specula_sys as sys;

pub use crate::batch::{Batch, BatchStats};
pub use crate::chat::{apply_template as apply_chat_template, builtin_templates, detect_template, format as format_chat, ChatMessage, ChatOptions};
pub use crate::device::{backend_check, device_count, devices, DeviceInfo};
pub use crate::error::{Error, Result, Status};
pub use crate::grammar::json_schema_to_grammar;
pub use crate::log::{clear_logger, set_logger, LogLevel};
pub use crate::model::{FimToken, Model, ModelOptions, TensorInfo, TokenKind, TokenizeFlags};
pub use crate::options::{Backend, ContextPolicy, DrawRule, GenerateOptions, KvType, SamplerOptions, SessionOptions, SnapshotOptions, SnapshotScope};
pub use crate::prompt_cache::{PromptCache, PromptCacheOptions, PromptCacheStats};
pub use crate::session::{CancelHandle, Session, Stats, StopReason, TokenEvent, TokenIter};
pub use crate::speculative::{Draft, SampledDrafts, SpeculativeOptions, TreeMode};
pub use crate::util::Progress;

/// A token id.
pub type Token = i32;

/// The library's version as (major, minor, patch) (`specula_version`).
pub fn version() -> (u32, u32, u32) {
    let v = unsafe { sys::specula_version() };
    (v >> 16, (v >> 8) & 0xff, v & 0xff)
}

/// The library's version as "MAJOR.MINOR.PATCH".
pub fn version_string() -> String {
    unsafe { util::string_from(sys::specula_version_string()) }
}

/// The ABI version of the loaded library; these bindings need [`sys::SPECULA_ABI_VERSION`].
pub fn abi_version() -> u32 {
    unsafe { sys::specula_abi_version() }
}

// Compile-time checks of the threading rules above (never called; type-checked).
#[allow(dead_code)]
fn _assert_thread_traits() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Model>();
    send_sync::<Draft>();
    send_sync::<PromptCache>();
    send_sync::<CancelHandle>();
    send_sync::<Error>();
    send::<Session<'static>>();
}

#[cfg(test)]
mod tests {
    /// Every function of the C ABI has a safe wrapper (or is used by one): a function added to specula.h and
    /// regenerated into specula-sys shows up here.
    #[test]
    fn every_c_function_is_wrapped() {
        let bindings = include_str!("../../specula-sys/src/bindings.rs");
        let sources = [
            include_str!("batch.rs"),
            include_str!("chat.rs"),
            include_str!("device.rs"),
            include_str!("error.rs"),
            include_str!("grammar.rs"),
            include_str!("lib.rs"),
            include_str!("log.rs"),
            include_str!("model.rs"),
            include_str!("options.rs"),
            include_str!("prompt_cache.rs"),
            include_str!("session.rs"),
            include_str!("speculative.rs"),
            include_str!("synthetic.rs"),
            include_str!("util.rs"),
        ]
        .concat();
        let mut missing = Vec::new();
        let mut n = 0;
        for item in bindings.split("pub fn ").skip(1) {
            let name: String = item.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !name.starts_with("specula_") {
                continue;
            }
            n += 1;
            // Kept for applications built against headers before 0.17; the wrappers call *_init_sized with the
            // size of their struct (what the header's *_init macros do).
            if name.ends_with("_options_init") && bindings.contains(&format!("pub fn {}_sized ", name)) {
                continue;
            }
            let used = sources.match_indices(&format!("sys::{}", name)).any(|(i, m)| {
                !sources[i + m.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
            });
            if !used {
                missing.push(name);
            }
        }
        assert!(n >= 96, "only {} functions found in bindings.rs", n);
        assert!(missing.is_empty(), "C functions without a safe wrapper: {:?}", missing);
    }
}
