//! fer_attention against the f64 oracle (C-ATT-001), across KV layouts (C-ATT-002), across ISA
//! levels, thread counts and query batching (C-ATT-003), and on bad input (C-ATT-005).
//!
//! Tolerance, per output element, with u = 2^-24: a score is an 8-lane f32 dot product
//! (ceil(d/8) + 3 roundings) times the scale, so |ds| <= 2 scale (d/8 + 4) u max_j sum|q||k_j|.
//! A probability then errs by at most 2 ds (its own score and the row maximum) plus the
//! exponential (2 ulp), the running sum (n + 8 roundings) and the rescalings: relative
//! 2 ds + (n + 16) u. The output errs by that times sum_j p_j |v_j| (the oracle's second
//! result), plus the f32 accumulation of n products ((n + 2) u of the same scale). We allow twice
//! the sum.

mod common;

use common::*;
use ferrite_spec::oracle::attention::{attention as oracle_attention, AttentionShape};
use ferrite_spec::oracle::Float;
use ferrite::{status, TensorMut, TensorRef};
use half::{bf16, f16};
use proptest::prelude::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KvLayout {
    /// [heads, positions, dim] contiguous (BNSH).
    HeadMajor,
    /// [positions, heads, dim] (BSNH).
    SeqMajor,
    /// one token's K and V for all `layers` together: [positions, layers, 2, heads, dim].
    TokenMajor { layers: usize, layer: usize },
}

/// Where K (kv = 0) and V (kv = 1) of shape [h, n, d] live in one shared buffer.
fn kv_layouts(l: KvLayout, h: usize, n: usize, d: usize) -> (Layout, Layout) {
    let (hn, nn, dn) = (h as i64, n as i64, d as i64);
    if n == 0 {
        let empty = Layout { shape: vec![h, 0, d], strides: vec![0, dn, 1], offset: 0, buf_len: 1 };
        return (empty.clone(), empty);
    }
    match l {
        KvLayout::HeadMajor => {
            let total = 2 * h * n * d;
            let mk = |kv: usize| Layout { shape: vec![h, n, d], strides: vec![nn * dn, dn, 1], offset: kv * h * n * d, buf_len: total.max(1) };
            (mk(0), mk(1))
        }
        KvLayout::SeqMajor => {
            let total = 2 * h * n * d;
            let mk = |kv: usize| Layout { shape: vec![h, n, d], strides: vec![dn, hn * dn, 1], offset: kv * h * n * d, buf_len: total.max(1) };
            (mk(0), mk(1))
        }
        KvLayout::TokenMajor { layers, layer } => {
            let per_token = layers * 2 * h * d;
            let total = n * per_token;
            let mk = |kv: usize| Layout {
                shape: vec![h, n, d],
                strides: vec![dn, per_token as i64, 1],
                offset: (layer * 2 + kv) * h * d,
                buf_len: total.max(1),
            };
            (mk(0), mk(1))
        }
    }
}

#[derive(Clone, Debug)]
struct AttCase {
    hkv: usize,
    group: usize,
    nq: usize,
    nk: usize,
    d: usize,
    layout: KvLayout,
    causal: bool,
    q_pos0: usize,
    scale: f32,
    seed: u64,
    pool: PoolSpec,
}

fn att_case() -> impl Strategy<Value = AttCase> {
    (
        1usize..3,
        prop_oneof![Just(1usize), Just(2), Just(3), Just(4)],
        prop_oneof![3 => 1usize..4, 2 => 4usize..20, 1 => 30usize..40],
        prop_oneof![1 => Just(0usize), 4 => 1usize..40, 2 => 60usize..140],
        prop_oneof![Just(8usize), Just(16), Just(64), Just(5), Just(12)],
        prop_oneof![Just(KvLayout::HeadMajor), Just(KvLayout::SeqMajor), Just(KvLayout::TokenMajor { layers: 3, layer: 1 })],
        any::<bool>(),
        0usize..100,
        prop_oneof![Just(0.0f32), 0.05f32..1.0],
        any::<u64>(),
        pool_spec(),
    )
        .prop_map(|(hkv, group, nq, nk, d, layout, causal, pos, scale, seed, pool)| AttCase {
            hkv, group, nq, nk, d, layout, causal, q_pos0: pos % (nk + 1), scale, seed, pool,
        })
}

