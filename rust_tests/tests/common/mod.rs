//! Shared test machinery: value generators, strided layouts over larger buffers, pools, proptest
//! runners, and the per-dtype comparison rules (the tolerances are stated and justified here).
#![allow(dead_code)]

use ferrite_spec::oracle::{self, Float, Format};
use ferrite::{isa, Element, TensorMut, TensorRef, ThreadPool};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestRunner};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::mem::size_of;

// ---------------------------------------------------------------------------------------------
// proptest runners

/// A proptest config with `cases` cases unless PROPTEST_CASES overrides it; failures are saved
/// next to the calling test file (`tests/<name>.proptest-regressions`, to be committed).
pub fn config(cases: u32, source_file: &'static str) -> Config {
    let mut c = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = cases;
    }
    c.source_file = Some(source_file);
    c.failure_persistence = Some(Box::new(FileFailurePersistence::SourceParallel(
        "proptest-regressions",
    )));
    c
}

/// Runs `test` over `strategy` with a runner built from `config`; panics with the minimal failing
/// input. Used where a test keeps state (pools, in a RefCell) across cases, which the proptest!
/// macro cannot.
pub fn run_prop<S: Strategy>(
    cfg: Config,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let mut runner = TestRunner::new(cfg);
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{}", e);
    }
}

pub fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

// ---------------------------------------------------------------------------------------------
// values

/// How a test draws element values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Values {
    /// Everything: raw bit patterns (any NaN payload, huge and tiny), specials (NaN, +-inf, +-0,
    /// subnormals, +-max), small multiples of 1/4 (exact ties and cancellations), normals.
    Any,
    /// Normals with |x| in [2^-10, 2^10] plus, at `special_permille`/1000 each, specials and
    /// subnormals: no overflow is possible in any f32 sum the tests make.
    Moderate { special_permille: u32 },
    /// Normals spread over 2^-8..2^8 with random signs: every change of summation order shows.
    Wide,
}

/// A small, fast generator (splitmix64): test inputs of millions of elements are generated in
/// debug builds, where a general-purpose RNG plus f64 conversions per element costs seconds.
pub struct Bits(u64);

impl Bits {
    pub fn new(seed: u64) -> Bits {
        Bits(seed ^ 0x5851_f42d_4c95_7f2d)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform-enough in [0, n) for test purposes.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Builds elements of T directly from sign, exponent and significand bits.
struct Maker {
    width: u32,
    mant: u32,
    bias: i32,
    emax: i32,
    quarters: Vec<u64>,
}

impl Maker {
    fn new<T: Float>() -> Maker {
        let f = T::FORMAT;
        Maker {
            width: 8 * size_of::<T>() as u32,
            mant: f.mant_bits as u32,
            bias: 1 - f.emin,
            emax: f.emax,
            quarters: (0..32)
                .map(|k| T::from_f64_rne(k as f64 / 4.0).bits())
                .collect(),
        }
    }
    fn mant_mask(&self) -> u64 {
        (1u64 << self.mant) - 1
    }
    fn sign(&self, r: &mut Bits) -> u64 {
        (r.next() & 1) << (self.width - 1)
    }
    fn exp_field(&self, e: i32) -> u64 {
        ((e + self.bias) as u64) << self.mant
    }
    fn inf(&self) -> u64 {
        self.exp_field(self.emax + 1)
    }
    fn normal(&self, r: &mut Bits, lo: i32, hi: i32) -> u64 {
        let e = lo + r.below((hi - lo + 1) as u64) as i32;
        self.sign(r) | self.exp_field(e) | (r.next() & self.mant_mask())
    }
    fn nan(&self, r: &mut Bits) -> u64 {
        // any payload, quiet or signalling (never the all-zero significand of infinity)
        let payload = (r.next() & self.mant_mask()).max(1);
        self.sign(r) | self.inf() | payload
    }
    fn subnormal(&self, r: &mut Bits) -> u64 {
        self.sign(r) | (r.next() & self.mant_mask()).max(1)
    }
    fn special(&self, r: &mut Bits) -> u64 {
        let s = self.sign(r);
        match r.below(9) {
            0 => self.nan(r),
            1 => s | self.inf(),
            2 => s,                                                // +-0
            3 => s | 1,                                            // smallest subnormal
            4 => self.subnormal(r),                                // any subnormal
            5 => s | self.exp_field(self.emax) | self.mant_mask(), // +-max
            6 => s | (1 << self.mant),                             // smallest normal
            7 => s | self.mant_mask(),                             // largest subnormal
            _ => s | self.quarters[4],                             // +-1
        }
    }
    fn special_moderate(&self, r: &mut Bits) -> u64 {
        match r.below(5) {
            0 => self.nan(r),
            1 => self.sign(r) | self.inf(),
            2 => self.sign(r),
            3 => self.subnormal(r),
            _ => self.sign(r) | 1,
        }
    }
    fn value(&self, r: &mut Bits, kind: Values) -> u64 {
        match kind {
            Values::Any => match r.below(100) {
                0..=14 => r.next() & ((1u64 << self.width) - 1), // raw bit patterns
                15..=29 => self.special(r),
                30..=49 => self.sign(r) | self.quarters[r.below(32) as usize],
                _ => self.normal(r, -12, 12),
            },
            Values::Moderate { special_permille } => {
                if r.below(1000) < special_permille as u64 {
                    self.special_moderate(r)
                } else {
                    self.normal(r, -10, 10)
                }
            }
            Values::Wide => self.normal(r, -8, 8),
        }
    }
}

/// `n` values of T drawn with `kind` from a generator seeded with `seed`.
pub fn gen_values<T: Float>(seed: u64, n: usize, kind: Values) -> Vec<T> {
    let m = Maker::new::<T>();
    let mut r = Bits::new(seed);
    (0..n)
        .map(|_| T::from_bits_u64(m.value(&mut r, kind)))
        .collect()
}

pub fn mask<T>() -> u64 {
    if size_of::<T>() == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * size_of::<T>())) - 1
    }
}

