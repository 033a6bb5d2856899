//! reduce_mean over the last axis with keepdims, accumulated in f64.

fn rows_of(shape: &[usize]) -> Result<(usize, usize, Vec<usize>), String> {
    let (&n, lead) = shape.split_last().ok_or("reduce_mean needs rank >= 1")?;
    let mut out_shape = lead.to_vec();
    out_shape.push(1);
    Ok((lead.iter().product(), n, out_shape))
}

/// Mean of each last-axis row in f64; an empty row gives NaN. Out shape: last axis 1.
pub fn reduce_mean(shape: &[usize], x: &[f64]) -> Result<(Vec<usize>, Vec<f64>), String> {
    assert_eq!(x.len(), super::numel(shape), "x does not match its shape");
    let (rows, n, out_shape) = rows_of(shape)?;
    let out = (0..rows)
        .map(|r| {
            if n == 0 {
                f64::NAN
            } else {
                x[r * n..(r + 1) * n].iter().sum::<f64>() / n as f64
            }
        })
        .collect();
    Ok((out_shape, out))
}

/// Mean of |x| per row (NaN-free when x has no NaN); the scale for reduce_mean's error bound.
pub fn reduce_mean_abs(shape: &[usize], x: &[f64]) -> Result<(Vec<usize>, Vec<f64>), String> {
    let abs: Vec<f64> = x.iter().map(|v| v.abs()).collect();
    reduce_mean(shape, &abs)
}

#[cfg(test)]
mod tests {
    use super::*;

    // EVIDENCE: C-MEAN-001 (the oracle itself: keepdims shape, empty axis -> NaN)
    #[test]
    fn c_mean_001_oracle_shapes_and_empty_rows() {
        let (s, v) = reduce_mean(&[2, 3], &[1.0, 2.0, 3.0, -1.0, -1.0, 5.0]).unwrap();
        assert_eq!(s, vec![2, 1]);
        assert_eq!(v, vec![2.0, 1.0]);
        let (s, v) = reduce_mean(&[3, 0], &[]).unwrap();
        assert_eq!(s, vec![3, 1]);
        assert!(v.len() == 3 && v.iter().all(|x| x.is_nan()));
        let (s, v) = reduce_mean(&[0, 4], &[]).unwrap();
        assert_eq!((s, v.len()), (vec![0, 1], 0));
        assert!(reduce_mean(&[], &[1.0]).is_err());
        let (_, v) = reduce_mean(&[2], &[f64::INFINITY, f64::NEG_INFINITY]).unwrap();
        assert!(v[0].is_nan());
    }
}
