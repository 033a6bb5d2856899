//! Block-quantized formats decoded from their specifications, independently of the C code:
//! llama.cpp's `block_q4_0` (f16 d; 16 bytes of nibbles, value (q - 8) d), `block_q4_1` (f16 d,
//! f16 m; nibbles, value q d + m), `block_q8_0` (f16 d; 32 int8, value q d), and OCP MX v1.0
//! MXFP4 in the original system's 17-byte block (E8M0 scale byte, then 16 bytes of E2M1 codes).
//! In every 4-bit format element o < 16 is the low nibble of byte o of the codes and element
//! o >= 16 the high nibble of byte o - 16.
//!
//! Also the references for fer_matmul_quant_i8 (claim C-Q-008), written from its definition in
//! ffi/ferrite.h and c/kernels/quant_i8.h: the activations rounded to 8 bits, the exact product
//! with its stated tolerance, and the kernel's own integer form evaluated in f64.

use half::f16;

/// The formats, with their dtype codes in ferrite.h.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QFormat {
    Mxfp4,
    Q4_0,
    Q4_1,
    Q8_0,
}

impl QFormat {
    pub const ALL: [QFormat; 4] = [QFormat::Mxfp4, QFormat::Q4_0, QFormat::Q4_1, QFormat::Q8_0];

    pub fn block_bytes(self) -> usize {
        match self {
            QFormat::Mxfp4 => 17,
            QFormat::Q4_0 => 18,
            QFormat::Q4_1 => 20,
            QFormat::Q8_0 => 34,
        }
    }

    pub fn dtype(self) -> i32 {
        match self {
            QFormat::Mxfp4 => 16,
            QFormat::Q4_0 => 17,
            QFormat::Q4_1 => 18,
            QFormat::Q8_0 => 19,
        }
    }
}

/// OCP MX E2M1: sign bit 3, exponent bits 2-1 (bias 1), mantissa bit 0; exponent 0 is subnormal.
pub fn e2m1(code: u8) -> f32 {
    let sign = if code & 8 != 0 { -1.0f32 } else { 1.0 };
    let e = (code >> 1) & 3;
    let m = (code & 1) as f32;
    let mag = if e == 0 { m * 0.5 } else { (1.0 + m * 0.5) * 2f32.powi(e as i32 - 1) };
    sign * mag
}

/// OCP MX E8M0: 2^(code - 127); 255 is NaN.
pub fn e8m0(code: u8) -> f32 {
    if code == 255 {
        f32::NAN
    } else {
        2f64.powi(code as i32 - 127) as f32
    }
}

fn f16_at(b: &[u8]) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()
}

fn nibble(codes: &[u8], o: usize) -> u8 {
    if o < 16 {
        codes[o] & 0xF
    } else {
        codes[o - 16] >> 4
    }
}

/// The 32 values of one block.
pub fn dequant_block(f: QFormat, b: &[u8]) -> [f32; 32] {
    assert_eq!(b.len(), f.block_bytes());
    let mut out = [0f32; 32];
    for (o, v) in out.iter_mut().enumerate() {
        *v = match f {
            QFormat::Mxfp4 => e2m1(nibble(&b[1..], o)) * e8m0(b[0]),
            QFormat::Q4_0 => (nibble(&b[2..], o) as i32 - 8) as f32 * f16_at(b),
            QFormat::Q4_1 => nibble(&b[4..], o) as f32 * f16_at(b) + f16_at(&b[2..]),
            QFormat::Q8_0 => (b[2 + o] as i8) as f32 * f16_at(b),
        };
    }
    out
}

/// The 32 values of one block in f64, exactly: unlike [`dequant_block`] nothing is rounded to
/// f32 (Q4_1's q d + m is exact in f64; MXFP4 at scale 2^127 stays finite).
pub fn dequant_block_f64(f: QFormat, b: &[u8]) -> [f64; 32] {
    assert_eq!(b.len(), f.block_bytes());
    let d = f16_at(b) as f64;
    let mut out = [0f64; 32];
    for (o, v) in out.iter_mut().enumerate() {
        *v = match f {
            QFormat::Mxfp4 => e2m1(nibble(&b[1..], o)) as f64 * 2f64.powi(b[0] as i32 - 127),
            QFormat::Q4_0 => (nibble(&b[2..], o) as i32 - 8) as f64 * d,
            QFormat::Q4_1 => nibble(&b[4..], o) as f64 * d + f16_at(&b[2..]) as f64,
            QFormat::Q8_0 => (b[2 + o] as i8) as f64 * d,
        };
    }
    out
}

