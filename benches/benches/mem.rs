//! Memory benchmarks (issue: memory where residency follows layout, section 6): granule map/unmap
//! cost, the cost of mapping a shared granule (prefix sharing), KV growth cost per layout, and
//! weight page-in throughput against the file read bandwidth measured in the same run.
//!
//! Ids: `vmm/map_unmap_granule/{65536,2097152}` (create, map, unmap, release one granule),
//! `vmm/share_map_unmap/2097152` (map an existing granule at a second address and unmap it),
//! `kv_cache/growth_{head_major,seq_major,token_major}/64_tokens` (one sequence, qwen2.5-0.5b
//! geometry, bucketed from 8, 64 single-token extends), `weights/page_in/2097152` (a streaming
//! store with a one-granule budget reading the next granule: every request a page-in) against
//! `weights/file_read/2097152` (pread of the same bytes from the page cache).
//! EVIDENCE: C-MEM-008

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ferrite_sys as sys;
use std::cell::Cell;
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::ptr;
use std::time::Duration;

fn ok(st: sys::fer_status) {
    assert_eq!(st, 0, "a memory call refused its benchmark input");
}

fn vmm(granule: u64, max: u64) -> *mut sys::fer_vmm {
    // SAFETY: plain-data struct filled by init; valid out-pointers.
    unsafe {
        let mut o: sys::fer_vmm_options = std::mem::zeroed();
        ok(sys::fer_vmm_options_init(&mut o));
        o.granule_bytes = granule;
        o.max_granules = max;
        let mut v = ptr::null_mut();
        ok(sys::fer_vmm_create(&o, &mut v));
        v
    }
}

fn bench_vmm(c: &mut Criterion) {
    let mut g = c.benchmark_group("vmm");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2));
    for granule in [64u64 << 10, 2 << 20] {
        let v = vmm(granule, 16);
        let mut range = ptr::null_mut();
        // SAFETY: (all blocks below) v and range live for the group; ids come from the calls.
        ok(unsafe { sys::fer_vmm_range_reserve(v, 4 * granule, &mut range) });
        g.throughput(Throughput::Bytes(granule));
        g.bench_function(BenchmarkId::new("map_unmap_granule", granule), |b| {
            b.iter(|| unsafe {
                let mut id = 0;
                ok(sys::fer_vmm_granule_create(v, &mut id));
                ok(sys::fer_vmm_map(range, 0, id, sys::FER_VMM_ACCESS_READ_WRITE as i32));
                ok(sys::fer_vmm_unmap(range, 0));
                ok(sys::fer_vmm_granule_release(v, id));
            })
        });
        if granule == 2 << 20 {
            let mut shared = 0;
            unsafe {
                ok(sys::fer_vmm_granule_create(v, &mut shared));
                ok(sys::fer_vmm_map(range, 0, shared, sys::FER_VMM_ACCESS_READ_WRITE as i32));
            }
            g.bench_function(BenchmarkId::new("share_map_unmap", granule), |b| {
                b.iter(|| unsafe {
                    ok(sys::fer_vmm_map(range, granule, shared, sys::FER_VMM_ACCESS_READ_ONLY as i32));
                    ok(sys::fer_vmm_unmap(range, granule));
                })
            });
            unsafe {
                ok(sys::fer_vmm_unmap(range, 0));
                ok(sys::fer_vmm_granule_release(v, shared));
            }
        }
        unsafe {
            ok(sys::fer_vmm_range_free(range));
            ok(sys::fer_vmm_free(v));
        }
    }
    g.finish();
}

fn bench_kv_growth(c: &mut Criterion) {
    let mut g = c.benchmark_group("kv_cache");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2));
    for (name, layout) in [
        ("growth_head_major", sys::FER_KV_LAYOUT_HEAD_MAJOR),
        ("growth_seq_major", sys::FER_KV_LAYOUT_SEQ_MAJOR),
        ("growth_token_major", sys::FER_KV_LAYOUT_TOKEN_MAJOR),
    ] {
        let v = vmm(64 << 10, 4096);
        // SAFETY: (all blocks below) plain-data options filled by init; cache and sequences live
        // inside the closure or the group.
        let cache = unsafe {
            let mut o: sys::fer_kv_cache_options = std::mem::zeroed();
            ok(sys::fer_kv_cache_options_init(&mut o));
            o.geometry.layout = layout as i32;
            o.geometry.n_layers = 24;
            o.geometry.n_kv_heads = 2;
            o.geometry.head_dim = 64;
            o.geometry.elem_bytes = 2;
            o.geometry.capacity_tokens = 1024;
            o.dtype = sys::FER_DTYPE_F16 as i32;
            o.mask_bytes_per_token = 8;
            o.min_bucket = 8;
            let mut cache = ptr::null_mut();
            ok(sys::fer_kv_cache_create(v, &o, &mut cache));
            cache
        };
        g.bench_function(BenchmarkId::new(name, "64_tokens"), |b| {
            b.iter(|| unsafe {
                let mut seq = ptr::null_mut();
                ok(sys::fer_kv_seq_create(cache, &mut seq));
                for t in 1..=64 {
                    ok(sys::fer_kv_seq_extend(seq, t));
                }
                ok(sys::fer_kv_seq_free(seq));
            })
        });
        unsafe {
            ok(sys::fer_kv_cache_free(cache));
            ok(sys::fer_vmm_free(v));
        }
    }
    g.finish();
}

fn bench_page_in(c: &mut Criterion) {
    const G: u64 = 2 << 20;
    const N: u64 = 16;
    let data: Vec<u8> = (0..G * N).map(|i| (i * 7 + 3) as u8).collect();
    let mut f = tempfile::tempfile().expect("temp file");
    f.write_all(&data).unwrap();
    f.flush().unwrap();
    let v = vmm(G, 8);
    let mut store = ptr::null_mut();
    // SAFETY: plain-data options; v and the file outlive the store.
    unsafe {
        let mut o: sys::fer_weight_store_options = std::mem::zeroed();
        ok(sys::fer_weight_store_options_init(&mut o));
        o.budget_bytes = G;
        ok(sys::fer_weight_store_open(v, f.as_raw_fd(), 0, G * N, &o, &mut store));
    }
    let mut g = c.benchmark_group("weights");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2));
    g.throughput(Throughput::Bytes(G));
    let next = Cell::new(0u64);
    g.bench_function(BenchmarkId::new("page_in", G), |b| {
        b.iter(|| {
            let i = next.get();
            next.set((i + 1) % N);
            let mut p = ptr::null();
            // SAFETY: store alive; a one-granule budget makes every request a page-in.
            ok(unsafe { sys::fer_weight_store_acquire(store, i * G, G, &mut p) });
        })
    });
    let mut buf = vec![0u8; G as usize];
    g.bench_function(BenchmarkId::new("file_read", G), |b| {
        b.iter(|| {
            let i = next.get();
            next.set((i + 1) % N);
            // SAFETY: buf has G bytes; the fd is open.
            let n = unsafe { libc_pread(f.as_raw_fd(), buf.as_mut_ptr(), G as usize, (i * G) as i64) };
            assert_eq!(n, G as isize);
        })
    });
    g.finish();
    // SAFETY: nothing uses the store or the pool after this.
    unsafe {
        ok(sys::fer_weight_store_free(store));
        ok(sys::fer_vmm_free(v));
    }
}

extern "C" {
    #[link_name = "pread"]
    fn libc_pread(fd: i32, buf: *mut u8, count: usize, offset: i64) -> isize;
}

criterion_group!(benches, bench_vmm, bench_kv_growth, bench_page_in);
criterion_main!(benches);
