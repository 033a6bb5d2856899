//! Real blocks from real GGUF files against the gguf Python package's dequantizers (claims
//! C-Q-301, C-Q-302): testdata/quant/<type>.golden.gz, made by scripts/quant/make_block_goldens.py
//! (blocks from SmolLM2-135M requantized by llama.cpp's llama-quantize and, where present, Gemma 3
//! 270M; the values checked there against ggml's own dequantize_row_* bit for bit). Every value
//! is compared bit for bit: the Rust oracle's f32 form, and C's fer_dequantize.

mod common;

use common::*;
use ferrite_spec::oracle::quant::{dequant_block, dequant_block_f64, QFormat};
use ferrite::{QMatrix, TensorMut};
use std::io::Read;
use std::path::Path;

/// One golden file: its blocks (raw bytes back to back) and the expected f32 bits of each.
struct Golden {
    f: QFormat,
    n: usize,
    raw: Vec<u8>,
    want: Vec<u32>,
    /// (file index, tensor index, block index in the tensor) of each block (goldens.json names them)
    at: Vec<(u16, u16, u32)>,
}

/// The ggml type ids of the formats (ggml.h's enum ggml_type).
fn ggml_type(f: QFormat) -> u32 {
    match f {
        QFormat::Q4_0 => 2,
        QFormat::Q4_1 => 3,
        QFormat::Q5_0 => 6,
        QFormat::Q5_1 => 7,
        QFormat::Q8_0 => 8,
        QFormat::Q2_K => 10,
        QFormat::Q3_K => 11,
        QFormat::Q4_K => 12,
        QFormat::Q5_K => 13,
        QFormat::Q6_K => 14,
        QFormat::IQ4_NL => 20,
        QFormat::IQ4_XS => 23,
        QFormat::Mxfp4 => 39,
    }
}

/// The formats whose goldens are committed: every format but MXFP4 (no file people download in
/// this set holds it; its spec test is C-Q-001's hand-worked blocks).
fn golden_formats() -> impl Iterator<Item = QFormat> {
    QFormat::ALL.into_iter().filter(|&f| f != QFormat::Mxfp4)
}

fn load(f: QFormat) -> Golden {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../testdata/quant/{}.golden.gz", f.name()));
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut b = Vec::new();
    flate2::read::GzDecoder::new(file).read_to_end(&mut b).expect("gzip golden");
    assert_eq!(&b[..8], b"FERQGLD1", "{}: magic", path.display());
    let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    let (tid, bb, be, n) = (u32_at(8), u32_at(12) as usize, u32_at(16) as usize, u32_at(20) as usize);
    assert_eq!((tid, bb, be), (ggml_type(f), f.block_bytes(), f.block_elems()), "{}: header", path.display());
    let rec = 8 + bb + 4 * be;
    assert_eq!(b.len(), 24 + n * rec, "{}: length", path.display());
    let mut g = Golden { f, n, raw: Vec::with_capacity(n * bb), want: Vec::with_capacity(n * be), at: Vec::new() };
    for i in 0..n {
        let r = &b[24 + i * rec..24 + (i + 1) * rec];
        g.at.push((u16::from_le_bytes([r[0], r[1]]), u16::from_le_bytes([r[2], r[3]]), u32::from_le_bytes([r[4], r[5], r[6], r[7]])));
        g.raw.extend_from_slice(&r[8..8 + bb]);
        g.want.extend(r[8 + bb..].chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])));
    }
    g
}

impl Golden {
    fn block(&self, i: usize) -> &[u8] {
        &self.raw[i * self.f.block_bytes()..(i + 1) * self.f.block_bytes()]
    }
    fn where_(&self, i: usize) -> String {
        let (fi, ti, bi) = self.at[i];
        format!("{:?} golden block {i} (file {fi}, tensor {ti}, block {bi} in testdata/quant/goldens.json)", self.f)
    }
}

// EVIDENCE: C-Q-301 (the oracle's f32 form equals the gguf package's, bit for bit, on every
// golden block; the f64 form rounds to within one f32 step of it)
#[test]
fn c_q_301_oracle_decodes_every_golden_block_bit_for_bit() {
    let mut total = 0usize;
    for f in golden_formats() {
        let g = load(f);
        assert!(g.n >= 100, "{f:?}: only {} golden blocks", g.n);
        let be = f.block_elems();
        for i in 0..g.n {
            let got = dequant_block(f, g.block(i));
            let exact = dequant_block_f64(f, g.block(i));
            for o in 0..be {
                let want = g.want[i * be + o];
                assert_eq!(got[o].to_bits(), want, "{} element {o}: oracle {} vs gguf {}", g.where_(i), got[o], f32::from_bits(want));
                let step = (exact[o].abs() * 2f64.powi(-23)).max(2f64.powi(-149));
                assert!((f32::from_bits(want) as f64 - exact[o]).abs() <= step, "{} element {o}: f64 form {}", g.where_(i), exact[o]);
            }
        }
        total += g.n;
    }
    assert!(total >= 2000, "{total} golden blocks in all");
}

// EVIDENCE: C-Q-302 (C's fer_dequantize equals the gguf package on every golden block, bit for
// bit, alone and over a pool; rows of one block and of several)
#[test]
fn c_q_302_c_dequantize_matches_every_golden_block() {
    for f in golden_formats() {
        let g = load(f);
        let be = f.block_elems();
        // rows of one block, then the same bytes as rows of 4 blocks (the tail dropped)
        for per_row in [1usize, 4] {
            let rows = g.n / per_row;
            let q = QMatrix::new(&g.raw, 0, f.dtype(), rows as i64, (per_row * be) as i64, (per_row * f.block_bytes()) as i64);
            for pool in [None, Some((3u32, ferrite::isa::AUTO))] {
                let mut p = make_pool(pool);
                let mut out = vec![sentinel::<f32>(); rows * per_row * be];
                ferrite::dequantize(p.as_mut(), &q, &mut TensorMut::new(&mut out, &[rows as i64, (per_row * be) as i64]).unwrap())
                    .unwrap_or_else(|e| panic!("{f:?}: fer_dequantize refused the golden blocks: {e:?} {}", ferrite::last_error_message()));
                for (k, v) in out.iter().enumerate() {
                    let want = g.want[k];
                    assert_eq!(v.to_bits(), want, "{} element {}: C {} vs gguf {}", g.where_(k / be), k % be, v, f32::from_bits(want));
                }
            }
            ferrite::qmatrix_check(&q).unwrap_or_else(|e| panic!("{f:?}: fer_qmatrix_check refused real blocks: {e:?}"));
        }
    }
}
