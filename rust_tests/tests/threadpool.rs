//! fer_threadpool: options, creation with any thread count, ISA reporting, and BUSY on concurrent
//! entry (C-POOL-001).

mod common;

use common::*;
use ferrite::status::*;
use ferrite::sys::{self, fer_threadpool, fer_threadpool_options};
use ferrite::{isa, PoolOptions, TensorMut, TensorRef, ThreadPool};
use std::ptr::{null, null_mut, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn raw_create(opts: &fer_threadpool_options) -> (i32, *mut fer_threadpool) {
    // A non-NULL garbage value, to see it replaced by NULL on failure.
    let mut out: *mut fer_threadpool = NonNull::dangling().as_ptr();
    // SAFETY: valid pointers.
    let st = unsafe { sys::fer_threadpool_create(opts, &mut out) };
    (st, out)
}

/// A small add run on `pool`, checked against the NULL-pool result.
fn pool_works(pool: &mut ThreadPool) {
    let a: Vec<f32> = gen_values(3, 70_000, Values::Any);
    let b: Vec<f32> = gen_values(4, 70_000, Values::Any);
    let mut want = vec![0f32; 70_000];
    let mut got = vec![0f32; 70_000];
    let (av, bv) = (
        TensorRef::new(&a, &[7, 10_000]).unwrap(),
        TensorRef::new(&b, &[7, 10_000]).unwrap(),
    );
    ferrite::add(
        None,
        &av,
        &bv,
        &mut TensorMut::new(&mut want, &[7, 10_000]).unwrap(),
    )
    .unwrap();
    ferrite::add(
        Some(pool),
        &av,
        &bv,
        &mut TensorMut::new(&mut got, &[7, 10_000]).unwrap(),
    )
    .unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert!(g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()));
    }
}

// EVIDENCE: C-POOL-001
#[test]
fn c_pool_001_options_init_defaults() {
    let mut o = fer_threadpool_options {
        struct_size: 1,
        n_threads: 77,
        isa: 9,
        reserved: 5,
    };
    // SAFETY: valid pointer.
    assert_eq!(unsafe { sys::fer_threadpool_options_init(&mut o) }, OK);
    assert_eq!(
        o.struct_size as usize,
        std::mem::size_of::<fer_threadpool_options>()
    );
    assert_eq!((o.n_threads, o.isa, o.reserved), (0, isa::AUTO, 0));
    assert_message_clear("options_init");
}

// EVIDENCE: C-POOL-001
#[test]
fn c_pool_001_any_thread_count_runs() {
    for n in [1u32, 2, 5, 64] {
        let mut pool = ThreadPool::new(n, isa::AUTO).unwrap_or_else(|e| panic!("{n} threads: {e}"));
        assert_eq!(pool.n_threads().unwrap(), n);
        pool_works(&mut pool);
    }
    // 0 means one per online CPU; NULL options are the defaults
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    let pool = ThreadPool::new(0, isa::AUTO).unwrap();
    assert_eq!(pool.n_threads().unwrap(), cpus.min(1024));
    let mut pool = ThreadPool::with_options(None).unwrap();
    assert_eq!(pool.n_threads().unwrap(), cpus.min(1024));
    assert_ne!(
        pool.isa().unwrap(),
        isa::AUTO,
        "a pool reports the level it resolved to"
    );
    pool_works(&mut pool);
}

// EVIDENCE: C-POOL-001
#[test]
fn c_pool_001_too_many_threads_refused_out_null() {
    let mut o: PoolOptions = ferrite::pool::options_init().unwrap();
    for n in [1025u32, 5000, u32::MAX] {
        o.n_threads = n;
        let (st, out) = raw_create(&o);
        assert_eq!(st, INVALID_ARG, "n_threads {n}");
        assert!(
            out.is_null(),
            "n_threads {n}: *out_pool not NULL on failure"
        );
        assert_message_set("n_threads above 1024");
    }
}