/// A NaN with a payload no kernel produces from these inputs: marks output elements that must
/// not be written.
pub fn sentinel<T: Float>() -> T {
    match size_of::<T>() {
        4 => T::from_bits_u64(0x7fa5_a5a5),
        _ if T::FORMAT == Format::F16 => T::from_bits_u64(0x7d5a),
        _ => T::from_bits_u64(0x7fa5),
    }
}

// ---------------------------------------------------------------------------------------------
// layouts: a strided view of a logical shape inside a larger buffer

/// Where the elements of a view of `shape` live in a buffer of `buf_len` elements: element
/// (i0, i1, ...) is at `offset + sum(ik * strides[k])` (strides in ELEMENTS; bytes = x size).
#[derive(Clone, Debug)]
pub struct Layout {
    pub shape: Vec<usize>,
    pub strides: Vec<i64>,
    pub offset: usize,
    pub buf_len: usize,
}

impl Layout {
    pub fn contiguous(shape: &[usize]) -> Layout {
        let mut strides = vec![0i64; shape.len()];
        let mut acc = 1i64;
        for i in (0..shape.len()).rev() {
            strides[i] = acc;
            acc *= shape[i].max(1) as i64;
        }
        Layout {
            shape: shape.to_vec(),
            strides,
            offset: 0,
            buf_len: oracle::numel(shape),
        }
    }

    pub fn shape_i64(&self) -> Vec<i64> {
        self.shape.iter().map(|&d| d as i64).collect()
    }

    pub fn byte_strides(&self, elem: usize) -> Vec<i64> {
        self.strides.iter().map(|&s| s * elem as i64).collect()
    }

    /// Buffer position of every logical element, row-major.
    pub fn positions(&self) -> Vec<usize> {
        let n = oracle::numel(&self.shape);
        (0..n)
            .map(|flat| {
                let idx = oracle::unravel(flat, &self.shape);
                let p = self.offset as i64
                    + idx
                        .iter()
                        .zip(&self.strides)
                        .map(|(&i, &s)| i as i64 * s)
                        .sum::<i64>();
                assert!(
                    p >= 0 && (p as usize) < self.buf_len,
                    "layout escapes its buffer: {self:?}"
                );
                p as usize
            })
            .collect()
    }

    pub fn view<'a, T: Element>(&self, buf: &'a [T]) -> TensorRef<'a> {
        assert_eq!(buf.len(), self.buf_len);
        TensorRef::strided(
            buf,
            self.offset,
            &self.shape_i64(),
            &self.byte_strides(size_of::<T>()),
        )
        .expect("layout lies inside its buffer")
    }

    pub fn view_mut<'a, T: Element>(&self, buf: &'a mut [T]) -> TensorMut<'a> {
        assert_eq!(buf.len(), self.buf_len);
        TensorMut::strided(
            buf,
            self.offset,
            &self.shape_i64(),
            &self.byte_strides(size_of::<T>()),
        )
        .expect("layout lies inside its buffer")
    }
}

/// The raw ingredients of a layout, drawn by proptest and assembled by `build`.
#[derive(Clone, Debug)]
pub struct LayoutPlan {
    contiguous: bool,
    /// axes from innermost to outermost
    order: Vec<usize>,
    pads: Vec<usize>,
    negative: Vec<bool>,
    zero: Vec<bool>,
    junk: Vec<i64>,
    lead: usize,
    tail: usize,
}

