//! Attention benchmarks (issue: compute kernels): decode at a 4k context for each KV layout with
//! f16 and f32 KV, causal prefill of 512 and 2048 tokens with f16 KV, and the read-bandwidth
//! ceiling in the same run.
//!
//! Model shape: 32 query heads, 8 KV heads, head_dim 128 (Llama-3-8B-like). The cache holds 537 MB
//! (32 layers of f16, or 16 of f32): each decode iteration reads the next layer's K and V (16.8 MB
//! in f16, 33.6 MB in f32), so the cache streams from DRAM as in a real decode step, never from L3.
//! Layouts: `head_major` [layer][kv][head][pos][dim], `seq_major` [layer][kv][pos][head][dim],
//! `token_major` [pos][layer][kv][head][dim] (one token's K and V for every layer together).
//!
//! Ids: `attention/decode_{layout}_{f16,f32}_threads=2/ctx=4096` (throughput = K+V bytes read),
//! `attention/prefill_{layout}_f16_threads=2/tokens={512,2048}`, `ceiling/read_threads=2/..`.
//!
//! The read probe of this machine varies from run to run and within a run (33 to 58 GB/s on the
//! 2-vCPU VM of docs/BENCHMARKS.md), so before the criterion scenarios of a dtype, a check times
//! the three layouts by hand, interleaved, in CHECK_ROUNDS rounds with the probe measured around
//! each round: a line `C-ATT-006 ...` per layout gives its median time, the median over rounds of
//! its rate against the higher of the two probes around that round (the verdict's figure: the
//! probe's mode can change within a check), and its median rate against the highest probe of the
//! whole check; a summary line each layout against 60% and the layouts' spread against 10%. The check runs twice: on the cache as allocated for the scenarios (4 KiB pages,
//! as the engine's KV cache gets on this machine) and on a copy the OS is asked to back with
//! 2 MiB pages (`madvise(MADV_HUGEPAGE)`; the line says how much of it the OS's AnonHugePages
//! counted), which separates what a layout costs in page-table
//! walks (a token-major position is a page of its own) from what it costs in the kernel. With
//! `FERRITE_ATT_CHECK_ROUNDS=1` in the environment each round's times are printed too (a line
//! `C-ATT-006 round ...`), to tell a layout slow in every round of a check from one slow round.
//! The layouts' order in a round turns by one each round: run in a fixed order (head-major first,
//! right after the probe; `FERRITE_ATT_CHECK_FIXED_ORDER=1`), head-major measured slower than it
//! is and the layouts closer together than they are (C-ATT-013). A line `C-ATT-014 after-probe`
//! per check gives each layout's median time in the rounds where it ran right after the probe (a
//! 256 MiB read of other memory, as a decode step's weight reads) and in the others: the cost of
//! starting from cold caches, which a whole tile of f32 prefetched ahead made token-major's.
//! EVIDENCE: C-ATT-006 C-ATT-007 C-ATT-008 C-ATT-009 C-ATT-013 C-ATT-014

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ferrite_benches::{float_values, read_sum, Pool};
use ferrite_sys as sys;
use std::cell::Cell;
use std::time::{Duration, Instant};

const HQ: i64 = 32;
const HKV: i64 = 8;
const D: i64 = 128;
const CTX: i64 = 4096;
/// Bytes of the probe's buffer, read by two threads.
const READ_BYTES: usize = 256 << 20;
/// Rounds of the layout check (each: probe, one pass over the cache's layers in every layout,
/// probe). 21 (about 2 s a check): in a busy hour one allocation's rounds ranged 14-27 GB/s, so
/// a median of 7 moved by several percent, against the target's 10% between layouts.
const CHECK_ROUNDS: usize = 21;
/// The transparent huge page size and the advice that asks for it (Linux).
const HUGE_PAGE: usize = 2 << 20;
const MADV_HUGEPAGE: i32 = 14;

extern "C" {
    fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
}

#[derive(Clone, Copy)]
enum Layout {
    HeadMajor,
    SeqMajor,
    TokenMajor,
}

