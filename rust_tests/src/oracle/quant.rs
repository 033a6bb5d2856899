//! Block-quantized formats decoded from their specifications, independently of the C code:
//! llama.cpp's `block_q4_0` (f16 d; 16 bytes of nibbles, value (q - 8) d), `block_q4_1` (f16 d,
//! f16 m; nibbles, value q d + m), `block_q8_0` (f16 d; 32 int8, value q d), and OCP MX v1.0
//! MXFP4 in the original system's 17-byte block (E8M0 scale byte, then 16 bytes of E2M1 codes).
//! In every 4-bit format of 32 elements, element o < 16 is the low nibble of byte o of the codes
//! and element o >= 16 the high nibble of byte o - 16.
//!
//! The formats of issue 19, each from ggml's block layout (ggml-common.h) and its
//! dequantize_row_* arithmetic (ggml-quants.c), read as a specification:
//! - Q5_0 {f16 d; u8 qh[4]; u8 qs[16]}: 5-bit q = nibble o | bit o of qh (little-endian u32) << 4,
//!   value (q - 16) d. Q5_1 {f16 d, m; qh[4]; qs[16]}: value q d + m.
//! - IQ4_NL {f16 d; qs[16]}: value d * KVALUES_IQ4NL[nibble o].
//! - super-blocks of 256 (QK_K): Q2_K {u8 scales[16]; u8 qs[64]; f16 d, dmin}, 16 sub-blocks of 16
//!   with a 4-bit scale (low nibble) and 4-bit min (high nibble); Q3_K {u8 hmask[32]; u8 qs[64];
//!   u8 scales[12]; f16 d}, 16 sub-blocks, 6-bit scales biased by 32, the 3rd bit of q in hmask
//!   (set: q, clear: q - 4); Q4_K {f16 d, dmin; u8 scales[12]; u8 qs[128]} and Q5_K {f16 d, dmin;
//!   u8 scales[12]; u8 qh[32]; u8 qs[128]}, 8 sub-blocks of 32 with 6-bit scale and min packed in
//!   12 bytes; Q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}, 16 sub-blocks, 6-bit q biased
//!   by 32; IQ4_XS {f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}, 8 sub-blocks of 32 with a
//!   6-bit scale biased by 32 and the IQ4_NL table.
//!
//! Every one of these values has the form (a1 a2) c - (b1 b2): a1, b1 the block's f16 scale and
//! min (or 1), a2, b2 the sub-block's small integer scale and min, c the element's integer code.
//! ggml evaluates it in f32, each operation rounded, no fused multiply-add: [`dequant_block`]
//! does the same (Rust never contracts), [`dequant_block_f64`] evaluates it in f64 (exact for
//! every format but the K-quants with a min, Q2_K, Q4_K and Q5_K, whose difference can need more
//! than 53 bits when d and dmin are far apart; those round once, to f64).
//!
//! Also the references for fer_matmul_quant_i8 (claim C-Q-008), written from its definition in
//! ffi/ferrite.h and c/kernels/quant_i8.h: the activations rounded to 8 bits, the exact product
//! with its stated tolerance, and the kernel's own integer form evaluated in f64.

use half::f16;

/// The formats, with their dtype codes in ferrite.h.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QFormat {
    Mxfp4,
    Q4_0,
    Q4_1,
    Q8_0,
    Q5_0,
    Q5_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    IQ4_NL,
    IQ4_XS,
}

/// ggml's kvalues_iq4nl: the 16 levels of IQ4_NL and IQ4_XS.
pub const KVALUES_IQ4NL: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

impl QFormat {
    pub const ALL: [QFormat; 13] = [
        QFormat::Mxfp4,
        QFormat::Q4_0,
        QFormat::Q4_1,
        QFormat::Q8_0,
        QFormat::Q5_0,
        QFormat::Q5_1,
        QFormat::Q2_K,
        QFormat::Q3_K,
        QFormat::Q4_K,
        QFormat::Q5_K,
        QFormat::Q6_K,
        QFormat::IQ4_NL,
        QFormat::IQ4_XS,
    ];