/// Plans for rank `rank`: half contiguous; the rest permuted axis order, padded extents (gaps
/// between rows), negative strides, arbitrary strides on extent-1 axes, slack before and after,
/// and (inputs only, `allow_zero`) zero strides that broadcast one element along an axis.
pub fn layout_plan(rank: usize, allow_zero: bool) -> impl Strategy<Value = LayoutPlan> {
    let axes: Vec<usize> = (0..rank).collect();
    (
        prop::bool::weighted(0.4),
        Just(axes).prop_shuffle(),
        prop::collection::vec(prop_oneof![3 => Just(0usize), 1 => 1usize..3], rank),
        prop::collection::vec(prop::bool::weighted(0.3), rank),
        prop::collection::vec(
            prop::bool::weighted(if allow_zero { 0.15 } else { 0.0 }),
            rank,
        ),
        prop::collection::vec(-5i64..=5, rank),
        0usize..3,
        0usize..3,
    )
        .prop_map(
            |(contiguous, order, pads, negative, zero, junk, lead, tail)| LayoutPlan {
                contiguous,
                order,
                pads,
                negative,
                zero,
                junk,
                lead,
                tail,
            },
        )
}

impl LayoutPlan {
    pub fn build(&self, shape: &[usize]) -> Layout {
        assert_eq!(shape.len(), self.order.len());
        if self.contiguous {
            return Layout::contiguous(shape);
        }
        let rank = shape.len();
        let mut strides = vec![0i64; rank];
        let mut running = 1i64;
        for &ax in &self.order {
            strides[ax] = running;
            running *= (shape[ax].max(1) + self.pads[ax]) as i64;
        }
        let mut offset = self.lead as i64;
        for ax in 0..rank {
            if self.zero[ax] {
                strides[ax] = 0;
            } else if shape[ax] == 1 {
                strides[ax] = self.junk[ax]; // never stepped along: any value is valid
            } else if self.negative[ax] {
                strides[ax] = -strides[ax];
                offset += -strides[ax] * (shape[ax] as i64 - 1).max(0);
            }
        }
        Layout {
            shape: shape.to_vec(),
            strides,
            offset: offset as usize,
            buf_len: self.lead + running as usize + self.tail,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// shapes

/// An extent for a leading axis: 0 sometimes, 1 often (broadcast and coalescing edge), else small.
pub fn small_dim() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0usize), 3 => Just(1usize), 6 => 2usize..6]
}

/// An extent for the last axis: like `small_dim`, plus lengths around the 8- and 32-wide vector
/// blocks and the 32 partial sums of reduce_mean.
pub fn inner_dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        1 => Just(0usize),
        3 => Just(1usize),
        5 => 2usize..10,
        2 => 30usize..42,
        1 => 60usize..140,
    ]
}

/// A shape of rank 0..=4 with small leading axes and an `inner_dim` last axis.
pub fn shape(max_rank: usize) -> impl Strategy<Value = Vec<usize>> {
    (0..=max_rank).prop_flat_map(|rank| {
        if rank == 0 {
            Just(vec![]).boxed()
        } else {
            (prop::collection::vec(small_dim(), rank - 1), inner_dim())
                .prop_map(|(mut lead, last)| {
                    lead.push(last);
                    lead
                })
                .boxed()
        }
    })
}

// ---------------------------------------------------------------------------------------------
// pools

/// Which pool a call runs on: None (NULL: calling thread, FER_ISA_AUTO) or (threads, isa).
pub type PoolSpec = Option<(u32, i32)>;

pub fn make_pool(spec: PoolSpec) -> Option<ThreadPool> {
    spec.map(|(n, i)| ThreadPool::new(n, i).expect("pool"))
}

/// Pools an oracle test may draw: NULL, or 1..3 threads at AUTO.
pub fn pool_spec() -> impl Strategy<Value = PoolSpec> {
    prop_oneof![
        Just(None),
        Just(Some((1, isa::AUTO))),
        Just(Some((2, isa::AUTO))),
        Just(Some((3, isa::PORTABLE))),
    ]
}