const LAYOUTS: [Layout; 3] = [Layout::HeadMajor, Layout::SeqMajor, Layout::TokenMajor];

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Layout::HeadMajor => "head_major",
            Layout::SeqMajor => "seq_major",
            Layout::TokenMajor => "token_major",
        }
    }

    /// (byte offset of K of `layer` (V follows at + kv_offset), strides [head, pos, dim] in bytes,
    /// kv_offset) for a cache of `layers` layers of `ctx` positions with `e`-byte elements.
    fn view(self, ctx: i64, layers: i64, layer: i64, e: i64) -> (i64, [i64; 3], i64) {
        match self {
            Layout::HeadMajor => {
                let kv = HKV * ctx * D * e;
                (layer * 2 * kv, [ctx * D * e, D * e, e], kv)
            }
            Layout::SeqMajor => {
                let kv = ctx * HKV * D * e;
                (layer * 2 * kv, [D * e, HKV * D * e, e], kv)
            }
            Layout::TokenMajor => {
                let token = layers * 2 * HKV * D * e;
                (layer * 2 * HKV * D * e, [D * e, token, e], HKV * D * e)
            }
        }
    }
}

/// A KV cache of one dtype: its bytes (2 MiB-aligned, optionally advised onto 2 MiB pages before
/// the first write), its element size and its layer count.
struct Cache {
    ptr: *mut u8,
    layout: std::alloc::Layout,
    dtype: u32,
    e: i64,
    layers: i64,
    /// `madvise(MADV_HUGEPAGE)` was asked for and accepted
    huge: bool,
    /// bytes of the cache on huge pages, by /proc/self/smaps_rollup's AnonHugePages
    huge_bytes: u64,
}

/// AnonHugePages of this process in bytes (0 where the file or the line is missing).
fn anon_huge_bytes() -> u64 {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    let line = text.lines().find(|l| l.starts_with("AnonHugePages:")).unwrap_or("");
    line.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) * 1024
}

impl Cache {
    fn new(f32_kv: bool, huge: bool) -> Cache {
        // 537 MB either way: 32 layers of f16 or 16 of f32
        let (layers, e) = if f32_kv { (16, 4) } else { (32, 2) };
        let n = (layers * 2 * HKV * CTX * D) as usize;
        let layout = std::alloc::Layout::from_size_align(n * e as usize, HUGE_PAGE).expect("cache layout");
        // SAFETY: non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        assert!(!ptr.is_null(), "cache allocation failed");
        // SAFETY: the range is the allocation, not written yet.
        let huge = huge && unsafe { madvise(ptr.cast(), layout.size(), MADV_HUGEPAGE) } == 0;
        let huge_before = anon_huge_bytes();
        let values = float_values(n);
        if f32_kv {
            // SAFETY: n f32 slots of the allocation, 2 MiB-aligned.
            let dst = unsafe { std::slice::from_raw_parts_mut(ptr.cast::<f32>(), n) };
            dst.iter_mut().zip(&values).for_each(|(d, &v)| *d = v * 0.25);
        } else {
            // SAFETY: n u16 slots of the allocation.
            let dst = unsafe { std::slice::from_raw_parts_mut(ptr.cast::<u16>(), n) };
            dst.iter_mut().zip(&values).for_each(|(d, &v)| *d = half::f16::from_f32(v * 0.25).to_bits());
        }
        let dtype = if f32_kv { sys::FER_DTYPE_F32 } else { sys::FER_DTYPE_F16 };
        let huge_bytes = anon_huge_bytes().saturating_sub(huge_before);
        Cache { ptr, layout, dtype, e, layers, huge, huge_bytes }
    }

    fn base(&self) -> *const u8 {
        self.ptr
    }

    fn dtype_name(&self) -> &'static str {
        if self.e == 4 { "f32" } else { "f16" }
    }

    /// K and V descriptors of `layer` in `layout`, `positions` positions long.
    fn kv(&self, layout: Layout, layer: i64, positions: i64) -> (sys::fer_tensor, sys::fer_tensor) {
        let (off, st, kvo) = layout.view(CTX, self.layers, layer, self.e);
        // SAFETY: every view lies inside the cache (offsets and strides from `view`).
        let (k, v) = unsafe { (self.base().add(off as usize), self.base().add((off + kvo) as usize)) };
        (tensor(k, self.dtype, [HKV, positions, D], st), tensor(v, self.dtype, [HKV, positions, D], st))
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

fn tensor(data: *const u8, dtype: u32, shape: [i64; 3], strides: [i64; 3]) -> sys::fer_tensor {
    // SAFETY: plain-data struct.
    let mut t: sys::fer_tensor = unsafe { std::mem::zeroed() };
    t.data = data as *mut _;
    t.dtype = dtype as i32;
    t.rank = 3;
    t.shape[..3].copy_from_slice(&shape);
    t.strides[..3].copy_from_slice(&strides);
    t
}

fn ok(st: sys::fer_status) {
    assert_eq!(st, 0, "fer_attention refused its benchmark input");
}

/// GB/s of the best of three two-thread reads of `data` (the `ceiling/read_threads=2` loop).
fn read_probe(data: &[f32]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            std::thread::scope(|s| {
                for part in data.chunks(data.len() / 2) {
                    // SAFETY: AVX2 checked above.
                    s.spawn(move || std::hint::black_box(unsafe { read_sum(part) }));
                }
            });
            best = best.min(t.elapsed().as_secs_f64());
        }
        return (data.len() * 4) as f64 / best / 1e9;
    }
    let _ = data;
    f64::NAN
}

