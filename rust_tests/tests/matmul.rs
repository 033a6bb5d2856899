//! fer_matmul against its two oracles (C-MM-001), across ISA levels and thread counts
//! (C-MM-002), across row counts (C-MM-003), on bad input (C-MM-004) and with caller scratch
//! (C-MM-005).
//!
//! Two checks per case, because the header promises two things:
//! - the exact value: every element is the f32 fma chain over k ascending from 0, rounded once to
//!   out's dtype. `oracle::matmul_fma_chain` computes that chain in Rust, so the check is bit for
//!   bit (NaN positions exactly, payloads free), on any inputs including NaN, infinities and
//!   subnormals (Values::Any).
//! - accuracy against the f64 product, on inputs in [-1, 1]: |got - exact| <= tol with
//!   tol = 1.01 K u sum|a||b| (the classical bound for any K-step f32 evaluation, u = 2^-24)
//!   + half an ulp of out's format at |exact| + the same format's half smallest subnormal, i.e.
//!   relative to the oracle's own norm sum|a||b| of that element. A kernel that drops a k step,
//!   adds a row twice or reads the wrong layout misses either check by far.

mod common;

use common::*;
use ferrite_spec::oracle::{self, Float, Format};
use ferrite::{status, BLayout, TensorMut, TensorRef, ThreadPool, Workspace};
use half::{bf16, f16};
use proptest::prelude::*;

/// A buffer of one of the three float dtypes, chosen at run time.
#[derive(Clone, Debug)]
enum Buf {
    F32(Vec<f32>),
    F16(Vec<f16>),
    Bf16(Vec<bf16>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dt {
    F32,
    F16,
    Bf16,
}

fn dt() -> impl Strategy<Value = Dt> {
    prop_oneof![2 => Just(Dt::F32), 1 => Just(Dt::F16), 1 => Just(Dt::Bf16)]
}

/// Uniform values in [-1, 1], rounded to T: sums of up to a few thousand products stay far from
/// every format's overflow.
fn unit_values<T: Float>(seed: u64, n: usize) -> Vec<T> {
    let mut r = Bits::new(seed);
    (0..n)
        .map(|_| {
            let u = (r.next() >> 11) as f64 / (1u64 << 53) as f64;
            T::from_f64_rne(2.0 * u - 1.0)
        })
        .collect()
}

impl Buf {
    fn gen(dt: Dt, seed: u64, n: usize, kind: Option<Values>) -> Buf {
        fn g<T: Float>(seed: u64, n: usize, kind: Option<Values>) -> Vec<T> {
            match kind {
                Some(k) => gen_values(seed, n, k),
                None => unit_values(seed, n),
            }
        }
        match dt {
            Dt::F32 => Buf::F32(g(seed, n, kind)),
            Dt::F16 => Buf::F16(g(seed, n, kind)),
            Dt::Bf16 => Buf::Bf16(g(seed, n, kind)),
        }
    }
    fn sentinels(dt: Dt, n: usize) -> Buf {
        match dt {
            Dt::F32 => Buf::F32(vec![sentinel::<f32>(); n]),
            Dt::F16 => Buf::F16(vec![sentinel::<f16>(); n]),
            Dt::Bf16 => Buf::Bf16(vec![sentinel::<bf16>(); n]),
        }
    }
    fn f64_at(&self, p: usize) -> f64 {
        match self {
            Buf::F32(v) => v[p].to_f64(),
            Buf::F16(v) => v[p].to_f64(),
            Buf::Bf16(v) => v[p].to_f64(),
        }
    }
    fn bits_at(&self, p: usize) -> u64 {
        match self {
            Buf::F32(v) => v[p].bits(),
            Buf::F16(v) => v[p].bits(),
            Buf::Bf16(v) => v[p].bits(),
        }
    }
    fn format(&self) -> Format {
        match self {
            Buf::F32(_) => Format::F32,
            Buf::F16(_) => Format::F16,
            Buf::Bf16(_) => Format::BF16,
        }
    }
    fn sentinel_bits(&self) -> u64 {
        match self {
            Buf::F32(_) => sentinel::<f32>().bits(),
            Buf::F16(_) => sentinel::<f16>().bits(),
            Buf::Bf16(_) => sentinel::<bf16>().bits(),
        }
    }
    /// The f64 value `x` rounded to this buffer's format, as bits, and whether it is NaN.
    fn round_bits(&self, x: f64) -> (u64, bool) {
        match self {
            Buf::F32(_) => (f32::from_f64_rne(x).bits(), x.is_nan()),
            Buf::F16(_) => (f16::from_f64_rne(x).bits(), x.is_nan()),
            Buf::Bf16(_) => (bf16::from_f64_rne(x).bits(), x.is_nan()),
        }
    }
    fn view(&self, l: &Layout) -> TensorRef<'_> {
        match self {
            Buf::F32(v) => l.view(v),
            Buf::F16(v) => l.view(v),
            Buf::Bf16(v) => l.view(v),
        }
    }
    fn view_mut(&mut self, l: &Layout) -> TensorMut<'_> {
        match self {
            Buf::F32(v) => l.view_mut(v),
            Buf::F16(v) => l.view_mut(v),
            Buf::Bf16(v) => l.view_mut(v),
        }
    }
}

