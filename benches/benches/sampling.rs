//! Sampling benchmarks with the original system's scenario ids and generators
//! (`../shared/reference/original-system.md` A.2), plus the baselines the original ran in the same
//! bench (full sorts, written here in plain Rust) and three added ids: the fused top-k + top-p,
//! greedy at V = 151,936, and the chain's ceiling (one read-write pass over the same logits).
//! `bench-table` reports the targets (C-PERF-003..C-PERF-006).
//! EVIDENCE: C-PERF-003, C-PERF-004, C-PERF-005, C-PERF-006, C-PERF-008, C-PERF-009

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use ferrite_benches::{empty_ctx, qwen3_logits, seven_processor_chain, synthetic_logits, ChainHistory, Sampler};
use ferrite_sys as sys;

fn greedy(logits: &[f32]) -> i32 {
    let mut tok = -1;
    // SAFETY: logits valid for its length.
    assert_eq!(unsafe { sys::fer_sample_greedy(logits.as_ptr(), logits.len(), &mut tok) }, 0);
    tok
}

fn bench_sampling_latency(c: &mut Criterion) {
    let logits = synthetic_logits();
    let mut g = c.benchmark_group("sampling_latency");
    g.bench_function("greedy_per_token", |b| b.iter(|| greedy(black_box(&logits))));
    let top_k = Sampler::new(|p| p.top_k = 50);
    let top_p = Sampler::new(|p| p.top_p = 0.9);
    let min_p = Sampler::new(|p| p.min_p = 0.05);
    for (name, s) in [("top_k_per_token", &top_k), ("top_p_per_token", &top_p), ("min_p_per_token", &min_p)] {
        // The original clones the logits outside the timing, then runs the processor and a
        // categorical draw with the fixed uniform 0.42.
        g.bench_function(name, |b| b.iter_batched(|| logits.clone(), |mut l| s.sample(&mut l, 0.42), BatchSize::SmallInput));
    }
    g.finish();
}

fn bench_seven_processor_chain(c: &mut Criterion) {
    let logits = synthetic_logits();
    let history = ChainHistory::original();
    let ctx = history.ctx();
    let s = Sampler::new(seven_processor_chain);
    let mut g = c.benchmark_group("logit_processing");
    g.bench_function("seven_processor_chain_per_step", |b| {
        b.iter_batched(|| logits.clone(), |mut l| s.process(&mut l, &ctx), BatchSize::SmallInput)
    });
    // The ceiling beside it, on the same fresh clones: one streaming pass that reads every logit
    // and writes it back, masked below a threshold. A chain that masks must at least read every
    // logit and write the masked ones, so chain / ceiling is the chain's overhead over the memory
    // traffic it cannot avoid, a ratio that carries across CPUs where the lone time does not.
    g.bench_function("stream_pass_ceiling_per_step", |b| {
        b.iter_batched(|| logits.clone(), |mut l| stream_pass(&mut l, black_box(6.0)), BatchSize::SmallInput)
    });
    g.finish();
}

/// One read-and-write pass: x stays when x >= thr, else becomes -inf (branch-free, so it
/// vectorises).
fn stream_pass(l: &mut [f32], thr: f32) {
    for x in l.iter_mut() {
        *x = if *x >= thr { *x } else { f32::NEG_INFINITY };
    }
}

/// The original's full-sort baselines: collect the non-NaN values, sort descending, threshold at
/// the k-th, mask below it.
fn top_k_full_sort(l: &mut [f32], k: usize) {
    let mut v: Vec<f32> = l.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_unstable_by(|a, b| b.partial_cmp(a).unwrap());
    if k < v.len() {
        let thr = v[k - 1];
        for x in l.iter_mut() {
            if *x < thr {
                *x = f32::NEG_INFINITY;
            }
        }
    }
}

/// Softmax over the finite entries, full sort by probability, keep the prefix reaching p.
fn top_p_full_sort(l: &mut [f32], p: f64) {
    let mx = l.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut idx: Vec<(f64, usize)> = l
        .iter()
        .enumerate()
        .filter(|(_, x)| **x != f32::NEG_INFINITY)
        .map(|(i, &x)| (((x - mx) as f64).exp(), i))
        .collect();
    let total: f64 = idx.iter().map(|e| e.0).sum();
    idx.sort_unstable_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
    let mut cum = 0.0;
    let mut cut = idx.len();
    for (j, e) in idx.iter().enumerate() {
        cum += e.0 / total;
        if cum >= p {
            cut = j + 1;
            break;
        }
    }
    for e in &idx[cut..] {
        l[e.1] = f32::NEG_INFINITY;
    }
}

fn bench_qwen3(c: &mut Criterion) {
    const K: usize = 20;
    const P: f32 = 0.95;
    let logits = qwen3_logits();
    let mut reduced = logits.clone();
    top_k_full_sort(&mut reduced, K); // about 151,916 entries at -inf, as the original prepared
    let ctx = empty_ctx();
    let top_k = Sampler::new(|p| p.top_k = K as i32);
    let top_p = Sampler::new(|p| p.top_p = P);
    let both = Sampler::new(|p| {
        p.top_k = K as i32;
        p.top_p = P;
    });
    let fused = Sampler::new(|p| {
        p.top_k = K as i32;
        p.top_p = P;
        p.flags = sys::FER_SAMPLING_FLAG_FUSE_TOP_K_TOP_P;
    });
    let mut g = c.benchmark_group("qwen3_sampling_processors");
    let batched = |g: &mut criterion::BenchmarkGroup<'_, _>, name: &str, src: &Vec<f32>, f: &dyn Fn(&mut Vec<f32>)| {
        g.bench_function(name, |b| b.iter_batched(|| src.clone(), |mut l| f(&mut l), BatchSize::LargeInput));
    };
    batched(&mut g, "top_k_full_sort_baseline", &logits, &|l| top_k_full_sort(l, K));
    batched(&mut g, "top_k_partial_selection", &logits, &|l| {
        top_k.process(l, &ctx);
    });
    batched(&mut g, "top_p_full_sort_after_top_k_baseline", &reduced, &|l| top_p_full_sort(l, P as f64));
    batched(&mut g, "top_p_fast_after_top_k", &reduced, &|l| {
        top_p.process(l, &ctx);
    });
    batched(&mut g, "top_k_top_p_full_sort_baseline", &logits, &|l| {
        top_k_full_sort(l, K);
        top_p_full_sort(l, P as f64);
    });
    batched(&mut g, "top_k_top_p_fast", &logits, &|l| {
        both.process(l, &ctx);
    });
    batched(&mut g, "top_k_top_p_fused", &logits, &|l| {
        fused.process(l, &ctx);
    });
    g.bench_function("greedy_argmax", |b| b.iter(|| greedy(black_box(&logits))));
    g.finish();
}

criterion_group!(benches, bench_sampling_latency, bench_seven_processor_chain, bench_qwen3);
criterion_main!(benches);
