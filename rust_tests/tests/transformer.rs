//! The transformer row kernels against their f64 oracles (C-TK-001..C-TK-006).
//!
//! Tolerances, with u = 2^-24 and h(out) half an ulp of out's format at the larger of the two
//! values (the f64 oracle has no final rounding) plus that format's half smallest subnormal:
//! - rms_norm: the sum of squares errs by at most (ceil(D/32) + 5) u relative (32 partials, then
//!   the tree), the square root halves it, the divide, reciprocal and two products add 4 u:
//!   |got - want| <= 2 ((ceil(D/32) + 5) / 2 + 4) u |x r w| + h.
//! - rope: cos and sin rounded to f32 (u each), two products and a sum (3 u):
//!   |got - want| <= 8 u (|x0| + |x1|) + h.
//! - silu: ferrite's exponential (2 ulp) plus an add, a divide and a product: 8 u |want| + h, plus
//!   4 (1 + |x|) 2^-149 where the sigmoid is subnormal.
//! - softmax: x - max rounds with error u |x - max|, which expf turns into a relative error of
//!   the same size; the sum adds (ceil(n/32) + 5) u and the divide u:
//!   2 (|x - max| + max_j |x_j - max| + ceil(n/32) + 8) u want + 4 2^-149 + h.
//! - argmax and embedding are exact.

mod common;

use common::*;
use ferrite_spec::oracle::{self, transformer as tk, Float};
use ferrite::{status, RopePairing, TensorMut, TensorRef};
use half::{bf16, f16};
use proptest::prelude::*;

fn tol_out<T: Float>(want: f64, got: f64) -> f64 {
    let f = T::FORMAT;
    let h = 2f64.powi(f.emin - f.mant_bits - 1);
    if f == oracle::Format::F32 {
        return h;
    }
    let mag = if got.is_finite() { want.abs().max(got.abs()) } else { want.abs() };
    0.5 * oracle::ulp(mag, f) + h
}

fn close<T: Float>(got: T, want: f64, tol: f64) -> bool {
    let g = got.to_f64();
    if want.is_nan() {
        return g.is_nan();
    }
    if want.is_infinite() {
        return g == want;
    }
    (g - want).abs() <= tol + tol_out::<T>(want, g)
}

/// Rows of a layout's logical values (last axis), row-major.
fn rows_of(vals: &[f64], len: usize) -> Vec<&[f64]> {
    if len == 0 {
        return vec![];
    }
    vals.chunks(len).collect()
}

#[derive(Clone, Debug)]
struct RowCase {
    shape: Vec<usize>,
    x: Layout,
    out: Layout,
    in_place: bool,
    seed: u64,
    pool: PoolSpec,
}

fn row_case(min_rank: usize) -> impl Strategy<Value = RowCase> {
    shape(3)
        .prop_filter("rank", move |s| s.len() >= min_rank)
        .prop_flat_map(|s| {
            let r = s.len();
            (Just(s), layout_plan(r, false), layout_plan(r, false), any::<bool>(), any::<u64>(), pool_spec())
        })
        .prop_map(|(shape, px, po, in_place, seed, pool)| RowCase {
            x: px.build(&shape),
            out: po.build(&shape),
            shape,
            in_place,
            seed,
            pool,
        })
}

/// Runs `call(x, out)` either out of place or with out exactly x; returns the output buffer and
/// its layout, and the logical input values.
fn run_rowwise<T: Float>(
    c: &RowCase,
    kind: Values,
    call: impl FnOnce(Option<&mut ferrite::ThreadPool>, &TensorRef<'_>, &mut TensorMut<'_>) -> ferrite::Result<()>,
) -> (Vec<f64>, Vec<f64>) {
    let mut xbuf: Vec<T> = gen_values(c.seed, c.x.buf_len, kind);
    let xs: Vec<f64> = c.x.positions().iter().map(|&p| xbuf[p].to_f64()).collect();
    let mut pool = make_pool(c.pool);
    if c.in_place {
        let mut v = c.x.view_mut(&mut xbuf);
        let raw = *v.raw();
        // SAFETY: x and out are the same descriptor of one live buffer, which the header allows.
        let x = unsafe { TensorRef::from_raw(raw) };
        call(pool.as_mut(), &x, &mut v).expect("kernel");
        let got = c.x.positions().iter().map(|&p| xbuf[p].to_f64()).collect();
        (xs, got)
    } else {
        let mut obuf = vec![sentinel::<T>(); c.out.buf_len];
        {
            let x = c.x.view(&xbuf);
            let mut o = c.out.view_mut(&mut obuf);
            call(pool.as_mut(), &x, &mut o).expect("kernel");
        }
        let pos = c.out.positions();
        let mut inside = vec![false; c.out.buf_len];
        pos.iter().for_each(|&p| inside[p] = true);
        for (p, v) in obuf.iter().enumerate() {
            assert!(inside[p] || v.bits() == sentinel::<T>().bits(), "wrote outside out's view at {p}");
        }
        (xs, pos.iter().map(|&p| obuf[p].to_f64()).collect())
    }
}

