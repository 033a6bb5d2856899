//! Kernel benchmarks with the original system's scenario ids and input generators
//! (`../shared/reference/original-system.md` A.0-A.1), plus the streaming-copy ceiling measured in
//! the same run. `bench-table` turns the results into the fractions recorded in docs/BENCHMARKS.md.
//!
//! Ids: `add/{small,medium,large}_{f32,f16,bf16}_threads=1-internal/{1024,262144,4194304}`,
//! `gather/..._{f32,f16,bf16}_threads=1-internal/{4096,32768,131072}`,
//! `reduce_mean/..._{f32,f16,bf16}_threads=1-internal/{4096,65536,262144}` (the original had f32
//! only; f16/bf16 are added beside it), `memory_bandwidth/stream_copy/{bytes}`.
//! "threads=1-internal": the kernel runs on the calling thread (NULL pool), as the original's did.
//! EVIDENCE: C-PERF-001, C-PERF-002

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ferrite_benches::{float_values, gather_indices, BenchDtype, Buffer};
use ferrite_sys as sys;

const SIZES: [&str; 3] = ["small", "medium", "large"];

fn id(size: &str, dtype: BenchDtype) -> String {
    format!("{size}_{}_threads=1-internal", dtype.name())
}

fn ok(status: sys::fer_status) {
    assert_eq!(status, sys::FER_STATUS_OK as i32, "kernel refused its benchmark input");
}

fn bench_add(c: &mut Criterion) {
    // A [rows, width] + B [width] (row broadcast); param = A.numel.
    let shapes: [(i64, i64); 3] = [(1, 1024), (256, 1024), (1024, 4096)];
    let mut g = c.benchmark_group("add");
    for (size, &(rows, width)) in SIZES.iter().zip(shapes.iter()) {
        for dtype in BenchDtype::ALL {
            let n = (rows * width) as usize;
            let a_shape: Vec<i64> = if rows == 1 { vec![width] } else { vec![rows, width] };
            let mut a = Buffer::from_f32(&float_values(n), dtype);
            let mut b = Buffer::from_f32(&float_values(width as usize), dtype);
            let mut out = Buffer::zeroed(n, dtype);
            let (ta, tb, to) = (a.tensor(&a_shape), b.tensor(&[width]), out.tensor(&a_shape));
            g.throughput(Throughput::Elements(n as u64));
            g.bench_with_input(BenchmarkId::new(id(size, dtype), n), &n, |bch, _| {
                // SAFETY: the descriptors point into buffers alive for this whole closure.
                bch.iter(|| ok(unsafe { sys::fer_add(std::ptr::null_mut(), &ta, &tb, &to) }))
            });
        }
    }
    g.finish();
}

fn bench_gather(c: &mut Criterion) {
    // data [rows, cols], `n_idx` i64 indices (i*97) % rows along axis 0; param = n_idx * cols.
    let shapes: [(i64, i64, usize); 3] = [(4096, 128, 32), (16384, 256, 128), (32768, 512, 256)];
    let mut g = c.benchmark_group("gather");
    for (size, &(rows, cols, n_idx)) in SIZES.iter().zip(shapes.iter()) {
        for dtype in BenchDtype::ALL {
            let param = n_idx * cols as usize;
            let mut data = Buffer::from_f32(&float_values((rows * cols) as usize), dtype);
            let idx = gather_indices(n_idx, rows);
            let mut out = Buffer::zeroed(param, dtype);
            let td = data.tensor(&[rows, cols]);
            let ti = ferrite_benches::contiguous(idx.as_ptr() as *mut _, sys::FER_DTYPE_I64 as i32, &[n_idx as i64]);
            let to = out.tensor(&[n_idx as i64, cols]);
            g.throughput(Throughput::Elements(param as u64));
            g.bench_with_input(BenchmarkId::new(id(size, dtype), param), &param, |bch, _| {
                // SAFETY: the descriptors point into buffers alive for this whole closure.
                bch.iter(|| ok(unsafe { sys::fer_gather(std::ptr::null_mut(), &td, &ti, &to) }))
            });
        }
    }
    g.finish();
}

fn bench_reduce_mean(c: &mut Criterion) {
    // x [rows, cols] -> [rows, 1] (axes=[1], keepdims); param = numel.
    let shapes: [(i64, i64); 3] = [(32, 128), (128, 512), (256, 1024)];
    let mut g = c.benchmark_group("reduce_mean");
    for (size, &(rows, cols)) in SIZES.iter().zip(shapes.iter()) {
        for dtype in BenchDtype::ALL {
            let n = (rows * cols) as usize;
            let mut x = Buffer::from_f32(&float_values(n), dtype);
            let mut out = Buffer::zeroed(rows as usize, dtype);
            let (tx, to) = (x.tensor(&[rows, cols]), out.tensor(&[rows, 1]));
            g.throughput(Throughput::Elements(n as u64));
            g.bench_with_input(BenchmarkId::new(id(size, dtype), n), &n, |bch, _| {
                // SAFETY: the descriptors point into buffers alive for this whole closure.
                bch.iter(|| ok(unsafe { sys::fer_reduce_mean(std::ptr::null_mut(), &tx, &to) }))
            });
        }
    }
    g.finish();
}

/// The ceiling: a plain streaming copy of 64 MiB (beyond any cache of this machine class), counted
/// as bytes read + written. Kernels are reported as a fraction of it by `bench-table`.
fn bench_stream_copy(c: &mut Criterion) {
    const BYTES: usize = 64 << 20;
    let src = float_values(BYTES / 4);
    let mut dst = vec![0f32; BYTES / 4];
    let mut g = c.benchmark_group("memory_bandwidth");
    g.throughput(Throughput::Bytes(2 * BYTES as u64));
    g.bench_with_input(BenchmarkId::new("stream_copy", BYTES), &BYTES, |bch, _| {
        bch.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&mut dst);
        })
    });
    g.finish();
}

criterion_group!(benches, bench_stream_copy, bench_add, bench_gather, bench_reduce_mean);
criterion_main!(benches);
