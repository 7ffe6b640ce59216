//! Speculative decoding: LongSpec drafts ([`Draft`]), independent draft models and n-gram drafting, attached to a
//! session with [`Session::set_speculative`](crate::Session::set_speculative). Verification is exact: with greedy
//! sampling the output is token for token what plain decoding gives.
use std::fmt;
use std::path::Path;
use std::ptr::{self, NonNull};

use specula_sys as sys;

use crate::error::{ffi, Error, Result, Status};
use crate::model::Model;
use crate::util;

/// A LongSpec draft (`specula_draft`): one extra decoder layer trained for a target model. Reference counted
/// (`Clone` retains, `Drop` releases); it keeps the target's weights alive and can only be attached to sessions
/// of the same loaded model (the same handle or a clone of it).
///
/// `Send + Sync`: `specula_draft_load`, `_retain` and `_destroy` are thread-safe (specula.h), and the draft is
/// immutable after load (sessions keep their drafter state themselves; the library holds it as a shared
/// const object), so one draft may serve sessions on many threads.
pub struct Draft {
    raw: NonNull<sys::specula_draft>,
}

// SAFETY: see the type's documentation.
unsafe impl Send for Draft {}
unsafe impl Sync for Draft {}

impl Clone for Draft {
    fn clone(&self) -> Draft {
        let raw = unsafe { sys::specula_draft_retain(self.raw.as_ptr()) };
        Draft { raw: NonNull::new(raw).expect("specula_draft_retain returned NULL") }
    }
}

impl Drop for Draft {
    fn drop(&mut self) {
        unsafe { sys::specula_draft_destroy(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Draft {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Draft").field("window", &self.window()).field("n_params", &self.n_params()).finish()
    }
}

impl Draft {
    /// Loads a LongSpec draft file and checks it against `target`, the model it was trained for.
    /// Statuses: `Io`, `Format` (not a LongSpec draft), `Unsupported`, `Incompatible` (made for another target;
    /// the message names the first difference), `InvalidArgument` (a vocab-only target), `OutOfMemory`.
    pub fn load<P: AsRef<Path>>(path: P, target: &Model) -> Result<Draft> {
        let cpath = util::path_cstring(path.as_ref())?;
        let mut out: *mut sys::specula_draft = ptr::null_mut();
        ffi(|err| unsafe { sys::specula_draft_load(cpath.as_ptr(), target.as_raw(), &mut out, err) })?;
        NonNull::new(out).map(|raw| Draft { raw }).ok_or_else(|| Error::new(Status::Internal, "specula_draft_load returned no draft"))
    }

    /// Writes a LongSpec draft for `target` with random (untrained) weights: it drafts poorly but never changes
    /// the output. `window`: self-attention window in tokens, 0 = 512. Same seed, same file.
    pub fn write_random<P: AsRef<Path>>(target: &Model, path: P, seed: u64, window: i32) -> Result<()> {
        let cpath = util::path_cstring(path.as_ref())?;
        ffi(|err| unsafe { sys::specula_draft_write_random(target.as_raw(), cpath.as_ptr(), seed, window, err) })
    }

    /// The raw handle (still owned by this `Draft`).
    pub fn as_raw(&self) -> *mut sys::specula_draft {
        self.raw.as_ptr()
    }

    /// The draft's self-attention window in tokens.
    pub fn window(&self) -> i32 {
        unsafe { sys::specula_draft_window(self.raw.as_ptr()) }
    }

    /// Parameters stored in the draft file (the shared embeddings and LM head not counted).
    pub fn n_params(&self) -> u64 {
        unsafe { sys::specula_draft_n_params(self.raw.as_ptr()) }
    }
}

/// Drafters to attach (`specula_speculative_options`). `Default` has none (plain decoding) and the library's
/// defaults for the tree and n-gram settings. The references are only read during
/// [`Session::set_speculative`](crate::Session::set_speculative): the session keeps its own.
#[derive(Clone)]
pub struct SpeculativeOptions<'a> {
    /// A LongSpec draft loaded for the session's model.
    pub draft: Option<&'a Draft>,
    /// An independent draft model with the target's vocabulary (not together with `draft`).
    pub draft_model: Option<&'a Model>,
    /// N-gram drafting (prompt lookup + TokenSwift's token-reuse table), alone or merged with the above.
    pub ngram: bool,
    /// The sampler's grammar drafts alone (since 0.14): with no other drafter, each round drafts the text the grammar
    /// forces, as the model spelled it before. With other drafters the forced text joins their trees anyway.
    pub grammar: bool,
    /// Nodes per tree level for the draft / draft model; empty: the default [4, 16, 16, 16, 16]. A chain of k
    /// drafted tokens is k levels of width 1.
    pub tree_widths: Vec<i32>,
    /// Tree nodes reserved for n-gram candidates (alone: the whole tree); 0..1024.
    pub ngram_nodes: i32,
    /// Prompt lookup: shortest context suffix matched.
    pub ngram_lookup_min: i32,
    /// Longest suffix matched.
    pub ngram_lookup_max: i32,
    /// Longest prompt-lookup chain proposed.
    pub ngram_max_chain: i32,
    /// N-gram size of the token-reuse table, 2..64.
    pub ngram_table_n: i32,
    /// N-grams proposed per root from the table; 0 = no table.
    pub ngram_table_topk: i32,
    /// The table ignores the newest `ngram_lag` tokens.
    pub ngram_lag: i32,
    /// How each round's tree is chosen (`specula_tree_mode`).
    pub tree_mode: TreeMode,
    /// How chains drafted by sampling are drawn and verified (`specula_sampled_drafts`).
    pub sampled_drafts: SampledDrafts,
}

/// How each speculative round's tree is chosen (`specula_tree_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeMode {
    /// `Auto`, unless `tree_widths` are given: then `Fixed` (the default).
    Default,
    /// Each round the tree the session expects to be fastest from what it measures, plain decoding included
    /// (`tree_widths` and `ngram_nodes` bound it). Lossless; with `SampledDrafts::Coupled` a seed gives the same
    /// text whatever it chooses.
    Auto,
    /// Every round drafts `tree_widths` (or [4, 16, 16, 16, 16]) and `ngram_nodes`.
    Fixed,
}

impl TreeMode {
    fn to_raw(self) -> i32 {
        (match self {
            TreeMode::Default => sys::specula_tree_mode_SPECULA_TREE_DEFAULT,
            TreeMode::Auto => sys::specula_tree_mode_SPECULA_TREE_AUTO,
            TreeMode::Fixed => sys::specula_tree_mode_SPECULA_TREE_FIXED,
        }) as i32
    }
}

/// How chains drafted by sampling (temperature > 0) are drawn and verified (`specula_sampled_drafts`). Both are
/// exact: every token is distributed as the target's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampledDrafts {
    /// The draft draws each position with the target's random key: for a seed, the text is plain sampling's,
    /// whatever the drafter, tree or thread count (the default).
    Coupled,
    /// Leviathan et al.'s accept/reject rule: up to ~14% more tokens per round with weak drafts, but the text for
    /// a seed depends on the drafts.
    Leviathan,
}

