//! Private helpers: C strings, the two-call pattern, and the progress-callback trampoline.
use std::any::Any;
use std::cell::{RefCell, RefMut};
use std::fmt;
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_void};
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;

use specula_sys as sys;

use crate::error::{ffi_status, Error, Result};

/// A NUL-terminated copy of `s`; InvalidArgument if it holds a NUL byte.
pub(crate) fn cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::invalid_argument(format!("{} contains a NUL byte", what)))
}

/// A path as the C library takes it (bytes on Unix).
pub(crate) fn path_cstring(path: &Path) -> Result<CString> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Error::invalid_argument(format!("path {:?} contains a NUL byte", path)))
    }
    #[cfg(not(unix))]
    {
        match path.to_str() {
            Some(s) => cstring(s, "path"),
            None => Err(Error::invalid_argument(format!("path {:?} is not valid UTF-8", path))),
        }
    }
}

/// A copy of a borrowed C string ("" for NULL); invalid UTF-8 is replaced.
pub(crate) unsafe fn string_from(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Like [`string_from`], but `None` for NULL.
pub(crate) unsafe fn opt_string_from(p: *const c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        Some(CStr::from_ptr(p).to_string_lossy().into_owned())
    }
}

/// The two-call pattern of the text getters (specula_model_meta_value and the like): `call(buf, buf_size, &len,
/// &err)` writes at most buf_size bytes with the NUL and sets len to the full length; BUFFER_TOO_SMALL when
/// buf_size <= len. Returns the bytes without the NUL.
pub(crate) fn fetch_bytes<F>(mut call: F) -> Result<Vec<u8>>
where
    F: FnMut(*mut c_char, usize, *mut usize, *mut *mut sys::specula_error) -> sys::specula_status,
{
    let mut buf: Vec<u8> = vec![0; 256];
    loop {
        let mut len: usize = 0;
        let (status, error) = ffi_status(|err| call(buf.as_mut_ptr() as *mut c_char, buf.len(), &mut len, err));
        match error {
            None => {
                buf.truncate(len.min(buf.len()));
                return Ok(buf);
            }
            // The length can only grow between the calls if the object changed; retry until it fits.
            Some(_) if status == sys::specula_status_SPECULA_ERR_BUFFER_TOO_SMALL && len >= buf.len() => {
                buf = vec![0; len + 1];
            }
            Some(e) => return Err(e),
        }
    }
}

/// [`fetch_bytes`] as a String (invalid UTF-8 is replaced).
pub(crate) fn fetch_text<F>(call: F) -> Result<String>
where
    F: FnMut(*mut c_char, usize, *mut usize, *mut *mut sys::specula_error) -> sys::specula_status,
{
    let bytes = fetch_bytes(call)?;
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// A progress closure as a C `specula_progress_fn` + user data. A panic in the closure is caught (it must not
/// unwind through the library), cancels the call, and is resumed by [`ProgressCallback::finish`] once the library
/// has returned.
pub(crate) struct ProgressCallback<'f> {
    f: &'f mut dyn FnMut(f32) -> bool,
    panic: Option<Box<dyn Any + Send + 'static>>,
}

impl<'f> ProgressCallback<'f> {
    pub(crate) fn new(f: &'f mut dyn FnMut(f32) -> bool) -> Self {
        ProgressCallback { f, panic: None }
    }

    /// The function and user data for the C struct. `self` must stay in place until the C call returns.
    pub(crate) fn as_c(&mut self) -> (sys::specula_progress_fn, *mut c_void) {
        (Some(progress_trampoline), self as *mut ProgressCallback as *mut c_void)
    }

    /// Resumes a panic of the closure, if there was one.
    pub(crate) fn finish(self) {
        if let Some(payload) = self.panic {
            panic::resume_unwind(payload);
        }
    }
}

unsafe extern "C" fn progress_trampoline(progress: f32, user_data: *mut c_void) -> i32 {
    // Nothing may unwind out of here: catch_unwind around everything that can panic.
    let state = &mut *(user_data as *mut ProgressCallback);
    if state.panic.is_some() {
        return 0;
    }
    let f = &mut state.f;
    match panic::catch_unwind(AssertUnwindSafe(|| (f)(progress))) {
        Ok(true) => 1,
        Ok(false) => 0,
        Err(payload) => {
            state.panic = Some(payload);
            0
        }
    }
}

/// A progress closure for [`ModelOptions`](crate::ModelOptions) and
/// [`SyntheticOptions`](crate::synthetic::SyntheticOptions): called on the calling thread with the progress in
/// `[0, 1]`; returning `false` cancels the call (`Status::Cancelled`). A panic in it cancels the call and is
/// resumed once the library has returned.
pub struct Progress<'a>(RefCell<Box<dyn FnMut(f32) -> bool + 'a>>);

impl<'a> Progress<'a> {
    pub fn new<F: FnMut(f32) -> bool + 'a>(f: F) -> Progress<'a> {
        Progress(RefCell::new(Box::new(f)))
    }

    /// Borrows the closure for one call; InvalidArgument if it is already running (a re-entrant call with the
    /// same options from inside the closure).
    pub(crate) fn borrow(&self) -> Result<RefMut<'_, Box<dyn FnMut(f32) -> bool + 'a>>> {
        self.0.try_borrow_mut().map_err(|_| Error::invalid_argument("the progress closure is already running"))
    }
}

impl<'a> fmt::Debug for Progress<'a> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Progress(<closure>)")
    }
}
