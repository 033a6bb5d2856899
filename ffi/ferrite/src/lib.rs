//! Safe Rust layer over ferrite's C ABI (`ffi/ferrite.h`), plus the f64 oracle the property tests
//! compare against.
//!
//! - Every status goes through one funnel, [`check`], into a `Result<(), Error>`.
//! - Status, dtype and ISA values are plain integers with named constants ([`status`], [`dtype`],
//!   [`isa`]), never Rust enums: the C side may hand back a value this crate does not know.
//! - [`ThreadPool`] owns a `NonNull<fer_threadpool>` and frees it in `Drop`.
//! - [`TensorRef`] / [`TensorMut`] borrow a Rust slice for `'a`, so a view cannot outlive its buffer;
//!   strided views are checked to lie inside the slice before C sees them (C cannot check that).
//! - [`oracle`] holds deliberately simple f64 implementations of the kernels.

pub use ferrite_sys as sys;

pub mod dtype;
pub mod engine;
pub mod error;
pub mod grammar;
pub mod kernels;
pub mod mem;
pub mod oracle;
pub mod pool;
pub mod sampling;
pub mod tensor;
pub mod tokenizer;

pub use dtype::{dtype_size, Dtype, Element};
pub use engine::{tiny_model_image, Canceller, Engine, EngineConfig, ModelInfo, Seq, SeqStats};
pub use grammar::{Grammar, GrammarVocab, Matcher};
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
