//! Matmul benchmarks: the original ids (`original-system.md` A.1: B is [K, N], inputs from
//! `float_values`), the weight layout [N, K] that decode uses, large decode GEMVs, and in the same
//! run the peer (OpenBLAS `cblas_sgemm` / `cblas_sgemv`, Debian's libopenblas, same thread count)
//! and the two ceilings (f32 FMA throughput; read bandwidth). docs/BENCHMARKS.md records the ratios.
//!
//! Ids:
//! - `matmul/{small,medium,large}_generic_{f32,f16,bf16}_threads={1,2,8}/{MxKxN}` (original
//!   shapes 1x256x256, 32x512x512, 32x1024x1024; "generic" is the original's backend label,
//!   kept for parity; threads=8 oversubscribes 2 cores as the original's 3-core runner did).
//! - `matmul_peer/openblas_f32_threads={1,2,8}/{MxKxN}`.
//! - `matmul_nk/{size}_{dtype}_threads=2/{MxKxN}`: B as [N, K] (weights as stored).
//! - `gemv/{f32,f16,bf16}_{kn,nk}_threads=2/1x4096x14336` and `gemv_peer/openblas_sgemv_f32_
//!   {kn,nk}_threads=2/...`: weights of 235 MB f32, far beyond the 32 MiB L3;
//!   `gemv/read_probe_threads=2/268435456` is the read ceiling again inside the group, so that
//!   `-- gemv` measures it in the same run; the same probe also runs once after each sample of
//!   every GEMV (outside criterion's timing), and the groups end by printing each GEMV's GB/s as a
//!   fraction of the probe's GB/s around its own samples (C-MM-008).
//! - `block_quantized_matmul_cached_dense/mxfp4_{cached_dense_repeated_call,uncached_dequant_each_
//!   call,preexpanded_dense_oncelock_like_proxy,fused,fused_i8}/{1x1024x1024,1x4096x14336}`: the
//!   original's MXFP4 strategies (A.1: weight u8 [N, K/32, 17], scale 127, codes from
//!   `mxfp4_codes`) plus the fused kernels (exact `fer_matmul_quant`; `fused_i8` is
//!   `fer_matmul_quant_i8`, A rounded to 8 bits), all on a 2-thread pool;
//!   `gguf_gemv/{q4_0,q4_1,q8_0,q4_0_i8,q4_1_i8,q8_0_i8,f32}_threads=2/{1x576x1536,1x4096x4096}`:
//!   decode GEMVs over GGUF blocks, exact and with 8-bit activations (throughput = weight bytes);
//!   `block_quantized_moe_cached_dense/mxfp4_{uncached_expert_dequant_each_call,cached_dense_
//!   expert_repeated_call,fused}/rows=1,H=256,I=256,E=4,top_k=1` (calling thread, as the original).
//! - `ceiling/fma_f32_threads={1,2}/..`: 12 independent FMA chains per thread (throughput =
//!   FLOPs); `ceiling/read_threads={1,2}/..`: a summing read of 256 MiB in eight streams per thread
//!   (throughput = bytes).
//! EVIDENCE: C-MM-006, C-MM-007, C-MM-008, C-MM-009, C-Q-005, C-POOL-002

use criterion::{black_box, criterion_group, Bencher, BenchmarkId, Criterion, Throughput};
use ferrite_benches::{fma_chains, float_values, mxfp4_weight, read_sum, BenchDtype, Buffer, Pool};
use ferrite_sys as sys;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::os::raw::c_int;
use std::time::{Duration, Instant};

#[link(name = "openblas")]
extern "C" {
    fn cblas_sgemm(
        order: c_int, ta: c_int, tb: c_int, m: c_int, n: c_int, k: c_int, alpha: f32,
        a: *const f32, lda: c_int, b: *const f32, ldb: c_int, beta: f32, c: *mut f32, ldc: c_int,
    );
    fn cblas_sgemv(
        order: c_int, ta: c_int, m: c_int, n: c_int, alpha: f32, a: *const f32, lda: c_int,
        x: *const f32, incx: c_int, beta: f32, y: *mut f32, incy: c_int,
    );
    fn openblas_set_num_threads(n: c_int);
}

const ROW_MAJOR: c_int = 101;
const NO_TRANS: c_int = 111;
const TRANS: c_int = 112;