/// A cycle through 2^20 lines (64 MiB, twice the L3) in scattered order, each line holding the
/// index of the next, for the latency of a dependent load to memory: token-major reads 4 KiB runs
/// far apart and keeps fewer lines in flight than a stream, so it is the layout that a higher
/// latency slows (the probe's bandwidth can stay the same).
struct Chase(Vec<u64>);

impl Chase {
    const LINE: usize = 8; // u64 per 64-byte line
    const LINES: usize = 1 << 20;

    fn new() -> Chase {
        // Sattolo's shuffle: one cycle through every line
        let mut order: Vec<usize> = (0..Self::LINES).collect();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in (1..Self::LINES).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            order.swap(i, (x % i as u64) as usize);
        }
        let mut v = vec![0u64; Self::LINES * Self::LINE];
        for i in 0..Self::LINES {
            v[order[i] * Self::LINE] = (order[(i + 1) % Self::LINES] * Self::LINE) as u64;
        }
        Chase(v)
    }

    /// Mean ns per dependent load over 2^18 hops.
    fn ns(&self) -> f64 {
        const HOPS: usize = 1 << 18;
        let mut at = 0usize;
        let t = Instant::now();
        for _ in 0..HOPS {
            at = self.0[at] as usize;
        }
        std::hint::black_box(at);
        t.elapsed().as_secs_f64() / HOPS as f64 * 1e9
    }
}