/// The pools whose results must be bit-identical (C-ADD-002, C-GATHER-003, C-MEAN-002): every
/// ISA level this CPU has, times 1, 2, 3 and 7 threads (7 > the 2 cores here), plus NULL. Prints
/// SKIPPED for the AVX2 (AVX512) level when the CPU lacks AVX2+FMA+F16C (AVX-512 F/BW/VL/DQ).
pub fn determinism_pools() -> Vec<(String, Option<ThreadPool>)> {
    let mut pools: Vec<(String, Option<ThreadPool>)> = vec![("NULL pool".into(), None)];
    let mut levels = vec![(isa::PORTABLE, "PORTABLE")];
    if ferrite::cpu_has_avx2_level() {
        levels.push((isa::AVX2, "AVX2"));
    } else {
        eprintln!("SKIPPED: FER_ISA_AVX2 side of the determinism check (CPU lacks AVX2|FMA|F16C)");
    }
    if ferrite::cpu_has_avx512_level() {
        levels.push((isa::AVX512, "AVX512"));
    } else {
        eprintln!("SKIPPED: FER_ISA_AVX512 side of the determinism check (CPU lacks AVX-512 F/BW/VL/DQ)");
    }
    for (level, name) in levels {
        for n in [1u32, 2, 3, 7] {
            let pool = ThreadPool::new(n, level).expect("pool");
            assert_eq!(pool.isa().unwrap(), level);
            pools.push((format!("{name} x{n}"), Some(pool)));
        }
    }
    pools
}

// ---------------------------------------------------------------------------------------------
// comparisons

/// Elementwise rule for results that must equal the correctly rounded oracle value: NaN where
/// the oracle has NaN (any payload), otherwise the same bits (so infinities and the sign of
/// zero match too).
pub fn same_or_both_nan<T: Float>(got: T, want: T) -> bool {
    if want.is_nan() {
        got.is_nan()
    } else {
        got.bits() == want.bits()
    }
}

/// The reduce_mean tolerance, |got - mean| <= tol, for a row of `n` elements with mean(|x|) =
/// `mean_abs`, output type T. Why this bound:
/// - the C kernel sums in f32: element j goes to partial j mod 32 (ceil(n/32) sequential adds per
///   partial), then a fixed 5-level tree, then one division by n. Each element's contribution
///   passes through at most k = ceil(n/32) + 5 additions plus the division, each rounding with
///   relative error <= u = 2^-24, so |sum_f32 - sum| <= k u sum|x| (to first order) and the
///   mean errs by at most (k + 1) u mean(|x|). We allow twice that: a bound that grows with the
///   row length, as a sequential f32 sum's error does.
/// - a quotient in the f32 subnormal range errs by up to half of 2^-149 absolutely: add 2^-149.
/// - f16/bf16 outputs round the f32 mean once more: add half an output ulp at the larger of the
///   two values (the oracle's f64 value has no such rounding).
///
/// The oracle's own f64 error (~n 2^-53 sum|x|) is far below all of this.
pub fn mean_tolerance<T: Float>(n: usize, mean_abs: f64, want: f64, got: f64) -> f64 {
    let k = n.div_ceil(32) + 5;
    let u = 2f64.powi(-24);
    let mut tol = 2.0 * (k as f64 + 1.0) * u * mean_abs + 2f64.powi(-149);
    if T::FORMAT != Format::F32 {
        let mag = if got.is_finite() {
            want.abs().max(got.abs())
        } else {
            want.abs()
        };
        tol += 0.5 * oracle::ulp(mag, T::FORMAT);
    }
    tol
}

/// Bytes of a slice of elements (for bit-exact comparisons of any element type).
pub fn as_bytes<T: Element>(v: &[T]) -> &[u8] {
    // SAFETY: Element types are plain old data without padding.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// Asserts the calling thread's last error message is non-empty and returns it.
pub fn assert_message_set(context: &str) -> String {
    let m = ferrite::last_error_message();
    assert!(!m.is_empty(), "{context}: the failing call left no message");
    m
}

/// Asserts the calling thread's last error message is empty (a successful call cleared it).
pub fn assert_message_clear(context: &str) {
    let mut len = usize::MAX;
    // SAFETY: cap 0 with a NULL buffer is allowed; len is a valid out-pointer.
    let st = unsafe { ferrite::sys::fer_last_error_message(std::ptr::null_mut(), 0, &mut len) };
    assert_eq!(
        (st, len),
        (ferrite::status::OK, 0),
        "{context}: message not cleared: {:?}",
        ferrite::last_error_message()
    );
}

// ---------------------------------------------------------------------------------------------
// KV cache options

/// f16 KV cache options: `layout`, `policy`, the geometry (layers, kv heads, head dim, max
/// tokens), `mask` bytes per token, min_bucket 8.
pub fn kv_f16_options(layout: i32, policy: i32, layers: u32, heads: u32, dim: u32, max: u64, mask: u32) -> ferrite::mem::KvCacheOptions {
    let mut o = ferrite::mem::kv_cache_options();
    o.policy = policy;
    o.geometry = ferrite::mem::kv_geometry(layout, layers, heads, dim, 2, max);
    o.dtype = ferrite::sys::FER_DTYPE_F16 as i32;
    o.mask_bytes_per_token = mask;
    o.min_bucket = 8;
    o
}