const SHAPES: [(&str, (i64, i64, i64)); 3] =
    [("small", (1, 256, 256)), ("medium", (32, 512, 512)), ("large", (32, 1024, 1024))];

fn shape_id((m, k, n): (i64, i64, i64)) -> String {
    format!("{m}x{k}x{n}")
}

fn ok(status: sys::fer_status) {
    assert_eq!(status, sys::FER_STATUS_OK as i32, "fer_matmul refused its benchmark input");
}

/// One fer_matmul set-up: buffers, descriptors and the pool, kept alive together.
struct Case {
    _a: Buffer,
    _b: Buffer,
    _out: Buffer,
    ta: sys::fer_tensor,
    tb: sys::fer_tensor,
    to: sys::fer_tensor,
    layout: sys::fer_matmul_b_layout,
    pool: Pool,
}

impl Case {
    fn new(dtype: BenchDtype, (m, k, n): (i64, i64, i64), nk: bool, threads: u32) -> Case {
        let mut a = Buffer::from_f32(&float_values((m * k) as usize), dtype);
        let mut b = Buffer::from_f32(&float_values((k * n) as usize), dtype);
        let mut out = Buffer::zeroed((m * n) as usize, BenchDtype::F32);
        let b_shape = if nk { [n, k] } else { [k, n] };
        let (ta, tb, to) = (a.tensor(&[m, k]), b.tensor(&b_shape), out.tensor(&[m, n]));
        let layout = (if nk { sys::FER_MATMUL_B_NK } else { sys::FER_MATMUL_B_KN }) as sys::fer_matmul_b_layout;
        Case { _a: a, _b: b, _out: out, ta, tb, to, layout, pool: Pool::new(threads) }
    }

    fn run(&self) {
        // SAFETY: the descriptors point into buffers owned by self; NULL workspace = allocate.
        ok(unsafe {
            sys::fer_matmul(self.pool.ptr(), &self.ta, &self.tb, self.layout, &self.to, std::ptr::null_mut(), 0)
        })
    }
}

fn bench_matmul(c: &mut Criterion) {
    let mut g = c.benchmark_group("matmul");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2)).sample_size(20);
    for (size, shape) in SHAPES {
        for dtype in BenchDtype::ALL {
            for threads in [1u32, 2, 8] {
                let case = Case::new(dtype, shape, false, threads);
                g.throughput(Throughput::Elements((shape.0 * shape.2) as u64));
                let id = format!("{size}_generic_{}_threads={threads}", dtype.name());
                g.bench_function(BenchmarkId::new(id, shape_id(shape)), |bch| bch.iter(|| case.run()));
            }
        }
    }
    g.finish();

    let mut g = c.benchmark_group("matmul_nk");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2)).sample_size(20);
    for (size, shape) in SHAPES {
        for dtype in BenchDtype::ALL {
            let case = Case::new(dtype, shape, true, 2);
            g.throughput(Throughput::Elements((shape.0 * shape.2) as u64));
            let id = format!("{size}_{}_threads=2", dtype.name());
            g.bench_function(BenchmarkId::new(id, shape_id(shape)), |bch| bch.iter(|| case.run()));
        }
    }
    g.finish();
}

fn bench_openblas(c: &mut Criterion) {
    let mut g = c.benchmark_group("matmul_peer");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2)).sample_size(20);
    for (_, shape) in SHAPES {
        let (m, k, n) = shape;
        let a = float_values((m * k) as usize);
        let b = float_values((k * n) as usize);
        let mut out = vec![0f32; (m * n) as usize];
        for threads in [1, 2, 8] {
            g.throughput(Throughput::Elements((m * n) as u64));
            g.bench_function(BenchmarkId::new(format!("openblas_f32_threads={threads}"), shape_id(shape)), |bch| {
                // SAFETY: plain FFI call into OpenBLAS with buffers sized [m,k], [k,n], [m,n].
                unsafe { openblas_set_num_threads(threads) };
                bch.iter(|| unsafe {
                    cblas_sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, m as c_int, n as c_int, k as c_int, 1.0,
                                a.as_ptr(), k as c_int, b.as_ptr(), n as c_int, 0.0, out.as_mut_ptr(), n as c_int);
                    black_box(&mut out);
                })
            });
        }
    }
    g.finish();
}

const GEMV: (i64, i64, i64) = (1, 4096, 14336);

