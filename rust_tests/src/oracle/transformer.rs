//! f64 oracles of the transformer row kernels, each over one row (the tests walk the rows).

/// x / sqrt(mean(x^2) + eps) * w (w = 1 when None).
pub fn rms_norm(x: &[f64], w: Option<&[f64]>, eps: f64) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    let r = 1.0 / (ms + eps).sqrt();
    x.iter()
        .enumerate()
        .map(|(i, v)| v * r * w.map_or(1.0, |w| w[i]))
        .collect()
}

/// Rotates pairs (NeoX: i, i + rot/2; GPT-J: 2i, 2i+1) by pos * theta^(-2i/rot).
pub fn rope(x: &[f64], pos: f64, rot: usize, theta: f64, gptj: bool) -> Vec<f64> {
    let mut y = x.to_vec();
    for i in 0..rot / 2 {
        let angle = pos * theta.powf(-2.0 * i as f64 / rot as f64);
        let (s, c) = angle.sin_cos();
        let (i0, i1) = if gptj { (2 * i, 2 * i + 1) } else { (i, i + rot / 2) };
        y[i0] = x[i0] * c - x[i1] * s;
        y[i1] = x[i0] * s + x[i1] * c;
    }
    y
}

/// x * sigmoid(x); -0 where the sigmoid vanishes (x = -inf), NaN for NaN.
pub fn silu(x: f64) -> f64 {
    if x == f64::NEG_INFINITY {
        return -0.0;
    }
    x / (1.0 + (-x).exp())
}

/// exp(x - max) / sum; NaN everywhere when the row has a NaN or no value above -inf.
pub fn softmax(x: &[f64]) -> Vec<f64> {
    let m = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if x.iter().any(|v| v.is_nan()) || m == f64::NEG_INFINITY {
        return vec![f64::NAN; x.len()];
    }
    let e: Vec<f64> = x.iter().map(|v| (v - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

/// First index of the maximum; the first NaN if there is one (numpy).
pub fn argmax(x: &[f64]) -> usize {
    if let Some(i) = x.iter().position(|v| v.is_nan()) {
        return i;
    }
    let mut best = 0;
    for (i, &v) in x.iter().enumerate() {
        if v > x[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    // EVIDENCE: C-TK-001 C-TK-002 C-TK-003 C-TK-004 C-TK-005 (the oracles on hand-worked rows)
    #[test]
    fn c_tk_001_oracles_on_known_rows() {
        assert_eq!(rms_norm(&[3.0, 4.0], None, 0.0), vec![3.0 / 12.5f64.sqrt(), 4.0 / 12.5f64.sqrt()]);
        let y = rope(&[1.0, 0.0, 5.0], 1.0, 2, 10000.0, false);
        assert!((y[0] - 1f64.cos()).abs() < 1e-15 && (y[1] - 1f64.sin()).abs() < 1e-15 && y[2] == 5.0);
        assert_eq!(silu(0.0), 0.0);
        assert!(silu(f64::NEG_INFINITY).is_sign_negative() && silu(f64::NEG_INFINITY) == 0.0);
        let s = softmax(&[0.0, 0.0]);
        assert_eq!(s, vec![0.5, 0.5]);
        assert!(softmax(&[f64::NEG_INFINITY])[0].is_nan());
        assert_eq!(argmax(&[1.0, 3.0, 3.0]), 1);
        assert_eq!(argmax(&[1.0, f64::NAN, 9.0, f64::NAN]), 1);
    }
}