impl SampledDrafts {
    fn to_raw(self) -> i32 {
        (match self {
            SampledDrafts::Coupled => sys::specula_sampled_drafts_SPECULA_SAMPLED_DRAFTS_COUPLED,
            SampledDrafts::Leviathan => sys::specula_sampled_drafts_SPECULA_SAMPLED_DRAFTS_LEVIATHAN,
        }) as i32
    }
}

impl<'a> fmt::Debug for SpeculativeOptions<'a> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpeculativeOptions")
            .field("draft", &self.draft.is_some())
            .field("draft_model", &self.draft_model.is_some())
            .field("ngram", &self.ngram)
            .field("grammar", &self.grammar)
            .field("tree_widths", &self.tree_widths)
            .field("ngram_nodes", &self.ngram_nodes)
            .field("tree_mode", &self.tree_mode)
            .field("sampled_drafts", &self.sampled_drafts)
            .finish()
    }
}

impl<'a> Default for SpeculativeOptions<'a> {
    fn default() -> Self {
        let c = SpeculativeOptions::init();
        SpeculativeOptions {
            draft: None,
            draft_model: None,
            ngram: c.ngram != 0,
            grammar: c.grammar != 0,
            tree_widths: Vec::new(),
            ngram_nodes: c.ngram_nodes,
            ngram_lookup_min: c.ngram_lookup_min,
            ngram_lookup_max: c.ngram_lookup_max,
            ngram_max_chain: c.ngram_max_chain,
            ngram_table_n: c.ngram_table_n,
            ngram_table_topk: c.ngram_table_topk,
            ngram_lag: c.ngram_lag,
            tree_mode: TreeMode::Default,
            sampled_drafts: SampledDrafts::Coupled,
        }
    }
}

impl<'a> SpeculativeOptions<'a> {
    /// A LongSpec draft alone.
    pub fn longspec(draft: &'a Draft) -> Self {
        SpeculativeOptions { draft: Some(draft), ..SpeculativeOptions::default() }
    }

    /// An independent draft model alone.
    pub fn with_draft_model(draft_model: &'a Model) -> Self {
        SpeculativeOptions { draft_model: Some(draft_model), ..SpeculativeOptions::default() }
    }

    /// N-gram drafting alone (no file needed).
    pub fn ngram() -> Self {
        SpeculativeOptions { ngram: true, ..SpeculativeOptions::default() }
    }

    fn init() -> sys::specula_speculative_options {
        let mut c: sys::specula_speculative_options = unsafe { std::mem::zeroed() };
        unsafe { sys::specula_speculative_options_init_sized(&mut c, std::mem::size_of_val(&c)) };
        c
    }

    /// The C struct; `widths` (a copy of `tree_widths`) must outlive its use.
    pub(crate) fn to_c(&self, widths: &[i32]) -> Result<sys::specula_speculative_options> {
        let mut c = SpeculativeOptions::init();
        c.draft = self.draft.map_or(ptr::null(), |d| d.as_raw() as *const sys::specula_draft);
        c.draft_model = self.draft_model.map_or(ptr::null_mut(), |m| m.as_raw());
        c.ngram = self.ngram as i32;
        c.grammar = self.grammar as i32;
        c.tree_widths = if widths.is_empty() { ptr::null() } else { widths.as_ptr() };
        c.n_tree_levels = i32::try_from(widths.len()).map_err(|_| Error::invalid_argument("too many tree levels"))?;
        c.ngram_nodes = self.ngram_nodes;
        c.ngram_lookup_min = self.ngram_lookup_min;
        c.ngram_lookup_max = self.ngram_lookup_max;
        c.ngram_max_chain = self.ngram_max_chain;
        c.ngram_table_n = self.ngram_table_n;
        c.ngram_table_topk = self.ngram_table_topk;
        c.ngram_lag = self.ngram_lag;
        c.tree_mode = self.tree_mode.to_raw();
        c.sampled_drafts = self.sampled_drafts.to_raw();
        Ok(c)
    }
}