/// One decode call of `layout` at layer `layer` of `cache` (the decode scenarios' step).
fn decode_call(pool: &Pool, cache: &Cache, layout: Layout, layer: i64, q: &sys::fer_tensor, out: &sys::fer_tensor,
               params: &sys::fer_attention_params) {
    let (kt, vt) = cache.kv(layout, layer, CTX);
    // SAFETY: descriptors over live buffers.
    ok(unsafe { sys::fer_attention(pool.ptr(), q, &kt, &vt, params, out, std::ptr::null_mut(), 0) });
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The C-ATT-006 check on `cache`: CHECK_ROUNDS rounds of (probe, one pass over the cache's
/// layers in each layout, probe); per layout the median over rounds of the round's rate against
/// its own probes (and, printed too, the median rate against the highest probe of the check), and
/// the slowest layout's median time against the fastest's.
fn layout_check(pool: &Pool, cache: &Cache, probe_data: &[f32], chase: &Chase, q: &sys::fer_tensor,
                out: &sys::fer_tensor, params: &sys::fer_attention_params) {
    let pages = if cache.huge {
        format!("2 MiB pages asked, {} of {} MiB granted", cache.huge_bytes >> 20, cache.layout.size() >> 20)
    } else {
        "4 KiB pages".to_string()
    };
    let bytes = (2 * HKV * CTX * D * cache.e) as f64;
    let reps = cache.layers;
    let mut secs: Vec<Vec<f64>> = vec![Vec::new(); LAYOUTS.len()];
    let mut first: Vec<Vec<bool>> = vec![Vec::new(); LAYOUTS.len()];
    let mut probes = Vec::new();
    let latency_before = chase.ns();
    let log_rounds = std::env::var_os("FERRITE_ATT_CHECK_ROUNDS").is_some_and(|v| v == "1");
    let fixed_order = std::env::var_os("FERRITE_ATT_CHECK_FIXED_ORDER").is_some_and(|v| v == "1");
    for round in 0..CHECK_ROUNDS {
        probes.push(read_probe(probe_data));
        // the layouts' order turns by one each round, so none always runs right after the probe
        // (FERRITE_ATT_CHECK_FIXED_ORDER=1: head-, seq-, token-major every round, as before)
        let turn = if fixed_order { 0 } else { round };
        for (slot, li) in (0..LAYOUTS.len()).map(|i| (i + turn) % LAYOUTS.len()).enumerate() {
            let layout = LAYOUTS[li];
            let t = Instant::now();
            (0..reps).for_each(|l| decode_call(pool, cache, layout, l % cache.layers, q, out, params));
            secs[li].push(t.elapsed().as_secs_f64() / reps as f64);
            first[li].push(slot == 0);
        }
        probes.push(read_probe(probe_data));
        if log_rounds {
            let ms: Vec<String> = secs.iter().map(|v| format!("{:.3}", v[round] * 1e3)).collect();
            println!(
                "C-ATT-006 round {round} {} ({pages}): probe {:.1} / {:.1} GB/s, head / seq / token-major {} ms",
                cache.dtype_name(),
                probes[2 * round],
                probes[2 * round + 1],
                ms.join(" / ")
            );
        }
    }
    let latency_after = chase.ns();
    let probe = probes.iter().cloned().fold(f64::MIN, f64::max);
    // Each round's rate against the higher of the two probes measured around it: the probe's mode
    // can change within a check (33-38 and 46-61 GB/s rounds in one check), and a round is
    // compared with the memory as it was during that round.
    let paired: Vec<f64> = secs
        .iter()
        .map(|v| median(v.iter().enumerate().map(|(r, &t)| bytes / t / 1e9 / probes[2 * r].max(probes[2 * r + 1])).collect()))
        .collect();
    // Each layout's median time in the rounds where it ran right after the probe (a 256 MiB
    // stream has just gone through the caches, as a decode step's weight reads do) and in the
    // others (right after another layout's pass over this cache): only the turned order gives
    // each layout both (a third of the rounds first); in the fixed order there is no split.
    let split: Option<Vec<(f64, f64)>> = (!fixed_order).then(|| {
        secs.iter()
            .zip(&first)
            .map(|(v, f)| {
                let pick = |want: bool| median(v.iter().zip(f).filter(|(_, &x)| x == want).map(|(&t, _)| t).collect());
                (pick(true), pick(false))
            })
            .collect()
    });
    let times: Vec<f64> = secs.into_iter().map(median).collect();
    let mut fracs = Vec::new();
    for ((layout, &t), &pf) in LAYOUTS.iter().zip(&times).zip(&paired) {
        let gbs = bytes / t / 1e9;
        println!(
            "C-ATT-006 decode_{}_{}_threads=2 ({pages}): {:.3} ms, {gbs:.1} GB/s = {:.0}% of the check's highest probe, \
             {:.0}% of its own round's probe (median)",
            layout.name(),
            cache.dtype_name(),
            t * 1e3,
            100.0 * gbs / probe,
            100.0 * pf
        );
        fracs.push(format!("{} {:.0}% ({:.0}%)", layout.name(), 100.0 * pf, 100.0 * gbs / probe));
    }
    let lowest = paired.iter().cloned().fold(f64::MAX, f64::min);
    let (fast, slow) = times.iter().fold((f64::MAX, 0f64), |(f, s), &t| (f.min(t), s.max(t)));
    let met = lowest >= 0.6 && slow / fast <= 1.1;
    println!(
        "C-ATT-006 summary {} ({pages}; probe {:.1}-{probe:.1} GB/s over the check, median {:.1}): {} of each round's \
         probe (of the check's highest); slowest layout {:.2}x the fastest's time; target (>= 60% each, within 10%) {}",
        cache.dtype_name(),
        probes.iter().cloned().fold(f64::MAX, f64::min),
        median(probes.clone()),
        fracs.join(", "),
        slow / fast,
        if met { "met" } else { "missed" }
    );
    if let Some(split) = split {
        let spread = |pick: fn(&(f64, f64)) -> f64| {
            let t: Vec<f64> = split.iter().map(pick).collect();
            t.iter().cloned().fold(0f64, f64::max) / t.iter().cloned().fold(f64::MAX, f64::min)
        };
        let each: Vec<String> = LAYOUTS
            .iter()
            .zip(&split)
            .map(|(l, (a, b))| format!("{} {:.3} / {:.3}", l.name(), a * 1e3, b * 1e3))
            .collect();
        println!(
            "C-ATT-014 after-probe {} ({pages}): median ms right after the probe / later in the round: {}; \
             slowest layout {:.2}x the fastest's right after the probe, {:.2}x later; a dependent load to memory \
             {latency_before:.0} ns before the rounds, {latency_after:.0} ns after",
            cache.dtype_name(),
            each.join(", "),
            spread(|x| x.0),
            spread(|x| x.1)
        );
    }
}

fn bench_attention(c: &mut Criterion) {
    let pool = Pool::new(2);
    let probe_data = float_values(READ_BYTES / 4);
    let chase = Chase::new();
    let mut g = c.benchmark_group("attention");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(10);
    let q = float_values((HQ * D) as usize);
    let mut out = vec![0f32; (HQ * D) as usize];
    let qt = tensor(q.as_ptr().cast(), sys::FER_DTYPE_F32, [HQ, 1, D], [D * 4, D * 4, 4]);
    let ot = tensor(out.as_mut_ptr().cast(), sys::FER_DTYPE_F32, [HQ, 1, D], [D * 4, D * 4, 4]);
    // SAFETY: plain-data struct filled by init.
    let mut params: sys::fer_attention_params = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    ok(unsafe { sys::fer_attention_params_init(&mut params) });
    for f32_kv in [false, true] {
        params.q_pos0 = CTX - 1;
        // the check on 2 MiB pages first, its cache dropped before the scenarios' one is made (a
        // measurement: only in a timed run, not in `make test`'s smoke run)
        let timed = ferrite_benches::timed_run();
        if timed {
            layout_check(&pool, &Cache::new(f32_kv, true), &probe_data, &chase, &qt, &ot, &params);
        }
        let cache = Cache::new(f32_kv, false);
        if timed {
            layout_check(&pool, &cache, &probe_data, &chase, &qt, &ot, &params);
        } else {
            println!("C-ATT-006 layout check: skipped in the smoke run (a measurement; `cargo bench` runs it)");
        }
        for layout in LAYOUTS {
            let layer = Cell::new(0i64);
            let step = || {
                let l = layer.get();
                layer.set((l + 1) % cache.layers);
                decode_call(&pool, &cache, layout, l, &qt, &ot, &params);
            };
            g.throughput(Throughput::Bytes((2 * HKV * CTX * D * cache.e) as u64));
            let id = format!("decode_{}_{}_threads=2", layout.name(), cache.dtype_name());
            g.bench_function(BenchmarkId::new(id.as_str(), format!("ctx={CTX}")), |b| b.iter(&step));
        }
        if f32_kv {
            continue;
        }
        for tokens in [512i64, 2048] {
            let qp = float_values((HQ * tokens * D) as usize);
            let mut op = vec![0f32; (HQ * tokens * D) as usize];
            let qt = tensor(qp.as_ptr().cast(), sys::FER_DTYPE_F32, [HQ, tokens, D], [tokens * D * 4, D * 4, 4]);
            let ot = tensor(op.as_mut_ptr().cast(), sys::FER_DTYPE_F32, [HQ, tokens, D], [tokens * D * 4, D * 4, 4]);
            params.q_pos0 = 0;
            // causal: query i sees i + 1 keys; 2 x (QK and PV) x D flops per visible key per q head
            let flops = 2 * 2 * HQ * D * tokens * (tokens + 1) / 2;
            g.throughput(Throughput::Elements(flops as u64));
            for layout in LAYOUTS {
                // the first `tokens` positions of layer 0
                let (kt, vt) = cache.kv(layout, 0, tokens);
                g.bench_function(BenchmarkId::new(format!("prefill_{}_f16_threads=2", layout.name()), format!("tokens={tokens}")), |b| {
                    // SAFETY: descriptors over live buffers.
                    b.iter(|| ok(unsafe { sys::fer_attention(pool.ptr(), &qt, &kt, &vt, &params, &ot, std::ptr::null_mut(), 0) }))
                });
            }
        }
    }
    g.finish();

    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        let mut g = c.benchmark_group("ceiling");
        g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2)).sample_size(10);
        g.throughput(Throughput::Bytes(READ_BYTES as u64));
        g.bench_function(BenchmarkId::new("read_threads=2", READ_BYTES), |b| {
            b.iter(|| {
                std::thread::scope(|s| {
                    for part in probe_data.chunks(probe_data.len() / 2) {
                        // SAFETY: AVX2 checked above.
                        s.spawn(move || std::hint::black_box(unsafe { read_sum(part) }));
                    }
                })
            })
        });
        g.finish();
    }
}

criterion_group!(benches, bench_attention);
criterion_main!(benches);
