//! Bit-identical results across ISA levels (PORTABLE, AVX2) and thread counts (1, 2, 3, 7, and the
//! NULL pool) for add (C-ADD-002), gather (C-GATHER-003) and reduce_mean (C-MEAN-002), in f32, f16
//! and bf16. The comparison is on raw bytes of the whole output buffer: NaN payloads, signed zeros
//! and the untouched padding all have to agree.
//!
//! Proptest cases are medium-sized (up to ~200k elements, so several 16k-element tasks); one
//! large case per kernel and dtype ([1024, 4096] for f32 add) runs once.

mod common;

use common::*;
use ferrite_spec::oracle::{self, Float};
use ferrite::ThreadPool;
use half::{bf16, f16};
use proptest::prelude::*;
use rand::Rng;
use std::cell::RefCell;

type Pools = RefCell<Vec<(String, Option<ThreadPool>)>>;

fn pools() -> Pools {
    RefCell::new(determinism_pools())
}

/// How two output buffers must agree.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Agree {
    /// Byte for byte (gather copies elements).
    Bits,
    /// Byte for byte, except that two NaNs agree whatever their payloads: ferrite.h (fer_isa_code)
    /// makes that one exception to "bit-identical", because x86 passes on the first operand's NaN
    /// when both are NaN and compilers may swap the operands of a commutative add.
    BitsOrBothNan,
}

/// Runs `call` once per pool on a fresh copy of `init` and asserts every output buffer agrees with
/// the first one.
fn same_everywhere<T: Float>(
    what: &str,
    agree: Agree,
    pools: &Pools,
    init: &[T],
    mut call: impl FnMut(Option<&mut ThreadPool>, &mut [T]) -> ferrite::Result<()>,
) -> Result<(), TestCaseError> {
    let mut reference: Option<(String, Vec<T>)> = None;
    for (name, pool) in pools.borrow_mut().iter_mut() {
        let mut out = init.to_vec();
        let r = call(pool.as_mut(), &mut out);
        prop_assert!(r.is_ok(), "{} on {}: {:?}", what, name, r);
        match &reference {
            None => reference = Some((name.clone(), out)),
            Some((ref_name, ref_out)) => {
                if as_bytes(ref_out) == as_bytes(&out) {
                    continue;
                }
                let differs = |i: usize| {
                    let (x, y) = (ref_out[i], out[i]);
                    x.bits() != y.bits()
                        && !(agree == Agree::BitsOrBothNan && x.is_nan() && y.is_nan())
                };
                if let Some(first) = (0..ref_out.len()).find(|&i| differs(i)) {
                    prop_assert!(
                        false,
                        "{}: {} and {} differ first at buffer element {}: {:#x} vs {:#x}",
                        what,
                        ref_name,
                        name,
                        first,
                        ref_out[first].bits(),
                        out[first].bits()
                    );
                }
            }
        }
    }
    Ok(())
}

/// Medium shapes: rank 1..=3, at most 200k elements, long last axes.
fn medium_shape() -> impl Strategy<Value = Vec<usize>> {
    (
        prop::collection::vec(prop_oneof![Just(1usize), 2usize..40], 0..=2),
        prop_oneof![1usize..40, 500usize..5000],
    )
        .prop_map(|(mut lead, last)| {
            lead.push(last);
            lead
        })
        .prop_filter("at most 200k elements", |s| oracle::numel(s) <= 200_000)
}

// ----------------------------------------------------------------------------------------------
// add

fn add_case() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Layout, Layout, Layout, u64)> {
    (medium_shape(), 0u8..3).prop_flat_map(|(out, bcast)| {
        let b_shape = match bcast {
            0 => out.clone(),
            1 => vec![*out.last().unwrap()], // a row broadcast down the leading axes
            _ => vec![],                     // a scalar
        };
        (
            Just(out.clone()),
            Just(b_shape.clone()),
            layout_plan(out.len(), true),
            layout_plan(b_shape.len(), true),
            layout_plan(out.len(), false),
            any::<u64>(),
        )
            .prop_map(move |(o, bs, pa, pb, po, seed)| {
                (
                    o.clone(),
                    bs.clone(),
                    pa.build(&o),
                    pb.build(&bs),
                    po.build(&o),
                    seed,
                )
            })
    })
}

