//! Element types: integer codes with named constants, and the Rust types that carry them.

use crate::error::{check, Result};
use crate::sys;
use half::{bf16, f16};

/// A `fer_dtype` value (integer, not a Rust enum).
pub type Dtype = i32;

pub const INVALID: Dtype = sys::FER_DTYPE_INVALID as Dtype;
pub const F32: Dtype = sys::FER_DTYPE_F32 as Dtype;
pub const F16: Dtype = sys::FER_DTYPE_F16 as Dtype;
pub const BF16: Dtype = sys::FER_DTYPE_BF16 as Dtype;
pub const I32: Dtype = sys::FER_DTYPE_I32 as Dtype;
pub const I64: Dtype = sys::FER_DTYPE_I64 as Dtype;
pub const U8: Dtype = sys::FER_DTYPE_U8 as Dtype;
pub const MXFP4: Dtype = sys::FER_DTYPE_MXFP4 as Dtype;
pub const Q4_0: Dtype = sys::FER_DTYPE_Q4_0 as Dtype;
pub const Q4_1: Dtype = sys::FER_DTYPE_Q4_1 as Dtype;
pub const Q8_0: Dtype = sys::FER_DTYPE_Q8_0 as Dtype;
pub const Q5_0: Dtype = sys::FER_DTYPE_Q5_0 as Dtype;
pub const Q5_1: Dtype = sys::FER_DTYPE_Q5_1 as Dtype;
pub const Q2_K: Dtype = sys::FER_DTYPE_Q2_K as Dtype;
pub const Q3_K: Dtype = sys::FER_DTYPE_Q3_K as Dtype;
pub const Q4_K: Dtype = sys::FER_DTYPE_Q4_K as Dtype;
pub const Q5_K: Dtype = sys::FER_DTYPE_Q5_K as Dtype;
pub const Q6_K: Dtype = sys::FER_DTYPE_Q6_K as Dtype;
pub const IQ4_NL: Dtype = sys::FER_DTYPE_IQ4_NL as Dtype;
pub const IQ4_XS: Dtype = sys::FER_DTYPE_IQ4_XS as Dtype;

/// The block-quantized codes every dense (fer_tensor) kernel refuses with UNSUPPORTED.
pub const RESERVED_BLOCK: [Dtype; 13] =
    [MXFP4, Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS];

/// Size in bytes of one element (`fer_dtype_size`); UNSUPPORTED for block formats.
pub fn dtype_size(dtype: Dtype) -> Result<usize> {
    let mut size = 0usize;
    // SAFETY: size is a valid out-pointer.
    check(unsafe { sys::fer_dtype_size(dtype, &mut size) })?;
    Ok(size)
}

/// A Rust type whose in-memory representation is exactly one element of `DTYPE`.
///
/// # Safety
/// `size_of::<Self>()` must equal the C element size of `DTYPE`, any bit pattern must be a valid
/// `Self` (C writes raw elements), and the alignment must be the element size.
pub unsafe trait Element: Copy + Send + Sync + 'static {
    const DTYPE: Dtype;
}

// SAFETY: each is a plain-old-data type of the element's size and alignment, valid for every bit
// pattern (half's f16/bf16 are `repr(transparent)` over u16).
unsafe impl Element for f32 {
    const DTYPE: Dtype = F32;
}
unsafe impl Element for f16 {
    const DTYPE: Dtype = F16;
}
unsafe impl Element for bf16 {
    const DTYPE: Dtype = BF16;
}
unsafe impl Element for i32 {
    const DTYPE: Dtype = I32;
}
unsafe impl Element for i64 {
    const DTYPE: Dtype = I64;
}
unsafe impl Element for u8 {
    const DTYPE: Dtype = U8;
}