/// Time and bytes of every call criterion timed, per benchmark id (warm-up included), and of a read
/// probe run after each of its samples, so that every GEMV is stated as a fraction of the read
/// bandwidth measured while it ran: on a shared machine the probe moved from 24 to 35 GB/s within
/// one run, so a probe measured once at the start of the group said little about later cases.
#[derive(Default)]
struct Recorded(RefCell<BTreeMap<String, [(Duration, u64); 2]>>);

impl Recorded {
    fn add(&self, id: &str, which: usize, took: Duration, calls: u64) {
        let mut m = self.0.borrow_mut();
        let e = &mut m.entry(id.to_string()).or_insert([(Duration::ZERO, 0); 2])[which];
        e.0 += took;
        e.1 += calls;
    }

    /// Times f for criterion and records it; then, outside criterion's time, one call of probe.
    fn time(&self, id: &str, b: &mut Bencher, mut f: impl FnMut(), probe: Option<&dyn Fn()>) {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                f();
            }
            let took = start.elapsed();
            self.add(id, 0, took, iters);
            if let Some(p) = probe {
                let start = Instant::now();
                p();
                self.add(id, 1, start.elapsed(), 1);
            }
            took
        })
    }

    /// Prints each GEMV's rate, the probe's rate around its samples and the fraction (C-MM-008).
    fn report(&self, bytes: impl Fn(&str) -> u64, probe_bytes: u64) {
        let gbs = |(t, n): (Duration, u64), b: u64| b as f64 * n as f64 / t.as_secs_f64() / 1e9;
        let m = self.0.borrow();
        if m.is_empty() {
            return;
        }
        println!("GEMV {} on 2 threads, against the read probe run after each of its samples:", shape_id(GEMV));
        for (id, [own, probe]) in m.iter() {
            let rate = gbs(*own, bytes(id));
            if probe.1 == 0 {
                println!("  {id:<44} {rate:5.1} GB/s ({} calls)", own.1);
                continue;
            }
            let ceiling = gbs(*probe, probe_bytes);
            println!("  {id:<44} {rate:5.1} GB/s = {:3.0}% of the probe's {ceiling:4.1} GB/s ({} calls, {} probes)",
                     100.0 * rate / ceiling, own.1, probe.1);
        }
    }
}

fn bench_gemv(c: &mut Criterion) {
    let (_, k, n) = GEMV;
    let rec = Recorded::default();
    const READ_BYTES: usize = 256 << 20;
    let probe_data = float_values(READ_BYTES / 4);
    // the read ceiling of bench_ceilings: eight streams per thread, 2 threads
    let read_probe = || {
        std::thread::scope(|s| {
            for part in probe_data.chunks(probe_data.len() / 2) {
                // SAFETY: AVX2 is checked before this closure is handed out.
                s.spawn(move || black_box(unsafe { read_sum(part) }));
            }
        })
    };
    #[cfg(target_arch = "x86_64")]
    let has_avx2 = std::is_x86_feature_detected!("avx2");
    #[cfg(not(target_arch = "x86_64"))]
    let has_avx2 = false;
    let probe: Option<&dyn Fn()> = if has_avx2 { Some(&read_probe) } else { None };

    let mut g = c.benchmark_group("gemv");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(10);
    if let Some(p) = probe {
        g.throughput(Throughput::Bytes(READ_BYTES as u64));
        g.bench_function(BenchmarkId::new("read_probe_threads=2", READ_BYTES), |bch| {
            rec.time("gemv/read_probe_threads=2", bch, p, None)
        });
    }
    let mut sizes = BTreeMap::new();
    sizes.insert("gemv/read_probe_threads=2".to_string(), READ_BYTES as u64);
    for dtype in BenchDtype::ALL {
        for nk in [false, true] {
            let case = Case::new(dtype, GEMV, nk, 2);
            let bytes = (k * n) as u64 * if dtype == BenchDtype::F32 { 4 } else { 2 };
            g.throughput(Throughput::Bytes(bytes));
            let id = format!("{}_{}_threads=2", dtype.name(), if nk { "nk" } else { "kn" });
            let key = format!("gemv/{id}");
            sizes.insert(key.clone(), bytes);
            g.bench_function(BenchmarkId::new(id, shape_id(GEMV)), |bch| rec.time(&key, bch, || case.run(), probe));
        }
    }
    g.finish();

    let mut g = c.benchmark_group("gemv_peer");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(10);
    let x = float_values(k as usize);
    let w = float_values((k * n) as usize);
    let mut y = vec![0f32; n as usize];
    let bytes = (k * n) as u64 * 4;
    g.throughput(Throughput::Bytes(bytes));
    for nk in [false, true] {
        let id = format!("openblas_sgemv_f32_{}_threads=2", if nk { "nk" } else { "kn" });
        let key = format!("gemv_peer/{id}");
        sizes.insert(key.clone(), bytes);
        g.bench_function(BenchmarkId::new(id, shape_id(GEMV)), |bch| {
            // SAFETY: FFI into OpenBLAS; w is [k, n] (kn: y = w^T x) or [n, k] (nk: y = w x).
            unsafe { openblas_set_num_threads(2) };
            let sgemv = || unsafe {
                if nk {
                    cblas_sgemv(ROW_MAJOR, NO_TRANS, n as c_int, k as c_int, 1.0, w.as_ptr(), k as c_int,
                                x.as_ptr(), 1, 0.0, y.as_mut_ptr(), 1);
                } else {
                    cblas_sgemv(ROW_MAJOR, TRANS, k as c_int, n as c_int, 1.0, w.as_ptr(), n as c_int,
                                x.as_ptr(), 1, 0.0, y.as_mut_ptr(), 1);
                }
                black_box(&mut y);
            };
            rec.time(&key, bch, sgemv, probe)
        });
    }
    g.finish();
    rec.report(|id| sizes[id], READ_BYTES as u64);
}