fn add_everywhere<T: Float>(
    pools: &Pools,
    a_l: &Layout,
    b_l: &Layout,
    out_l: &Layout,
    seed: u64,
) -> Result<(), TestCaseError> {
    let a_buf: Vec<T> = gen_values(seed, a_l.buf_len, Values::Any);
    let b_buf: Vec<T> = gen_values(seed ^ 7, b_l.buf_len, Values::Any);
    let init = vec![sentinel::<T>(); out_l.buf_len];
    same_everywhere(
        &format!("fer_add {} {:?}", T::NAME, out_l.shape),
        Agree::BitsOrBothNan,
        pools,
        &init,
        |pool, out| {
            ferrite::add(
                pool,
                &a_l.view(&a_buf),
                &b_l.view(&b_buf),
                &mut out_l.view_mut(out),
            )
        },
    )
}

fn add_prop<T: Float>() {
    let pools = pools();
    run_prop(
        config(40, file!()),
        add_case(),
        |(_, _, a, b, out, seed)| add_everywhere::<T>(&pools, &a, &b, &out, seed),
    );
}

#[test]
fn c_add_002_bit_identical_across_isa_and_threads_f32() {
    add_prop::<f32>();
}

#[test]
fn c_add_002_bit_identical_across_isa_and_threads_f16() {
    add_prop::<f16>();
}

#[test]
fn c_add_002_bit_identical_across_isa_and_threads_bf16() {
    add_prop::<bf16>();
}

// EVIDENCE: C-ADD-002 (one large case per dtype: hundreds of tasks spread over up to 7 threads)
#[test]
fn c_add_002_bit_identical_large() {
    let pools = pools();
    let full = |s: &[usize]| Layout::contiguous(s);
    add_everywhere::<f32>(
        &pools,
        &full(&[1024, 4096]),
        &full(&[1024, 4096]),
        &full(&[1024, 4096]),
        1,
    )
    .unwrap();
    add_everywhere::<f16>(
        &pools,
        &full(&[257, 4099]),
        &full(&[4099]),
        &full(&[257, 4099]),
        2,
    )
    .unwrap();
    add_everywhere::<bf16>(
        &pools,
        &full(&[257, 1]),
        &full(&[4099]),
        &full(&[257, 4099]),
        3,
    )
    .unwrap();
}

// ----------------------------------------------------------------------------------------------
// gather

fn gather_everywhere<T: Float>(
    pools: &Pools,
    data_shape: &[usize],
    n_idx: usize,
    seed: u64,
    strided: Option<(&LayoutPlan, &LayoutPlan)>,
) -> Result<(), TestCaseError> {
    let mut out_shape = vec![n_idx];
    out_shape.extend_from_slice(&data_shape[1..]);
    let (dl, ol) = match strided {
        Some((pd, po)) => (pd.build(data_shape), po.build(&out_shape)),
        None => (
            Layout::contiguous(data_shape),
            Layout::contiguous(&out_shape),
        ),
    };
    let data: Vec<T> = gen_values(seed, dl.buf_len, Values::Any);
    let rows = data_shape[0] as i64;
    let mut r = rng(seed ^ 3);
    let idx: Vec<i64> = (0..n_idx).map(|_| r.gen_range(-rows..rows)).collect();
    let il = Layout::contiguous(&[n_idx]);
    let init = vec![sentinel::<T>(); ol.buf_len];
    same_everywhere(
        &format!("fer_gather {} {:?}", T::NAME, data_shape),
        Agree::Bits,
        pools,
        &init,
        |pool, out| ferrite::gather(pool, &dl.view(&data), &il.view(&idx), &mut ol.view_mut(out)),
    )
}

fn gather_case() -> impl Strategy<Value = (Vec<usize>, usize, LayoutPlan, LayoutPlan, u64)> {
    (
        1usize..300,
        prop_oneof![1usize..8, 100usize..1000],
        1usize..600,
    )
        .prop_flat_map(|(rows, width, n_idx)| {
            (
                Just(vec![rows, width]),
                Just(n_idx),
                layout_plan(2, true),
                layout_plan(2, false),
                any::<u64>(),
            )
        })
}

