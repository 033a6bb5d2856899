//! kernel-counts: runs one named hot scenario a fixed number of times, so that an instruction
//! counter can measure it. Instruction counts do not depend on machine load, so a regression of 1%
//! is visible where timing noise is 20% (claim C-BENCH-003).
//!
//! Usage:
//!   kernel-counts --list              the scenario names, one a line
//!   kernel-counts SCENARIO [REPS]     set up SCENARIO's inputs, then call it REPS times (default 3;
//!                                     0 sets up only, for counters that see the whole process)
//!
//! `bench-compare` runs it under `valgrind --tool=callgrind --toggle-collect='fer_*'`: only the
//! instructions executed inside ferrite's C entry points count, so neither the process start-up
//! nor the input generation (plain Rust here) does. What does count besides the measured calls:
//! the scenario's few set-up entry points (`fer_tensor_init_contiguous`, `fer_sampler_create`,
//! `fer_sampler_free`), a few hundred instructions against millions; and since callgrind toggles
//! (not sets) collection at each `fer_*` boundary, the body of a `fer_*` function called from
//! inside another one (`fer_cpu_features` inside the samplers) is left out. Both sides of a
//! comparison are counted the same way, so neither bends a delta.
//!
//! Scenario names are the criterion ids of the timing scenario with the same inputs
//! (benches/benches/kernels.rs and benches/benches/sampling.rs), so the report can put a scenario's
//! time and its instruction count on one row. `bench-compare` writes this file into both worktrees
//! it compares, so both sides are measured by the same harness against their own C library.

use ferrite_benches::{
    contiguous, empty_ctx, float_values, gather_indices, qwen3_logits, synthetic_logits,
    BenchDtype, Buffer, ChainHistory, Sampler,
};
use ferrite_sys as sys;
use std::hint::black_box;
use std::ptr;

/// One scenario: its criterion id and the function that sets it up and calls it `reps` times.
struct Scenario {
    name: String,
    run: Box<dyn Fn(u32)>,
}

fn ok(status: sys::fer_status, what: &str) {
    assert_eq!(status, sys::FER_STATUS_OK as i32, "{what} refused its input");
}

fn kernel_id(group: &str, dtype: BenchDtype, param: i64) -> String {
    format!("{group}/large_{}_threads=1-internal/{param}", dtype.name())
}

/// add large: A [1024, 4096] + B [4096] (row broadcast), as bench_add's `large`.
fn add_large(dtype: BenchDtype) -> Scenario {
    const ROWS: i64 = 1024;
    const WIDTH: i64 = 4096;
    let n = ROWS * WIDTH;
    let run = move |reps: u32| {
        let mut a = Buffer::from_f32(&float_values(n as usize), dtype);
        let mut b = Buffer::from_f32(&float_values(WIDTH as usize), dtype);
        let mut out = Buffer::zeroed(n as usize, dtype);
        let (ta, tb, to) = (a.tensor(&[ROWS, WIDTH]), b.tensor(&[WIDTH]), out.tensor(&[ROWS, WIDTH]));
        for _ in 0..reps {
            // SAFETY: the descriptors point into buffers alive for this whole closure.
            ok(unsafe { sys::fer_add(ptr::null_mut(), &ta, &tb, &to) }, "fer_add");
        }
    };
    Scenario { name: kernel_id("add", dtype, n), run: Box::new(run) }
}

/// gather large: data [32768, 512], 256 indices (i*97) % rows along axis 0, as bench_gather's.
fn gather_large(dtype: BenchDtype) -> Scenario {
    const ROWS: i64 = 32768;
    const COLS: i64 = 512;
    const N_IDX: usize = 256;
    let param = N_IDX as i64 * COLS;
    let run = move |reps: u32| {
        let mut data = Buffer::from_f32(&float_values((ROWS * COLS) as usize), dtype);
        let idx = gather_indices(N_IDX, ROWS);
        let mut out = Buffer::zeroed(param as usize, dtype);
        let td = data.tensor(&[ROWS, COLS]);
        let ti = contiguous(idx.as_ptr() as *mut _, sys::FER_DTYPE_I64 as i32, &[N_IDX as i64]);
        let to = out.tensor(&[N_IDX as i64, COLS]);
        for _ in 0..reps {
            // SAFETY: the descriptors point into buffers alive for this whole closure.
            ok(unsafe { sys::fer_gather(ptr::null_mut(), &td, &ti, &to) }, "fer_gather");
        }
    };
    Scenario { name: kernel_id("gather", dtype, param), run: Box::new(run) }
}