    /// Elements per block: 256 for the K-quants and IQ4_XS (ggml's QK_K), 32 for the others.
    pub fn block_elems(self) -> usize {
        match self {
            QFormat::Q2_K | QFormat::Q3_K | QFormat::Q4_K | QFormat::Q5_K | QFormat::Q6_K | QFormat::IQ4_XS => 256,
            _ => 32,
        }
    }

    pub fn block_bytes(self) -> usize {
        match self {
            QFormat::Mxfp4 => 17,
            QFormat::Q4_0 => 18,
            QFormat::Q4_1 => 20,
            QFormat::Q8_0 => 34,
            QFormat::Q5_0 => 22,
            QFormat::Q5_1 => 24,
            QFormat::Q2_K => 84,
            QFormat::Q3_K => 110,
            QFormat::Q4_K => 144,
            QFormat::Q5_K => 176,
            QFormat::Q6_K => 210,
            QFormat::IQ4_NL => 18,
            QFormat::IQ4_XS => 136,
        }
    }

    pub fn dtype(self) -> i32 {
        match self {
            QFormat::Mxfp4 => 16,
            QFormat::Q4_0 => 17,
            QFormat::Q4_1 => 18,
            QFormat::Q8_0 => 19,
            QFormat::Q5_0 => 20,
            QFormat::Q5_1 => 21,
            QFormat::Q2_K => 22,
            QFormat::Q3_K => 23,
            QFormat::Q4_K => 24,
            QFormat::Q5_K => 25,
            QFormat::Q6_K => 26,
            QFormat::IQ4_NL => 27,
            QFormat::IQ4_XS => 28,
        }
    }

    /// ggml's lower-case type name (the golden files are testdata/quant/<name>.golden).
    pub fn name(self) -> &'static str {
        match self {
            QFormat::Mxfp4 => "mxfp4",
            QFormat::Q4_0 => "q4_0",
            QFormat::Q4_1 => "q4_1",
            QFormat::Q8_0 => "q8_0",
            QFormat::Q5_0 => "q5_0",
            QFormat::Q5_1 => "q5_1",
            QFormat::Q2_K => "q2_k",
            QFormat::Q3_K => "q3_k",
            QFormat::Q4_K => "q4_k",
            QFormat::Q5_K => "q5_k",
            QFormat::Q6_K => "q6_k",
            QFormat::IQ4_NL => "iq4_nl",
            QFormat::IQ4_XS => "iq4_xs",
        }
    }

    /// Byte offsets of the f16 fields of a block that must be finite (scale, min).
    pub fn f16_fields(self) -> &'static [usize] {
        match self {
            QFormat::Mxfp4 => &[],
            QFormat::Q4_0 | QFormat::Q8_0 | QFormat::Q5_0 | QFormat::IQ4_NL | QFormat::IQ4_XS => &[0],
            QFormat::Q4_1 | QFormat::Q5_1 | QFormat::Q4_K | QFormat::Q5_K => &[0, 2],
            QFormat::Q2_K => &[80, 82],
            QFormat::Q3_K => &[108],
            QFormat::Q6_K => &[208],
        }
    }

    /// Whether values are (a1 a2) c - (b1 b2) with an offset (ggml subtracts a min / adds m).
    pub fn has_min(self) -> bool {
        matches!(self, QFormat::Q4_1 | QFormat::Q5_1 | QFormat::Q2_K | QFormat::Q4_K | QFormat::Q5_K)
    }

    /// The activation block of the 8-bit route (claim C-Q-008): 256 values (Q8_K-style) for the
    /// formats with blocks of 256, 32 for the others.
    pub fn act_block(self) -> usize {
        self.block_elems()
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

/// The 6-bit scale and min of sub-block j (0..8) of Q4_K/Q5_K's 12 packed bytes: j < 4 in the
/// low 6 bits of bytes j (scale) and j + 4 (min); j >= 4 in the nibbles of byte j + 4 (scale low,
/// min high) with their top 2 bits in the top bits of bytes j - 4 (scale) and j (min).
fn k4_scale_min(s: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        ((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4))
    }
}