#[derive(Clone, Debug)]
struct MmCase {
    m: usize,
    k: usize,
    n: usize,
    layout: BLayout,
    dts: (Dt, Dt, Dt),
    a: Layout,
    b: Layout,
    out: Layout,
    seed: u64,
    pool: PoolSpec,
}

/// Extents that cross the blocking: MC = 96 rows, KC = 256 steps, NC = 256 columns, NR = 16,
/// MR = 6, and the 8-wide vectors; small ones most of the time to keep debug-mode oracles fast.
fn m_dim() -> impl Strategy<Value = usize> {
    prop_oneof![2 => Just(1usize), 1 => Just(0usize), 6 => 2usize..20, 1 => 94usize..100]
}
fn k_dim() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0usize), 7 => 1usize..40, 1 => 250usize..262, 1 => 510usize..516]
}
fn n_dim() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0usize), 7 => 1usize..40, 2 => 250usize..262]
}

fn mm_case() -> impl Strategy<Value = MmCase> {
    (m_dim(), k_dim(), n_dim(), any::<bool>()).prop_flat_map(|(m, k, n, nk)| {
        let layout = if nk { BLayout::NK } else { BLayout::KN };
        let b_shape = if nk { vec![n, k] } else { vec![k, n] };
        (
            (dt(), dt(), dt()),
            layout_plan(2, true),
            layout_plan(2, true),
            layout_plan(2, false),
            any::<u64>(),
            pool_spec(),
        )
            .prop_map(move |(dts, pa, pb, po, seed, pool)| MmCase {
                m,
                k,
                n,
                layout,
                dts,
                a: pa.build(&[m, k]),
                b: pb.build(&b_shape),
                out: po.build(&[m, n]),
                seed,
                pool,
            })
    })
}

/// a as row-major [M, K] and b as row-major logical [K, N] (transposing an [N, K] b), in f64.
fn logical_inputs(c: &MmCase, a: &Buf, b: &Buf) -> (Vec<f64>, Vec<f64>) {
    let av: Vec<f64> = c.a.positions().iter().map(|&p| a.f64_at(p)).collect();
    let bpos = c.b.positions();
    let mut bv = vec![0.0; c.k * c.n];
    for kk in 0..c.k {
        for j in 0..c.n {
            let flat = match c.layout {
                BLayout::KN => kk * c.n + j,
                BLayout::NK => j * c.k + kk,
            };
            bv[kk * c.n + j] = b.f64_at(bpos[flat]);
        }
    }
    (av, bv)
}

fn run_case(c: &MmCase, a: &Buf, b: &Buf, pool: Option<&mut ThreadPool>) -> Buf {
    let mut out = Buf::sentinels(c.dts.2, c.out.buf_len);
    {
        let av = a.view(&c.a);
        let bv = b.view(&c.b);
        let mut ov = out.view_mut(&c.out);
        let r = ferrite::matmul(pool, &av, &bv, c.layout, &mut ov);
        assert!(r.is_ok(), "fer_matmul failed on {c:?}: {r:?}");
    }
    out
}