fn bench_ceilings(c: &mut Criterion) {
    #[cfg(target_arch = "x86_64")]
    {
        let has = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
        if !has {
            eprintln!("SKIPPED: ceilings need AVX2+FMA");
            return;
        }
        const ITERS: u64 = 1 << 20; // 12 x 8 x 2 FLOPs each
        let mut g = c.benchmark_group("ceiling");
        g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2)).sample_size(20);
        for threads in [1u64, 2] {
            g.throughput(Throughput::Elements(threads * ITERS * 12 * 8 * 2));
            g.bench_function(BenchmarkId::new(format!("fma_f32_threads={threads}"), ITERS), |bch| {
                bch.iter(|| {
                    std::thread::scope(|s| {
                        for _ in 0..threads {
                            // SAFETY: AVX2+FMA checked above.
                            s.spawn(|| black_box(unsafe { fma_chains(ITERS) }));
                        }
                    })
                })
            });
        }
        const READ_BYTES: usize = 256 << 20;
        let data = float_values(READ_BYTES / 4);
        g.throughput(Throughput::Bytes(READ_BYTES as u64));
        for threads in [1usize, 2] {
            g.bench_function(BenchmarkId::new(format!("read_threads={threads}"), READ_BYTES), |bch| {
                bch.iter(|| {
                    std::thread::scope(|s| {
                        for part in data.chunks(data.len() / threads) {
                            // SAFETY: AVX2 checked above.
                            s.spawn(move || black_box(unsafe { read_sum(part) }));
                        }
                    })
                })
            });
        }
        g.finish();
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = c;
}

/// A block-quantized weight [n, k] with its descriptor (the buffer must stay where it is).
struct QWeight {
    bytes: Vec<u8>,
    q: sys::fer_qmatrix,
}

impl QWeight {
    fn new(bytes: Vec<u8>, dtype: i32, n: i64, k: i64, block_bytes: i64) -> QWeight {
        let q = sys::fer_qmatrix {
            data: bytes.as_ptr().cast(),
            bytes: bytes.len() as u64,
            dtype,
            reserved: 0,
            rows: n,
            cols: k,
            row_stride: k / 32 * block_bytes,
        };
        QWeight { bytes, q }
    }
}