/// Uniform values in [-1, 1] rounded to T: scores then stay within a few units, so the softmax
/// is spread over many keys and a one-ulp change of any score shows in the output (values of
/// 2^8 would make it one-hot and blind to such changes).
fn unit_values<T: Float>(seed: u64, n: usize) -> Vec<T> {
    let mut r = Bits::new(seed);
    (0..n).map(|_| T::from_f64_rne(2.0 * ((r.next() >> 11) as f64 / (1u64 << 53) as f64) - 1.0)).collect()
}

/// Runs fer_attention on a case with K/V of type T in the case's layout; returns (output f32
/// [hq, nq, d], logical q, k, v in f64).
fn run_att<T: Float>(c: &AttCase, layout: KvLayout, pool: Option<&mut ferrite::ThreadPool>) -> (Vec<f32>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let (hq, d) = (c.hkv * c.group, c.d);
    let q: Vec<f32> = unit_values(c.seed, hq * c.nq * d);
    // the logical K and V, then placed in the layout
    let kl: Vec<T> = unit_values(c.seed ^ 1, c.hkv * c.nk * d);
    let vl: Vec<T> = unit_values(c.seed ^ 2, c.hkv * c.nk * d);
    let (lk, lv) = kv_layouts(layout, c.hkv, c.nk, d);
    let mut buf: Vec<T> = gen_values(c.seed ^ 3, lk.buf_len, Values::Any); // junk elsewhere
    for (i, &p) in lk.positions().iter().enumerate() {
        buf[p] = kl[i];
    }
    for (i, &p) in lv.positions().iter().enumerate() {
        buf[p] = vl[i];
    }
    let mut out = vec![sentinel::<f32>(); hq * c.nq * d];
    let mut params = ferrite::attention_params();
    params.causal = c.causal as i32;
    params.scale = c.scale;
    params.q_pos0 = c.q_pos0 as i64;
    {
        let qt = TensorRef::new(&q, &[hq as i64, c.nq as i64, d as i64]).unwrap();
        let (kt, vt) = (lk.view(&buf), lv.view(&buf));
        let mut ot = TensorMut::new(&mut out, &[hq as i64, c.nq as i64, d as i64]).unwrap();
        ferrite::attention(pool, &qt, &kt, &vt, &params, &mut ot).expect("attention");
    }
    let f = |v: &[T]| v.iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
    (out, q.iter().map(|&x| x as f64).collect(), f(&kl), f(&vl))
}

fn check_against_oracle<T: Float>(c: &AttCase) -> Result<(), TestCaseError> {
    let mut pool = make_pool(c.pool);
    let (out, q, k, v) = run_att::<T>(c, c.layout, pool.as_mut());
    let s = AttentionShape { hq: c.hkv * c.group, hkv: c.hkv, nq: c.nq, nk: c.nk, d: c.d, dv: c.d };
    let scale = if c.scale == 0.0 { 1.0 / (c.d as f32).sqrt() } else { c.scale } as f64;
    let (want, mag) = oracle_attention(&s, &q, &k, &v, scale, c.causal, c.q_pos0);
    let u = 2f64.powi(-24);
    // the largest sum |q||k| of the case bounds every score's error
    let mut qk = 0.0f64;
    for h in 0..s.hq {
        for i in 0..s.nq {
            for j in 0..s.nk {
                let kh = h / c.group;
                let t: f64 = (0..c.d).map(|e| (q[(h * s.nq + i) * c.d + e] * k[(kh * s.nk + j) * c.d + e]).abs()).sum();
                qk = qk.max(t);
            }
        }
    }
    let ds = 2.0 * scale * (c.d as f64 / 8.0 + 4.0) * u * qk;
    let rel = 2.0 * ds + (c.nk as f64 + 16.0) * u + (c.nk as f64 + 2.0) * u;
    for (i, (&g, &w)) in out.iter().zip(&want).enumerate() {
        let tol = 2.0 * rel * mag[i] + 2f64.powi(-140);
        prop_assert!(((g as f64) - w).abs() <= tol, "element {} of {:?}: got {}, oracle {}, tol {:e}", i, c, g, w, tol);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(96, file!()))]

    // EVIDENCE: C-ATT-001
    #[test]
    fn c_att_001_matches_oracle_f32_kv(c in att_case()) { check_against_oracle::<f32>(&c)?; }
    #[test]
    fn c_att_001_matches_oracle_f16_kv(c in att_case()) { check_against_oracle::<f16>(&c)?; }
    #[test]
    fn c_att_001_matches_oracle_bf16_kv(c in att_case()) { check_against_oracle::<bf16>(&c)?; }
}