fn gather_prop<T: Float>() {
    let pools = pools();
    run_prop(
        config(40, file!()),
        gather_case(),
        |(ds, n, pd, po, seed)| gather_everywhere::<T>(&pools, &ds, n, seed, Some((&pd, &po))),
    );
}

#[test]
fn c_gather_003_bit_identical_across_isa_and_threads_f32() {
    gather_prop::<f32>();
}

#[test]
fn c_gather_003_bit_identical_across_isa_and_threads_f16() {
    gather_prop::<f16>();
}

#[test]
fn c_gather_003_bit_identical_across_isa_and_threads_bf16() {
    gather_prop::<bf16>();
}

// EVIDENCE: C-GATHER-003 (one large case per dtype)
#[test]
fn c_gather_003_bit_identical_large() {
    let pools = pools();
    gather_everywhere::<f32>(&pools, &[4096, 257], 3001, 11, None).unwrap();
    gather_everywhere::<f16>(&pools, &[2048, 129], 5000, 12, None).unwrap();
    gather_everywhere::<bf16>(&pools, &[100, 3], 40000, 13, None).unwrap();
}

// ----------------------------------------------------------------------------------------------
// reduce_mean

fn mean_everywhere<T: Float>(
    pools: &Pools,
    x_l: &Layout,
    out_l: &Layout,
    seed: u64,
    values: Values,
) -> Result<(), TestCaseError> {
    let x: Vec<T> = gen_values(seed, x_l.buf_len, values);
    let init = vec![sentinel::<T>(); out_l.buf_len];
    same_everywhere(
        &format!("fer_reduce_mean {} {:?}", T::NAME, x_l.shape),
        Agree::BitsOrBothNan,
        pools,
        &init,
        |pool, out| ferrite::reduce_mean(pool, &x_l.view(&x), &mut out_l.view_mut(out)),
    )
}

fn mean_case() -> impl Strategy<Value = (Layout, Layout, u64, Values)> {
    let values = prop_oneof![3 => Just(Values::Wide), 1 => Just(Values::Moderate { special_permille: 5 }), 1 => Just(Values::Any)];
    (medium_shape(), values).prop_flat_map(|(x, values)| {
        let mut o = x.clone();
        *o.last_mut().unwrap() = 1;
        (
            layout_plan(x.len(), true),
            layout_plan(o.len(), false),
            any::<u64>(),
            Just(values),
        )
            .prop_map(move |(px, po, seed, v)| (px.build(&x), po.build(&o), seed, v))
    })
}

fn mean_prop<T: Float>() {
    let pools = pools();
    run_prop(config(40, file!()), mean_case(), |(x, o, seed, v)| {
        mean_everywhere::<T>(&pools, &x, &o, seed, v)
    });
}

#[test]
fn c_mean_002_bit_identical_across_isa_and_threads_f32() {
    mean_prop::<f32>();
}

#[test]
fn c_mean_002_bit_identical_across_isa_and_threads_f16() {
    mean_prop::<f16>();
}

#[test]
fn c_mean_002_bit_identical_across_isa_and_threads_bf16() {
    mean_prop::<bf16>();
}

// EVIDENCE: C-MEAN-002 (large cases: many rows per task, and rows longer than a task)
#[test]
fn c_mean_002_bit_identical_large() {
    let pools = pools();
    let c = |s: &[usize]| Layout::contiguous(s);
    mean_everywhere::<f32>(&pools, &c(&[512, 4096]), &c(&[512, 1]), 21, Values::Wide).unwrap();
    mean_everywhere::<f32>(&pools, &c(&[3, 100_003]), &c(&[3, 1]), 22, Values::Wide).unwrap();
    mean_everywhere::<f16>(&pools, &c(&[300, 3001]), &c(&[300, 1]), 23, Values::Wide).unwrap();
    mean_everywhere::<bf16>(&pools, &c(&[300, 3001]), &c(&[300, 1]), 24, Values::Wide).unwrap();
}

