//! gather along axis 0: an exact copy, so the oracle works on any element type (compare bits).

/// out[i..., j...] = data[idx(indices[i...]), j...]; a negative index counts from the end; an
/// index outside [-rows, rows) is Err. out's shape = indices' shape ++ data's shape[1..].
pub fn gather<T: Copy>(
    data_shape: &[usize],
    data: &[T],
    idx_shape: &[usize],
    indices: &[i64],
) -> Result<(Vec<usize>, Vec<T>), String> {
    assert_eq!(
        data.len(),
        super::numel(data_shape),
        "data does not match its shape"
    );
    assert_eq!(
        indices.len(),
        super::numel(idx_shape),
        "indices do not match their shape"
    );
    if data_shape.is_empty() {
        return Err("gather needs data of rank >= 1".into());
    }
    let rows = data_shape[0] as i64;
    let row_len: usize = data_shape[1..].iter().product();
    let mut out = Vec::with_capacity(indices.len() * row_len);
    for &i in indices {
        let r = if i < 0 { i + rows } else { i };
        if r < 0 || r >= rows {
            return Err(format!("index {i} outside [-{rows}, {rows})"));
        }
        let start = r as usize * row_len;
        out.extend_from_slice(&data[start..start + row_len]);
    }
    let mut out_shape = idx_shape.to_vec();
    out_shape.extend_from_slice(&data_shape[1..]);
    Ok((out_shape, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    // EVIDENCE: C-GATHER-001 (the oracle itself: negative indices count from the end)
    #[test]
    fn c_gather_001_oracle_negative_indices_and_range() {
        let data = [0, 1, 2, 3, 4, 5];
        let (s, v) = gather(&[3, 2], &data, &[2], &[-1, 0]).unwrap();
        assert_eq!(s, vec![2, 2]);
        assert_eq!(v, vec![4, 5, 0, 1]);
        let (s, v) = gather(&[3, 2], &data, &[], &[-3]).unwrap();
        assert_eq!((s, v), (vec![2], vec![0, 1]));
        assert!(gather(&[3, 2], &data, &[1], &[3]).is_err());
        assert!(gather(&[3, 2], &data, &[1], &[-4]).is_err());
        assert!(gather(&[0, 2], &data[..0], &[0], &[]).is_ok());
    }
}