/// Nothing outside out's view was written.
fn check_untouched(c: &MmCase, out: &Buf) -> Result<(), TestCaseError> {
    let mut inside = vec![false; c.out.buf_len];
    c.out.positions().iter().for_each(|&p| inside[p] = true);
    for (p, &ins) in inside.iter().enumerate() {
        prop_assert!(
            ins || out.bits_at(p) == out.sentinel_bits(),
            "buffer element {} outside out's view was written",
            p
        );
    }
    Ok(())
}

fn check_exact_chain(c: &MmCase) -> Result<(), TestCaseError> {
    let a = Buf::gen(c.dts.0, c.seed, c.a.buf_len, Some(Values::Any));
    let b = Buf::gen(c.dts.1, c.seed ^ 0xb, c.b.buf_len, Some(Values::Any));
    let mut pool = make_pool(c.pool);
    let out = run_case(c, &a, &b, pool.as_mut());
    let (av, bv) = logical_inputs(c, &a, &b);
    let a32: Vec<f32> = av.iter().map(|&x| x as f32).collect();
    let b32: Vec<f32> = bv.iter().map(|&x| x as f32).collect();
    let want = oracle::matmul_fma_chain(c.m, c.k, c.n, &a32, &b32);
    for (i, &p) in c.out.positions().iter().enumerate() {
        let (want_bits, want_nan) = out.round_bits(want[i] as f64);
        let got_nan = out.f64_at(p).is_nan();
        prop_assert!(
            if want_nan { got_nan } else { out.bits_at(p) == want_bits },
            "element ({}, {}) of {:?}: got {:#x}, chain gives {:#x} ({})",
            i / c.n.max(1),
            i % c.n.max(1),
            c,
            out.bits_at(p),
            want_bits,
            want[i]
        );
    }
    check_untouched(c, &out)
}

fn half_subnormal(f: Format) -> f64 {
    // half of 2^(emin - mant_bits), the smallest subnormal
    2f64.powi(f.emin - f.mant_bits - 1)
}

fn check_accuracy(c: &MmCase) -> Result<(), TestCaseError> {
    let a = Buf::gen(c.dts.0, c.seed, c.a.buf_len, None);
    let b = Buf::gen(c.dts.1, c.seed ^ 0xb, c.b.buf_len, None);
    let mut pool = make_pool(c.pool);
    let out = run_case(c, &a, &b, pool.as_mut());
    let (av, bv) = logical_inputs(c, &a, &b);
    let want = oracle::matmul(c.m, c.k, c.n, &av, &bv);
    let scale = oracle::matmul_abs(c.m, c.k, c.n, &av, &bv);
    let fmt = out.format();
    let u = 2f64.powi(-24);
    for (i, &p) in c.out.positions().iter().enumerate() {
        let got = out.f64_at(p);
        let mut tol = 1.01 * c.k as f64 * u * scale[i] + half_subnormal(fmt);
        if fmt != Format::F32 {
            tol += 0.5 * oracle::ulp(want[i].abs().max(got.abs()), fmt);
        }
        prop_assert!(
            (got - want[i]).abs() <= tol,
            "element ({}, {}) of {:?}: got {}, oracle {}, |diff| {:e} > tol {:e}",
            i / c.n.max(1),
            i % c.n.max(1),
            c,
            got,
            want[i],
            (got - want[i]).abs(),
            tol
        );
    }
    check_untouched(c, &out)
}

proptest! {
    #![proptest_config(config(192, file!()))]

    // EVIDENCE: C-MM-001
    #[test]
    fn c_mm_001_bit_exact_fma_chain(c in mm_case()) {
        check_exact_chain(&c)?;
    }

    // EVIDENCE: C-MM-001
    #[test]
    fn c_mm_001_within_f64_oracle_tolerance(c in mm_case()) {
        check_accuracy(&c)?;
    }
}

/// Fixed shapes that cross every block boundary and both routes.
fn determinism_shapes() -> Vec<(usize, usize, usize)> {
    vec![(1, 515, 300), (1, 7, 9), (2, 17, 33), (37, 300, 290), (97, 520, 270)]
}

