//! Batch groups: continuous batching of sessions' forward passes (`specula_batch_*`, library 0.15).
use std::fmt;
use std::ptr::{self, NonNull};

use specula_sys as sys;

use crate::error::{ffi, Error, Result, Status};
use crate::model::Model;
use crate::session::Session;

/// Counters of a batch group (`specula_batch_stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchStats {
    /// Combined passes run.
    pub passes: u64,
    /// Sessions' forward passes they held.
    pub requests: u64,
    /// Rows (tokens, tree nodes) they computed.
    pub rows: u64,
    /// The most sessions one pass held.
    pub widest: u32,
}

/// A batch group (`specula_batch`): sessions of one model that join it compute their forward passes together, each
/// weight read once per step for all of them; their tokens do not change. `Send + Sync`: specula.h: "the group is
/// used by its sessions' threads at once". The library keeps the group alive while sessions are in it, so dropping
/// the handle first is fine.
pub struct Batch {
    raw: NonNull<sys::specula_batch>,
}

// SAFETY: see the type's documentation.
unsafe impl Send for Batch {}
unsafe impl Sync for Batch {}

impl Drop for Batch {
    fn drop(&mut self) {
        unsafe { sys::specula_batch_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batch").finish()
    }
}

impl Batch {
    /// A group for sessions of `model`; `n_threads` computes its passes (0: the cores, at most 8).
    pub fn new(model: &Model, n_threads: i32) -> Result<Batch> {
        let mut c: sys::specula_batch_options = unsafe { std::mem::zeroed() };
        unsafe { sys::specula_batch_options_init_sized(&mut c, std::mem::size_of_val(&c)) };
        c.n_threads = n_threads;
        let mut out: *mut sys::specula_batch = ptr::null_mut();
        ffi(|err| unsafe { sys::specula_batch_create(model.as_raw(), &c, &mut out, err) })?;
        NonNull::new(out).map(|raw| Batch { raw }).ok_or_else(|| Error::new(Status::Internal, "specula_batch_create returned no batch"))
    }

    /// The session's passes join this group's. Statuses: `Incompatible` (another model), `Unsupported` (a backend
    /// that does not batch: the session stays alone).
    pub fn join(&self, session: &mut Session<'_>) -> Result<()> {
        ffi(|err| unsafe { sys::specula_session_join_batch(session.as_raw(), self.raw.as_ptr(), err) })
    }

    /// The session computes alone again.
    pub fn leave(session: &mut Session<'_>) -> Result<()> {
        ffi(|err| unsafe { sys::specula_session_join_batch(session.as_raw(), ptr::null_mut(), err) })
    }

    /// The group's counters.
    pub fn stats(&self) -> Result<BatchStats> {
        let mut c: sys::specula_batch_stats = unsafe { std::mem::zeroed() };
        c.struct_size = std::mem::size_of::<sys::specula_batch_stats>() as u32;
        ffi(|err| unsafe { sys::specula_batch_get_stats(self.raw.as_ptr(), &mut c, err) })?;
        Ok(BatchStats { passes: c.passes, requests: c.requests, rows: c.rows, widest: c.widest })
    }
}
