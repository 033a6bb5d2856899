//! The oracle: deliberately simple, obviously right f64 implementations of the kernels.
//!
//! Arrays are row-major `Vec`s with a `Vec<usize>` shape (rank 0 = one element). No strides, no
//! threads, no vector code: the property tests turn whatever strided view they hand to C into a
//! plain row-major array first, run the oracle on that, and compare.

pub mod add;
pub mod attention;
pub mod convert;
pub mod gather;
pub mod gguf;
pub mod matmul;
pub mod model;
pub mod quant;
pub mod reduce_mean;
pub mod sampling;
pub mod tokenizer;
pub mod transformer;

pub use add::{add, broadcast_shape};
pub use convert::{round_to_format, ulp, Float, Format};
pub use gather::gather;
pub use matmul::{matmul, matmul_abs, matmul_fma_chain};
pub use reduce_mean::{reduce_mean, reduce_mean_abs};

/// Number of elements of a shape (1 for rank 0).
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Row-major multi-index of flat position `flat` in `shape`.
pub fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for ax in (0..shape.len()).rev() {
        let d = shape[ax];
        idx[ax] = flat % d;
        flat /= d;
    }
    idx
}

/// Row-major flat position of multi-index `idx` in `shape`.
pub fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    let mut flat = 0;
    for (i, d) in idx.iter().zip(shape) {
        flat = flat * d + i;
    }
    flat
}