/// The 6-bit scale i (0..16) of Q3_K's 12 packed bytes: low 4 bits in the low (i < 8) or high
/// (i >= 8) nibble of byte i % 8, top 2 bits in bits 2 (i / 4) of byte 8 + i % 4.
fn k3_scale(s: &[u8], i: usize) -> i32 {
    let low = if i < 8 { s[i] & 0xF } else { s[i - 8] >> 4 };
    let high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    (low | (high << 4)) as i32
}

/// One element of a block in the form (a1 a2) c - (b1 b2): `a1`, `b1` f32 values of the block
/// (an f16 scale, or 1), `a2`, `b2`, `c` integers (`b1 b2` = 0 where the format has no offset).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Elem {
    pub a1: f32,
    pub a2: i32,
    pub c: i32,
    pub b1: f32,
    pub b2: i32,
}

/// Element `o` of a block of the formats other than MXFP4, in [`Elem`] form. Q4_0, Q4_1, Q8_0,
/// Q5_0, Q5_1 and IQ4_NL have a2 = 1 (ggml multiplies code and scale once); Q4_1 and Q5_1 put
/// +m as - (m * -1), which rounds the same.
pub fn elem(f: QFormat, b: &[u8], o: usize) -> Elem {
    let plain = |a1: f32, c: i32| Elem { a1, a2: 1, c, b1: 0.0, b2: 0 };
    match f {
        QFormat::Mxfp4 => panic!("MXFP4 has no (a1 a2) c - (b1 b2) form"),
        QFormat::Q4_0 => plain(f16_at(b), nibble(&b[2..], o) as i32 - 8),
        QFormat::Q4_1 => Elem { a1: f16_at(b), a2: 1, c: nibble(&b[4..], o) as i32, b1: f16_at(&b[2..]), b2: -1 },
        QFormat::Q8_0 => plain(f16_at(b), (b[2 + o] as i8) as i32),
        QFormat::Q5_0 | QFormat::Q5_1 => {
            let at = if f == QFormat::Q5_0 { 2 } else { 4 };
            let qh = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
            let q = nibble(&b[at + 4..], o) as i32 | (((qh >> o) & 1) << 4) as i32;
            if f == QFormat::Q5_0 {
                plain(f16_at(b), q - 16)
            } else {
                Elem { a1: f16_at(b), a2: 1, c: q, b1: f16_at(&b[2..]), b2: -1 }
            }
        }
        QFormat::IQ4_NL => plain(f16_at(b), KVALUES_IQ4NL[nibble(&b[2..], o) as usize] as i32),
        QFormat::Q2_K => {
            // halves of 128 elements use 32 bytes of qs each; within a half, 2-bit field j
            // (bits 2j, 2j+1) of byte l holds element 32 j + l; sub-blocks of 16 in order
            let (h, r) = (o / 128, o % 128);
            let (j, l) = (r / 32, r % 32);
            let q = ((b[16 + 32 * h + l] >> (2 * j)) & 3) as i32;
            let sc = b[o / 16];
            Elem { a1: f16_at(&b[80..]), a2: (sc & 0xF) as i32, c: q, b1: f16_at(&b[82..]), b2: (sc >> 4) as i32 }
        }
        QFormat::Q3_K => {
            // qs as Q2_K; the third bit of element o is bit (4 h + j) of hmask[l]
            let (h, r) = (o / 128, o % 128);
            let (j, l) = (r / 32, r % 32);
            let low = ((b[32 + 32 * h + l] >> (2 * j)) & 3) as i32;
            let high = (b[l] >> (4 * h + j)) & 1;
            let q = low - if high == 1 { 0 } else { 4 };
            Elem { a1: f16_at(&b[108..]), a2: k3_scale(&b[96..108], o / 16) - 32, c: q, b1: 0.0, b2: 0 }
        }
        QFormat::Q4_K | QFormat::Q5_K => {
            // pairs of sub-blocks (64 elements) share 32 bytes of qs: low nibbles the first,
            // high nibbles the second; Q5_K's fifth bit of sub-block s is bit s of qh[l]
            let (p, r) = (o / 64, o % 64);
            let (hi, l) = (r / 32, r % 32);
            let qs = if f == QFormat::Q4_K { 16 } else { 48 };
            let byte = b[qs + 32 * p + l];
            let mut q = (if hi == 1 { byte >> 4 } else { byte & 0xF }) as i32;
            if f == QFormat::Q5_K {
                q |= (((b[16 + l] >> (2 * p + hi)) & 1) << 4) as i32;
            }
            let (sc, m) = k4_scale_min(&b[4..16], o / 32);
            Elem { a1: f16_at(b), a2: sc as i32, c: q, b1: f16_at(&b[2..]), b2: m as i32 }
        }
        QFormat::Q6_K => {
            // halves of 128: ql 64 bytes, qh 32 bytes, 8 scales each; quarter t of a half takes
            // the low (t < 2) or high nibble of ql[l + 32 (t % 2)] and bits 2t, 2t+1 of qh[l]
            let (h, r) = (o / 128, o % 128);
            let (t, l) = (r / 32, r % 32);
            let lo = b[64 * h + l + 32 * (t % 2)];
            let lo = if t >= 2 { lo >> 4 } else { lo & 0xF };
            let hi = (b[128 + 32 * h + l] >> (2 * t)) & 3;
            let q = (lo | (hi << 4)) as i32 - 32;
            let sc = b[192 + 8 * h + l / 16 + 2 * t] as i8;
            Elem { a1: f16_at(&b[208..]), a2: sc as i32, c: q, b1: 0.0, b2: 0 }
        }
        QFormat::IQ4_XS => {
            // sub-block s of 32: 16 bytes of qs as IQ4_NL's block, scale = nibble s of scales_l
            // (low nibble first) | bits 2s, 2s+1 of scales_h << 4, biased by 32
            let (s, r) = (o / 32, o % 32);
            let sh = u16::from_le_bytes([b[2], b[3]]);
            let ls = ((b[4 + s / 2] >> (4 * (s % 2))) & 0xF) as i32 | (((sh >> (2 * s)) & 3) << 4) as i32;
            let q = KVALUES_IQ4NL[nibble(&b[8 + 16 * s..], r) as usize] as i32;
            Elem { a1: f16_at(b), a2: ls - 32, c: q, b1: 0.0, b2: 0 }
        }
    }
}

