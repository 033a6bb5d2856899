//! Status codes and the one `check()` funnel from `fer_status` to `Result`.

use crate::sys;
use std::ffi::CStr;
use std::fmt;

/// A `fer_status` value. Integers, not a Rust enum: an unknown code must stay representable.
pub type Status = i32;

/// Named `fer_status_code` values, typed as [`Status`] (bindgen types them `c_uint`).
pub mod status {
    use super::Status;
    use crate::sys;
    pub const OK: Status = sys::FER_STATUS_OK as Status;
    pub const NULL_ARG: Status = sys::FER_STATUS_NULL_ARG as Status;
    pub const INVALID_ARG: Status = sys::FER_STATUS_INVALID_ARG as Status;
    pub const BUFFER_TOO_SMALL: Status = sys::FER_STATUS_BUFFER_TOO_SMALL as Status;
    pub const BUSY: Status = sys::FER_STATUS_BUSY as Status;
    pub const MISUSE: Status = sys::FER_STATUS_MISUSE as Status;
    pub const SHAPE_MISMATCH: Status = sys::FER_STATUS_SHAPE_MISMATCH as Status;
    pub const SIZE_OVERFLOW: Status = sys::FER_STATUS_SIZE_OVERFLOW as Status;
    pub const CANCELLED: Status = sys::FER_STATUS_CANCELLED as Status;
    pub const OUT_OF_MEMORY: Status = sys::FER_STATUS_OUT_OF_MEMORY as Status;
    pub const BUDGET_EXCEEDED: Status = sys::FER_STATUS_BUDGET_EXCEEDED as Status;
    pub const NO_DEVICE: Status = sys::FER_STATUS_NO_DEVICE as Status;
    pub const DEVICE_ERROR: Status = sys::FER_STATUS_DEVICE_ERROR as Status;
    pub const UNSUPPORTED: Status = sys::FER_STATUS_UNSUPPORTED as Status;
    pub const BAD_FORMAT: Status = sys::FER_STATUS_BAD_FORMAT as Status;
    pub const CORRUPT: Status = sys::FER_STATUS_CORRUPT as Status;
    pub const INVALID_UTF8: Status = sys::FER_STATUS_INVALID_UTF8 as Status;
    pub const NO_CANDIDATES: Status = sys::FER_STATUS_NO_CANDIDATES as Status;
    pub const TEMPLATE_ERROR: Status = sys::FER_STATUS_TEMPLATE_ERROR as Status;

    /// Every code the header names, in header order.
    pub const ALL: [Status; 19] = [
        OK,
        NULL_ARG,
        INVALID_ARG,
        BUFFER_TOO_SMALL,
        BUSY,
        MISUSE,
        SHAPE_MISMATCH,
        SIZE_OVERFLOW,
        CANCELLED,
        OUT_OF_MEMORY,
        BUDGET_EXCEEDED,
        NO_DEVICE,
        DEVICE_ERROR,
        UNSUPPORTED,
        BAD_FORMAT,
        CORRUPT,
        INVALID_UTF8,
        NO_CANDIDATES,
        TEMPLATE_ERROR,
    ];
}

/// A failed call: the status code and the detailed message the C side left for this thread
/// (or one written by the Rust layer when it refused a call before reaching C).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub code: Status,
    pub message: String,
}

impl Error {
    /// An error raised by the Rust layer itself (never reached C).
    pub fn rust(code: Status, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            status_str(self.code),
            self.code,
            self.message
        )
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// The one funnel: `FER_STATUS_OK` -> `Ok(())`; anything else -> `Err` with the code and the
/// calling thread's last error message. Call it right after the C call, on the same thread.
pub fn check(code: Status) -> Result<()> {
    if code == status::OK {
        Ok(())
    } else {
        Err(Error {
            code,
            message: last_error_message(),
        })
    }
}

/// Static description of a status code (`fer_status_str`); "unknown status" for unknown codes.
pub fn status_str(code: Status) -> &'static str {
    // SAFETY: the header promises static storage; a NULL (contract breach) reads as "".
    unsafe {
        let p = sys::fer_status_str(code);
        if p.is_null() {
            return "";
        }
        CStr::from_ptr(p).to_str().unwrap_or("<invalid UTF-8>")
    }
}

/// The calling thread's message for its most recent failing call ("" after a success).
/// Reading does not clear it.
pub fn last_error_message() -> String {
    let mut cap = 256usize;
    loop {
        let mut buf = vec![0u8; cap];
        let mut len = 0usize;
        // SAFETY: buf is valid for cap bytes, len is a valid out-pointer.
        let st = unsafe { sys::fer_last_error_message(buf.as_mut_ptr().cast(), cap, &mut len) };
        if st == status::BUFFER_TOO_SMALL && len + 1 > cap && cap < (1 << 20) {
            cap = len + 1;
            continue;
        }
        if st != status::OK && st != status::BUFFER_TOO_SMALL {
            return format!("<fer_last_error_message failed with status {}>", st);
        }
        let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
        buf.truncate(end);
        return String::from_utf8_lossy(&buf).into_owned();
    }
}