/// One block in the integer form fer_matmul_quant_i8 multiplies (quant_i8.h): value o is exactly
/// `codes[o] * dw + mw`. Q4_0: the nibbles, mw = -8 dw; Q4_1: the nibbles, mw the minimum; Q8_0:
/// the int8 values, mw = 0; MXFP4: twice the E2M1 value (integers -12 .. 12), dw half the E8M0
/// scale, mw = 0. dw and mw are f32 values (the kernel holds them in f32, exactly).
#[derive(Clone, Copy, Debug)]
pub struct BlockCodes {
    pub codes: [i32; 32],
    pub dw: f64,
    pub mw: f64,
}

pub fn block_codes(f: QFormat, b: &[u8]) -> BlockCodes {
    assert_eq!(b.len(), f.block_bytes());
    let mut codes = [0i32; 32];
    for (o, c) in codes.iter_mut().enumerate() {
        *c = match f {
            QFormat::Mxfp4 => (2.0 * e2m1(nibble(&b[1..], o))) as i32,
            QFormat::Q4_0 => nibble(&b[2..], o) as i32,
            QFormat::Q4_1 => nibble(&b[4..], o) as i32,
            QFormat::Q8_0 => (b[2 + o] as i8) as i32,
        };
    }
    let d = f16_at(b) as f64;
    let (dw, mw) = match f {
        QFormat::Mxfp4 => (2f64.powi(b[0] as i32 - 127) / 2.0, 0.0),
        QFormat::Q4_0 => (d, -8.0 * d),
        QFormat::Q4_1 => (d, f16_at(&b[2..]) as f64),
        QFormat::Q8_0 => (d, 0.0),
    };
    BlockCodes { codes, dw, mw }
}

/// A row of activations rounded to 8 bits, block by block of 32, as fer_matmul_quant_i8 holds it:
/// codes `q`, scales `d` and `s = d * sum(q)`, all computed in f32.
#[derive(Clone, Debug, PartialEq)]
pub struct I8Row {
    pub q: Vec<i8>,
    pub d: Vec<f32>,
    pub s: Vec<f32>,
}

/// The definition in ffi/ferrite.h and quant_i8.h: a block with largest magnitude amax gets
/// d = amax / 127 and q = round_half_even(x * (127 / amax)), each operation rounded to f32; a block
/// holding an infinite or NaN value gets d = s = NaN; a block where 127 / amax overflows (amax 0,
/// or below about 2^-121) is zero.
pub fn quantize_activations_i8(x: &[f32]) -> I8Row {
    assert_eq!(x.len() % 32, 0, "rows are whole blocks");
    let mut r = I8Row { q: Vec::with_capacity(x.len()), d: Vec::new(), s: Vec::new() };
    for blk in x.chunks(32) {
        let amax = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
        let inv = 127.0f32 / amax;
        if blk.iter().any(|v| !v.is_finite()) || !inv.is_finite() {
            let fill = if blk.iter().all(|v| v.is_finite()) { 0.0 } else { f32::NAN };
            r.q.extend_from_slice(&[0; 32]);
            r.d.push(fill);
            r.s.push(fill);
            continue;
        }
        let q: Vec<i32> = blk.iter().map(|&v| (v * inv).round_ties_even() as i32).collect();
        assert!(q.iter().all(|c| c.abs() <= 127));
        let d = amax / 127.0f32;
        r.q.extend(q.iter().map(|&c| c as i8));
        r.d.push(d);
        r.s.push(d * q.iter().sum::<i32>() as f32);
    }
    r
}

/// sum_k w_k x_k in f64 over one row of weight blocks (`w_row`: `x.len() / 32` blocks back to
/// back) and `x`, with the weights' exact values: the product fer_matmul_quant_i8 approximates.
pub fn dot_exact(f: QFormat, w_row: &[u8], x: &[f32]) -> f64 {
    let bb = f.block_bytes();
    let mut acc = 0f64;
    for (b, xb) in x.chunks(32).enumerate() {
        let w = dequant_block_f64(f, &w_row[b * bb..(b + 1) * bb]);
        acc += w.iter().zip(xb).map(|(w, &x)| w * x as f64).sum::<f64>();
    }
    acc
}

/// Unit roundoff of f32 and half its smallest subnormal: the error of one f32 operation is at most
/// U32 times its result plus TINY32 (the latter only in the subnormal range).
const U32: f64 = 1.0 / (1u64 << 24) as f64;
const TINY32: f64 = 1.0 / (1u128 << 126) as f64 / (1u64 << 24) as f64;

/// Relative allowance for the kernel's f32 rounding: each lane takes one product rounding and one
/// rounded fma per block, then four rounded adds, so about (nb + 6) U32 of the magnitudes it adds.
/// 1e-5 (twice that up to nb = 78, K = 2496), and twice the count beyond.
fn rounding_rel(nb: usize) -> f64 {
    1e-5f64.max(2.0 * (nb as f64 + 6.0) * U32)
}

