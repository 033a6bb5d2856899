//! Safe Rust layer over ferrite's C ABI (`ffi/ferrite.h`): the crate a Rust program depends on.
//! The raw declarations are [`sys`] (crate `ferrite-sys`); the f64 oracle and the property tests
//! that are this layer's executable spec live in `rust_tests/` (crate `ferrite-spec`), not here.
//!
//! - Every status goes through one funnel, [`check`], into a `Result<(), Error>`.
//! - Status, dtype and ISA values are plain integers with named constants ([`status`], [`dtype`],
//!   [`isa`]), never Rust enums: the C side may hand back a value this crate does not know.
//! - [`ThreadPool`] owns a `NonNull<fer_threadpool>` and frees it in `Drop`.
//! - [`TensorRef`] / [`TensorMut`] borrow a Rust slice for `'a`, so a view cannot outlive its buffer;
//!   strided views are checked to lie inside the slice before C sees them (C cannot check that).
//!
//! # Threads: which types are `Send` and `Sync`
//!
//! Each handle is `Send`/`Sync` only where `ffi/ferrite.h` says its object may cross or be shared
//! between threads; every `unsafe impl` carries a `// SAFETY:` line citing the header. The unit
//! test `send_and_sync_as_documented` below holds the positive half of this list to the compiler.
//!
//! - `Send + Sync`:
//!   - [`Tokenizer`]: "Immutable after loading and shareable between threads: every encode/decode
//!     call may run concurrently".
//!   - [`GrammarVocab`], [`Grammar`]: "A vocabulary and a grammar may be used by any number of
//!     threads at once".
//!   - [`Engine`]: "Thread-safety: one call at a time per engine (a second thread gets BUSY)": a call
//!     racing another is refused, never run, so a shared engine is safe (the engine serialises).
//!   - [`Canceller`]: fer_engine_seq_cancel is the exception, "which any thread may call at any time".
//!   - [`Scheduler`]: "fer_scheduler_submit, fer_scheduler_cancel and fer_scheduler_get_stats from
//!     any thread at any time; fer_scheduler_step, fer_scheduler_poll_events and
//!     fer_scheduler_clear_cache from one thread at a time (a second gets BUSY)".
//! - `Send`, not `Sync`: the header says "one call at a time" and nothing ties the object to the
//!   thread that made it, so it may move; not being `Sync` keeps two threads from calling at once.
//!   [`ThreadPool`] ("one call at a time per pool"), [`sampling::Sampler`] ("one call at a time"),
//!   [`mem::Vmm`] ("one call at a time (callers serialise)"), [`mem::Governor`] ("one call at a
//!   time"), [`Matcher`] ("per sequence a fer_matcher (one thread at a time)"), [`Seq`] (one thread
//!   at a time; it moves with the `Sync` engine it borrows).
//! - Neither: every other handle and view ([`Detokenizer`], [`engine::EngineTokenizer`],
//!   [`mem::KvCache`], [`mem::KvSeq`], [`mem::KvPages`], [`mem::VmmRange`], [`mem::Grant`],
//!   [`mem::WeightStore`], [`DenseCache`], [`TensorRef`], [`TensorMut`], [`QMatrix`]). They hold raw
//!   pointers and no `unsafe impl` is made for them, so they stay on the thread that made them. For
//!   some the header would allow `Send` ([`Detokenizer`]: "one sequence, one thread at a time";
//!   [`DenseCache`]: "One thread at a time per cache"); none is claimed until a user needs it.
//!
//! Plain data ([`EngineConfig`], [`ModelInfo`], [`SeqStats`], [`Error`], [`Workspace`]) is
//! `Send + Sync` as the compiler derives it.

pub use ferrite_sys as sys;

pub mod dtype;
pub mod engine;
pub mod error;
pub mod grammar;
pub mod kernels;
pub mod mem;
pub mod pool;
pub mod sampling;
pub mod scheduler;
pub mod tensor;
pub mod tokenizer;

pub use dtype::{dtype_size, Dtype, Element};
pub use engine::{tiny_model_image, Canceller, Engine, EngineConfig, ModelInfo, Seq, SeqStats};
pub use grammar::{Grammar, GrammarVocab, Matcher};
pub use scheduler::{Event, Request, Scheduler, SchedulerOptions};
pub use error::{check, last_error_message, status, status_str, Error, Result, Status};
pub use kernels::{
    add, add_assign, argmax, attention, attention_params, dequantize, embedding, embedding_quant, gather, matmul, matmul_in, matmul_quant,
    matmul_quant_i8, matmul_quant_i8_workspace_bytes, matmul_workspace_bytes, moe, moe_params, qmatrix_check, reduce_mean,
    rms_norm, rope, silu, softmax, swiglu,
    BLayout, DenseCache, QMatrix, RopePairing, Workspace,
};
pub use pool::{isa, PoolOptions, ThreadPool};
pub use tensor::{TensorMut, TensorRef};
pub use tokenizer::{Detokenizer, Tokenizer};