// EVIDENCE: C-POOL-001
#[test]
fn c_pool_001_struct_size_too_small_refused() {
    let mut o: PoolOptions = ferrite::pool::options_init().unwrap();
    for size in [0u32, 4, 8, 15] {
        o.struct_size = size;
        let (st, out) = raw_create(&o);
        assert_eq!(st, INVALID_ARG, "struct_size {size}");
        assert!(out.is_null());
        assert_message_set("struct_size too small");
    }
}

// EVIDENCE: C-POOL-001, C-MM-101
#[test]
fn c_pool_001_isa_levels() {
    let has_avx2 = ferrite::cpu_has_avx2_level();
    let has_avx512 = ferrite::cpu_has_avx512_level();
    let auto = ThreadPool::new(1, isa::AUTO).unwrap();
    assert_eq!(
        auto.isa().unwrap(),
        if has_avx512 {
            isa::AVX512
        } else if has_avx2 {
            isa::AVX2
        } else {
            isa::PORTABLE
        },
        "AUTO resolves to the best level"
    );
    let portable = ThreadPool::new(2, isa::PORTABLE).unwrap();
    assert_eq!(portable.isa().unwrap(), isa::PORTABLE);
    match ThreadPool::new(2, isa::AVX2) {
        Ok(mut p) => {
            assert!(has_avx2, "AVX2 pool created on a CPU without AVX2+FMA+F16C");
            assert_eq!(p.isa().unwrap(), isa::AVX2);
            pool_works(&mut p);
        }
        Err(e) => {
            assert!(!has_avx2, "AVX2 refused on a CPU that has it: {e}");
            assert_eq!(e.code, UNSUPPORTED);
            eprintln!("SKIPPED: FER_ISA_AVX2 pool (CPU lacks AVX2|FMA|F16C)");
        }
    }
    match ThreadPool::new(2, isa::AVX512) {
        Ok(mut p) => {
            assert!(has_avx512, "AVX512 pool created on a CPU without AVX-512 F/BW/VL/DQ");
            assert_eq!(p.isa().unwrap(), isa::AVX512);
            pool_works(&mut p);
        }
        Err(e) => {
            assert!(!has_avx512, "AVX512 refused on a CPU that has it: {e}");
            assert_eq!(e.code, UNSUPPORTED);
            eprintln!("SKIPPED: FER_ISA_AVX512 pool (CPU lacks AVX-512 F/BW/VL/DQ; UNSUPPORTED checked)");
        }
    }
    let mut o: PoolOptions = ferrite::pool::options_init().unwrap();
    for bad in [4, -1, 99] {
        o.isa = bad;
        let (st, out) = raw_create(&o);
        assert_eq!(st, INVALID_ARG, "isa {bad}");
        assert!(out.is_null());
    }
}

// EVIDENCE: C-POOL-001 (fer_cpu_features agrees with the CPU as Rust's std sees it)
#[test]
fn c_pool_001_cpu_features_match_std_detection() {
    let f = ferrite::cpu_features();
    assert_eq!(f, ferrite::cpu_features(), "detected once, stable");
    #[cfg(target_arch = "x86_64")]
    {
        use ferrite::cpu;
        let pairs = [
            (cpu::SSE42, std::is_x86_feature_detected!("sse4.2")),
            (cpu::AVX, std::is_x86_feature_detected!("avx")),
            (cpu::AVX2, std::is_x86_feature_detected!("avx2")),
            (cpu::FMA, std::is_x86_feature_detected!("fma")),
            (cpu::F16C, std::is_x86_feature_detected!("f16c")),
            (cpu::AVX512F, std::is_x86_feature_detected!("avx512f")),
            (cpu::AVX512BW, std::is_x86_feature_detected!("avx512bw")),
            (cpu::AVX512VL, std::is_x86_feature_detected!("avx512vl")),
            (cpu::AVX512DQ, std::is_x86_feature_detected!("avx512dq")),
        ];
        for (bit, std_says) in pairs {
            assert_eq!(
                f & bit != 0,
                std_says,
                "feature bit {bit:#x}: fer_cpu_features {f:#x}"
            );
        }
    }
}

