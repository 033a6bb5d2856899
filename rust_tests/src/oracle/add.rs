//! add: numpy broadcasting, computed in f64.
//!
//! The caller rounds the f64 result to the output dtype with `convert::round_to_format`. For two
//! inputs of one float format F the f64 sum rounded to F is the correctly rounded sum: f64 has
//! 53 >= 2*24+2 significand bits, so the rounding to f64 is innocuous (Figueroa 1995).

/// The numpy broadcast shape of `a` and `b`: align at the last axis, a missing leading axis
/// counts as 1, equal extents stay, an extent of 1 takes the other's. Err on any other pair.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for k in 0..rank {
        // k counts from the last axis
        let da = if k < a.len() { a[a.len() - 1 - k] } else { 1 };
        let db = if k < b.len() { b[b.len() - 1 - k] } else { 1 };
        out[rank - 1 - k] = if da == db {
            da
        } else if da == 1 {
            db
        } else if db == 1 {
            da
        } else {
            return Err(format!(
                "shapes {a:?} and {b:?} do not broadcast (axis -{}: {da} vs {db})",
                k + 1
            ));
        };
    }
    Ok(out)
}

/// Index into an input of shape `in_shape` for output multi-index `out_idx` (broadcast axes read 0).
fn source_index(out_idx: &[usize], in_shape: &[usize]) -> usize {
    let skip = out_idx.len() - in_shape.len();
    let mut flat = 0;
    for (k, &d) in in_shape.iter().enumerate() {
        let i = if d == 1 { 0 } else { out_idx[skip + k] };
        flat = flat * d + i;
    }
    flat
}

/// out = a + b in f64, with the broadcast shape. `a`, `b` are row-major arrays of their shapes.
pub fn add(
    a_shape: &[usize],
    a: &[f64],
    b_shape: &[usize],
    b: &[f64],
) -> Result<(Vec<usize>, Vec<f64>), String> {
    assert_eq!(a.len(), super::numel(a_shape), "a does not match its shape");
    assert_eq!(b.len(), super::numel(b_shape), "b does not match its shape");
    let out_shape = broadcast_shape(a_shape, b_shape)?;
    let n = super::numel(&out_shape);
    let mut out = Vec::with_capacity(n);
    for flat in 0..n {
        let idx = super::unravel(flat, &out_shape);
        out.push(a[source_index(&idx, a_shape)] + b[source_index(&idx, b_shape)]);
    }
    Ok((out_shape, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    // EVIDENCE: C-ADD-001 (the oracle itself: numpy's broadcasting rules)
    #[test]
    fn c_add_001_oracle_broadcasts_like_numpy() {
        assert_eq!(broadcast_shape(&[2, 3], &[3]).unwrap(), vec![2, 3]);
        assert_eq!(broadcast_shape(&[2, 1], &[1, 3]).unwrap(), vec![2, 3]);
        assert_eq!(broadcast_shape(&[], &[4]).unwrap(), vec![4]);
        assert_eq!(broadcast_shape(&[0, 1], &[1, 5]).unwrap(), vec![0, 5]);
        assert_eq!(broadcast_shape(&[1], &[0]).unwrap(), vec![0]);
        assert!(broadcast_shape(&[2], &[3]).is_err());
        assert!(broadcast_shape(&[0], &[2]).is_err());
        let (s, v) = add(&[2, 1], &[10.0, 20.0], &[3], &[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s, vec![2, 3]);
        assert_eq!(v, vec![11.0, 12.0, 13.0, 21.0, 22.0, 23.0]);
        let (s, v) = add(&[], &[1.5], &[], &[2.0]).unwrap();
        assert_eq!((s, v), (vec![], vec![3.5]));
    }
}