use std::ffi::CStr;

/// `FER_ABI_VERSION` as the declarations in `ferrite-sys` were generated from the header.
pub const ABI_VERSION: u32 = sys::FER_ABI_VERSION;

/// `FER_TENSOR_MAX_RANK`.
pub const MAX_RANK: usize = sys::FER_TENSOR_MAX_RANK as usize;

/// The ABI version the linked C library was built with (`fer_abi_version`). Equal to
/// [`ABI_VERSION`] when declarations and library agree (claim C-ABI-003).
pub fn abi_version() -> u32 {
    // SAFETY: no arguments, no preconditions.
    unsafe { sys::fer_abi_version() }
}

/// The library version string, e.g. "0.1.0" (`fer_version_string`).
pub fn version_string() -> &'static str {
    // SAFETY: the header promises static storage, never NULL.
    unsafe { static_str(sys::fer_version_string()) }
}

/// One line describing the build: compiler, optimisation, sanitizers, CUDA (`fer_build_info`).
pub fn build_info() -> &'static str {
    // SAFETY: the header promises static storage, never NULL.
    unsafe { static_str(sys::fer_build_info()) }
}

/// `fer_cpu_feature` bits of this CPU (`fer_cpu_features`); test with the `cpu::*` constants.
pub fn cpu_features() -> u64 {
    // SAFETY: no arguments, no preconditions.
    unsafe { sys::fer_cpu_features() }
}

/// Bits of [`cpu_features`], as `u64` to match its return type.
pub mod cpu {
    use crate::sys;
    pub const SSE42: u64 = sys::FER_CPU_FEATURE_SSE42 as u64;
    pub const AVX: u64 = sys::FER_CPU_FEATURE_AVX as u64;
    pub const AVX2: u64 = sys::FER_CPU_FEATURE_AVX2 as u64;
    pub const FMA: u64 = sys::FER_CPU_FEATURE_FMA as u64;
    pub const F16C: u64 = sys::FER_CPU_FEATURE_F16C as u64;
    pub const AVX512F: u64 = sys::FER_CPU_FEATURE_AVX512F as u64;
    pub const AVX512BW: u64 = sys::FER_CPU_FEATURE_AVX512BW as u64;
    pub const AVX512BF16: u64 = sys::FER_CPU_FEATURE_AVX512BF16 as u64;
    pub const AVXVNNI: u64 = sys::FER_CPU_FEATURE_AVXVNNI as u64;
    pub const AVX512VL: u64 = sys::FER_CPU_FEATURE_AVX512VL as u64;
    pub const AVX512DQ: u64 = sys::FER_CPU_FEATURE_AVX512DQ as u64;
    /// What `FER_ISA_AVX2` needs: AVX2 + FMA + F16C.
    pub const ISA_AVX2_NEEDS: u64 = AVX2 | FMA | F16C;
    /// What `FER_ISA_AVX512` needs: the AVX2 level and AVX-512 F, BW, VL, DQ.
    pub const ISA_AVX512_NEEDS: u64 = ISA_AVX2_NEEDS | AVX512F | AVX512BW | AVX512VL | AVX512DQ;
}

/// True when this CPU can run a pool pinned to `FER_ISA_AVX2`.
pub fn cpu_has_avx2_level() -> bool {
    cpu_features() & cpu::ISA_AVX2_NEEDS == cpu::ISA_AVX2_NEEDS
}

/// True when this CPU can run a pool pinned to `FER_ISA_AVX512`.
pub fn cpu_has_avx512_level() -> bool {
    cpu_features() & cpu::ISA_AVX512_NEEDS == cpu::ISA_AVX512_NEEDS
}

/// # Safety
/// `p` is NULL or a NUL-terminated string in static storage.
unsafe fn static_str(p: *const std::os::raw::c_char) -> &'static str {
    if p.is_null() {
        return "";
    }
    CStr::from_ptr(p).to_str().unwrap_or("<invalid UTF-8>")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send<T: Send>() {}
    fn send_sync<T: Send + Sync>() {}

    #[test]
    fn send_and_sync_as_documented() {
        send_sync::<Tokenizer>();
        send_sync::<GrammarVocab<'static>>();
        send_sync::<Grammar<'static>>();
        send_sync::<Engine<'static>>();
        send_sync::<Canceller<'static>>();
        send_sync::<Scheduler<'static>>();
        send::<ThreadPool>();
        send::<sampling::Sampler>();
        send::<mem::Vmm>();
        send::<mem::Governor>();
        send::<Matcher<'static>>();
        send::<Seq<'static>>();
        send_sync::<EngineConfig>();
        send_sync::<ModelInfo>();
        send_sync::<SeqStats>();
        send_sync::<Error>();
        send_sync::<Workspace>();
    }
}