proptest! {
    #![proptest_config(config(48, file!()))]

    // EVIDENCE: C-ATT-002
    #[test]
    fn c_att_002_every_layout_gives_the_same_bits(c in att_case()) {
        let layouts = [KvLayout::HeadMajor, KvLayout::SeqMajor, KvLayout::TokenMajor { layers: 2, layer: 0 }, KvLayout::TokenMajor { layers: 4, layer: 3 }];
        let (reference, ..) = run_att::<f16>(&c, layouts[0], None);
        for l in &layouts[1..] {
            let (got, ..) = run_att::<f16>(&c, *l, None);
            for i in 0..got.len() {
                prop_assert!(got[i].to_bits() == reference[i].to_bits(), "{:?} element {} differs from head-major: {} vs {}", l, i, got[i], reference[i]);
            }
        }
    }
}

// EVIDENCE: C-ATT-003
#[test]
fn c_att_003_bit_identical_across_isa_threads_and_query_batching() {
    let mut pools = determinism_pools();
    for (hkv, group, nq, nk, d) in [(2usize, 3usize, 37usize, 150usize, 64usize), (1, 4, 5, 70, 12)] {
        let c = AttCase { hkv, group, nq, nk, d, layout: KvLayout::SeqMajor, causal: true, q_pos0: nk - nq, scale: 0.0, seed: 3, pool: None };
        let (reference, ..) = run_att::<bf16>(&c, c.layout, None);
        for (name, pool) in pools.iter_mut() {
            let (got, ..) = run_att::<bf16>(&c, c.layout, pool.as_mut());
            assert!(got.iter().zip(&reference).all(|(a, b)| a.to_bits() == b.to_bits()), "{name}: {hkv}x{group} {nq}x{nk}x{d} differs");
        }
        // each query alone (decode) gives the row it got in the batch (prefill)
        let (hq, q_all) = (hkv * group, unit_values::<f32>(c.seed, hkv * group * nq * d));
        let kl: Vec<bf16> = unit_values(c.seed ^ 1, hkv * nk * d);
        let vl: Vec<bf16> = unit_values(c.seed ^ 2, hkv * nk * d);
        let (lk, lv) = kv_layouts(c.layout, hkv, nk, d);
        let mut buf: Vec<bf16> = vec![bf16::ZERO; lk.buf_len];
        lk.positions().iter().enumerate().for_each(|(i, &p)| buf[p] = kl[i]);
        lv.positions().iter().enumerate().for_each(|(i, &p)| buf[p] = vl[i]);
        for i in 0..nq {
            let mut qi = vec![0f32; hq * d];
            for h in 0..hq {
                qi[h * d..(h + 1) * d].copy_from_slice(&q_all[(h * nq + i) * d..(h * nq + i + 1) * d]);
            }
            let mut params = ferrite::attention_params();
            params.q_pos0 = (c.q_pos0 + i) as i64;
            let mut out = vec![0f32; hq * d];
            ferrite::attention(None, &TensorRef::new(&qi, &[hq as i64, 1, d as i64]).unwrap(), &lk.view(&buf), &lv.view(&buf), &params,
                               &mut TensorMut::new(&mut out, &[hq as i64, 1, d as i64]).unwrap()).unwrap();
            for h in 0..hq {
                for e in 0..d {
                    assert_eq!(out[h * d + e].to_bits(), reference[(h * nq + i) * d + e].to_bits(), "query {i} head {h} dim {e}: decode differs from prefill");
                }
            }
        }
    }
}