/// The values of one block (`f.block_elems()` of them) in f32 as ggml computes them: a = a1 a2
/// and b = b1 b2 rounded to f32, then a c rounded, then the difference (formats without an offset
/// stop at a c, the others subtract even a zero offset, as ggml does).
pub fn dequant_block(f: QFormat, b: &[u8]) -> Vec<f32> {
    assert_eq!(b.len(), f.block_bytes());
    (0..f.block_elems())
        .map(|o| match f {
            QFormat::Mxfp4 => e2m1(nibble(&b[1..], o)) * e8m0(b[0]),
            _ => {
                let e = elem(f, b, o);
                let a = if e.a2 == 1 { e.a1 } else { e.a1 * e.a2 as f32 };
                let v = a * e.c as f32;
                // formats with a min subtract it even when it is 0: -0.0 - (-0.0) is +0.0
                if f.has_min() {
                    v - e.b1 * e.b2 as f32
                } else {
                    v
                }
            }
        })
        .collect()
}

/// The values of one block in f64: nothing is rounded to f32 (Q4_1's q d + m is exact in f64;
/// MXFP4 at scale 2^127 stays finite); see the module comment for the K-quants with a min.
pub fn dequant_block_f64(f: QFormat, b: &[u8]) -> Vec<f64> {
    assert_eq!(b.len(), f.block_bytes());
    (0..f.block_elems())
        .map(|o| match f {
            QFormat::Mxfp4 => e2m1(nibble(&b[1..], o)) as f64 * 2f64.powi(b[0] as i32 - 127),
            _ => {
                let e = elem(f, b, o);
                e.a1 as f64 * e.a2 as f64 * e.c as f64 - e.b1 as f64 * e.b2 as f64
            }
        })
        .collect()
}