// EVIDENCE: C-MM-002
#[test]
fn c_mm_002_bit_identical_across_isa_levels_and_thread_counts() {
    let mut pools = determinism_pools();
    let dts = [
        (Dt::F32, Dt::F32, Dt::F32),
        (Dt::F16, Dt::F16, Dt::F32),
        (Dt::Bf16, Dt::Bf16, Dt::Bf16),
        (Dt::F32, Dt::Bf16, Dt::F16),
    ];
    for (m, k, n) in determinism_shapes() {
        for &d in &dts {
            for layout in [BLayout::KN, BLayout::NK] {
                let b_shape = if layout == BLayout::NK { [n, k] } else { [k, n] };
                let c = MmCase {
                    m,
                    k,
                    n,
                    layout,
                    dts: d,
                    a: Layout::contiguous(&[m, k]),
                    b: Layout::contiguous(&b_shape),
                    out: Layout::contiguous(&[m, n]),
                    seed: (m * 1000 + k * 10 + n) as u64,
                    pool: None,
                };
                let a = Buf::gen(d.0, c.seed, c.a.buf_len, Some(Values::Wide));
                let b = Buf::gen(d.1, c.seed ^ 0xb, c.b.buf_len, Some(Values::Wide));
                let reference = run_case(&c, &a, &b, None);
                for (name, pool) in pools.iter_mut() {
                    let got = run_case(&c, &a, &b, pool.as_mut());
                    for p in 0..c.out.buf_len {
                        assert_eq!(
                            got.bits_at(p),
                            reference.bits_at(p),
                            "{name}: element {p} of {m}x{k}x{n} {layout:?} {d:?} differs from the NULL pool's"
                        );
                    }
                }
                // and the reference itself is the documented chain
                let (av, bv) = logical_inputs(&c, &a, &b);
                let a32: Vec<f32> = av.iter().map(|&x| x as f32).collect();
                let b32: Vec<f32> = bv.iter().map(|&x| x as f32).collect();
                let want = oracle::matmul_fma_chain(m, k, n, &a32, &b32);
                for (i, w) in want.iter().enumerate() {
                    assert_eq!(reference.bits_at(i), reference.round_bits(*w as f64).0);
                }
            }
        }
    }
}

fn row_invariance_case() -> impl Strategy<Value = (usize, usize, usize, bool, (Dt, Dt, Dt), u64, PoolSpec)> {
    (
        prop_oneof![4 => 2usize..12, 1 => 95usize..100],
        prop_oneof![3 => 1usize..40, 1 => 255usize..262],
        prop_oneof![3 => 1usize..40, 1 => 255usize..262],
        any::<bool>(),
        (dt(), dt(), dt()),
        any::<u64>(),
        pool_spec(),
    )
}

proptest! {
    #![proptest_config(config(48, file!()))]

    // EVIDENCE: C-MM-003
    #[test]
    fn c_mm_003_each_row_equals_the_m1_gemv(
        (m, k, n, nk, d, seed, pool) in row_invariance_case()
    ) {
        let layout = if nk { BLayout::NK } else { BLayout::KN };
        let b_shape = if nk { [n, k] } else { [k, n] };
        let full = MmCase {
            m, k, n, layout, dts: d,
            a: Layout::contiguous(&[m, k]),
            b: Layout::contiguous(&b_shape),
            out: Layout::contiguous(&[m, n]),
            seed, pool,
        };
        let a = Buf::gen(d.0, seed, full.a.buf_len, Some(Values::Wide));
        let b = Buf::gen(d.1, seed ^ 0xb, full.b.buf_len, Some(Values::Wide));
        let mut p = make_pool(pool);
        let all = run_case(&full, &a, &b, p.as_mut());
        for i in 0..m {
            // row i of a as a [1, K] view into the same buffer
            let row = MmCase {
                m: 1,
                a: Layout { shape: vec![1, k], strides: vec![k as i64, 1], offset: i * k, buf_len: m * k },
                out: Layout::contiguous(&[1, n]),
                ..full.clone()
            };
            let one = run_case(&row, &a, &b, p.as_mut());
            for j in 0..n {
                prop_assert_eq!(one.bits_at(j), all.bits_at(i * n + j), "row {} col {} of {:?}", i, j, full);
            }
        }
    }
}

