//! Attention benchmarks (issue: compute kernels): decode at a 4k context and causal prefill of 512
//! and 2048 tokens, for each KV layout, with the read-bandwidth ceiling in the same run.
//!
//! Model shape: 32 query heads, 8 KV heads, head_dim 128 (Llama-3-8B-like), KV in f16, a cache
//! of 32 layers. Each decode iteration reads the next layer's K and V (16.8 MB), so the 537 MB
//! cache streams from DRAM as in a real decode step, never from L3. Layouts: `head_major`
//! [layer][kv][head][pos][dim], `seq_major` [layer][kv][pos][head][dim], `token_major`
//! [pos][layer][kv][head][dim] (one token's K and V for every layer together).
//!
//! Ids: `attention/decode_{layout}_f16_threads=2/ctx=4096` (throughput = K+V bytes read),
//! `attention/prefill_{layout}_f16_threads=2/tokens={512,2048}`, `ceiling/read_threads=2/..`.
//! EVIDENCE: C-ATT-006

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ferrite_benches::{float_values, read_sum, Pool};
use ferrite_sys as sys;
use std::cell::Cell;
use std::time::Duration;

const HQ: i64 = 32;
const HKV: i64 = 8;
const D: i64 = 128;
const LAYERS: i64 = 32;

#[derive(Clone, Copy)]
enum Layout {
    HeadMajor,
    SeqMajor,
    TokenMajor,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Layout::HeadMajor => "head_major",
            Layout::SeqMajor => "seq_major",
            Layout::TokenMajor => "token_major",
        }
    }

    /// (byte offset of K of `layer` (V follows at + kv_offset), strides [head, pos, dim] in bytes,
    /// kv_offset) for a cache of `ctx` positions of f16.
    fn view(self, ctx: i64, layer: i64) -> (i64, [i64; 3], i64) {
        let e = 2;
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
                let token = LAYERS * 2 * HKV * D * e;
                (layer * 2 * HKV * D * e, [D * e, token, e], HKV * D * e)
            }
        }
    }
}

fn f16_buffer(n: usize) -> Vec<u16> {
    float_values(n).iter().map(|&v| half::f16::from_f32(v * 0.25).to_bits()).collect()
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

fn bench_attention(c: &mut Criterion) {
    let pool = Pool::new(2);
    let mut g = c.benchmark_group("attention");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(10);
    let ctx = 4096i64;
    let cache = f16_buffer((LAYERS * 2 * HKV * ctx * D) as usize);
    let base = cache.as_ptr() as *const u8;
    let q = float_values((HQ * D) as usize);
    let mut out = vec![0f32; (HQ * D) as usize];
    let qt = tensor(q.as_ptr().cast(), sys::FER_DTYPE_F32, [HQ, 1, D], [D * 4, D * 4, 4]);
    let ot = tensor(out.as_mut_ptr().cast(), sys::FER_DTYPE_F32, [HQ, 1, D], [D * 4, D * 4, 4]);
    // SAFETY: plain-data struct filled by init.
    let mut params: sys::fer_attention_params = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    ok(unsafe { sys::fer_attention_params_init(&mut params) });
    params.q_pos0 = ctx - 1;
    for layout in [Layout::HeadMajor, Layout::SeqMajor, Layout::TokenMajor] {
        let layer = Cell::new(0i64);
        g.throughput(Throughput::Bytes((2 * HKV * ctx * D * 2) as u64));
        g.bench_function(BenchmarkId::new(format!("decode_{}_f16_threads=2", layout.name()), format!("ctx={ctx}")), |b| {
            b.iter(|| {
                let l = layer.get();
                layer.set((l + 1) % LAYERS);
                let (off, st, kvo) = layout.view(ctx, l);
                // SAFETY: every view lies inside `cache` (offsets and strides from `view`).
                let kt = tensor(unsafe { base.add(off as usize) }, sys::FER_DTYPE_F16, [HKV, ctx, D], st);
                let vt = tensor(unsafe { base.add((off + kvo) as usize) }, sys::FER_DTYPE_F16, [HKV, ctx, D], st);
                // SAFETY: descriptors over live buffers.
                ok(unsafe { sys::fer_attention(pool.ptr(), &qt, &kt, &vt, &params, &ot, std::ptr::null_mut(), 0) });
            })
        });
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
        for layout in [Layout::HeadMajor, Layout::SeqMajor, Layout::TokenMajor] {
            let (off, st, kvo) = layout.view(ctx, 0);
            // SAFETY: the first `tokens` positions of layer 0 lie inside `cache`.
            let kt = tensor(unsafe { base.add(off as usize) }, sys::FER_DTYPE_F16, [HKV, tokens, D], st);
            let vt = tensor(unsafe { base.add((off + kvo) as usize) }, sys::FER_DTYPE_F16, [HKV, tokens, D], st);
            g.bench_function(BenchmarkId::new(format!("prefill_{}_f16_threads=2", layout.name()), format!("tokens={tokens}")), |b| {
                // SAFETY: descriptors over live buffers.
                b.iter(|| ok(unsafe { sys::fer_attention(pool.ptr(), &qt, &kt, &vt, &params, &ot, std::ptr::null_mut(), 0) }))
            });
        }
    }
    g.finish();

    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        const READ_BYTES: usize = 256 << 20;
        let data = float_values(READ_BYTES / 4);
        let mut g = c.benchmark_group("ceiling");
        g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2)).sample_size(10);
        g.throughput(Throughput::Bytes(READ_BYTES as u64));
        g.bench_function(BenchmarkId::new("read_threads=2", READ_BYTES), |b| {
            b.iter(|| {
                std::thread::scope(|s| {
                    for part in data.chunks(data.len() / 2) {
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