// EVIDENCE: C-ATT-005
#[test]
fn c_att_005_bad_input_is_refused_and_nothing_is_written() {
    let (hq, hkv, n, d) = (4i64, 2i64, 3i64, 8i64);
    let q = vec![1f32; (hq * n * d) as usize];
    let kv = vec![1f32; (hkv * n * d) as usize];
    let mut out = vec![sentinel::<f32>(); (hq * n * d) as usize];
    let qt = TensorRef::new(&q, &[hq, n, d]).unwrap();
    let kt = TensorRef::new(&kv, &[hkv, n, d]).unwrap();
    let p = ferrite::attention_params();
    let mut call = |q: &TensorRef<'_>, k: &TensorRef<'_>, v: &TensorRef<'_>, p: &ferrite::sys::fer_attention_params, oshape: &[i64]| {
        let len = oshape.iter().product::<i64>() as usize;
        let mut o = TensorMut::new(&mut out[..len], oshape).unwrap();
        ferrite::attention(None, q, k, v, p, &mut o).err().map(|e| e.code)
    };
    let k3 = TensorRef::new(&kv[..(3 * 2 * d) as usize], &[3, 2, d]).unwrap();
    assert_eq!(call(&qt, &k3, &k3, &p, &[hq, n, d]), Some(status::SHAPE_MISMATCH), "4 q heads over 3 kv heads");
    let kd = TensorRef::new(&kv[..(hkv * n * 4) as usize], &[hkv, n, 4]).unwrap();
    assert_eq!(call(&qt, &kd, &kt, &p, &[hq, n, d]), Some(status::SHAPE_MISMATCH), "head_dim mismatch");
    let k2 = TensorRef::new(&kv[..(hkv * n * d) as usize], &[hkv * n, d]).unwrap();
    assert_eq!(call(&qt, &k2, &kt, &p, &[hq, n, d]), Some(status::SHAPE_MISMATCH), "rank 2 k");
    assert_eq!(call(&qt, &kt, &kt, &p, &[hq, n - 1, d]), Some(status::SHAPE_MISMATCH), "out shape");
    let mut bad = p;
    bad.q_pos0 = -1;
    assert_eq!(call(&qt, &kt, &kt, &bad, &[hq, n, d]), Some(status::INVALID_ARG), "negative q_pos0");
    let mut bad = p;
    bad.scale = f32::NAN;
    assert_eq!(call(&qt, &kt, &kt, &bad, &[hq, n, d]), Some(status::INVALID_ARG), "NaN scale");
    let mut bad = p;
    bad.struct_size = 4;
    assert_eq!(call(&qt, &kt, &kt, &bad, &[hq, n, d]), Some(status::INVALID_ARG), "struct_size");
    let mut ki = ferrite::sys::fer_tensor { ..*kt.raw() };
    ki.dtype = ferrite::sys::FER_DTYPE_Q4_0 as i32;
    // SAFETY: the descriptor is refused on its dtype before any read.
    let kq = unsafe { TensorRef::from_raw(ki) };
    assert_eq!(call(&qt, &kq, &kt, &p, &[hq, n, d]), Some(status::UNSUPPORTED), "Q4_0 k");
    // Q8_0 K is read (8-bit KV), but only as packed 34-byte blocks: f32 strides are refused
    ki.dtype = ferrite::sys::FER_DTYPE_Q8_0 as i32;
    // SAFETY: as above, refused on its strides before any read.
    let kq = unsafe { TensorRef::from_raw(ki) };
    assert_eq!(call(&qt, &kq, &kt, &p, &[hq, n, d]), Some(status::INVALID_ARG), "Q8_0 k with element strides");
    drop(call);
    assert!(out.iter().all(|v| v.to_bits() == sentinel::<f32>().to_bits()), "a refused call wrote");
    // workspace: exactly the reported bytes work, one less is refused
    let mut o2 = vec![0f32; (hq * n * d) as usize];
    let mut ot = TensorMut::new(&mut o2, &[hq, n, d]).unwrap();
    let mut need = 0usize;
    // SAFETY: descriptors over live buffers; valid out-pointer.
    assert_eq!(unsafe { ferrite::sys::fer_attention_workspace_bytes(std::ptr::null(), qt.raw(), kt.raw(), kt.raw(), &p, ot.raw(), &mut need) }, status::OK);
    assert!(need > 0);
    let mut ws = ferrite::Workspace::new(need);
    // SAFETY: ws has `need` writable bytes at ptr(0).
    let st = unsafe { ferrite::sys::fer_attention(std::ptr::null_mut(), qt.raw(), kt.raw(), kt.raw(), &p, ot.raw(), ws.ptr(0), need - 1) };
    assert_eq!(st, status::BUFFER_TOO_SMALL);
    // SAFETY: as above.
    let st = unsafe { ferrite::sys::fer_attention(std::ptr::null_mut(), qt.raw(), kt.raw(), kt.raw(), &p, ot.raw(), ws.ptr(0), need) };
    assert_eq!(st, status::OK);
    let _ = &mut ot;
}