/// One block in the integer form fer_matmul_quant_i8 multiplies (quant_i8.h): value o is exactly
/// `codes[o] * dw[o] + mw[o]`. Q4_0: the nibbles minus 8, mw = 0; Q4_1: the nibbles, mw the minimum;
/// Q8_0: the int8 values, mw = 0; MXFP4: twice the E2M1 value (integers -12 .. 12), dw half the
/// E8M0 scale, mw = 0; the others: the code c of [`Elem`], dw = a1 a2 and mw = -(b1 b2) (Q5_0:
/// c = q - 16; Q3_K: q - 4 h; Q6_K: q - 32; IQ4_*: the table value), constant over each
/// sub-block. dw and mw are f32 values for the formats of 32 and exact products for the others.
#[derive(Clone, Debug)]
pub struct BlockCodes {
    pub codes: Vec<i32>,
    pub dw: Vec<f64>,
    pub mw: Vec<f64>,
}

pub fn block_codes(f: QFormat, b: &[u8]) -> BlockCodes {
    assert_eq!(b.len(), f.block_bytes());
    let n = f.block_elems();
    let mut r = BlockCodes { codes: Vec::with_capacity(n), dw: Vec::with_capacity(n), mw: Vec::with_capacity(n) };
    let d = f16_at(b) as f64;
    for o in 0..n {
        let (c, dw, mw) = match f {
            QFormat::Mxfp4 => ((2.0 * e2m1(nibble(&b[1..], o))) as i32, 2f64.powi(b[0] as i32 - 127) / 2.0, 0.0),
            QFormat::Q4_0 => (nibble(&b[2..], o) as i32 - 8, d, 0.0),
            QFormat::Q4_1 => (nibble(&b[4..], o) as i32, d, f16_at(&b[2..]) as f64),
            QFormat::Q8_0 => ((b[2 + o] as i8) as i32, d, 0.0),
            _ => {
                let e = elem(f, b, o);
                (e.c, e.a1 as f64 * e.a2 as f64, -(e.b1 as f64 * e.b2 as f64))
            }
        };
        r.codes.push(c);
        r.dw.push(dw);
        r.mw.push(mw);
    }
    r
}

/// A row of activations rounded to 8 bits, block by block of `block` (32, or 256 for the formats
/// with blocks of 256), as fer_matmul_quant_i8 holds it: codes `q`, scales `d` and
/// `s = d * sum(q)` per block, all computed in f32.
#[derive(Clone, Debug, PartialEq)]
pub struct I8Row {
    pub block: usize,
    pub q: Vec<i8>,
    pub d: Vec<f32>,
    pub s: Vec<f32>,
}

/// The definition in ffi/ferrite.h and quant_i8.h: a block with largest magnitude amax gets
/// d = amax / 127 and q = round_half_even(x * (127 / amax)), each operation rounded to f32; a block
/// holding an infinite or NaN value gets d = s = NaN; a block where 127 / amax overflows (amax 0,
/// or below about 2^-121) is zero. Blocks of 32.
pub fn quantize_activations_i8(x: &[f32]) -> I8Row {
    quantize_activations_i8_in(x, 32)
}

