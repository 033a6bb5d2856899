//! Borrowed tensor views: `TensorRef<'a>` over `&'a [T]`, `TensorMut<'a>` over `&'a mut [T]`.
//!
//! The lifetime ties each view to its buffer, so a view cannot outlive the memory C reads or
//! writes. Strided views (explicit shape + byte strides, any sign, 0 to broadcast an input) are
//! checked here to address only elements inside the slice: the C side validates descriptors but
//! cannot know how large the caller's buffer is. Everything else (alignment of strides, dtype
//! support, outputs mapping two elements to one address, overlap) is left to the C side's checks.

use crate::dtype::{Dtype, Element};
use crate::error::{status, Error, Result};
use crate::sys;
use crate::MAX_RANK;
use std::marker::PhantomData;
use std::mem::size_of;
use std::os::raw::c_void;

/// A read-only strided view of `'a`-borrowed memory.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    raw: sys::fer_tensor,
    _borrow: PhantomData<&'a [u8]>,
}

/// A writable strided view of `'a`-borrowed memory.
#[derive(Debug)]
pub struct TensorMut<'a> {
    raw: sys::fer_tensor,
    _borrow: PhantomData<&'a mut [u8]>,
}

/// Row-major byte strides of a contiguous tensor of `shape` with `elem`-byte elements.
pub fn contiguous_strides(shape: &[i64], elem: usize) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut acc = elem as i64;
    for i in (0..shape.len()).rev() {
        strides[i] = acc;
        acc = acc.saturating_mul(shape[i].max(1));
    }
    strides
}

/// Number of elements of `shape` (1 for rank 0), or None on overflow / negative extent.
pub fn element_count(shape: &[i64]) -> Option<usize> {
    let mut n: usize = 1;
    for &d in shape {
        n = n.checked_mul(usize::try_from(d).ok()?)?;
    }
    Some(n)
}

fn invalid(msg: String) -> Error {
    Error::rust(status::INVALID_ARG, msg)
}

