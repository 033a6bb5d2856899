//! Kernel wrappers. A `None` pool runs on the calling thread at FER_ISA_AUTO.

use crate::error::{check, Result};
use crate::pool::{pool_ptr, ThreadPool};
use crate::sys;
use crate::tensor::{TensorMut, TensorRef};

/// out = a + b with numpy broadcasting (`fer_add`). On error nothing is written.
pub fn add(
    pool: Option<&mut ThreadPool>,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<()> {
    // SAFETY: the views borrow live slices and were checked to lie inside them; `out` is borrowed
    // mutably, so no other Rust reference reads its elements during the call.
    check(unsafe { sys::fer_add(pool_ptr(pool), a.raw(), b.raw(), out.raw()) })
}

/// acc = acc + b in place (`fer_add` with out exactly a, which the header allows).
pub fn add_assign(
    pool: Option<&mut ThreadPool>,
    acc: &mut TensorMut<'_>,
    b: &TensorRef<'_>,
) -> Result<()> {
    // SAFETY: as in `add`; a and out are the same descriptor, the one overlap fer_add permits.
    check(unsafe { sys::fer_add(pool_ptr(pool), acc.raw(), b.raw(), acc.raw()) })
}

/// out[i..., j...] = data[idx(indices[i...]), j...] (`fer_gather`).
pub fn gather(
    pool: Option<&mut ThreadPool>,
    data: &TensorRef<'_>,
    indices: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<()> {
    // SAFETY: as in `add`.
    check(unsafe { sys::fer_gather(pool_ptr(pool), data.raw(), indices.raw(), out.raw()) })
}

/// Mean over the last axis, keepdims (`fer_reduce_mean`).
pub fn reduce_mean(
    pool: Option<&mut ThreadPool>,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<()> {
    // SAFETY: as in `add`.
    check(unsafe { sys::fer_reduce_mean(pool_ptr(pool), x.raw(), out.raw()) })
}
