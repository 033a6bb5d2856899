//! Tokenizer: `Tokenizer` owns a `fer_tokenizer` (shareable: encode/decode take `&self` from any
//! thread), `Detokenizer<'t>` borrows it, so a detokenizer cannot outlive its tokenizer.

use crate::error::{check, status, Result};
use crate::sys;
use std::ffi::CString;
use std::marker::PhantomData;
use std::path::Path;
use std::ptr::{self, NonNull};

/// `fer_encode_flag` bits.
pub mod encode_flag {
    pub const ADD_SPECIAL: u32 = crate::sys::FER_ENCODE_ADD_SPECIAL;
    pub const REPLACE_INVALID_UTF8: u32 = crate::sys::FER_ENCODE_REPLACE_INVALID_UTF8;
    pub const NO_SPECIAL_SPLIT: u32 = crate::sys::FER_ENCODE_NO_SPECIAL_SPLIT;
}

/// `fer_decode_flag` bits.
pub mod decode_flag {
    pub const SKIP_SPECIAL: u32 = crate::sys::FER_DECODE_SKIP_SPECIAL;
    pub const REPLACE_INVALID_UTF8: u32 = crate::sys::FER_DECODE_REPLACE_INVALID_UTF8;
}

pub type Info = sys::fer_tokenizer_info;

pub struct Tokenizer {
    raw: NonNull<sys::fer_tokenizer>,
}

// SAFETY: the header states a tokenizer is immutable after loading and that encode/decode may run
// concurrently from several threads.
unsafe impl Send for Tokenizer {}
unsafe impl Sync for Tokenizer {}

fn path_cstring(path: &Path) -> CString {
    CString::new(path.to_string_lossy().as_bytes()).expect("path without NUL")
}

impl Tokenizer {
    /// `fer_tokenizer_from_json` over a tokenizer.json image.
    pub fn from_json(json: &[u8]) -> Result<Tokenizer> {
        let mut out = ptr::null_mut();
        // SAFETY: json is a valid slice for the call; out is a valid out-pointer.
        check(unsafe { sys::fer_tokenizer_from_json(json.as_ptr() as *const _, json.len(), &mut out) })?;
        Ok(Tokenizer { raw: NonNull::new(out).expect("OK implies a tokenizer") })
    }

    /// `fer_tokenizer_from_json_file`.
    pub fn from_json_file(path: &Path) -> Result<Tokenizer> {
        let c = path_cstring(path);
        let mut out = ptr::null_mut();
        // SAFETY: c is NUL-terminated; out is a valid out-pointer.
        check(unsafe { sys::fer_tokenizer_from_json_file(c.as_ptr(), &mut out) })?;
        Ok(Tokenizer { raw: NonNull::new(out).expect("OK implies a tokenizer") })
    }

    /// `fer_tokenizer_from_gguf_file`.
    pub fn from_gguf_file(path: &Path) -> Result<Tokenizer> {
        let c = path_cstring(path);
        let mut out = ptr::null_mut();
        // SAFETY: c is NUL-terminated; out is a valid out-pointer.
        check(unsafe { sys::fer_tokenizer_from_gguf_file(c.as_ptr(), &mut out) })?;
        Ok(Tokenizer { raw: NonNull::new(out).expect("OK implies a tokenizer") })
    }

    pub fn as_ptr(&self) -> *const sys::fer_tokenizer {
        self.raw.as_ptr()
    }

    pub fn info(&self) -> Info {
        // SAFETY: plain-data struct, overwritten by the call.
        let mut info: Info = unsafe { std::mem::zeroed() };
        // SAFETY: valid tokenizer and out-pointer.
        check(unsafe { sys::fer_tokenizer_get_info(self.raw.as_ptr(), &mut info) }).expect("get_info");
        info
    }

    /// `fer_tokenizer_encode` with a buffer sized by a first guess, retried once at the exact size.
    pub fn encode(&self, text: &[u8], flags: u32) -> Result<Vec<i32>> {
        let mut ids = vec![0i32; text.len() / 2 + 16];
        let mut n = 0usize;
        // SAFETY: text and ids are valid for their lengths; n is a valid out-pointer.
        let st = unsafe {
            sys::fer_tokenizer_encode(self.raw.as_ptr(), text.as_ptr() as *const _, text.len(), flags, ids.as_mut_ptr(), ids.len(), &mut n)
        };
        if st == status::BUFFER_TOO_SMALL {
            ids.resize(n, 0);
            // SAFETY: as above, with room for n ids.
            check(unsafe {
                sys::fer_tokenizer_encode(self.raw.as_ptr(), text.as_ptr() as *const _, text.len(), flags, ids.as_mut_ptr(), ids.len(), &mut n)
            })?;
        } else {
            check(st)?;
        }
        ids.truncate(n);
        Ok(ids)
    }

    /// `fer_tokenizer_decode` into a fresh byte vector.
    pub fn decode(&self, ids: &[i32], flags: u32) -> Result<Vec<u8>> {
        let mut need = 0usize;
        // SAFETY: ids valid for its length; cap 0 with a NULL buffer asks for the size.
        let st = unsafe { sys::fer_tokenizer_decode(self.raw.as_ptr(), ids.as_ptr(), ids.len(), flags, ptr::null_mut(), 0, &mut need) };
        if st != status::OK && st != status::BUFFER_TOO_SMALL {
            check(st)?;
        }
        let mut out = vec![0u8; need];
        let mut len = 0usize;
        // SAFETY: out has room for need bytes.
        check(unsafe {
            sys::fer_tokenizer_decode(self.raw.as_ptr(), ids.as_ptr(), ids.len(), flags, out.as_mut_ptr() as *mut _, out.len(), &mut len)
        })?;
        out.truncate(len);
        Ok(out)
    }