/// reduce_mean large: x [256, 1024] -> [256, 1] (axes = [1], keepdims), as bench_reduce_mean's.
fn reduce_mean_large(dtype: BenchDtype) -> Scenario {
    const ROWS: i64 = 256;
    const COLS: i64 = 1024;
    let n = ROWS * COLS;
    let run = move |reps: u32| {
        let mut x = Buffer::from_f32(&float_values(n as usize), dtype);
        let mut out = Buffer::zeroed(ROWS as usize, dtype);
        let (tx, to) = (x.tensor(&[ROWS, COLS]), out.tensor(&[ROWS, 1]));
        for _ in 0..reps {
            // SAFETY: the descriptors point into buffers alive for this whole closure.
            ok(unsafe { sys::fer_reduce_mean(ptr::null_mut(), &tx, &to) }, "fer_reduce_mean");
        }
    };
    Scenario { name: kernel_id("reduce_mean", dtype, n), run: Box::new(run) }
}



/// Runs the chain over a fresh copy of `src` (the copy is Rust, outside the count) `reps` times.
fn process_copies(s: &Sampler, src: &[f32], ctx: &sys::fer_sampling_context, reps: u32) {
    for _ in 0..reps {
        let mut l = src.to_vec();
        s.process(&mut l, ctx);
        black_box(&l);
    }
}

/// The original's seven-processor chain at V = 32,000, as bench_seven_processor_chain.
fn seven_processor_chain_scenario() -> Scenario {
    let run = |reps: u32| {
        let logits = synthetic_logits();
        let history = ChainHistory::original();
        let ctx = history.ctx();
        let s = Sampler::new(ferrite_benches::seven_processor_chain);
        process_copies(&s, &logits, &ctx, reps);
    };
    Scenario { name: "logit_processing/seven_processor_chain_per_step".into(), run: Box::new(run) }
}

/// Top-k (k = 20) at V = 151,936, as the `top_k_partial_selection` scenario.
fn top_k_qwen3() -> Scenario {
    let run = |reps: u32| {
        let logits = qwen3_logits();
        let s = Sampler::new(|p| p.top_k = 20);
        process_copies(&s, &logits, &empty_ctx(), reps);
    };
    Scenario { name: "qwen3_sampling_processors/top_k_partial_selection".into(), run: Box::new(run) }
}

/// Greedy at V = 151,936, as the `greedy_argmax` scenario.
fn greedy_qwen3() -> Scenario {
    let run = |reps: u32| {
        let logits = qwen3_logits();
        for _ in 0..reps {
            let mut tok = -1;
            // SAFETY: logits valid for its length.
            ok(unsafe { sys::fer_sample_greedy(logits.as_ptr(), logits.len(), &mut tok) }, "fer_sample_greedy");
            black_box(tok);
        }
    };
    Scenario { name: "qwen3_sampling_processors/greedy_argmax".into(), run: Box::new(run) }
}

fn scenarios() -> Vec<Scenario> {
    let mut all = Vec::new();
    for make in [add_large, gather_large, reduce_mean_large] {
        all.extend(BenchDtype::ALL.into_iter().map(make));
    }
    all.extend([seven_processor_chain_scenario(), top_k_qwen3(), greedy_qwen3()]);
    all
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let all = scenarios();
    match args.first().map(String::as_str) {
        Some("--list") => all.iter().for_each(|s| println!("{}", s.name)),
        Some(name) if !name.starts_with('-') => {
            let reps: u32 = match args.get(1).map(|r| r.parse()) {
                None => 3,
                Some(Ok(r)) => r,
                _ => usage_exit(&format!("REPS must be an integer >= 0, got {:?}", args[1])),
            };
            let Some(s) = all.iter().find(|s| s.name == name) else {
                usage_exit(&format!("no scenario {name:?} (see --list)"))
            };
            (s.run)(reps);
            println!("{} reps={reps}", s.name);
        }
        _ => usage_exit("expected --list or a scenario name"),
    }
}

fn usage_exit(msg: &str) -> ! {
    eprintln!("kernel-counts: {msg}\nusage: kernel-counts --list | kernel-counts SCENARIO [REPS]");
    std::process::exit(2);
}