fn f32_views<'a>(a: &'a [f32], b: &'a [f32], m: i64, k: i64, n: i64) -> (TensorRef<'a>, TensorRef<'a>) {
    (TensorRef::new(a, &[m, k]).unwrap(), TensorRef::new(b, &[k, n]).unwrap())
}

/// Calls fer_matmul through raw descriptors and checks the status, that a message was left and
/// that `out` still holds its sentinels.
fn expect_refused(
    what: &str,
    want: i32,
    a: &ferrite::sys::fer_tensor,
    b: &ferrite::sys::fer_tensor,
    layout: i32,
    out: &ferrite::sys::fer_tensor,
    ws: *mut std::os::raw::c_void,
    ws_len: usize,
) {
    // SAFETY: the descriptors come from checked views of live buffers (or are deliberately
    // invalid in ways the C side must detect before touching memory).
    let st = unsafe { ferrite::sys::fer_matmul(std::ptr::null_mut(), a, b, layout, out, ws, ws_len) };
    assert_eq!(st, want, "{what}: got {} ({})", ferrite::status_str(st), ferrite::last_error_message());
    assert_message_set(what);
}

// EVIDENCE: C-MM-004
#[test]
fn c_mm_004_bad_input_is_refused_and_nothing_is_written() {
    let (m, k, n) = (3i64, 5i64, 4i64);
    let a = vec![1.0f32; 15];
    let b = vec![1.0f32; 20];
    let mut out = vec![sentinel::<f32>(); 12];
    let (av, bv) = f32_views(&a, &b, m, k, n);
    let ov = TensorMut::new(&mut out, &[m, n]).unwrap();
    let (ar, br, or) = (*av.raw(), *bv.raw(), *ov.raw());
    let kn = BLayout::KN.raw();
    let null = std::ptr::null_mut();
    // SAFETY: NULL descriptors must be refused before any dereference.
    let st = unsafe { ferrite::sys::fer_matmul(null, std::ptr::null(), &br, kn, &or, null as _, 0) };
    assert_eq!(st, status::NULL_ARG);
    // SAFETY: as above.
    let st = unsafe { ferrite::sys::fer_matmul(null, &ar, &br, kn, std::ptr::null(), null as _, 0) };
    assert_eq!(st, status::NULL_ARG);
    expect_refused("layout 2", status::INVALID_ARG, &ar, &br, 2, &or, null as _, 0);
    expect_refused("b as [N, K] with K = 4", status::SHAPE_MISMATCH, &ar, &br, BLayout::NK.raw(), &or, null as _, 0);
    let mut bad = br;
    bad.shape[0] = 6; // refused on shapes before any element is read
    expect_refused("K of b 6 vs 5", status::SHAPE_MISMATCH, &ar, &bad, kn, &or, null as _, 0);
    let mut bad = or;
    bad.shape[1] = 3;
    expect_refused("out [3, 3]", status::SHAPE_MISMATCH, &ar, &br, kn, &bad, null as _, 0);
    let mut bad = ar;
    bad.rank = 3;
    bad.shape[2] = 1;
    expect_refused("a of rank 3", status::SHAPE_MISMATCH, &bad, &br, kn, &or, null as _, 0);
    let mut bad = br;
    bad.dtype = ferrite::sys::FER_DTYPE_Q4_0 as i32;
    expect_refused("b q4_0", status::UNSUPPORTED, &ar, &bad, kn, &or, null as _, 0);
    let mut bad = or;
    bad.dtype = ferrite::sys::FER_DTYPE_I32 as i32;
    expect_refused("out i32", status::UNSUPPORTED, &ar, &br, kn, &bad, null as _, 0);
    let mut bad = ar;
    bad.data = (bad.data as usize + 2) as *mut _;
    expect_refused("a misaligned", status::INVALID_ARG, &bad, &br, kn, &or, null as _, 0);
    // out aliasing an input
    let mut alias = or;
    alias.data = ar.data;
    expect_refused("out overlaps a", status::INVALID_ARG, &ar, &br, kn, &alias, null as _, 0);
    // out with two elements at one address
    let mut bad = or;
    bad.strides[0] = 0;
    expect_refused("out broadcast", status::INVALID_ARG, &ar, &br, kn, &bad, null as _, 0);
    // workspace: misaligned and too small
    let mut ws = Workspace::new(1 << 20);
    let p = ws.ptr(8);
    expect_refused("misaligned workspace", status::INVALID_ARG, &ar, &br, kn, &or, p, 1 << 20);
    let p = ws.ptr(0);
    expect_refused("16-byte workspace", status::BUFFER_TOO_SMALL, &ar, &br, kn, &or, p, 16);
    drop(ov);
    assert!(out.iter().all(|v| v.to_bits() == sentinel::<f32>().to_bits()), "a refused call wrote to out");
}

