//! f16 / bf16 rounding inside the kernels matches round-to-nearest-even as the oracle (and the
//! half crate, for f32 inputs) computes it; NaN stays NaN (C-CONV-001).
//!
//! The ABI has no conversion entry point, so rounding is observed through fer_add of two 16-bit
//! values: their f32 sum carries up to 24 significant bits (ties and near-ties included), and
//! the kernel rounds it to 16 bits. Every 16-bit pattern is used as `a`, against several `b`
//! vectors, on the NULL pool and on each ISA level. Through fer_reduce_mean, a length-1 row must
//! come back exactly (value-wise; the f32 partial sums start at +0, so -0 may come back as +0).

mod common;

use common::*;
use ferrite_spec::oracle::{Float, Format};
use ferrite::{isa, TensorMut, TensorRef, ThreadPool};
use half::{bf16, f16};

fn pools() -> Vec<(String, Option<ThreadPool>)> {
    let mut v: Vec<(String, Option<ThreadPool>)> = vec![
        ("NULL".into(), None),
        (
            "PORTABLE".into(),
            Some(ThreadPool::new(1, isa::PORTABLE).unwrap()),
        ),
    ];
    if ferrite::cpu_has_avx2_level() {
        v.push(("AVX2".into(), Some(ThreadPool::new(1, isa::AVX2).unwrap())));
    } else {
        eprintln!("SKIPPED: FER_ISA_AVX2 conversions (CPU lacks AVX2|FMA|F16C)");
    }
    if ferrite::cpu_has_avx512_level() {
        v.push(("AVX512".into(), Some(ThreadPool::new(1, isa::AVX512).unwrap())));
    } else {
        eprintln!("SKIPPED: FER_ISA_AVX512 conversions (CPU lacks AVX-512 F/BW/VL/DQ)");
    }
    v
}

/// b vectors for a = every 16-bit pattern: +0 and -0 (x + 0 re-encodes x), random patterns, and
/// values 7..10 binades below a with random significands (sums that land on and near ties).
fn b_vectors<T: Float>(all: &[T]) -> Vec<(String, Vec<T>)> {
    let n = all.len();
    let mut v = vec![
        ("+0".to_string(), vec![T::from_f64_rne(0.0); n]),
        ("-0".to_string(), vec![T::from_f64_rne(-0.0); n]),
        (
            "random patterns".to_string(),
            (0..n)
                .map(|i| T::from_bits_u64(Bits::new(i as u64).next() & 0xffff))
                .collect(),
        ),
    ];
    let mant = T::FORMAT.mant_bits;
    for shift in [mant - 3, mant, mant + 1, mant + 2] {
        let mut r = Bits::new(shift as u64);
        let b = all
            .iter()
            .map(|a| {
                let x = a.to_f64();
                if !x.is_finite() || x == 0.0 {
                    return T::from_f64_rne(1.0);
                }
                let m = 1.0 + (r.below(1 << mant) as f64) / (1u64 << mant) as f64;
                let sign = if r.below(2) == 0 { 1.0 } else { -1.0 };
                T::from_f64_rne(sign * m * 2f64.powi(x.abs().log2().floor() as i32 - shift))
            })
            .collect();
        v.push((format!("a * 2^-{shift}"), b));
    }
    v
}

fn exhaustive_add<T: Float>() {
    let all: Vec<T> = (0..=0xffffu64).map(T::from_bits_u64).collect();
    let n = all.len() as i64;
    for (pool_name, mut pool) in pools() {
        for (b_name, b) in b_vectors(&all) {
            let mut out = vec![sentinel::<T>(); all.len()];
            ferrite::add(
                pool.as_mut(),
                &TensorRef::new(&all, &[n]).unwrap(),
                &TensorRef::new(&b, &[n]).unwrap(),
                &mut TensorMut::new(&mut out, &[n]).unwrap(),
            )
            .unwrap();
            let mut bad = vec![];
            for i in 0..all.len() {
                let want = T::from_f64_rne(all[i].to_f64() + b[i].to_f64());
                if !same_or_both_nan(out[i], want) {
                    bad.push(format!(
                        "{:#06x} + {:#06x} = {:#06x}, want {:#06x}",
                        all[i].bits(),
                        b[i].bits(),
                        out[i].bits(),
                        want.bits()
                    ));
                }
            }
            assert!(
                bad.is_empty(),
                "{} add, pool {pool_name}, b = {b_name}: {} wrong, e.g. {:?}",
                T::NAME,
                bad.len(),
                &bad[..bad.len().min(5)]
            );
        }
    }
}

// EVIDENCE: C-CONV-001
#[test]
fn c_conv_001_f16_add_rounds_to_nearest_even_for_every_pattern() {
    exhaustive_add::<f16>();
}

// EVIDENCE: C-CONV-001
#[test]
fn c_conv_001_bf16_add_rounds_to_nearest_even_for_every_pattern() {
    exhaustive_add::<bf16>();
}

fn add1<T: Float>(a: f64, b: f64) -> f64 {
    let exact = |x: f64| {
        let t = T::from_f64_rne(x);
        assert!(
            x.is_nan() || t.to_f64() == x,
            "{x:e} is not a {} value",
            T::NAME
        );
        [t]
    };
    let (a, b) = (exact(a), exact(b));
    let mut out = [sentinel::<T>()];
    ferrite::add(
        None,
        &TensorRef::new(&a, &[1]).unwrap(),
        &TensorRef::new(&b, &[1]).unwrap(),
        &mut TensorMut::new(&mut out, &[1]).unwrap(),
    )
    .unwrap();
    out[0].to_f64()
}

