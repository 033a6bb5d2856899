//! matmul-ab: f32 matmul A/B in one process, ferrite at FER_ISA_AVX512 against OpenBLAS's
//! `cblas_sgemm` and ferrite at FER_ISA_AVX2, interleaved: each round runs a block of calls of
//! each side (the order rotating from round to round) and keeps the block's median; the report is
//! the median over rounds of the per-round ratios, with the quartiles, and each side's fastest
//! call. On a shared machine only these same-run ratios mean anything (C-MM-103).
//!
//! Usage: matmul-ab M K N LAYOUT THREADS [ROUNDS] [CALLS]
//!   LAYOUT kn (B [K, N]) or nk (B [N, K], a weight as stored); ROUNDS 21, CALLS 10 by default.
//!   OpenBLAS runs with the best kernel it has for the CPU (ferrite_benches::openblas: where
//!   its DYNAMIC_ARCH build does not know the CPU, OPENBLAS_CORETYPE is set as a user would).
//! A level the CPU lacks is reported and its side skipped.
//! EVIDENCE: C-MM-103

use ferrite_benches::float_values;
use ferrite_sys as sys;
use std::os::raw::c_int;
use std::time::Instant;

#[link(name = "openblas")]
extern "C" {
    fn cblas_sgemm(
        order: c_int, ta: c_int, tb: c_int, m: c_int, n: c_int, k: c_int, alpha: f32,
        a: *const f32, lda: c_int, b: *const f32, ldb: c_int, beta: f32, c: *mut f32, ldc: c_int,
    );
    fn openblas_set_num_threads(n: c_int);
}

fn pool(threads: u32, isa: sys::fer_isa) -> Option<*mut sys::fer_threadpool> {
    // SAFETY: opts and p are valid out-pointers; create reads opts and writes the handle.
    unsafe {
        let mut opts: sys::fer_threadpool_options = std::mem::zeroed();
        assert_eq!(sys::fer_threadpool_options_init(&mut opts), 0);
        opts.n_threads = threads;
        opts.isa = isa;
        let mut p = std::ptr::null_mut();
        (sys::fer_threadpool_create(&opts, &mut p) == 0).then_some(p)
    }
}

fn tensor(data: *mut f32, rows: i64, cols: i64) -> sys::fer_tensor {
    // SAFETY: fer_tensor is plain data; all-zero is a valid starting value.
    let mut t: sys::fer_tensor = unsafe { std::mem::zeroed() };
    t.data = data.cast();
    t.dtype = sys::FER_DTYPE_F32 as i32;
    t.rank = 2;
    t.shape[0] = rows;
    t.shape[1] = cols;
    t.strides[0] = cols * 4;
    t.strides[1] = 4;
    t
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    ferrite_benches::openblas::best_core();
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 || !(args[4] == "kn" || args[4] == "nk") {
        eprintln!("usage: matmul-ab M K N kn|nk THREADS [ROUNDS] [CALLS]");
        std::process::exit(2);
    }
    let num = |i: usize, d: usize| args.get(i).map_or(d, |s| s.parse().expect("a number"));
    let (m, k, n, nk, threads) = (num(1, 0), num(2, 0), num(3, 0), args[4] == "nk", num(5, 2));
    let (rounds, calls) = (num(6, 21).max(1), num(7, 10).max(1));
    let a = float_values(m * k);
    let b = float_values(k * n);
    let mut c = vec![0f32; m * n];
    let (m_, k_, n_) = (m as i64, k as i64, n as i64);
    let ta = tensor(a.as_ptr() as *mut f32, m_, k_);
    let tb = if nk { tensor(b.as_ptr() as *mut f32, n_, k_) } else { tensor(b.as_ptr() as *mut f32, k_, n_) };
    let to = tensor(c.as_mut_ptr(), m_, n_);
    let layout = if nk { sys::FER_MATMUL_B_NK } else { sys::FER_MATMUL_B_KN } as sys::fer_matmul_b_layout;
    let names = ["ferrite AVX512", "OpenBLAS", "ferrite AVX2"];
    let pools = [pool(threads as u32, sys::FER_ISA_AVX512 as i32), None, pool(threads as u32, sys::FER_ISA_AVX2 as i32)];
    for (i, p) in pools.iter().enumerate() {
        if i != 1 && p.is_none() {
            println!("SKIPPED: {} (this CPU lacks the level)", names[i]);
        }
    }
    // SAFETY: plain setter.
    unsafe { openblas_set_num_threads(threads as c_int) };
    let run = |side: usize, c: *mut f32| {
        // SAFETY: every pointer spans its matrix; the tensors describe the same buffers.
        unsafe {
            if side == 1 {
                let tb_ = if nk { 112 } else { 111 };
                let ldb = if nk { k } else { n } as c_int;
                cblas_sgemm(101, 111, tb_, m as c_int, n as c_int, k as c_int, 1.0, a.as_ptr(), k as c_int,
                            b.as_ptr(), ldb, 0.0, c, n as c_int);
            } else {
                let st = sys::fer_matmul(pools[side].unwrap(), &ta, &tb, layout, &to, std::ptr::null_mut(), 0);
                assert_eq!(st, 0, "fer_matmul refused the benchmark input");
            }
        }
    };
    let sides: Vec<usize> = (0..3).filter(|&s| s == 1 || pools[s].is_some()).collect();
    let mut med = vec![Vec::new(); 3];
    let mut best = [f64::INFINITY; 3];
    let cp = c.as_mut_ptr();
    for r in 0..rounds {
        for i in 0..sides.len() {
            let s = sides[(i + r) % sides.len()];
            let mut t = Vec::with_capacity(calls);
            for call in 0..calls + 2 {
                let t0 = Instant::now();
                run(s, cp);
                let dt = t0.elapsed().as_secs_f64();
                if call >= 2 {
                    t.push(dt); // the first two warm the caches and wake the other side's threads
                }
            }
            let mm = median(&mut t);
            best[s] = best[s].min(t[0]);
            med[s].push(mm);
        }
    }
    let flops = 2.0 * (m * n * k) as f64;
    println!("{m}x{k}x{n} B {} threads={threads} rounds={rounds} calls={calls}", if nk { "[N, K]" } else { "[K, N]" });
    for &s in &sides {
        let mut v = med[s].clone();
        let mm = median(&mut v);
        println!("  {:15} median of round medians {:9.1} us ({:6.1} GFLOP/s), fastest call {:9.1} us",
                 names[s], mm * 1e6, flops / mm / 1e9, best[s] * 1e6);
    }
    let ratio = |x: usize, y: usize| {
        let mut v: Vec<f64> = med[x].iter().zip(&med[y]).map(|(a, b)| a / b).collect();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        (v[v.len() / 2], v[v.len() / 4], v[(3 * v.len()) / 4])
    };
    for (x, y) in [(1, 0), (2, 0), (1, 2)] {
        if sides.contains(&x) && sides.contains(&y) {
            let (md, q1, q3) = ratio(x, y);
            println!("  time {} / {}: {md:.3} (quartiles {q1:.3}..{q3:.3})", names[x], names[y]);
        }
    }
}