// ----------------------------------------------------------------------------------------------
// NaN results: "a NaN result is NaN at every level" (its payload may differ, see fer_isa_code).

/// n elements that are all NaN, with payloads, signs and quiet bits drawn at random.
fn nans<T: Float>(seed: u64, n: usize) -> Vec<T> {
    let width = 8 * std::mem::size_of::<T>() as u32;
    let mant = T::FORMAT.mant_bits as u32;
    let inf_exp = ((1u64 << (width - 1 - mant)) - 1) << mant;
    let mut r = Bits::new(seed);
    (0..n)
        .map(|_| {
            let payload = (r.next() & ((1u64 << mant) - 1)).max(1);
            T::from_bits_u64(((r.next() & 1) << (width - 1)) | inf_exp | payload)
        })
        .collect()
}

fn add_nans<T: Float>(pools: &Pools) -> Result<(), TestCaseError> {
    // NaN + NaN (different payloads, signalling ones included), NaN + x and x + NaN, in rows long
    // enough for the vector loops: NaN everywhere, on every level (no payload rounds into an inf)
    let l = Layout::contiguous(&[4, 1000]);
    let x: Vec<T> = gen_values(3, l.buf_len, Values::Wide);
    let mut a: Vec<T> = nans(1, l.buf_len);
    let mut b: Vec<T> = nans(2, l.buf_len);
    for i in 0..l.buf_len {
        match i % 3 {
            0 => a[i] = x[i],
            1 => b[i] = x[i],
            _ => {}
        }
    }
    let init = vec![sentinel::<T>(); l.buf_len];
    same_everywhere(
        &format!("fer_add {} with NaNs", T::NAME),
        Agree::BitsOrBothNan,
        pools,
        &init,
        |pool, out| {
            ferrite::add(pool, &l.view(&a), &l.view(&b), &mut l.view_mut(out))?;
            assert!(
                out.iter()
                    .all(|v| v.is_nan() && v.bits() != sentinel::<T>().bits()),
                "a NaN input gave a non-NaN (or no) result"
            );
            Ok(())
        },
    )
}

// EVIDENCE: C-ADD-002 (a NaN result is NaN on every level and thread count)
#[test]
fn c_add_002_nan_results_are_nan_everywhere() {
    let pools = pools();
    add_nans::<f32>(&pools).unwrap();
    add_nans::<f16>(&pools).unwrap();
    add_nans::<bf16>(&pools).unwrap();
}

fn mean_nans<T: Float>(pools: &Pools) -> Result<(), TestCaseError> {
    // rows holding NaNs with different payloads in different partial-sum lanes, and rows without
    let x_l = Layout::contiguous(&[64, 200]);
    let o_l = Layout::contiguous(&[64, 1]);
    let mut x: Vec<T> = gen_values(5, x_l.buf_len, Values::Wide);
    let n: Vec<T> = nans(6, x_l.buf_len);
    let mut r = Bits::new(7);
    for row in 0..32 {
        for j in 0..200 {
            if r.below(40) == 0 || j == row {
                x[row * 200 + j] = n[row * 200 + j];
            }
        }
    }
    let init = vec![sentinel::<T>(); o_l.buf_len];
    same_everywhere(
        &format!("fer_reduce_mean {} rows with NaNs", T::NAME),
        Agree::BitsOrBothNan,
        pools,
        &init,
        |pool, out| {
            ferrite::reduce_mean(pool, &x_l.view(&x), &mut o_l.view_mut(out))?;
            assert!(
                out[..32]
                    .iter()
                    .all(|v| v.is_nan() && v.bits() != sentinel::<T>().bits()),
                "a row with a NaN gave a non-NaN mean"
            );
            assert!(
                out[32..].iter().all(|v| !v.is_nan()),
                "a row without NaN gave NaN"
            );
            Ok(())
        },
    )
}

// EVIDENCE: C-MEAN-002 (a NaN result is NaN on every level and thread count)
#[test]
fn c_mean_002_nan_results_are_nan_everywhere() {
    let pools = pools();
    mean_nans::<f32>(&pools).unwrap();
    mean_nans::<f16>(&pools).unwrap();
    mean_nans::<bf16>(&pools).unwrap();
}