fn check_rms_norm<T: Float>(c: &RowCase, with_weight: bool) -> Result<(), TestCaseError> {
    let d = *c.shape.last().unwrap();
    let w: Vec<f32> = gen_values(c.seed ^ 7, d, Values::Wide);
    let wt = TensorRef::new(&w, &[d as i64]).unwrap();
    let wv: Vec<f64> = w.iter().map(|&v| v as f64).collect();
    let eps = 1e-5f32;
    let (xs, got) = run_rowwise::<T>(c, Values::Wide, |p, x, o| {
        ferrite::rms_norm(p, x, if with_weight { Some(&wt) } else { None }, eps, o)
    });
    let u = 2f64.powi(-24);
    let k = (d.div_ceil(32) + 5) as f64;
    for (r, row) in rows_of(&xs, d).iter().enumerate() {
        let want = tk::rms_norm(row, with_weight.then_some(&wv[..]), eps as f64);
        for i in 0..d {
            let g = T::from_f64_rne(got[r * d + i]);
            let tol = 2.0 * (k / 2.0 + 4.0) * u * want[i].abs();
            prop_assert!(close(g, want[i], tol), "row {} elem {}: got {:?}, want {}", r, i, g, want[i]);
        }
    }
    Ok(())
}

fn check_silu<T: Float>(c: &RowCase) -> Result<(), TestCaseError> {
    let (xs, got) = run_rowwise::<T>(c, Values::Moderate { special_permille: 50 }, |p, x, o| ferrite::silu(p, x, o));
    for (i, (&x, &g)) in xs.iter().zip(&got).enumerate() {
        let want = tk::silu(x);
        // below about -87 the sigmoid is an f32 subnormal: it keeps an absolute error of
        // 2^-149 per rounding, which the product with x scales by |x|
        let tol = 8.0 * 2f64.powi(-24) * want.abs() + 4.0 * (1.0 + x.abs()) * 2f64.powi(-149);
        prop_assert!(close(T::from_f64_rne(g), want, tol), "elem {}: silu({}) got {}, want {}", i, x, g, want);
        if want == 0.0 && want.is_sign_negative() && x == f64::NEG_INFINITY {
            prop_assert!(g == 0.0 && g.is_sign_negative(), "silu(-inf) must be -0, got {}", g);
        }
    }
    Ok(())
}

fn check_softmax<T: Float>(c: &RowCase) -> Result<(), TestCaseError> {
    let d = *c.shape.last().unwrap();
    let (xs, got) = run_rowwise::<T>(c, Values::Wide, |p, x, o| ferrite::softmax(p, x, o));
    let u = 2f64.powi(-24);
    for (r, row) in rows_of(&xs, d).iter().enumerate() {
        let want = tk::softmax(row);
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let spread = row.iter().map(|v| (v - m).abs()).fold(0.0, f64::max);
        for i in 0..d {
            // plus 4 * 2^-149: an exp in the f32 subnormal range errs absolutely, not relatively
            let tol = 2.0 * ((row[i] - m).abs() + spread + d.div_ceil(32) as f64 + 8.0) * u * want[i]
                + 4.0 * 2f64.powi(-149);
            let g = T::from_f64_rne(got[r * d + i]);
            prop_assert!(close(g, want[i], tol), "row {} elem {}: got {:?}, want {}", r, i, g, want[i]);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(128, file!()))]

    // EVIDENCE: C-TK-001
    #[test]
    fn c_tk_001_rms_norm_f32(c in row_case(1), w in any::<bool>()) { check_rms_norm::<f32>(&c, w)?; }
    #[test]
    fn c_tk_001_rms_norm_f16(c in row_case(1), w in any::<bool>()) { check_rms_norm::<f16>(&c, w)?; }
    #[test]
    fn c_tk_001_rms_norm_bf16(c in row_case(1), w in any::<bool>()) { check_rms_norm::<bf16>(&c, w)?; }

    // EVIDENCE: C-TK-003
    #[test]
    fn c_tk_003_silu_f32(c in row_case(1)) { check_silu::<f32>(&c)?; }
    #[test]
    fn c_tk_003_silu_bf16(c in row_case(1)) { check_silu::<bf16>(&c)?; }

    // EVIDENCE: C-TK-004
    #[test]
    fn c_tk_004_softmax_f32(c in row_case(1)) { check_softmax::<f32>(&c)?; }
    #[test]
    fn c_tk_004_softmax_f16(c in row_case(1)) { check_softmax::<f16>(&c)?; }
}