/// Checks that a view of `shape`/`byte_strides` starting at element `offset` of a `len`-element
/// slice of `elem`-byte elements addresses only bytes inside the slice.
fn check_view(
    len: usize,
    elem: usize,
    offset: usize,
    shape: &[i64],
    byte_strides: &[i64],
) -> Result<()> {
    if shape.len() != byte_strides.len() {
        return Err(invalid(format!(
            "shape has {} axes but strides has {}",
            shape.len(),
            byte_strides.len()
        )));
    }
    if shape.len() > MAX_RANK {
        return Err(invalid(format!(
            "rank {} exceeds FER_TENSOR_MAX_RANK",
            shape.len()
        )));
    }
    if let Some(d) = shape.iter().find(|&&d| d < 0) {
        return Err(invalid(format!("negative extent {d} in shape {shape:?}")));
    }
    if offset > len {
        return Err(invalid(format!(
            "offset {offset} beyond slice of {len} elements"
        )));
    }
    if shape.contains(&0) {
        return Ok(()); // no element is addressed
    }
    let base = offset as i128 * elem as i128;
    let (mut lo, mut hi) = (base, base);
    for (&n, &s) in shape.iter().zip(byte_strides) {
        let span = s as i128 * (n as i128 - 1);
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    let end = len as i128 * elem as i128;
    if lo < 0 || hi + elem as i128 > end {
        return Err(invalid(format!(
            "view shape {shape:?} byte strides {byte_strides:?} at element {offset} reaches bytes \
             [{lo}, {}) outside the slice's [0, {end})",
            hi + elem as i128
        )));
    }
    Ok(())
}

fn raw_tensor(
    data: *mut c_void,
    dtype: Dtype,
    shape: &[i64],
    byte_strides: &[i64],
) -> sys::fer_tensor {
    let mut raw = sys::fer_tensor {
        data,
        dtype,
        rank: shape.len() as i32,
        shape: [0; MAX_RANK],
        strides: [0; MAX_RANK],
    };
    raw.shape[..shape.len()].copy_from_slice(shape);
    raw.strides[..shape.len()].copy_from_slice(byte_strides);
    raw
}

fn contiguous_len_check(len: usize, shape: &[i64]) -> Result<()> {
    if shape.len() > MAX_RANK {
        return Err(invalid(format!(
            "rank {} exceeds FER_TENSOR_MAX_RANK",
            shape.len()
        )));
    }
    match element_count(shape) {
        Some(n) if n == len => Ok(()),
        Some(n) => Err(Error::rust(
            status::SHAPE_MISMATCH,
            format!("shape {shape:?} has {n} elements but the slice has {len}"),
        )),
        None => Err(invalid(format!("shape {shape:?} is negative or overflows"))),
    }
}

impl<'a> TensorRef<'a> {
    /// A contiguous row-major view of all of `data` (shape must cover it exactly).
    pub fn new<T: Element>(data: &'a [T], shape: &[i64]) -> Result<Self> {
        contiguous_len_check(data.len(), shape)?;
        let strides = contiguous_strides(shape, size_of::<T>());
        Self::strided(data, 0, shape, &strides)
    }

    /// A view starting at element `offset` of `data` with explicit shape and byte strides, checked
    /// to lie inside `data`.
    pub fn strided<T: Element>(
        data: &'a [T],
        offset: usize,
        shape: &[i64],
        byte_strides: &[i64],
    ) -> Result<Self> {
        check_view(data.len(), size_of::<T>(), offset, shape, byte_strides)?;
        // SAFETY: offset <= len was checked, so the pointer stays within or one past the slice.
        let ptr = unsafe { data.as_ptr().add(offset) } as *mut c_void;
        Ok(TensorRef {
            raw: raw_tensor(ptr, T::DTYPE, shape, byte_strides),
            _borrow: PhantomData,
        })
    }

    /// Wraps a raw descriptor as is.
    ///
    /// # Safety
    /// Every element the descriptor addresses must be readable for `'a`.
    pub unsafe fn from_raw(raw: sys::fer_tensor) -> Self {
        TensorRef {
            raw,
            _borrow: PhantomData,
        }
    }

    pub fn raw(&self) -> &sys::fer_tensor {
        &self.raw
    }
    pub fn dtype(&self) -> Dtype {
        self.raw.dtype
    }
    pub fn rank(&self) -> usize {
        self.raw.rank as usize
    }
    pub fn shape(&self) -> &[i64] {
        &self.raw.shape[..self.rank()]
    }
    pub fn strides(&self) -> &[i64] {
        &self.raw.strides[..self.rank()]
    }
}

impl<'a> TensorMut<'a> {
    /// A contiguous row-major view of all of `data` (shape must cover it exactly).
    pub fn new<T: Element>(data: &'a mut [T], shape: &[i64]) -> Result<Self> {
        contiguous_len_check(data.len(), shape)?;
        let strides = contiguous_strides(shape, size_of::<T>());
        Self::strided(data, 0, shape, &strides)
    }

    /// A view starting at element `offset` of `data` with explicit shape and byte strides, checked
    /// to lie inside `data`. Whether two elements share an address is checked by the C side.
    pub fn strided<T: Element>(
        data: &'a mut [T],
        offset: usize,
        shape: &[i64],
        byte_strides: &[i64],
    ) -> Result<Self> {
        check_view(data.len(), size_of::<T>(), offset, shape, byte_strides)?;
        // SAFETY: offset <= len was checked, so the pointer stays within or one past the slice.
        let ptr = unsafe { data.as_mut_ptr().add(offset) } as *mut c_void;
        Ok(TensorMut {
            raw: raw_tensor(ptr, T::DTYPE, shape, byte_strides),
            _borrow: PhantomData,
        })
    }

    /// Wraps a raw descriptor as is.
    ///
    /// # Safety
    /// Every element the descriptor addresses must be writable, and not otherwise accessed, for `'a`.
    pub unsafe fn from_raw(raw: sys::fer_tensor) -> Self {
        TensorMut {
            raw,
            _borrow: PhantomData,
        }
    }

    /// A read-only view of the same elements, borrowing this one.
    pub fn as_ref(&self) -> TensorRef<'_> {
        TensorRef {
            raw: self.raw,
            _borrow: PhantomData,
        }
    }

    pub fn raw(&self) -> &sys::fer_tensor {
        &self.raw
    }
    pub fn dtype(&self) -> Dtype {
        self.raw.dtype
    }
    pub fn rank(&self) -> usize {
        self.raw.rank as usize
    }
    pub fn shape(&self) -> &[i64] {
        &self.raw.shape[..self.rank()]
    }
    pub fn strides(&self) -> &[i64] {
        &self.raw.strides[..self.rank()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // EVIDENCE: C-ABI-004 (the Rust layer refuses views C could not check: outside the buffer)
    #[test]
    fn c_abi_004_views_outside_the_slice_are_refused() {
        let buf = [0f32; 12];
        assert!(TensorRef::new(&buf, &[3, 4]).is_ok());
        assert_eq!(
            TensorRef::new(&buf, &[3, 5]).unwrap_err().code,
            status::SHAPE_MISMATCH
        );
        assert!(TensorRef::strided(&buf, 0, &[3, 4], &[16, 4]).is_ok());
        assert!(TensorRef::strided(&buf, 1, &[3, 4], &[16, 4]).is_err());
        assert!(TensorRef::strided(&buf, 0, &[4, 3], &[12, 4]).is_ok());
        assert!(TensorRef::strided(&buf, 0, &[4, 4], &[12, 4]).is_err());
        // negative strides: start at the last element and walk back
        assert!(TensorRef::strided(&buf, 11, &[3, 4], &[-16, -4]).is_ok());
        assert!(TensorRef::strided(&buf, 10, &[3, 4], &[-16, -4]).is_err());
        // zero stride broadcasts one element
        assert!(TensorRef::strided(&buf, 11, &[1000, 1], &[0, 4]).is_ok());
        // empty views address nothing, even with wild strides
        assert!(TensorRef::strided(&buf, 12, &[0, 4], &[1 << 40, 4]).is_ok());
        assert!(TensorRef::strided(&buf, 13, &[0], &[4]).is_err());
        assert!(TensorRef::strided(&buf, 0, &[-1], &[4]).is_err());
        assert!(TensorRef::strided(&buf, 0, &[1; 9], &[4; 9]).is_err());
        assert!(TensorRef::strided(&buf, 0, &[i64::MAX, 2], &[4, 4]).is_err());
        let scalar = TensorRef::new(&buf[..1], &[]).unwrap();
        assert_eq!(scalar.rank(), 0);
    }
}
