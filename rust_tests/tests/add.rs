//! fer_add against the oracle (C-ADD-001), in place (C-ADD-001) and its shape checks (C-ADD-003).
//!
//! Tolerances, per output dtype:
//! - f32: exact. The oracle adds in f64 and rounds to f32 once; for two f32 inputs that is the
//!   correctly rounded f32 sum (53 >= 2*24+2 bits makes the f64 step innocuous), which is what a
//!   single IEEE f32 addition gives.
//! - f16 / bf16: exact as well, although the kernel rounds twice (f32 sum, then to 16 bits): for
//!   p-bit inputs a sum rounded first to p' >= 2p+2 bits and then to p bits equals the direct
//!   rounding (Figueroa 1995; f32 has 24 >= 2*11+2 and >= 2*8+2). So the 1-ulp allowance that
//!   double rounding suggests is not needed, and an exact check also catches a kernel that
//!   truncates or rounds ties away from zero, which a 1-ulp tolerance would let through.
//! - NaN: positions match exactly, payloads are free. Infinities and signed zeros: exact bits.

mod common;

use common::*;
use ferrite_spec::oracle::{self, Float};
use ferrite::{status, TensorRef};
use half::{bf16, f16};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct AddCase {
    out_shape: Vec<usize>,
    a_shape: Vec<usize>,
    b_shape: Vec<usize>,
    a: Layout,
    b: Layout,
    out: Layout,
    seed: u64,
    pool: PoolSpec,
}

/// Broadcast patterns: per axis both full, a of extent 1, or b of extent 1; leading extent-1
/// axes may be dropped from either input (a missing axis counts as 1), but not from both.
fn add_shapes() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Vec<usize>)> {
    shape(4).prop_flat_map(|out| {
        let r = out.len();
        (Just(out), prop::collection::vec(0u8..3, r), 0..=r, 0..=r).prop_map(
            |(out, pat, da, db)| {
                let full = |which: u8| -> Vec<usize> {
                    out.iter()
                        .zip(&pat)
                        .map(|(&d, &p)| if p == which { 1 } else { d })
                        .collect()
                };
                let (a_full, b_full) = (full(1), full(2));
                let droppable = |s: &[usize]| s.iter().take_while(|&&d| d == 1).count();
                let da = da.min(droppable(&a_full));
                let db = if da > 0 {
                    0
                } else {
                    db.min(droppable(&b_full))
                };
                (out, a_full[da..].to_vec(), b_full[db..].to_vec())
            },
        )
    })
}

fn add_case() -> impl Strategy<Value = AddCase> {
    add_shapes().prop_flat_map(|(out_shape, a_shape, b_shape)| {
        (
            layout_plan(a_shape.len(), true),
            layout_plan(b_shape.len(), true),
            layout_plan(out_shape.len(), false),
            any::<u64>(),
            pool_spec(),
        )
            .prop_map(move |(pa, pb, po, seed, pool)| AddCase {
                a: pa.build(&a_shape),
                b: pb.build(&b_shape),
                out: po.build(&out_shape),
                out_shape: out_shape.clone(),
                a_shape: a_shape.clone(),
                b_shape: b_shape.clone(),
                seed,
                pool,
            })
    })
}

fn check_add<T: Float>(c: &AddCase) -> Result<(), TestCaseError> {
    let a_buf: Vec<T> = gen_values(c.seed, c.a.buf_len, Values::Any);
    let b_buf: Vec<T> = gen_values(c.seed ^ 0xb, c.b.buf_len, Values::Any);
    let mut out_buf = vec![sentinel::<T>(); c.out.buf_len];
    let mut pool = make_pool(c.pool);
    {
        let a = c.a.view(&a_buf);
        let b = c.b.view(&b_buf);
        let mut out = c.out.view_mut(&mut out_buf);
        let r = ferrite::add(pool.as_mut(), &a, &b, &mut out);
        prop_assert!(r.is_ok(), "fer_add failed: {:?}", r);
    }
    let a_vals: Vec<f64> = c.a.positions().iter().map(|&p| a_buf[p].to_f64()).collect();
    let b_vals: Vec<f64> = c.b.positions().iter().map(|&p| b_buf[p].to_f64()).collect();
    let (shape, want) = oracle::add(&c.a_shape, &a_vals, &c.b_shape, &b_vals).expect("oracle");
    prop_assert_eq!(&shape, &c.out_shape);
    let out_pos = c.out.positions();
    for (i, (&p, &w)) in out_pos.iter().zip(&want).enumerate() {
        let (got, want_t) = (out_buf[p], T::from_f64_rne(w));
        prop_assert!(
            same_or_both_nan(got, want_t),
            "{} element {} {:?}: got {:?} ({:#x}), oracle {:?} ({:#x}) from {} + {}",
            T::NAME,
            i,
            oracle::unravel(i, &c.out_shape),
            got,
            got.bits(),
            want_t,
            want_t.bits(),
            a_vals.get(i).copied().unwrap_or(f64::NAN),
            b_vals.get(i).copied().unwrap_or(f64::NAN)
        );
    }
    // Nothing outside the output view was written.
    let mut inside = vec![false; c.out.buf_len];
    out_pos.iter().for_each(|&p| inside[p] = true);
    for (p, v) in out_buf.iter().enumerate() {
        prop_assert!(
            inside[p] || v.bits() == sentinel::<T>().bits(),
            "buffer element {} outside the view was written",
            p
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(256, file!()))]

    #[test]
    fn c_add_001_matches_oracle_f32(c in add_case()) {
        check_add::<f32>(&c)?;
    }

    #[test]
    fn c_add_001_matches_oracle_f16(c in add_case()) {
        check_add::<f16>(&c)?;
    }

    #[test]
    fn c_add_001_matches_oracle_bf16(c in add_case()) {
        check_add::<bf16>(&c)?;
    }
}