// EVIDENCE: C-CONV-001 (exact cases: ties go to even, just above a tie goes up, overflow)
#[test]
fn c_conv_001_exact_tie_and_overflow_cases() {
    let p = |e: i32| 2f64.powi(e);
    // bf16: 8 significant bits
    assert_eq!(add1::<bf16>(1.0, p(-8)), 1.0, "tie below: to even 1.0");
    assert_eq!(
        add1::<bf16>(1.0 + p(-7), p(-8)),
        1.0 + p(-6),
        "tie above: to even"
    );
    assert_eq!(
        add1::<bf16>(1.0, p(-8) + p(-15)),
        1.0 + p(-7),
        "just above the tie"
    );
    assert_eq!(add1::<bf16>(1.0, p(-9)), 1.0, "below the tie");
    assert_eq!(add1::<bf16>(-1.0, -p(-8)), -1.0, "negative tie to even");
    assert_eq!(
        add1::<bf16>(Format::BF16.max_finite(), Format::BF16.max_finite()),
        f64::INFINITY
    );
    assert_eq!(
        add1::<bf16>(Format::BF16.max_finite(), p(127 - 9)),
        Format::BF16.max_finite(),
        "below the overflow tie"
    );
    assert_eq!(
        add1::<bf16>(p(-133), p(-133)),
        p(-132),
        "subnormals add exactly"
    );
    // f16: 11 significant bits
    assert_eq!(add1::<f16>(1.0, p(-11)), 1.0);
    assert_eq!(add1::<f16>(1.0 + p(-10), p(-11)), 1.0 + p(-9));
    assert_eq!(add1::<f16>(2048.0, 1.0), 2048.0);
    assert_eq!(add1::<f16>(2050.0, 1.0), 2052.0);
    assert_eq!(
        add1::<f16>(65504.0, 16.0),
        f64::INFINITY,
        "65520 ties to even: infinity"
    );
    assert_eq!(add1::<f16>(65504.0, 8.0), 65504.0);
    assert_eq!(
        add1::<f16>(p(-24), p(-24)),
        p(-23),
        "subnormals add exactly"
    );
    assert_eq!(
        add1::<f16>(p(-14), -p(-24)),
        p(-14) - p(-24),
        "normal minus subnormal"
    );
    // NaN stays NaN, infinities stay infinite
    assert!(add1::<bf16>(f64::NAN, 1.0).is_nan());
    assert!(add1::<f16>(1.0, f64::NAN).is_nan());
    assert!(add1::<bf16>(f64::INFINITY, f64::NEG_INFINITY).is_nan());
    assert_eq!(add1::<f16>(f64::INFINITY, 1.0), f64::INFINITY);
}

// EVIDENCE: C-CONV-001 (the oracle's bf16 rounding of f32 inputs agrees with the half crate)
#[test]
fn c_conv_001_oracle_bf16_from_f32_matches_half() {
    let mut r = Bits::new(42);
    for _ in 0..100_000 {
        let x = f32::from_bits(r.next() as u32);
        let h = ferrite_spec::oracle::convert::bf16_from_f32(x);
        if x.is_nan() {
            assert!(
                h.is_nan(),
                "bf16 of NaN {:#x} is {:#x}",
                x.to_bits(),
                h.to_bits()
            );
        } else {
            assert_eq!(h.to_bits(), bf16::from_f64_rne(x as f64).to_bits(), "{x:e}");
        }
    }
}

fn mean_of_one<T: Float>(x: &[T]) {
    let n = x.len() as i64;
    for (name, mut pool) in pools() {
        let mut out = vec![sentinel::<T>(); x.len()];
        ferrite::reduce_mean(
            pool.as_mut(),
            &TensorRef::new(x, &[n, 1]).unwrap(),
            &mut TensorMut::new(&mut out, &[n, 1]).unwrap(),
        )
        .unwrap();
        for (xi, oi) in x.iter().zip(&out) {
            if xi.is_nan() {
                assert!(
                    oi.is_nan(),
                    "{} mean of NaN {:#x} on {name}: {:#x}",
                    T::NAME,
                    xi.bits(),
                    oi.bits()
                );
            } else {
                assert_eq!(
                    oi.to_f64(),
                    xi.to_f64(),
                    "{} mean of [{:#x}] on {name}: {:#x}",
                    T::NAME,
                    xi.bits(),
                    oi.bits()
                );
            }
        }
    }
}

// EVIDENCE: C-CONV-001 (a length-1 row round-trips exactly: 16 bits -> f32 -> 16 bits)
#[test]
fn c_conv_001_mean_of_one_element_is_exact() {
    mean_of_one::<f16>(&(0..=0xffffu64).map(f16::from_bits_u64).collect::<Vec<_>>());
    mean_of_one::<bf16>(&(0..=0xffffu64).map(bf16::from_bits_u64).collect::<Vec<_>>());
    let mut r = Bits::new(9);
    mean_of_one::<f32>(
        &(0..100_000)
            .map(|_| f32::from_bits(r.next() as u32))
            .collect::<Vec<_>>(),
    );
}
