//! Errors: every fallible call returns `Result<T, Error>`; an [`Error`] carries the library's [`Status`] and
//! its message.
use std::ffi::CStr;
use std::fmt;
use std::ptr;

use specula_sys as sys;

/// Why a call failed: the `specula_status` codes of specula.h (`SPECULA_OK` is never an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// NULL handle, out-of-range value, bad options struct (or, from the bindings, a string with a NUL byte).
    InvalidArgument,
    /// File missing, unreadable, mmap failure.
    Io,
    /// Malformed or hostile file: bad magic, offsets, counts, shapes.
    Format,
    /// Well-formed but not supported: architecture, tensor type, version.
    Unsupported,
    OutOfMemory,
    /// A progress callback or a cancel request stopped the call.
    Cancelled,
    /// The session's context has no room for the tokens asked for.
    ContextFull,
    /// A token id outside `[0, n_vocab)`.
    InvalidToken,
    /// Two objects that do not belong together (a draft for another model, a snapshot of another model, ...).
    Incompatible,
    /// Two-call pattern: the buffer was too small (the bindings retry, so this is rarely seen).
    BufferTooSmall,
    /// A compute backend failed.
    Backend,
    /// A bug in Specula.
    Internal,
    /// A status this version of the bindings does not know (from a newer library).
    Other(u32),
}

impl Status {
    /// The status of a raw `specula_status`; `None` for `SPECULA_OK`.
    pub fn from_raw(raw: sys::specula_status) -> Option<Status> {
        Some(match raw {
            sys::specula_status_SPECULA_OK => return None,
            sys::specula_status_SPECULA_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::specula_status_SPECULA_ERR_IO => Status::Io,
            sys::specula_status_SPECULA_ERR_FORMAT => Status::Format,
            sys::specula_status_SPECULA_ERR_UNSUPPORTED => Status::Unsupported,
            sys::specula_status_SPECULA_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::specula_status_SPECULA_ERR_CANCELLED => Status::Cancelled,
            sys::specula_status_SPECULA_ERR_CONTEXT_FULL => Status::ContextFull,
            sys::specula_status_SPECULA_ERR_INVALID_TOKEN => Status::InvalidToken,
            sys::specula_status_SPECULA_ERR_INCOMPATIBLE => Status::Incompatible,
            sys::specula_status_SPECULA_ERR_BUFFER_TOO_SMALL => Status::BufferTooSmall,
            sys::specula_status_SPECULA_ERR_BACKEND => Status::Backend,
            sys::specula_status_SPECULA_ERR_INTERNAL => Status::Internal,
            other => Status::Other(other),
        })
    }

    /// The raw `specula_status` value.
    pub fn to_raw(self) -> sys::specula_status {
        match self {
            Status::InvalidArgument => sys::specula_status_SPECULA_ERR_INVALID_ARGUMENT,
            Status::Io => sys::specula_status_SPECULA_ERR_IO,
            Status::Format => sys::specula_status_SPECULA_ERR_FORMAT,
            Status::Unsupported => sys::specula_status_SPECULA_ERR_UNSUPPORTED,
            Status::OutOfMemory => sys::specula_status_SPECULA_ERR_OUT_OF_MEMORY,
            Status::Cancelled => sys::specula_status_SPECULA_ERR_CANCELLED,
            Status::ContextFull => sys::specula_status_SPECULA_ERR_CONTEXT_FULL,
            Status::InvalidToken => sys::specula_status_SPECULA_ERR_INVALID_TOKEN,
            Status::Incompatible => sys::specula_status_SPECULA_ERR_INCOMPATIBLE,
            Status::BufferTooSmall => sys::specula_status_SPECULA_ERR_BUFFER_TOO_SMALL,
            Status::Backend => sys::specula_status_SPECULA_ERR_BACKEND,
            Status::Internal => sys::specula_status_SPECULA_ERR_INTERNAL,
            Status::Other(raw) => raw,
        }
    }

    /// The library's name of the status, e.g. `"SPECULA_ERR_FORMAT"` (`specula_status_string`).
    pub fn name(self) -> &'static str {
        // Static storage, never NULL (specula.h).
        let s = unsafe { CStr::from_ptr(sys::specula_status_string(self.to_raw())) };
        s.to_str().unwrap_or("SPECULA_ERR_UNKNOWN")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed call: the library's status and message (`specula_error`), or an argument the bindings refused
/// before calling the library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

/// `Result<T, specula::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error with this status and message.
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error { status, message: message.into() }
    }

    /// Why the call failed.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The library's message (the status name when the library gave none).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Takes ownership of `err` (which may be NULL) and frees it.
    pub(crate) unsafe fn from_raw(status: sys::specula_status, err: *mut sys::specula_error) -> Error {
        let mut message = String::new();
        if !err.is_null() {
            debug_assert_eq!(sys::specula_error_status(err), status, "the error object's status differs from the call's");
        }
        let status = Status::from_raw(status).unwrap_or(Status::Internal);
        if !err.is_null() {
            let m = sys::specula_error_message(err);
            if !m.is_null() {
                message = CStr::from_ptr(m).to_string_lossy().into_owned();
            }
            sys::specula_error_destroy(err);
        }
        if message.is_empty() {
            message = status.name().to_string();
        }
        Error { status, message }
    }

    pub(crate) fn invalid_argument(message: impl Into<String>) -> Error {
        Error::new(Status::InvalidArgument, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}

/// Turns a status and its error object (owned; freed here) into a `Result`.
pub(crate) fn check(status: sys::specula_status, err: *mut sys::specula_error) -> Result<()> {
    if status == sys::specula_status_SPECULA_OK {
        unsafe { sys::specula_error_destroy(err) };
        Ok(())
    } else {
        Err(unsafe { Error::from_raw(status, err) })
    }
}

/// Runs one fallible C call with a fresh `specula_error *` and checks its result. The status is computed
/// before the error object is read.
pub(crate) fn ffi<F>(call: F) -> Result<()>
where
    F: FnOnce(*mut *mut sys::specula_error) -> sys::specula_status,
{
    let mut err: *mut sys::specula_error = ptr::null_mut();
    let status = call(&mut err);
    check(status, err)
}

/// Like [`ffi`], but hands back the raw status with the error (for two-call patterns and outcome statuses).
pub(crate) fn ffi_status<F>(call: F) -> (sys::specula_status, Option<Error>)
where
    F: FnOnce(*mut *mut sys::specula_error) -> sys::specula_status,
{
    let mut err: *mut sys::specula_error = ptr::null_mut();
    let status = call(&mut err);
    match check(status, err) {
        Ok(()) => (status, None),
        Err(e) => (status, Some(e)),
    }
}