/// [`quantize_activations_i8`] with blocks of `block` values (the rule is the same per block).
pub fn quantize_activations_i8_in(x: &[f32], block: usize) -> I8Row {
    assert_eq!(x.len() % block, 0, "rows are whole blocks");
    let mut r = I8Row { block, q: Vec::with_capacity(x.len()), d: Vec::new(), s: Vec::new() };
    for blk in x.chunks(block) {
        let amax = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
        let inv = 127.0f32 / amax;
        if blk.iter().any(|v| !v.is_finite()) || !inv.is_finite() {
            let fill = if blk.iter().all(|v| v.is_finite()) { 0.0 } else { f32::NAN };
            r.q.extend(std::iter::repeat(0).take(block));
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

/// sum_k w_k x_k in f64 over one row of weight blocks (`w_row`: `x.len() / f.block_elems()`
/// blocks back to back) and `x`, with the weights' exact values: the product
/// fer_matmul_quant_i8 approximates.
pub fn dot_exact(f: QFormat, w_row: &[u8], x: &[f32]) -> f64 {
    let (bb, be) = (f.block_bytes(), f.block_elems());
    let mut acc = 0f64;
    for (b, xb) in x.chunks(be).enumerate() {
        let w = dequant_block_f64(f, &w_row[b * bb..(b + 1) * bb]);
        acc += w.iter().zip(xb).map(|(w, &x)| w * x as f64).sum::<f64>();
    }
    acc
}

/// Unit roundoff of f32 and half its smallest subnormal: the error of one f32 operation is at most
/// U32 times its result plus TINY32 (the latter only in the subnormal range).
const U32: f64 = 1.0 / (1u64 << 24) as f64;
const TINY32: f64 = 1.0 / (1u128 << 126) as f64 / (1u64 << 24) as f64;

/// Relative allowance for the kernel's f32 rounding: each block takes one product rounding
/// (dw dx) and one rounded fma, and the two chains one final add, so about (nb + 6) U32 of the
/// magnitudes it adds (nb counts blocks of 32, also in blocks of 256; 6 is headroom). 1e-5 (twice
/// that up to nb = 78, K = 2496), and twice the count beyond.
fn rounding_rel(nb: usize) -> f64 {
    1e-5f64.max(2.0 * (nb as f64 + 6.0) * U32)
}

/// The bound claim C-Q-008 states for |out - dot_exact(f, w_row, x)| for a row of finite x:
/// sum over activation blocks b (`f.act_block()` values, the same span as a weight block) of
/// (amax_b / 254) sum_{k in b} |w_k| (rounding x to 8 bits moves each value by at most half a
/// step, d / 2 = amax / 254), plus f32 rounding:
/// - relative: rounding_rel(nb) times sum_b amax_b sum_{k in b} (|code_k dw_k| + |mw_k|), the
///   largest magnitudes the kernel adds (it multiplies codes and offsets separately, so with
///   Q4_0, Q4_1 and the formats with a min these can exceed |w_k|); the same allowance covers d,
///   127 / amax and x 127 / amax being rounded to f32 (a few U32 of amax per element);
/// - absolute, where f32 values are subnormal: TINY32 for each rounded operation (d, the block
///   products dw d, s and the fma chains) times the integer it is multiplied by.
///
/// A block the kernel counts as zero (127 / amax overflows) adds its whole amax_b sum |w_k|.
pub fn i8_tolerance(f: QFormat, w_row: &[u8], x: &[f32]) -> f64 {
    let (bb, be) = (f.block_bytes(), f.act_block());
    let nb = x.len() / 32;
    let (mut quant, mut magnitude, mut tiny) = (0f64, 0f64, 0f64);
    for (b, xb) in x.chunks(be).enumerate() {
        let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
        let c = block_codes(f, &w_row[b * bb..(b + 1) * bb]);
        let sum_w: f64 = dequant_block_f64(f, &w_row[b * bb..(b + 1) * bb]).iter().map(|w| w.abs()).sum();
        let sum_split: f64 = (0..be).map(|k| (c.codes[k] as f64 * c.dw[k]).abs() + c.mw[k].abs()).sum();
        let sum_codes: f64 = c.codes.iter().map(|&k| k.abs() as f64).sum();
        let amax = amax as f64;
        quant += if (127.0f32 / amax as f32).is_finite() { amax / 254.0 * sum_w } else { amax * sum_w };
        magnitude += amax * sum_split;
        tiny += 128.0 * (sum_split + sum_codes) + 16.0 * (be / 32) as f64;
    }
    quant + rounding_rel(nb) * magnitude + TINY32 * (tiny + 16.0)
}

/// fer_matmul_quant_i8's output for one row pair evaluated without f32 rounding, with what the
/// kernel's rounding may add to it.
#[derive(Clone, Copy, Debug)]
pub struct I8Dot {
    /// sum over blocks b of dw dx_b isum_b + mw s_b in f64, isum_b the exact integer sum of code
    /// times q, with the activations' f32 d and s as they are (NaN where x was not finite). For
    /// blocks of 256 the offsets take dx_b times the exact integer sum of q over their group of
    /// 16 (Q8_K's per-16 sums) instead of s_b.
    pub value: f64,
    /// The sum of |terms| (each block's dw dx isum, each mw s): f32 rounding is relative
    /// to these, not to the result, since the terms may cancel.
    pub abs_terms: f64,
    /// rounding_rel(nb) abs_terms plus TINY32 per rounding in the subnormal range.
    pub tolerance: f64,
    /// Some value the kernel holds in f32 (a product dw dx or a partial sum) may pass f32::MAX:
    /// the output may then be infinite or NaN.
    pub may_overflow: bool,
}

/// The integer form of quant_i8.h in f64 over one row of weight blocks and one quantized row
/// (quantized in blocks of `f.act_block()`). Formats of 32: one integer per block (codes times q)
/// and one offset term mw s (Q4_1, Q5_1; zero for the others); formats of 256: one group per 16 values (the sub-blocks' scale and min
/// are constant over 16), dw dx isum + mw dx qsum each (the value does not depend on how the
/// exact integers are grouped; abs_terms takes each element's |dw dx c q|, which bounds the
/// kernel's eight lanes across sub-blocks, quant_i8.h).
pub fn dot_i8_integer(f: QFormat, w_row: &[u8], xq: &I8Row) -> I8Dot {
    let (bb, be) = (f.block_bytes(), f.block_elems());
    assert_eq!(xq.block, f.act_block(), "activations quantized in the format's blocks");
    let nb = xq.d.len();
    let (mut value, mut abs_terms, mut tiny, mut big) = (0f64, 0f64, 16f64, 0f64);
    for b in 0..nb {
        let c = block_codes(f, &w_row[b * bb..(b + 1) * bb]);
        let dx = xq.d[b] as f64;
        let q = &xq.q[be * b..be * (b + 1)];
        if be == 32 {
            // one exact integer per block, one fma (quant_i8.h)
            let dd = c.dw[0] * dx;
            let isum: i64 = (0..32).map(|k| c.codes[k] as i64 * q[k] as i64).sum();
            value += dd * isum as f64;
            abs_terms += (dd * isum as f64).abs();
            tiny += isum.abs() as f64 + 1.0;
            value += c.mw[0] * xq.s[b] as f64;
            abs_terms += (c.mw[0] * xq.s[b] as f64).abs();
            tiny += 1.0;
            big = big.max(dd.abs());
        } else {
            for g in 0..be / 16 {
                let ks = 16 * g..16 * g + 16;
                let isum: i64 = ks.clone().map(|k| c.codes[k] as i64 * q[k] as i64).sum();
                let qsum: i64 = ks.clone().map(|k| q[k] as i64).sum();
                let (dd, md) = (c.dw[16 * g] * dx, c.mw[16 * g] * dx);
                value += dd * isum as f64 + md * qsum as f64;
                // the kernel groups the integers its own way (lanes across sub-blocks): bound
                // its partial sums by the elements' magnitudes, which bound any grouping
                let per_elem: f64 = ks.map(|k| (c.codes[k] as f64 * q[k] as f64).abs()).sum();
                abs_terms += dd.abs() * per_elem + (md * qsum as f64).abs();
                tiny += (isum.abs() + qsum.abs()) as f64 + 2.0;
                big = big.max(dd.abs()).max(md.abs());
            }
        }
    }
    let max32 = f32::MAX as f64 * (1.0 - 1e-6);
    I8Dot {
        value,
        abs_terms,
        tolerance: rounding_rel(nb * be / 32) * abs_terms + TINY32 * tiny,
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
                        for &at in f.f16_fields() {
                            b[at + 1] &= 0xFB; // exponent field below 31: finite f16 scales
                        }
                    }
                }
                let c = block_codes(f, &b);
                let exact = dequant_block_f64(f, &b);
                let spec = dequant_block(f, &b);
                for o in 0..f.block_elems() {
                    assert_eq!(c.codes[o] as f64 * c.dw[o] + c.mw[o], exact[o], "{f:?} block {i} element {o}");
                    if f.has_min() {
                        // ggml rounds the product and the difference: within one f32 step
                        let step = (exact[o].abs() * 2f64.powi(-23)).max(2f64.powi(-149));
                        assert!((spec[o] as f64 - exact[o]).abs() <= step, "{f:?} block {i} element {o}");
                    } else {
                        assert!(spec[o] == exact[o] as f32 || (f == QFormat::Mxfp4 && spec[o].is_infinite()));
                    }
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