// EVIDENCE: C-POOL-001
#[test]
fn c_pool_001_free_null_is_a_noop_and_pool_is_send() {
    // SAFETY: NULL is documented as a no-op.
    unsafe { sys::fer_threadpool_free(null_mut()) };
    let pool = ThreadPool::new(3, isa::AUTO).unwrap();
    // The pool moves to another thread, runs there, and is freed there.
    std::thread::spawn(move || {
        let mut pool = pool;
        pool_works(&mut pool);
    })
    .join()
    .unwrap();
    let _ = null::<u8>();
}

/// A pool pointer shared by two threads on purpose (the safe layer forbids this).
#[derive(Clone, Copy)]
struct SharedPool(*mut fer_threadpool);
// SAFETY: ferrite.h: "one call at a time per pool; a second thread entering a pool that is running
// gets FER_STATUS_BUSY" -- concurrent entry is defined behaviour, which is what this test checks.
unsafe impl Send for SharedPool {}

/// One thread's loop: fer_add, fer_reduce_mean or fer_gather on its own buffers, `iters` times.
/// Every call must return OK or BUSY; OK must give the right result; BUSY must write nothing.
fn hammer(pool: SharedPool, seed: u64, iters: usize, busy: Arc<AtomicUsize>) {
    let (rows, cols) = (64usize, 1024usize);
    let a: Vec<f32> = gen_values(
        seed,
        rows * cols,
        Values::Moderate {
            special_permille: 0,
        },
    );
    let b: Vec<f32> = gen_values(
        seed + 1,
        cols,
        Values::Moderate {
            special_permille: 0,
        },
    );
    let idx: Vec<i64> = (0..rows as i64).rev().collect();
    let want_add: Vec<f32> = (0..rows * cols).map(|i| a[i] + b[i % cols]).collect();
    let mut want_mean = vec![0f32; rows];
    ferrite::reduce_mean(
        None,
        &TensorRef::new(&a, &[rows as i64, cols as i64]).unwrap(),
        &mut TensorMut::new(&mut want_mean, &[rows as i64, 1]).unwrap(),
    )
    .unwrap();
    let mut out = vec![0f32; rows * cols];
    for it in 0..iters {
        out.iter_mut().for_each(|v| *v = sentinel::<f32>());
        let kind = (it + seed as usize) % 3;
        let st = {
            let av = TensorRef::new(&a, &[rows as i64, cols as i64]).unwrap();
            match kind {
                0 => {
                    let bv = TensorRef::new(&b, &[cols as i64]).unwrap();
                    let ov = TensorMut::new(&mut out, &[rows as i64, cols as i64]).unwrap();
                    // SAFETY: views over live buffers; the pool outlives both threads.
                    unsafe { sys::fer_add(pool.0, av.raw(), bv.raw(), ov.raw()) }
                }
                1 => {
                    let ov = TensorMut::new(&mut out[..rows], &[rows as i64, 1]).unwrap();
                    // SAFETY: as above.
                    unsafe { sys::fer_reduce_mean(pool.0, av.raw(), ov.raw()) }
                }
                _ => {
                    let iv = TensorRef::new(&idx, &[rows as i64]).unwrap();
                    let ov = TensorMut::new(&mut out, &[rows as i64, cols as i64]).unwrap();
                    // SAFETY: as above.
                    unsafe { sys::fer_gather(pool.0, av.raw(), iv.raw(), ov.raw()) }
                }
            }
        };
        match st {
            OK => match kind {
                0 => assert!(
                    out.iter()
                        .zip(&want_add)
                        .all(|(g, w)| g.to_bits() == w.to_bits()),
                    "add result wrong under contention"
                ),
                1 => assert_eq!(
                    &out[..rows],
                    &want_mean[..],
                    "mean result wrong under contention"
                ),
                _ => {
                    for r in 0..rows {
                        assert_eq!(
                            &out[r * cols..(r + 1) * cols],
                            &a[(rows - 1 - r) * cols..(rows - r) * cols],
                            "gather row {r} wrong under contention"
                        );
                    }
                }
            },
            BUSY => {
                busy.fetch_add(1, Ordering::Relaxed);
                assert!(
                    out.iter()
                        .all(|v| v.to_bits() == sentinel::<f32>().to_bits()),
                    "a BUSY call wrote"
                );
                assert_message_set("BUSY");
            }
            other => panic!(
                "concurrent entry returned {other} ({}): {}",
                ferrite::status_str(other),
                ferrite::last_error_message()
            ),
        }
    }
}

