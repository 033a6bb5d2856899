//! `ThreadPool`: an owned `fer_threadpool`, freed in `Drop`.

use crate::error::{check, status, Error, Result};
use crate::sys;
use std::ptr::{self, NonNull};

/// Instruction-set levels (`fer_isa_code`), as integers.
pub mod isa {
    pub type Isa = i32;
    pub const AUTO: Isa = crate::sys::FER_ISA_AUTO as Isa;
    pub const PORTABLE: Isa = crate::sys::FER_ISA_PORTABLE as Isa;
    pub const AVX2: Isa = crate::sys::FER_ISA_AVX2 as Isa;
    pub const AVX512: Isa = crate::sys::FER_ISA_AVX512 as Isa;
}

/// `fer_threadpool_options`, as the C side lays it out.
pub type PoolOptions = sys::fer_threadpool_options;

/// Defaults from `fer_threadpool_options_init` (struct_size set, n_threads 0, isa AUTO).
pub fn options_init() -> Result<PoolOptions> {
    let mut opts = PoolOptions {
        struct_size: 0,
        n_threads: 0,
        isa: 0,
        reserved: 0,
    };
    // SAFETY: opts is a valid out-pointer.
    check(unsafe { sys::fer_threadpool_options_init(&mut opts) })?;
    Ok(opts)
}

/// An explicit pool of worker threads (`fer_threadpool`).
#[derive(Debug)]
pub struct ThreadPool {
    ptr: NonNull<sys::fer_threadpool>,
}

// SAFETY: ferrite.h: "Thread-safety: one call at a time per pool; a second thread entering a pool
// that is running gets FER_STATUS_BUSY." Nothing ties a pool to the thread that created it, so it
// may move between threads (Send). It is not Sync: kernel calls take `&mut ThreadPool`, so safe
// code makes one call at a time and never sees BUSY.
unsafe impl Send for ThreadPool {}

impl ThreadPool {
    /// A pool of `n_threads` threads (including the caller's; 0 = one per online CPU) at `isa`.
    pub fn new(n_threads: u32, isa: isa::Isa) -> Result<ThreadPool> {
        let mut opts = options_init()?;
        opts.n_threads = n_threads;
        opts.isa = isa;
        ThreadPool::with_options(Some(&opts))
    }

    /// `fer_threadpool_create` with the given options (None: the C defaults, opts = NULL).
    pub fn with_options(opts: Option<&PoolOptions>) -> Result<ThreadPool> {
        let mut out: *mut sys::fer_threadpool = ptr::null_mut();
        let opts_ptr = opts.map_or(ptr::null(), |o| o as *const PoolOptions);
        // SAFETY: opts_ptr is NULL or points to a live options struct; out is a valid out-pointer.
        check(unsafe { sys::fer_threadpool_create(opts_ptr, &mut out) })?;
        NonNull::new(out)
            .map(|ptr| ThreadPool { ptr })
            .ok_or_else(|| {
                Error::rust(
                    status::MISUSE,
                    "fer_threadpool_create returned OK and a NULL pool",
                )
            })
    }

    /// Thread count including the caller's.
    pub fn n_threads(&self) -> Result<u32> {
        let mut n = 0u32;
        // SAFETY: live pool; n is a valid out-pointer.
        check(unsafe { sys::fer_threadpool_n_threads(self.ptr.as_ptr(), &mut n) })?;
        Ok(n)
    }

    /// The level the pool's kernels run at (never AUTO).
    pub fn isa(&self) -> Result<isa::Isa> {
        let mut v = 0;
        // SAFETY: live pool; v is a valid out-pointer.
        check(unsafe { sys::fer_threadpool_isa(self.ptr.as_ptr(), &mut v) })?;
        Ok(v)
    }

    /// The raw handle for queries that only read the pool.
    pub fn as_const_ptr(&self) -> *const sys::fer_threadpool {
        self.ptr.as_ptr()
    }

    /// The raw handle, for calls through `ferrite-sys`. `&mut self`: one call at a time.
    pub fn as_ptr(&mut self) -> *mut sys::fer_threadpool {
        self.ptr.as_ptr()
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        // SAFETY: we own the pool; `&mut self` means no call is running on it.
        unsafe { sys::fer_threadpool_free(self.ptr.as_ptr()) }
    }
}

pub(crate) fn pool_ptr(pool: Option<&mut ThreadPool>) -> *mut sys::fer_threadpool {
    pool.map_or(ptr::null_mut(), |p| p.as_ptr())
}
