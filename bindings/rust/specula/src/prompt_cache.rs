//! Prompt caches: a directory of context snapshots shared by processes (`specula_prompt_cache_*`).
use std::fmt;
use std::path::Path;
use std::ptr::{self, NonNull};

use specula_sys as sys;

use crate::error::{ffi, Error, Result, Status};
use crate::session::Session;
use crate::util;
use crate::Token;

/// Options of [`PromptCache::open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptCacheOptions {
    /// Size limit of the directory's entries; default 1 GiB; 0 = no limit.
    pub max_bytes: u64,
    /// zstd level of new entries; default 1.
    pub compression_level: i32,
}

impl Default for PromptCacheOptions {
    fn default() -> Self {
        let mut c: sys::specula_prompt_cache_options = unsafe { std::mem::zeroed() };
        unsafe { sys::specula_prompt_cache_options_init_sized(&mut c, std::mem::size_of_val(&c)) };
        PromptCacheOptions { max_bytes: c.max_bytes, compression_level: c.compression_level }
    }
}

/// Counters of a prompt cache handle (`specula_prompt_cache_stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PromptCacheStats {
    /// Entries in the directory (all models).
    pub n_entries: i64,
    /// Their total size.
    pub bytes: u64,
    pub hits: i64,
    pub misses: i64,
    pub stores: i64,
    pub evictions: i64,
    pub restored_tokens: i64,
}

/// A prompt cache directory (`specula_prompt_cache`). `Send + Sync`: specula.h: "One specula_prompt_cache may be
/// used from several threads; each call is serialised."
pub struct PromptCache {
    raw: NonNull<sys::specula_prompt_cache>,
}

// SAFETY: see the type's documentation.
unsafe impl Send for PromptCache {}
unsafe impl Sync for PromptCache {}

impl Drop for PromptCache {
    fn drop(&mut self) {
        unsafe { sys::specula_prompt_cache_destroy(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for PromptCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PromptCache").finish()
    }
}

impl PromptCache {
    /// Opens (creating it if needed) a cache directory.
    pub fn open<P: AsRef<Path>>(dir: P, opts: &PromptCacheOptions) -> Result<PromptCache> {
        let cdir = util::path_cstring(dir.as_ref())?;
        let mut c: sys::specula_prompt_cache_options = unsafe { std::mem::zeroed() };
        unsafe { sys::specula_prompt_cache_options_init_sized(&mut c, std::mem::size_of_val(&c)) };
        c.max_bytes = opts.max_bytes;
        c.compression_level = opts.compression_level;
        let mut out: *mut sys::specula_prompt_cache = ptr::null_mut();
        ffi(|err| unsafe { sys::specula_prompt_cache_open(cdir.as_ptr(), &c, &mut out, err) })?;
        NonNull::new(out)
            .map(|raw| PromptCache { raw })
            .ok_or_else(|| Error::new(Status::Internal, "specula_prompt_cache_open returned no cache"))
    }

    /// Restores into `session` the cached context sharing the longest prefix with `tokens` and returns its
    /// length: append `tokens[n..]` next. 0 on a miss (the session is unchanged).
    pub fn restore(&self, session: &mut Session<'_>, tokens: &[Token]) -> Result<usize> {
        let mut n: usize = 0;
        ffi(|err| unsafe { sys::specula_prompt_cache_restore(self.raw.as_ptr(), session.as_raw(), tokens.as_ptr(), tokens.len(), &mut n, err) })?;
        Ok(n)
    }

    /// Stores the session's evaluated context as an entry, then enforces the size limit.
    pub fn store(&self, session: &mut Session<'_>) -> Result<()> {
        ffi(|err| unsafe { sys::specula_prompt_cache_store(self.raw.as_ptr(), session.as_raw(), err) })
    }

    /// The handle's counters and the directory's size.
    pub fn stats(&self) -> Result<PromptCacheStats> {
        let mut c: sys::specula_prompt_cache_stats = unsafe { std::mem::zeroed() };
        c.struct_size = std::mem::size_of::<sys::specula_prompt_cache_stats>() as u32;
        ffi(|err| unsafe { sys::specula_prompt_cache_get_stats(self.raw.as_ptr(), &mut c, err) })?;
        Ok(PromptCacheStats {
            n_entries: c.n_entries,
            bytes: c.bytes,
            hits: c.hits,
            misses: c.misses,
            stores: c.stores,
            evictions: c.evictions,
            restored_tokens: c.restored_tokens,
        })
    }
}
