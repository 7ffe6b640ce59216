//! Library logging (`specula_log_set`): global for the process; silent by default.
use std::ffi::CStr;
use std::os::raw::{c_char, c_void};
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use specula_sys as sys;

/// Severity of a log message (`specula_log_level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

impl LogLevel {
    fn to_raw(self) -> sys::specula_log_level {
        match self {
            LogLevel::Debug => sys::specula_log_level_SPECULA_LOG_DEBUG,
            LogLevel::Info => sys::specula_log_level_SPECULA_LOG_INFO,
            LogLevel::Warn => sys::specula_log_level_SPECULA_LOG_WARN,
            LogLevel::Error => sys::specula_log_level_SPECULA_LOG_ERROR,
        }
    }

    fn from_raw(raw: sys::specula_log_level) -> LogLevel {
        match raw {
            sys::specula_log_level_SPECULA_LOG_DEBUG => LogLevel::Debug,
            sys::specula_log_level_SPECULA_LOG_INFO => LogLevel::Info,
            sys::specula_log_level_SPECULA_LOG_WARN => LogLevel::Warn,
            _ => LogLevel::Error,
        }
    }
}

type Logger = Arc<dyn Fn(LogLevel, &str) + Send + Sync + 'static>;

/// The current closure. The C side only ever sees `log_trampoline` with NULL user data, so replacing the closure
/// never frees one a message still being delivered uses (specula.h: "messages already being delivered may still
/// reach the old callback"): the trampoline holds its own `Arc` for the call.
static LOGGER: Mutex<Option<Logger>> = Mutex::new(None);
/// Serialises set_logger/clear_logger so that the closure and the library's setting change together.
static SETTING: Mutex<()> = Mutex::new(());

unsafe extern "C" fn log_trampoline(level: sys::specula_log_level, message: *const c_char, _user: *mut c_void) {
    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
        let logger = match LOGGER.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        if let Some(f) = logger {
            let text = if message.is_null() { std::borrow::Cow::Borrowed("") } else { CStr::from_ptr(message).to_string_lossy() };
            f(LogLevel::from_raw(level), &text);
        }
    }));
}

/// Routes the library's messages at or above `min_level` to `f`, on whatever thread logs them. A panic in `f`
/// is caught and discarded (it must not unwind through the library). `f` must not call [`set_logger`] or
/// [`clear_logger`].
pub fn set_logger<F>(min_level: LogLevel, f: F)
where
    F: Fn(LogLevel, &str) + Send + Sync + 'static,
{
    let _setting = SETTING.lock().unwrap_or_else(|p| p.into_inner());
    *LOGGER.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(f));
    unsafe { sys::specula_log_set(Some(log_trampoline), min_level.to_raw(), std::ptr::null_mut()) };
}

/// Silences the library again (the default).
pub fn clear_logger() {
    let _setting = SETTING.lock().unwrap_or_else(|p| p.into_inner());
    unsafe { sys::specula_log_set(None, sys::specula_log_level_SPECULA_LOG_ERROR, std::ptr::null_mut()) };
    let old = LOGGER.lock().unwrap_or_else(|p| p.into_inner()).take();
    drop(old);
}