// EVIDENCE: C-MM-005
#[test]
fn c_mm_005_workspace_is_exact_and_zero_where_the_route_needs_none() {
    let mut pools: Vec<Option<ThreadPool>> =
        vec![None, Some(ThreadPool::new(1, ferrite::isa::AUTO).unwrap()), Some(ThreadPool::new(3, ferrite::isa::AUTO).unwrap())];
    for (m, k, n) in [(1usize, 300usize, 70usize), (4, 33, 17), (97, 300, 290)] {
        for dta in [Dt::F32, Dt::Bf16] {
            let c = MmCase {
                m, k, n, layout: BLayout::NK, dts: (dta, Dt::F16, Dt::F32),
                a: Layout::contiguous(&[m, k]), b: Layout::contiguous(&[n, k]),
                out: Layout::contiguous(&[m, n]), seed: 7, pool: None,
            };
            let a = Buf::gen(dta, 1, c.a.buf_len, Some(Values::Wide));
            let b = Buf::gen(Dt::F16, 2, c.b.buf_len, Some(Values::Wide));
            for pool in pools.iter_mut() {
                let reference = run_case(&c, &a, &b, pool.as_mut());
                let mut out = Buf::sentinels(Dt::F32, m * n);
                let av = a.view(&c.a);
                let bv = b.view(&c.b);
                let mut ov = out.view_mut(&c.out);
                let need = ferrite::matmul_workspace_bytes(pool.as_ref(), &av, &bv, c.layout, &ov).unwrap();
                if m == 1 && dta == Dt::F32 {
                    assert_eq!(need, 0, "M = 1 with a contiguous f32 row needs no scratch");
                } else {
                    assert!(need > 0, "{m}x{k}x{n} {dta:?} reports no scratch");
                }
                if need > 0 {
                    let mut short = Workspace::new(need - 1);
                    let r = ferrite::matmul_in(pool.as_mut(), &av, &bv, c.layout, &mut ov, &mut short, 0);
                    assert_eq!(r.unwrap_err().code, status::BUFFER_TOO_SMALL);
                }
                // exactly `need` bytes, surrounded by canaries that must survive
                let mut ws = Workspace::new(need + 64);
                let canary = 0xA5u8;
                // SAFETY: ws.ptr(0) has need + 64 writable bytes.
                unsafe { std::ptr::write_bytes(ws.ptr(0) as *mut u8, canary, need + 64) };
                let base = ws.ptr(0);
                // SAFETY: call with the first `need` bytes only.
                let st = unsafe {
                    ferrite::sys::fer_matmul(
                        pool.as_mut().map_or(std::ptr::null_mut(), |p| p.as_ptr()),
                        av.raw(), bv.raw(), c.layout.raw(), ov.raw(), if need == 0 { std::ptr::null_mut() } else { base }, need,
                    )
                };
                assert_eq!(st, status::OK, "{}", ferrite::last_error_message());
                // SAFETY: reading back the bytes written above.
                let tail = unsafe { std::slice::from_raw_parts((base as *const u8).add(need), 64) };
                assert!(tail.iter().all(|&x| x == canary), "fer_matmul wrote past the bytes it reported");
                drop(ov);
                for p in 0..m * n {
                    assert_eq!(out.bits_at(p), reference.bits_at(p));
                }
            }
        }
    }
}