// EVIDENCE: C-TK-003
#[test]
fn c_tk_003_swiglu_is_silu_gate_times_up() {
    let n = 1000;
    let gate: Vec<f32> = gen_values(1, n, Values::Moderate { special_permille: 20 });
    let up: Vec<f32> = gen_values(2, n, Values::Wide);
    let mut out = vec![0f32; n];
    let g = TensorRef::new(&gate, &[10, 100]).unwrap();
    let u = TensorRef::new(&up, &[10, 100]).unwrap();
    ferrite::swiglu(None, &g, &u, &mut TensorMut::new(&mut out, &[10, 100]).unwrap()).unwrap();
    let mut s = vec![0f32; n];
    ferrite::silu(None, &g, &mut TensorMut::new(&mut s, &[10, 100]).unwrap()).unwrap();
    for i in 0..n {
        let want = s[i] * up[i];
        assert!(out[i].to_bits() == want.to_bits() || (out[i].is_nan() && want.is_nan()), "elem {i}");
    }
    let short = TensorRef::new(&up[..990], &[10, 99]).unwrap();
    let e = ferrite::swiglu(None, &g, &short, &mut TensorMut::new(&mut out, &[10, 100]).unwrap()).unwrap_err();
    assert_eq!(e.code, status::SHAPE_MISMATCH);
}

#[derive(Clone, Debug)]
struct RopeCase {
    t: usize,
    h: usize,
    d: usize,
    rot: usize,
    gptj: bool,
    theta: f32,
    positions: Vec<i64>,
    x: Layout,
    seed: u64,
    pool: PoolSpec,
}

fn rope_case() -> impl Strategy<Value = RopeCase> {
    (0usize..5, 1usize..4, 1usize..24, any::<bool>(), prop_oneof![Just(10000.0f32), Just(1e6f32), 2.0f32..500.0])
        .prop_flat_map(|(t, h, half_rot, gptj, theta)| {
            let rot = 2 * half_rot;
            (
                Just((t, h, rot, gptj, theta)),
                0usize..4,
                prop::collection::vec(prop_oneof![0i64..64, -50i64..0, 0i64..40000], t),
                layout_plan(3, false),
                any::<u64>(),
                pool_spec(),
            )
        })
        .prop_map(|((t, h, rot, gptj, theta), extra, positions, px, seed, pool)| {
            let d = rot + extra;
            RopeCase { t, h, d, rot, gptj, theta, positions, x: px.build(&[t, h, d]), seed, pool }
        })
}

fn check_rope<T: Float>(c: &RopeCase) -> Result<(), TestCaseError> {
    let rc = RowCase {
        shape: vec![c.t, c.h, c.d],
        x: c.x.clone(),
        out: Layout::contiguous(&[c.t, c.h, c.d]),
        in_place: c.seed % 3 == 0,
        seed: c.seed,
        pool: c.pool,
    };
    let pos = TensorRef::new(&c.positions, &[c.t as i64]).unwrap();
    let pairing = if c.gptj { RopePairing::Gptj } else { RopePairing::Neox };
    let (xs, got) = run_rowwise::<T>(&rc, Values::Wide, |p, x, o| ferrite::rope(p, x, &pos, pairing, c.rot as u32, c.theta, o));
    let u = 2f64.powi(-24);
    for (r, row) in rows_of(&xs, c.d).iter().enumerate() {
        let p = c.positions[r / c.h] as f64;
        let want = tk::rope(row, p, c.rot, c.theta as f64, c.gptj);
        for i in 0..c.d {
            let partner = if i >= c.rot { i } else if c.gptj { i ^ 1 } else { (i + c.rot / 2) % c.rot };
            let tol = if i >= c.rot { 0.0 } else { 8.0 * u * (row[i].abs() + row[partner].abs()) };
            let g = T::from_f64_rne(got[r * c.d + i]);
            prop_assert!(close(g, want[i], tol), "row {} elem {} pos {}: got {:?}, want {}", r, i, p, g, want[i]);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(128, file!()))]

    // EVIDENCE: C-TK-002
    #[test]
    fn c_tk_002_rope_f32(c in rope_case()) { check_rope::<f32>(&c)?; }
    #[test]
    fn c_tk_002_rope_bf16(c in rope_case()) { check_rope::<bf16>(&c)?; }
}

