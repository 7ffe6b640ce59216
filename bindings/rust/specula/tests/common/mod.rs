//! Shared helpers of the integration tests: the bundled models of the repository and a greedy session.
#![allow(dead_code)]

use std::path::PathBuf;

use specula::{GenerateOptions, Model, ModelOptions, SamplerOptions, Session, SessionOptions, Token};

/// The repository's models/ directory (bindings/rust/specula/../../../models).
pub fn models_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../models")
}

pub fn model_path() -> PathBuf {
    models_dir().join("stories260K.gguf")
}

pub fn draft_path() -> PathBuf {
    models_dir().join("drafts/stories260K.longspec.gguf")
}

pub fn load_model() -> Model {
    Model::load(model_path(), &ModelOptions::default()).unwrap_or_else(|e| panic!("loading {}: {}", model_path().display(), e))
}

/// BOS, "Once", " upon" in stories260K's vocabulary (the prompt of the CLI comparison).
pub const PROMPT: [Token; 3] = [1, 403, 407];

/// One compute thread: the tests run in parallel on a small machine.
pub fn session_options() -> SessionOptions {
    SessionOptions { n_threads: 1, backend: specula::Backend::Cpu, ..SessionOptions::default() }
}

pub fn greedy_session(model: &Model) -> Session<'_> {
    Session::new(model, &session_options(), &SamplerOptions::greedy()).expect("session")
}

/// Generation that does not stop at EOS, so that runs of different lengths compare token for token.
pub fn gen_opts(n: i32) -> GenerateOptions {
    GenerateOptions { max_tokens: n, stop_at_eog: false, ..GenerateOptions::default() }
}

/// The greedy continuation of `prompt`: `n` tokens by plain decoding.
pub fn plain_greedy(model: &Model, prompt: &[Token], n: i32) -> Vec<Token> {
    let mut s = greedy_session(model);
    s.append_tokens(prompt).unwrap();
    let (tokens, _) = s.generate_tokens(&gen_opts(n)).unwrap();
    tokens
}

/// A fresh directory under the system's temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("specula-rust-{}-{}", name, std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