fn bench_mxfp4(c: &mut Criterion) {
    let mut g = c.benchmark_group("block_quantized_matmul_cached_dense");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2)).sample_size(15);
    let pool = Pool::new(2);
    for (m, k, n) in [(1i64, 1024i64, 1024i64), (1, 4096, 14336)] {
        let w = QWeight::new(mxfp4_weight(n as usize, k as usize), sys::FER_DTYPE_MXFP4 as i32, n, k, 17);
        let mut a = Buffer::from_f32(&float_values(k as usize), BenchDtype::F32);
        let mut out = Buffer::zeroed(n as usize, BenchDtype::F32);
        let mut dense = Buffer::zeroed((n * k) as usize, BenchDtype::F32);
        let (ta, to, td) = (a.tensor(&[m, k]), out.tensor(&[m, n]), dense.tensor(&[n, k]));
        let nk = sys::FER_MATMUL_B_NK as sys::fer_matmul_b_layout;
        let id = shape_id((m, k, n));
        let null = std::ptr::null_mut();
        // SAFETY (all closures below): descriptors point into buffers alive for the whole group.
        g.bench_function(BenchmarkId::new("mxfp4_uncached_dequant_each_call", &id), |bch| {
            bch.iter(|| unsafe {
                ok(sys::fer_dequantize(pool.ptr(), &w.q, &td));
                ok(sys::fer_matmul(pool.ptr(), &ta, &td, nk, &to, null, 0));
            })
        });
        let mut cache = std::ptr::null_mut();
        // SAFETY: valid out-pointer; no governor.
        ok(unsafe { sys::fer_dense_cache_create(1 << 31, null as _, &mut cache) });
        let cached = |pool: &Pool| unsafe {
            let mut p: *const f32 = std::ptr::null();
            ok(sys::fer_dense_cache_get(cache, pool.ptr(), 7, &w.q, 0, &mut p));
            let tb = ferrite_benches::contiguous(p as *mut _, sys::FER_DTYPE_F32 as i32, &[n, k]);
            ok(sys::fer_matmul(pool.ptr(), &ta, &tb, nk, &to, null, 0));
        };
        cached(&pool); // pre-warmed, as the original's constant-input path
        g.bench_function(BenchmarkId::new("mxfp4_cached_dense_repeated_call", &id), |bch| bch.iter(|| cached(&pool)));
        // SAFETY: the cache is not used after this.
        unsafe { sys::fer_dense_cache_free(cache) };
        // SAFETY: fills the dense weight once.
        ok(unsafe { sys::fer_dequantize(pool.ptr(), &w.q, &td) });
        g.bench_function(BenchmarkId::new("mxfp4_preexpanded_dense_oncelock_like_proxy", &id), |bch| {
            bch.iter(|| ok(unsafe { sys::fer_matmul(pool.ptr(), &ta, &td, nk, &to, null, 0) }))
        });
        g.bench_function(BenchmarkId::new("mxfp4_fused", &id), |bch| {
            bch.iter(|| ok(unsafe { sys::fer_matmul_quant(pool.ptr(), &ta, &w.q, &to, null, 0) }))
        });
        g.bench_function(BenchmarkId::new("mxfp4_fused_i8", &id), |bch| {
            bch.iter(|| ok(unsafe { sys::fer_matmul_quant_i8(pool.ptr(), &ta, &w.q, &to, null, 0) }))
        });
        black_box(&w.bytes);
    }
    g.finish();
}

/// GGUF blocks with a fixed pattern: f16 scales 1/64 (and minimum -1/8 for Q4_1), codes from the
/// position (every nibble and int8 value occurs).
fn gguf_weight(dtype: i32, block_bytes: usize, n: usize, k: usize) -> Vec<u8> {
    let blocks = n * k / 32;
    let mut v = vec![0u8; blocks * block_bytes];
    let d = half::f16::from_f32(1.0 / 64.0).to_bits().to_le_bytes();
    let m = half::f16::from_f32(-0.125).to_bits().to_le_bytes();
    for (b, blk) in v.chunks_mut(block_bytes).enumerate() {
        blk[..2].copy_from_slice(&d);
        let start = if dtype == sys::FER_DTYPE_Q4_1 as i32 {
            blk[2..4].copy_from_slice(&m);
            4
        } else {
            2
        };
        for (i, x) in blk[start..].iter_mut().enumerate() {
            *x = ((b * 7 + i * 13) % 256) as u8;
        }
    }
    v
}