/// The bound claim C-Q-008 states for |out - dot_exact(f, w_row, x)| for a row of finite x:
/// sum over blocks b of (amax_b / 254) sum_{k in b} |w_k| (rounding x to 8 bits moves each value
/// by at most half a step, d / 2 = amax / 254), plus f32 rounding:
/// - relative: rounding_rel(nb) times sum_b amax_b sum_{k in b} (|code_k dw| + |mw|), the largest
///   magnitudes the kernel adds (it multiplies codes and offsets separately, so with Q4_0 and
///   Q4_1 these can exceed |w_k|); the same allowance covers d, 127 / amax and x 127 / amax being
///   rounded to f32 (a few U32 of amax per element);
/// - absolute, where f32 values are subnormal: TINY32 for each rounded operation (d, the block
///   products dw d, s and the fma chains) times the integer it is multiplied by.
///
/// A block the kernel counts as zero (127 / amax overflows) adds its whole amax_b sum |w_k|.
pub fn i8_tolerance(f: QFormat, w_row: &[u8], x: &[f32]) -> f64 {
    let bb = f.block_bytes();
    let nb = x.len() / 32;
    let (mut quant, mut magnitude, mut tiny) = (0f64, 0f64, 0f64);
    for (b, xb) in x.chunks(32).enumerate() {
        let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
        let c = block_codes(f, &w_row[b * bb..(b + 1) * bb]);
        let sum_w: f64 = dequant_block_f64(f, &w_row[b * bb..(b + 1) * bb]).iter().map(|w| w.abs()).sum();
        let sum_split: f64 = c.codes.iter().map(|&k| (k as f64 * c.dw).abs() + c.mw.abs()).sum();
        let sum_codes: f64 = c.codes.iter().map(|&k| k.abs() as f64).sum();
        let amax = amax as f64;
        quant += if (127.0f32 / amax as f32).is_finite() { amax / 254.0 * sum_w } else { amax * sum_w };
        magnitude += amax * sum_split;
        tiny += 128.0 * (sum_split + sum_codes) + 16.0;
    }
    quant + rounding_rel(nb) * magnitude + TINY32 * (tiny + 16.0)
}

/// fer_matmul_quant_i8's output for one row pair evaluated without f32 rounding, with what the
/// kernel's rounding may add to it.
#[derive(Clone, Copy, Debug)]
pub struct I8Dot {
    /// sum over blocks b of dw dx_b isum_b + mw s_b in f64, isum_b the exact integer sum of code
    /// times q, with the activations' f32 d and s as they are (NaN where x was not finite).
    pub value: f64,
    /// The sum of |terms| (each lane's dw dx isum per block, each mw s): f32 rounding is relative
    /// to these, not to the result, since the terms may cancel.
    pub abs_terms: f64,
    /// rounding_rel(nb) abs_terms plus TINY32 per rounding in the subnormal range.
    pub tolerance: f64,
    /// Some value the kernel holds in f32 (a product dw dx or a partial sum) may pass f32::MAX:
    /// the output may then be infinite or NaN.
    pub may_overflow: bool,
}