// EVIDENCE: C-POOL-001 (a second thread entering a running pool gets BUSY; results stay right)
#[test]
fn c_pool_001_concurrent_entry_ok_or_busy() {
    for n_threads in [2u32, 3] {
        let mut pool = ThreadPool::new(n_threads, isa::AUTO).unwrap();
        let shared = SharedPool(pool.as_ptr());
        let busy = Arc::new(AtomicUsize::new(0));
        let iters = 150;
        let handles: Vec<_> = (0..2u64)
            .map(|t| {
                let busy = busy.clone();
                std::thread::spawn(move || hammer(shared, 100 + t, iters, busy))
            })
            .collect();
        for h in handles {
            h.join().expect("hammer thread");
        }
        eprintln!(
            "pool of {n_threads}: {} of {} calls answered BUSY",
            busy.load(Ordering::Relaxed),
            2 * iters
        );
        // Still usable afterwards.
        pool_works(&mut pool);
    }
}

// EVIDENCE: C-POOL-001 (BUSY is really answered: a second thread keeps entering a pool while a
// long call runs on it; retried a few times so scheduling cannot make the test flaky)
#[test]
fn c_pool_001_busy_while_another_thread_runs() {
    use std::sync::atomic::AtomicBool;
    let mut pool = ThreadPool::new(2, isa::AUTO).unwrap();
    let shared = SharedPool(pool.as_ptr());
    let (rows, cols) = (2048i64, 4096i64);
    let a = vec![1.0f32; (rows * cols) as usize];
    let mut out = vec![0f32; (rows * cols) as usize];
    let small = [1.0f32; 4];
    for attempt in 0..20 {
        let running = Arc::new(AtomicBool::new(true));
        let r2 = running.clone();
        let prober = std::thread::spawn(move || {
            let shared = shared; // capture the whole Send wrapper, not its raw field
            let mut o = [0f32; 4];
            let mut seen = [0usize; 2]; // [ok, busy]
            while r2.load(Ordering::Acquire) {
                let t = TensorRef::new(&small, &[4]).unwrap();
                let ov = TensorMut::new(&mut o, &[4]).unwrap();
                // SAFETY: live buffers; the pool outlives this thread (joined below).
                match unsafe { sys::fer_add(shared.0, t.raw(), t.raw(), ov.raw()) } {
                    OK => seen[0] += 1,
                    BUSY => seen[1] += 1,
                    other => panic!("unexpected status {other}"),
                }
            }
            seen
        });
        for _ in 0..5 {
            let av = TensorRef::new(&a, &[rows, cols]).unwrap();
            let mut ov = TensorMut::new(&mut out, &[rows, cols]).unwrap();
            // the prober may hold the pool for a moment: BUSY is a valid answer here too
            match ferrite::add(Some(&mut pool), &av, &av, &mut ov) {
                Ok(()) => {}
                Err(e) => assert_eq!(e.code, BUSY, "{e}"),
            }
        }
        running.store(false, Ordering::Release);
        let [ok, busy] = prober.join().unwrap();
        if busy > 0 {
            eprintln!(
                "attempt {attempt}: the second thread got BUSY {busy} times and OK {ok} times"
            );
            return;
        }
    }
    panic!("20 attempts and a second thread never saw BUSY on a running pool");
}