fn bench_gguf_gemv(c: &mut Criterion) {
    let mut g = c.benchmark_group("gguf_gemv");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2)).sample_size(15);
    let pool = Pool::new(2);
    let null = std::ptr::null_mut();
    for (k, n) in [(576i64, 1536i64), (4096, 4096)] {
        let mut a = Buffer::from_f32(&float_values(k as usize), BenchDtype::F32);
        let mut out = Buffer::zeroed(n as usize, BenchDtype::F32);
        let (ta, to) = (a.tensor(&[1, k]), out.tensor(&[1, n]));
        let id = shape_id((1, k, n));
        for (name, dtype, bb) in [("q4_0", sys::FER_DTYPE_Q4_0, 18usize), ("q4_1", sys::FER_DTYPE_Q4_1, 20), ("q8_0", sys::FER_DTYPE_Q8_0, 34)] {
            let w = QWeight::new(gguf_weight(dtype as i32, bb, n as usize, k as usize), dtype as i32, n, k, bb as i64);
            g.throughput(Throughput::Bytes(w.bytes.len() as u64));
            g.bench_function(BenchmarkId::new(format!("{name}_threads=2"), &id), |bch| {
                // SAFETY: descriptors over buffers alive for the closure.
                bch.iter(|| ok(unsafe { sys::fer_matmul_quant(pool.ptr(), &ta, &w.q, &to, null, 0) }))
            });
            g.bench_function(BenchmarkId::new(format!("{name}_i8_threads=2"), &id), |bch| {
                // SAFETY: as above.
                bch.iter(|| ok(unsafe { sys::fer_matmul_quant_i8(pool.ptr(), &ta, &w.q, &to, null, 0) }))
            });
        }
        let dense = Case::new(BenchDtype::F32, (1, k, n), true, 2);
        g.throughput(Throughput::Bytes((n * k * 4) as u64));
        g.bench_function(BenchmarkId::new("f32_threads=2", &id), |bch| bch.iter(|| dense.run()));
    }
    g.finish();
}

/// The original MoE scenario (A.1): rows=1, H=256, I=256, E=4, top_k=1, identity activation,
/// router logits [4, -1, -2, -3] (expert 0 always), fc1 and fc2 u8 [4, 256, 8, 17].
fn bench_moe(c: &mut Criterion) {
    let mut g = c.benchmark_group("block_quantized_moe_cached_dense");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2)).sample_size(15);
    let (h, i, e) = (256i64, 256i64, 4i64);
    let fc1 = QWeight::new(mxfp4_weight((e * i) as usize, h as usize), sys::FER_DTYPE_MXFP4 as i32, e * i, h, 17);
    let fc2 = QWeight::new(mxfp4_weight((e * h) as usize, i as usize), sys::FER_DTYPE_MXFP4 as i32, e * h, i, 17);
    let mut x = Buffer::from_f32(&float_values(h as usize), BenchDtype::F32);
    let mut logits = Buffer::from_f32(&[4.0, -1.0, -2.0, -3.0], BenchDtype::F32);
    let mut out = Buffer::zeroed(h as usize, BenchDtype::F32);
    let (tx, tl, to) = (x.tensor(&[1, h]), logits.tensor(&[1, e]), out.tensor(&[1, h]));
    let mut cache = std::ptr::null_mut();
    // SAFETY: valid out-pointer; no governor.
    ok(unsafe { sys::fer_dense_cache_create(1 << 26, std::ptr::null_mut(), &mut cache) });
    let id = "rows=1,H=256,I=256,E=4,top_k=1";
    for (name, strategy) in [
        ("mxfp4_uncached_expert_dequant_each_call", sys::FER_MOE_DEQUANT_EACH_CALL),
        ("mxfp4_cached_dense_expert_repeated_call", sys::FER_MOE_CACHED_DENSE),
        ("mxfp4_fused", sys::FER_MOE_FUSED),
    ] {
        // SAFETY: plain-data struct filled by init.
        let mut p: sys::fer_moe_params = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointer.
        ok(unsafe { sys::fer_moe_params_init(&mut p) });
        p.strategy = strategy as i32;
        p.cache = cache;
        // SAFETY: descriptors over buffers alive for the group; the first call pre-warms the cache.
        let call = || ok(unsafe { sys::fer_moe(std::ptr::null_mut(), &tx, &tl, &fc1.q, &fc2.q, &p, &to) });
        call();
        g.bench_function(BenchmarkId::new(name, id), |b| b.iter(call));
    }
    // SAFETY: no call uses the cache after this.
    unsafe { sys::fer_dense_cache_free(cache) };
    g.finish();
}

criterion_group!(benches, bench_ceilings, bench_matmul, bench_openblas, bench_gemv, bench_mxfp4, bench_gguf_gemv, bench_moe);

// criterion_main!, with OpenBLAS first given the kernel its users would pick for this CPU
// (ferrite_benches::openblas) and its core printed beside the numbers.
fn main() {
    ferrite_benches::openblas::best_core();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