/// The integer form of quant_i8.h in f64 over one row of weight blocks and one quantized row.
pub fn dot_i8_integer(f: QFormat, w_row: &[u8], xq: &I8Row) -> I8Dot {
    let bb = f.block_bytes();
    let nb = xq.d.len();
    let (mut value, mut abs_terms, mut tiny, mut big) = (0f64, 0f64, 16f64, 0f64);
    for b in 0..nb {
        let c = block_codes(f, &w_row[b * bb..(b + 1) * bb]);
        let dd = c.dw * xq.d[b] as f64;
        for lane in 0..8 {
            let isum: i64 = (4 * lane..4 * lane + 4).map(|k| c.codes[k] as i64 * xq.q[32 * b + k] as i64).sum();
            value += dd * isum as f64;
            abs_terms += (dd * isum as f64).abs();
            tiny += isum.abs() as f64 + 1.0;
        }
        value += c.mw * xq.s[b] as f64;
        abs_terms += (c.mw * xq.s[b] as f64).abs();
        tiny += 1.0;
        big = big.max(dd.abs());
    }
    let max32 = f32::MAX as f64 * (1.0 - 1e-6);
    I8Dot {
        value,
        abs_terms,
        tolerance: rounding_rel(nb) * abs_terms + TINY32 * tiny,
        may_overflow: big >= max32 || abs_terms >= max32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // EVIDENCE: C-Q-001 (the oracle against hand-decoded blocks)
    #[test]
    fn c_q_001_oracle_known_blocks() {
        let table: Vec<f32> = (0..16).map(e2m1).collect();
        assert_eq!(&table[..8], &[0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]);
        assert_eq!(&table[9..], &[-0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]);
        assert!(table[8] == 0.0 && table[8].is_sign_negative());
        assert_eq!(e8m0(127), 1.0);
        assert_eq!(e8m0(0), 2f32.powi(-127));
        assert!(e8m0(255).is_nan());
        // MXFP4: scale 2^1, byte 1 = 0x71: element 0 code 1 (0.5), element 16 code 7 (6)
        let mut b = [0u8; 17];
        b[0] = 128;
        b[1] = 0x71;
        let v = dequant_block(QFormat::Mxfp4, &b);
        assert_eq!((v[0], v[16], v[1]), (1.0, 12.0, 0.0));
        // Q4_0: d = 0.5, byte 0 = 0x0F: element 0 is (15 - 8) * 0.5, element 16 (0 - 8) * 0.5
        let mut q = [0u8; 18];
        q[..2].copy_from_slice(&f16::from_f32(0.5).to_bits().to_le_bytes());
        q[2] = 0x0F;
        let v = dequant_block(QFormat::Q4_0, &q);
        assert_eq!((v[0], v[16], v[1]), (3.5, -4.0, -4.0));
        // Q4_1: d = 2, m = -1: nibble 3 gives 5
        let mut q = [0u8; 20];
        q[..2].copy_from_slice(&f16::from_f32(2.0).to_bits().to_le_bytes());
        q[2..4].copy_from_slice(&f16::from_f32(-1.0).to_bits().to_le_bytes());
        q[4] = 0x03;
        assert_eq!(dequant_block(QFormat::Q4_1, &q)[0], 5.0);
        // Q8_0: d = 0.25, q = -128
        let mut q = [0u8; 34];
        q[..2].copy_from_slice(&f16::from_f32(0.25).to_bits().to_le_bytes());
        q[2] = 0x80;
        assert_eq!(dequant_block(QFormat::Q8_0, &q)[0], -32.0);
    }

    // EVIDENCE: C-Q-008 (the i8 oracle's pieces against each other and hand-worked blocks)
    #[test]
    fn c_q_008_oracle_codes_and_activations() {
        // the integer form gives back the spec's values, exactly, in every format and at the
        // scale extremes (E8M0 0 and 254, f16 subnormal and large)
        let mut seed = 0x1234_5678u64;
        for f in QFormat::ALL {
            for i in 0..64 {
                let mut b = vec![0u8; f.block_bytes()];
                for x in b.iter_mut() {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    *x = (seed >> 33) as u8;
                }
                match f {
                    QFormat::Mxfp4 => b[0] = [0u8, 1, 127, 200, 254][i % 5],
                    _ => {
                        b[1] &= 0xFB; // exponent field below 31: finite f16 scales
                        if f == QFormat::Q4_1 {
                            b[3] &= 0xFB;
                        }
                    }
                }
                let c = block_codes(f, &b);
                let exact = dequant_block_f64(f, &b);
                let spec = dequant_block(f, &b);
                for o in 0..32 {
                    assert_eq!(c.codes[o] as f64 * c.dw + c.mw, exact[o], "{f:?} block {i} element {o}");
                    assert!(spec[o] == exact[o] as f32 || (f == QFormat::Mxfp4 && spec[o].is_infinite()));
                }
            }
        }
        // activations: amax 127 makes 127 / amax = 1, so x.5 are exact ties, rounded to even
        let mut x = [0f32; 32];
        x[0] = 127.0;
        x[1] = 2.5;
        x[2] = -3.5;
        x[3] = 0.5;
        x[4] = -126.5;
        x[5] = 1.25;
        let r = quantize_activations_i8(&x);
        assert_eq!(&r.q[..6], &[127, 2, -4, 0, -126, 1]);
        assert_eq!((r.d[0], r.s[0]), (1.0, 0.0)); // 127 + 2 - 4 + 0 - 126 + 1
        // a NaN or an infinity poisons its block only; a tiny block and a zero block are zero
        let mut x = vec![1f32; 128];
        x[40] = f32::INFINITY;
        for v in &mut x[64..96] {
            *v = 2f32.powi(-125);
        }
        for v in &mut x[96..] {
            *v = 0.0;
        }
        let r = quantize_activations_i8(&x);
        let d = 1.0f32 / 127.0;
        assert_eq!((r.d[0], r.s[0], r.q[0]), (d, d * 4064.0, 127)); // 32 codes of 127
        assert!(r.d[1].is_nan() && r.s[1].is_nan() && r.q[32..64].iter().all(|&q| q == 0));
        assert_eq!((r.d[2], r.s[2], r.d[3], r.s[3]), (0.0, 0.0, 0.0, 0.0));
        assert!(r.q[64..].iter().all(|&q| q == 0));
        // 2^-120 is above the cut: 127 / amax is finite, d is subnormal
        let r = quantize_activations_i8(&[2f32.powi(-120); 32]);
        assert_eq!(r.q[0], 127);
        assert!(r.d[0] > 0.0 && !r.d[0].is_normal());
    }
}
