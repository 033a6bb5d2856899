//! KV benchmarks with the original's scenario id: `kv_cache/alloc_dealloc_pages` (64 pages of 16
//! tokens; per iteration create a sequence, append 256 tokens = 16 pages, remove it; throughput 16
//! pages). Target: under 2 µs per iteration (the original measured 42.7 µs on its runner).
//! EVIDENCE: C-PERF-007

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferrite_sys as sys;
use std::ptr;

fn bench_alloc_dealloc_pages(c: &mut Criterion) {
    let mut pool = ptr::null_mut();
    // SAFETY: valid out-pointer; the pool lives for the whole bench.
    assert_eq!(unsafe { sys::fer_kv_pages_create(64, 16, &mut pool) }, 0);
    let mut g = c.benchmark_group("kv_cache");
    g.throughput(Throughput::Elements(16));
    g.bench_function("alloc_dealloc_pages", |b| {
        b.iter(|| {
            let mut seq = 0u32;
            // SAFETY: pool alive; the sequence is created and removed within the iteration.
            unsafe {
                assert_eq!(sys::fer_kv_pages_seq_create(pool, &mut seq), 0);
                assert_eq!(sys::fer_kv_pages_append(pool, seq, 256), 0);
                assert_eq!(sys::fer_kv_pages_seq_free(pool, seq), 0);
            }
        })
    });
    g.finish();
    // SAFETY: no sequence alive.
    unsafe { sys::fer_kv_pages_free(pool) };
}

criterion_group!(benches, bench_alloc_dealloc_pages);
criterion_main!(benches);
