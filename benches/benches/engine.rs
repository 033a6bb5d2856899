//! Engine benchmarks on the real model (SmolLM2-135M-Instruct Q4_1; SKIPPED when the setup script
//! has not fetched it), through the public ABI on a 2-thread engine:
//! - `engine/decode_batch/seqs=N`: one batched decode step of N sequences (N = 1 runs the single
//!   sequence's captured decode plan), each 32 tokens into its context; throughput in tokens, so
//!   the batched step's gain over one sequence is the ratio of the rates (weights read once for N
//!   tokens);
//! - `engine/prefill/tokens=512`: a 512-token prompt from position 0 (rewound outside the timer).
//! The same-run comparison with llama.cpp is `scripts/model/bench_engine.sh`.
//! EVIDENCE: C-ENG-020

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferrite_sys as sys;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn model_path() -> Option<PathBuf> {
    let dir = std::env::var_os("FERRITE_DATA_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/ferrite")))?;
    let p = dir.join("smollm2-135m-instruct-q4_1.gguf");
    p.exists().then_some(p)
}

struct Engine(*mut sys::fer_engine);

impl Drop for Engine {
    fn drop(&mut self) {
        // SAFETY: created by fer_engine_create; every sequence was freed before.
        unsafe { sys::fer_engine_free(self.0) };
    }
}

struct Seq(*mut sys::fer_engine_seq);

impl Drop for Seq {
    fn drop(&mut self) {
        // SAFETY: created by fer_engine_seq_create on a live engine; freed once.
        unsafe { sys::fer_engine_seq_free(self.0) };
    }
}

fn engine(path: &std::path::Path) -> Engine {
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: plain-data struct filled by the init call.
    let mut cfg: sys::fer_engine_config = unsafe { std::mem::zeroed() };
    let mut e = std::ptr::null_mut();
    // SAFETY: cfg is valid; the path outlives the call (the engine copies it); e is an out-pointer.
    unsafe {
        assert_eq!(sys::fer_engine_config_init(&mut cfg), 0);
        cfg.model_path = c_path.as_ptr();
        cfg.n_threads = 2;
        cfg.max_seqs = 8;
        assert_eq!(sys::fer_engine_create(&cfg, &mut e), 0);
    }
    Engine(e)
}

fn seq(e: &Engine, max_tokens: u32) -> Seq {
    let mut s = std::ptr::null_mut();
    // SAFETY: live engine; s is an out-pointer.
    assert_eq!(unsafe { sys::fer_engine_seq_create(e.0, max_tokens, &mut s) }, 0);
    Seq(s)
}

fn prefill(s: &Seq, ids: &[i32]) {
    // SAFETY: ids valid for its length; no logits wanted (NULL, 0).
    assert_eq!(unsafe { sys::fer_engine_prefill(s.0, ids.as_ptr(), ids.len(), std::ptr::null_mut(), 0) }, 0);
}

fn rewind(s: &Seq, n: u32) {
    // SAFETY: live sequence.
    assert_eq!(unsafe { sys::fer_engine_seq_rewind(s.0, n) }, 0);
}

fn ids(n: usize) -> Vec<i32> {
    (0..n).map(|i| (100 + i * 37 % 40000) as i32).collect()
}

fn bench(c: &mut Criterion) {
    let Some(path) = model_path() else {
        println!("SKIPPED: engine benchmarks: smollm2-135m-instruct-q4_1.gguf not found ($FERRITE_DATA_DIR or ~/.cache/ferrite)");
        return;
    };
    let e = engine(&path);
    let vocab = 49152usize;
    let mut g = c.benchmark_group("engine");
    g.sample_size(10).measurement_time(Duration::from_secs(4)).warm_up_time(Duration::from_secs(1));
    for n in [1usize, 2, 4, 8] {
        let seqs: Vec<Seq> = (0..n).map(|_| seq(&e, 1024)).collect();
        let prompt = ids(32);
        for s in &seqs {
            prefill(s, &prompt);
        }
        let ptrs: Vec<*mut sys::fer_engine_seq> = seqs.iter().map(|s| s.0).collect();
        let mut logits = vec![0f32; n * vocab];
        let step_ids: Vec<i32> = (0..n as i32).map(|i| 300 + i).collect();
        let mut len = 32u32;
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(format!("decode_batch/seqs={n}"), |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    if len >= 1000 {
                        for s in &seqs {
                            rewind(s, 32); // outside the timer: stay in the same context range
                        }
                        len = 32;
                    }
                    let t = Instant::now();
                    // SAFETY: n live, distinct sequences of this engine; logits hold n rows.
                    let st = unsafe {
                        sys::fer_engine_decode(e.0, ptrs.as_ptr(), step_ids.as_ptr(), n, logits.as_mut_ptr(), logits.len())
                    };
                    spent += t.elapsed();
                    assert_eq!(st, 0);
                    len += 1;
                }
                spent
            })
        });
        drop(seqs);
    }
    let s = seq(&e, 1024);
    let prompt = ids(512);
    g.throughput(Throughput::Elements(512));
    g.bench_function("prefill/tokens=512", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                rewind(&s, 0);
                let t = Instant::now();
                prefill(&s, &prompt);
                spent += t.elapsed();
            }
            spent
        })
    });
    g.finish();
    drop(s);
}

criterion_group!(benches, bench);
criterion_main!(benches);