/// acc = acc + b with out exactly a (the one overlap the header allows).
fn check_add_in_place<T: Float>(
    shape: &[usize],
    acc_plan: &LayoutPlan,
    b_plan: &LayoutPlan,
    seed: u64,
    out_is_b: bool,
) -> Result<(), TestCaseError> {
    let acc = acc_plan.build(shape);
    let bl = b_plan.build(shape);
    let mut acc_buf: Vec<T> = gen_values(seed, acc.buf_len, Values::Any);
    let b_buf: Vec<T> = gen_values(seed ^ 1, bl.buf_len, Values::Any);
    let before: Vec<T> = acc_buf.clone();
    {
        let b = bl.view(&b_buf);
        let mut out = acc.view_mut(&mut acc_buf);
        if out_is_b {
            // out exactly b: pass the accumulator's descriptor in b's place as well.
            let raw = *out.raw();
            // SAFETY: `out` is the only live view of acc_buf; C reads and writes each element once.
            let st = unsafe { ferrite::sys::fer_add(std::ptr::null_mut(), b.raw(), &raw, &raw) };
            prop_assert_eq!(st, status::OK, "{}", ferrite::last_error_message());
        } else {
            let r = ferrite::add_assign(None, &mut out, &b);
            prop_assert!(r.is_ok(), "{:?}", r);
        }
    }
    let pos = acc.positions();
    let bpos = bl.positions();
    for (i, (&p, &q)) in pos.iter().zip(&bpos).enumerate() {
        let want = T::from_f64_rne(before[p].to_f64() + b_buf[q].to_f64());
        prop_assert!(
            same_or_both_nan(acc_buf[p], want),
            "{} element {}: got {:?}, want {:?}",
            T::NAME,
            i,
            acc_buf[p],
            want
        );
    }
    Ok(())
}

fn in_place_case() -> impl Strategy<Value = (Vec<usize>, LayoutPlan, LayoutPlan, u64, bool)> {
    shape(3).prop_flat_map(|s| {
        let r = s.len();
        (
            Just(s),
            layout_plan(r, false),
            layout_plan(r, true),
            any::<u64>(),
            any::<bool>(),
        )
    })
}

proptest! {
    #![proptest_config(config(64, file!()))]

    #[test]
    fn c_add_001_in_place_out_is_a_or_b(c in in_place_case()) {
        let (s, pa, pb, seed, out_is_b) = c;
        check_add_in_place::<f32>(&s, &pa, &pb, seed, out_is_b)?;
        check_add_in_place::<f16>(&s, &pa, &pb, seed, out_is_b)?;
        check_add_in_place::<bf16>(&s, &pa, &pb, seed, out_is_b)?;
    }
}

/// Shapes that do not broadcast to out, or an out that is not exactly the broadcast shape:
/// SHAPE_MISMATCH, a message, and nothing written.
fn mismatch_case() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Vec<usize>)> {
    (add_shapes(), 0u8..4, any::<prop::sample::Index>()).prop_filter_map(
        "no axis to break",
        |((out, a, b), how, ix)| {
            let mut out = out;
            let (mut a, b) = (a, b);
            match how {
                // an input axis that is neither out's extent nor 1
                0 if !a.is_empty() => {
                    let k = ix.index(a.len());
                    let off = out.len() - a.len();
                    a[k] = out[off + k].max(1) + 1;
                }
                // out's axis differs from the broadcast extent
                1 if !out.is_empty() => {
                    let k = ix.index(out.len());
                    out[k] = if out[k] == 2 { 3 } else { 2 };
                }
                // out has an extra leading axis of 1 (rank above both inputs)
                2 => out.insert(0, 1),
                // out lost its leading axis (rank below an input's)
                3 if !out.is_empty() && (a.len() == out.len() || b.len() == out.len()) => {
                    out.remove(0);
                }
                _ => return None,
            }
            if oracle::broadcast_shape(&a, &b).is_ok_and(|s| s == out) {
                return None; // the change happened to be harmless
            }
            Some((out, a, b))
        },
    )
}

proptest! {
    #![proptest_config(config(128, file!()))]

    #[test]
    fn c_add_003_shape_mismatch_refused_nothing_written(c in mismatch_case(), seed in any::<u64>()) {
        let (out_shape, a_shape, b_shape) = c;
        let n = |s: &[usize]| oracle::numel(s);
        let a_buf: Vec<f32> = gen_values(seed, n(&a_shape), Values::Any);
        let b_buf: Vec<f32> = gen_values(seed ^ 2, n(&b_shape), Values::Any);
        let mut out_buf = vec![sentinel::<f32>(); n(&out_shape)];
        let i64s = |s: &[usize]| s.iter().map(|&d| d as i64).collect::<Vec<_>>();
        let a = TensorRef::new(&a_buf, &i64s(&a_shape)).unwrap();
        let b = TensorRef::new(&b_buf, &i64s(&b_shape)).unwrap();
        let mut out = ferrite::TensorMut::new(&mut out_buf, &i64s(&out_shape)).unwrap();
        let err = ferrite::add(None, &a, &b, &mut out).expect_err("mismatched shapes accepted");
        prop_assert_eq!(err.code, status::SHAPE_MISMATCH, "{}", err);
        prop_assert!(!err.message.is_empty());
        prop_assert!(out_buf.iter().all(|v| v.to_bits() == sentinel::<f32>().to_bits()), "out was written");
    }
}
