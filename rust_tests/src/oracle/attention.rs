//! Attention in f64: q [hq, nq, d], k [hkv, nk, d], v [hkv, nk, dv], all row-major; q head h
//! reads kv head h / (hq / hkv); query i sits at position q_pos0 + i and, when causal, sees keys
//! j <= q_pos0 + i. A query that sees no key gives zeros.

pub struct AttentionShape {
    pub hq: usize,
    pub hkv: usize,
    pub nq: usize,
    pub nk: usize,
    pub d: usize,
    pub dv: usize,
}

/// (output [hq, nq, dv], and per output element the scale of its error bound: sum_j p_j |v_j e|).
pub fn attention(
    s: &AttentionShape,
    q: &[f64],
    k: &[f64],
    v: &[f64],
    scale: f64,
    causal: bool,
    q_pos0: usize,
) -> (Vec<f64>, Vec<f64>) {
    let group = s.hq / s.hkv;
    let mut out = vec![0.0; s.hq * s.nq * s.dv];
    let mut mag = vec![0.0; s.hq * s.nq * s.dv];
    for h in 0..s.hq {
        let kh = h / group;
        for i in 0..s.nq {
            let visible = if causal { (q_pos0 + i + 1).min(s.nk) } else { s.nk };
            if visible == 0 {
                continue;
            }
            let qrow = &q[(h * s.nq + i) * s.d..(h * s.nq + i + 1) * s.d];
            let scores: Vec<f64> = (0..visible)
                .map(|j| {
                    let krow = &k[(kh * s.nk + j) * s.d..(kh * s.nk + j + 1) * s.d];
                    scale * qrow.iter().zip(krow).map(|(a, b)| a * b).sum::<f64>()
                })
                .collect();
            let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
            let l: f64 = e.iter().sum();
            for c in 0..s.dv {
                let at = (h * s.nq + i) * s.dv + c;
                for (j, ej) in e.iter().enumerate() {
                    let vv = v[(kh * s.nk + j) * s.dv + c];
                    out[at] += ej / l * vv;
                    mag[at] += ej / l * vv.abs();
                }
            }
        }
    }
    (out, mag)
}
