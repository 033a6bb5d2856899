//! fer_reduce_mean against the oracle (C-MEAN-001).
//!
//! Tolerance (see `common::mean_tolerance` for the derivation): |got - mean| <= 2 (k + 1) u
//! mean(|x|) + 2^-149, with k = ceil(n/32) + 5 and u = 2^-24, plus half an output ulp for f16 and
//! bf16 outputs. The bound grows with the row length n, as the error of the kernel's f32
//! accumulation does. NaN and infinities must match exactly: a row with a NaN, or with both
//! +inf and -inf, gives NaN; a row with infinities of one sign gives that infinity; an empty
//! row gives NaN.

mod common;

use common::*;
use ferrite_spec::oracle::{self, Float};
use ferrite::status;
use half::{bf16, f16};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct MeanCase {
    x_shape: Vec<usize>,
    x: Layout,
    out: Layout,
    values: Values,
    seed: u64,
    pool: PoolSpec,
}

fn mean_case() -> impl Strategy<Value = MeanCase> {
    let values = prop_oneof![
        2 => Just(Values::Moderate { special_permille: 0 }),
        2 => Just(Values::Moderate { special_permille: 20 }),
        1 => Just(Values::Moderate { special_permille: 300 }),
        1 => Just(Values::Wide),
    ];
    (shape(4).prop_filter("rank >= 1", |s| !s.is_empty()), values).prop_flat_map(
        |(x_shape, values)| {
            let mut out_shape = x_shape.clone();
            *out_shape.last_mut().unwrap() = 1;
            (
                layout_plan(x_shape.len(), true),
                layout_plan(out_shape.len(), false),
                any::<u64>(),
                pool_spec(),
            )
                .prop_map(move |(px, po, seed, pool)| MeanCase {
                    x: px.build(&x_shape),
                    out: po.build(&out_shape),
                    x_shape: x_shape.clone(),
                    values,
                    seed,
                    pool,
                })
        },
    )
}

fn check_mean<T: Float>(c: &MeanCase) -> Result<(), TestCaseError> {
    let x_buf: Vec<T> = gen_values(c.seed, c.x.buf_len, c.values);
    let mut out_buf = vec![sentinel::<T>(); c.out.buf_len];
    let mut pool = make_pool(c.pool);
    {
        let x = c.x.view(&x_buf);
        let mut out = c.out.view_mut(&mut out_buf);
        let r = ferrite::reduce_mean(pool.as_mut(), &x, &mut out);
        prop_assert!(r.is_ok(), "fer_reduce_mean failed: {:?}", r);
    }
    let xs: Vec<f64> = c.x.positions().iter().map(|&p| x_buf[p].to_f64()).collect();
    let (shape, want) = oracle::reduce_mean(&c.x_shape, &xs).expect("oracle");
    let (_, scale) = oracle::reduce_mean_abs(&c.x_shape, &xs).expect("oracle");
    let n = *c.x_shape.last().unwrap();
    let out_pos = c.out.positions();
    prop_assert_eq!(out_pos.len(), want.len());
    for (row, (&p, &w)) in out_pos.iter().zip(&want).enumerate() {
        let got = out_buf[p].to_f64();
        let ctx = || {
            format!(
                "{} row {} of shape {:?} (n = {}): got {:e} ({:#x}), oracle {:e}",
                T::NAME,
                row,
                shape,
                n,
                got,
                out_buf[p].bits(),
                w
            )
        };
        if w.is_nan() {
            prop_assert!(got.is_nan(), "{}: want NaN", ctx());
        } else if w.is_infinite() {
            prop_assert_eq!(got, w, "{}: want the same infinity", ctx());
        } else {
            prop_assert!(got.is_finite(), "{}: want a finite value", ctx());
            let tol = mean_tolerance::<T>(n, scale[row], w, got);
            prop_assert!(
                (got - w).abs() <= tol,
                "{}: |error| {:e} > tolerance {:e}",
                ctx(),
                (got - w).abs(),
                tol
            );
        }
    }
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
    fn c_mean_001_matches_oracle_f32(c in mean_case()) {
        check_mean::<f32>(&c)?;
    }

    #[test]
    fn c_mean_001_matches_oracle_f16(c in mean_case()) {
        check_mean::<f16>(&c)?;
    }

    #[test]
    fn c_mean_001_matches_oracle_bf16(c in mean_case()) {
        check_mean::<bf16>(&c)?;
    }
}

// EVIDENCE: C-MEAN-001
#[test]
fn c_mean_001_known_rows() {
    let x: Vec<f32> = vec![
        1.0,
        2.0,
        3.0,
        4.0,
        f32::NAN,
        1.0,
        f32::INFINITY,
        1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    let mut out = vec![0f32; 5];
    {
        let xv = ferrite::TensorRef::new(&x, &[5, 2]).unwrap();
        let mut ov = ferrite::TensorMut::new(&mut out, &[5, 1]).unwrap();
        ferrite::reduce_mean(None, &xv, &mut ov).unwrap();
    }
    assert_eq!(out[0], 1.5);
    assert_eq!(out[1], 3.5);
    assert!(out[2].is_nan());
    assert_eq!(out[3], f32::INFINITY);
    assert!(out[4].is_nan());

    // An empty last axis gives NaN for every row.
    let mut out = vec![0f32; 3];
    {
        let xv = ferrite::TensorRef::new(&x[..0], &[3, 0]).unwrap();
        let mut ov = ferrite::TensorMut::new(&mut out, &[3, 1]).unwrap();
        ferrite::reduce_mean(None, &xv, &mut ov).unwrap();
    }
    assert!(out.iter().all(|v| v.is_nan()), "{out:?}");

    // A row of 1000 ones is exactly 1, and 1..=1000 averages to exactly 500.5.
    let ones = vec![1f32; 1000];
    let ramp: Vec<f32> = (1..=1000).map(|i| i as f32).collect();
    for (x, want) in [(&ones, 1.0f32), (&ramp, 500.5)] {
        let mut out = [0f32; 1];
        let xv = ferrite::TensorRef::new(x, &[1000]).unwrap();
        let mut ov = ferrite::TensorMut::new(&mut out, &[1]).unwrap();
        ferrite::reduce_mean(None, &xv, &mut ov).unwrap();
        assert_eq!(out[0], want);
    }
    assert_eq!(status::OK, 0);
}
