//! Matmul oracles over row-major `a` [M, K] and `b` [K, N] (callers transpose an [N, K] weight
//! into [K, N] first).
//!
//! - [`matmul`]: the product in f64, and [`matmul_abs`] the sum of |a||b| per element, the scale
//!   of the error bound for any f32 evaluation order.
//! - [`matmul_fma_chain`]: the exact f32 result fer_matmul promises (one fma per k, k ascending
//!   from 0), for checks bit for bit. Rust's `f32::mul_add` is a correctly rounded fma.

fn check_shapes(m: usize, k: usize, n: usize, a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), m * k, "a is not [M, K]");
    assert_eq!(b.len(), k * n, "b is not [K, N]");
}

/// out[i, j] = sum_k a[i, k] b[k, j] in f64.
pub fn matmul(m: usize, k: usize, n: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
    check_shapes(m, k, n, a, b);
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|t| a[i * k + t] * b[t * n + j]).sum();
        }
    }
    out
}

/// out[i, j] = sum_k |a[i, k]| |b[k, j]| in f64.
pub fn matmul_abs(m: usize, k: usize, n: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
    let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
    matmul(m, k, n, &abs(a), &abs(b))
}

/// out[i, j] = fma chain over k ascending from +0.0, all in f32 (inputs must be exact in f32).
pub fn matmul_fma_chain(m: usize, k: usize, n: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
    assert_eq!(a.len(), m * k, "a is not [M, K]");
    assert_eq!(b.len(), k * n, "b is not [K, N]");
    let mut out = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0f32;
            for t in 0..k {
                acc = a[i * k + t].mul_add(b[t * n + j], acc);
            }
            out[i * n + j] = acc;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // EVIDENCE: C-MM-001 (the oracle itself: a hand-computed product, and the chain's rounding)
    #[test]
    fn c_mm_001_oracle_small_product() {
        // [[1, 2, 3], [4, 5, 6]] x [[7, 8], [9, 10], [11, 12]] = [[58, 64], [139, 154]]
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [7.0, 8.0, 9.0, 10.0, 11.0, 12.0];
        assert_eq!(matmul(2, 3, 2, &a, &b), vec![58.0, 64.0, 139.0, 154.0]);
        assert_eq!(matmul_abs(1, 2, 1, &[-1.0, 2.0], &[3.0, -4.0]), vec![11.0]);
        let a32: Vec<f32> = a.iter().map(|&x| x as f32).collect();
        let b32: Vec<f32> = b.iter().map(|&x| x as f32).collect();
        assert_eq!(matmul_fma_chain(2, 3, 2, &a32, &b32), vec![58.0, 64.0, 139.0, 154.0]);
        // the chain rounds after every step: 2^24 + 1 + 1 stays 2^24 in f32, exact in f64
        let big = 16_777_216.0f32;
        assert_eq!(matmul_fma_chain(1, 3, 1, &[big, 1.0, 1.0], &[1.0, 1.0, 1.0]), vec![big]);
        assert_eq!(matmul(1, 3, 1, &[big as f64, 1.0, 1.0], &[1.0, 1.0, 1.0]), vec![16_777_218.0]);
        // K = 0 gives zeros
        assert_eq!(matmul_fma_chain(2, 0, 1, &[], &[]), vec![0.0, 0.0]);
    }
}