// EVIDENCE: C-TK-002
#[test]
fn c_tk_002_rope_refuses_bad_arguments() {
    let x = vec![1f32; 2 * 3 * 8];
    let mut out = vec![0f32; 2 * 3 * 8];
    let xt = TensorRef::new(&x, &[2, 3, 8]).unwrap();
    let pos = vec![0i64, 1];
    let pt = TensorRef::new(&pos, &[2]).unwrap();
    for (rot, theta) in [(0u32, 1e4f32), (3, 1e4), (10, 1e4), (8, 0.0), (8, f32::NAN), (8, f32::INFINITY)] {
        let e = ferrite::rope(None, &xt, &pt, RopePairing::Neox, rot, theta, &mut TensorMut::new(&mut out, &[2, 3, 8]).unwrap());
        assert_eq!(e.unwrap_err().code, status::INVALID_ARG, "rot {rot} theta {theta}");
    }
    let p3 = TensorRef::new(&[0i64, 1, 2][..], &[3]).unwrap();
    let e = ferrite::rope(None, &xt, &p3, RopePairing::Neox, 8, 1e4, &mut TensorMut::new(&mut out, &[2, 3, 8]).unwrap());
    assert_eq!(e.unwrap_err().code, status::SHAPE_MISMATCH);
    assert!(out.iter().all(|&v| v == 0.0), "a refused call wrote");
}

// EVIDENCE: C-TK-005
#[test]
fn c_tk_005_argmax_first_max_and_first_nan() {
    for seed in 0..200u64 {
        let rows = 1 + (seed % 5) as usize;
        let len = 1 + (seed * 7 % 300) as usize;
        // quarters give many ties; Any adds NaN and infinities
        let kind = if seed % 2 == 0 { Values::Any } else { Values::Moderate { special_permille: 0 } };
        let x: Vec<bf16> = gen_values(seed, rows * len, kind);
        let mut out = vec![-1i64; rows];
        ferrite::argmax(None, &TensorRef::new(&x, &[rows as i64, len as i64]).unwrap(), &mut TensorMut::new(&mut out, &[rows as i64]).unwrap()).unwrap();
        let mut out32 = vec![-1i32; rows];
        ferrite::argmax(None, &TensorRef::new(&x, &[rows as i64, len as i64]).unwrap(), &mut TensorMut::new(&mut out32, &[rows as i64]).unwrap()).unwrap();
        for r in 0..rows {
            let row: Vec<f64> = x[r * len..(r + 1) * len].iter().map(|v| v.to_f64()).collect();
            assert_eq!(out[r] as usize, tk::argmax(&row), "seed {seed} row {r}");
            assert_eq!(out32[r] as i64, out[r]);
        }
    }
    let empty: Vec<f32> = vec![];
    let mut o = vec![0i64; 2];
    let e = ferrite::argmax(None, &TensorRef::new(&empty, &[2, 0]).unwrap(), &mut TensorMut::new(&mut o, &[2]).unwrap());
    assert_eq!(e.unwrap_err().code, status::INVALID_ARG);
}

// EVIDENCE: C-TK-006
#[test]
fn c_tk_006_embedding_rows_converted_and_bad_ids_refused() {
    let (v, d) = (50usize, 37usize);
    let table: Vec<f32> = gen_values(3, v * d, Values::Any);
    let ids: Vec<i32> = (0..12).map(|i| (i * 17 % v) as i32).collect();
    for pool in [None, Some((3u32, ferrite::isa::AUTO))] {
        let mut p = make_pool(pool);
        let mut out = vec![bf16::ZERO; 12 * d];
        ferrite::embedding(p.as_mut(), &TensorRef::new(&table, &[v as i64, d as i64]).unwrap(), &TensorRef::new(&ids, &[3, 4]).unwrap(), &mut TensorMut::new(&mut out, &[3, 4, d as i64]).unwrap()).unwrap();
        for (t, &id) in ids.iter().enumerate() {
            for j in 0..d {
                let want = bf16::from_f64_rne(table[id as usize * d + j] as f64);
                assert!(same_or_both_nan(out[t * d + j], want), "token {t} dim {j}");
            }
        }
    }
    for bad in [-1i64, 50] {
        let ids = vec![0i64, bad];
        let mut out = vec![7f32; 2 * d];
        let e = ferrite::embedding(None, &TensorRef::new(&table, &[v as i64, d as i64]).unwrap(), &TensorRef::new(&ids, &[2]).unwrap(), &mut TensorMut::new(&mut out, &[2, d as i64]).unwrap());
        assert_eq!(e.unwrap_err().code, status::INVALID_ARG, "id {bad}");
        assert!(ferrite::last_error_message().contains(&bad.to_string()));
        assert!(out.iter().all(|&x| x == 7.0), "a refused lookup wrote");
    }
}