    /// DRY's sequence breakers for these strings (`fer_tokenizer_dry_breakers`).
    pub fn dry_breakers(&self, strings: &[&str]) -> Result<crate::sampling::DryBreakers> {
        // SAFETY: self is a live tokenizer.
        unsafe { crate::sampling::DryBreakers::from_strings_raw(self.raw.as_ptr(), strings) }
    }

    /// `fer_tokenizer_token_to_id`.
    pub fn token_to_id(&self, text: &[u8]) -> Result<i32> {
        let mut id = 0;
        // SAFETY: text valid for its length; id is a valid out-pointer.
        check(unsafe { sys::fer_tokenizer_token_to_id(self.raw.as_ptr(), text.as_ptr() as *const _, text.len(), &mut id) })?;
        Ok(id)
    }

    /// A streaming detokenizer borrowing this tokenizer.
    pub fn detokenizer(&self, flags: u32) -> Result<Detokenizer<'_>> {
        // SAFETY: a valid tokenizer, alive for the borrow.
        unsafe { Detokenizer::on(self.raw.as_ptr(), flags) }
    }
}

impl Drop for Tokenizer {
    fn drop(&mut self) {
        // SAFETY: raw came from a constructor; no detokenizer can be alive (they borrow self).
        let st = unsafe { sys::fer_tokenizer_free(self.raw.as_ptr()) };
        debug_assert_eq!(st, status::OK);
    }
}

pub struct Detokenizer<'t> {
    raw: NonNull<sys::fer_detokenizer>,
    _tok: PhantomData<&'t Tokenizer>,
}

impl<'t> Detokenizer<'t> {
    /// `fer_detokenizer_create` over tok.
    ///
    /// # Safety
    /// tok must be a valid tokenizer that outlives 't (the engine's tokenizer borrows the engine).
    pub(crate) unsafe fn on(tok: *const sys::fer_tokenizer, flags: u32) -> Result<Detokenizer<'t>> {
        let mut out = ptr::null_mut();
        // SAFETY: valid tokenizer (the caller's promise) and out-pointer.
        check(unsafe { sys::fer_detokenizer_create(tok, flags, &mut out) })?;
        Ok(Detokenizer { raw: NonNull::new(out).expect("OK implies a detokenizer"), _tok: PhantomData })
    }

    /// `fer_detokenizer_push`, appending the completed text to `out`.
    pub fn push(&mut self, id: i32, out: &mut Vec<u8>) -> Result<()> {
        let mut buf = [0u8; 64];
        let mut len = 0usize;
        // SAFETY: buf is valid for its length.
        let st = unsafe { sys::fer_detokenizer_push(self.raw.as_ptr(), id, buf.as_mut_ptr() as *mut _, buf.len(), &mut len) };
        if st == status::BUFFER_TOO_SMALL {
            let mut big = vec![0u8; len];
            // SAFETY: big has room for len bytes; the failed call left the state unchanged.
            check(unsafe { sys::fer_detokenizer_push(self.raw.as_ptr(), id, big.as_mut_ptr() as *mut _, big.len(), &mut len) })?;
            out.extend_from_slice(&big[..len]);
            return Ok(());
        }
        check(st)?;
        out.extend_from_slice(&buf[..len]);
        Ok(())
    }

    /// `fer_detokenizer_flush`, appending what was held back.
    pub fn flush(&mut self, out: &mut Vec<u8>) -> Result<()> {
        let mut len = 0usize;
        // SAFETY: a NULL buffer with cap 0 asks for the size and leaves the state unchanged.
        let st = unsafe { sys::fer_detokenizer_flush(self.raw.as_ptr(), ptr::null_mut(), 0, &mut len) };
        if st != status::OK && st != status::BUFFER_TOO_SMALL {
            check(st)?;
        }
        let mut buf = vec![0u8; len];
        // SAFETY: buf has room for len bytes.
        check(unsafe { sys::fer_detokenizer_flush(self.raw.as_ptr(), buf.as_mut_ptr() as *mut _, buf.len(), &mut len) })?;
        out.extend_from_slice(&buf[..len]);
        Ok(())
    }

    pub fn as_ptr(&mut self) -> *mut sys::fer_detokenizer {
        self.raw.as_ptr()
    }
}

impl Drop for Detokenizer<'_> {
    fn drop(&mut self) {
        // SAFETY: raw came from fer_detokenizer_create and is freed once.
        unsafe { sys::fer_detokenizer_free(self.raw.as_ptr()) }
    }
}

/// Where the setup script put the real vocabularies and model: `$FERRITE_DATA_DIR`, else
/// `~/.cache/ferrite`.
pub fn data_dir() -> std::path::PathBuf {
    match std::env::var_os("FERRITE_DATA_DIR") {
        Some(d) if !d.is_empty() => d.into(),
        _ => Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cache/ferrite"),
    }
}
