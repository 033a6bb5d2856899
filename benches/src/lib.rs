//! Inputs of ferrite's benchmarks, generated exactly as the original system's benches generate them
//! (`../shared/reference/original-system.md`, A.0-A.1), so the scenario ids measure the same work.

use ferrite_sys as sys;

pub mod compare;
pub mod openblas;

/// The original `float_values(len)`: element i is `((i % 251) - 125) / 64`, in [-1.95, 1.95].
pub fn float_values(len: usize) -> Vec<f32> {
    (0..len).map(|i| ((i % 251) as f32 - 125.0) / 64.0).collect()
}

/// Element types the kernel benches cover, with their scenario-id spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchDtype {
    F32,
    F16,
    Bf16,
}

impl BenchDtype {
    pub const ALL: [BenchDtype; 3] = [BenchDtype::F32, BenchDtype::F16, BenchDtype::Bf16];

    pub fn name(self) -> &'static str {
        match self {
            BenchDtype::F32 => "f32",
            BenchDtype::F16 => "f16",
            BenchDtype::Bf16 => "bf16",
        }
    }

    pub fn code(self) -> sys::fer_dtype {
        (match self {
            BenchDtype::F32 => sys::FER_DTYPE_F32,
            BenchDtype::F16 => sys::FER_DTYPE_F16,
            BenchDtype::Bf16 => sys::FER_DTYPE_BF16,
        }) as sys::fer_dtype
    }
}

/// A contiguous buffer of one dtype, converted from f32 values the way the original converted them
/// (the `half` crate: round to nearest even). Stored in u64 words so every view is 8-byte aligned.
pub struct Buffer {
    words: Vec<u64>,
    pub dtype: BenchDtype,
}

impl Buffer {
    fn elem_size(dtype: BenchDtype) -> usize {
        if dtype == BenchDtype::F32 { 4 } else { 2 }
    }

    pub fn from_f32(values: &[f32], dtype: BenchDtype) -> Buffer {
        let mut buf = Buffer::zeroed(values.len(), dtype);
        let bytes = buf.bytes_mut();
        for (i, &v) in values.iter().enumerate() {
            match dtype {
                BenchDtype::F32 => bytes[4 * i..4 * i + 4].copy_from_slice(&v.to_ne_bytes()),
                BenchDtype::F16 => bytes[2 * i..2 * i + 2].copy_from_slice(&half::f16::from_f32(v).to_bits().to_ne_bytes()),
                BenchDtype::Bf16 => bytes[2 * i..2 * i + 2].copy_from_slice(&half::bf16::from_f32(v).to_bits().to_ne_bytes()),
            }
        }
        buf
    }

    pub fn zeroed(len: usize, dtype: BenchDtype) -> Buffer {
        let bytes = len * Buffer::elem_size(dtype);
        Buffer { words: vec![0; bytes.div_ceil(8).max(1)], dtype }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.words.len() * 8;
        // SAFETY: the words own `len` initialised bytes; u8 has no alignment requirement.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), len) }
    }

    /// A descriptor over the buffer with the given shape. The caller keeps `self` alive and
    /// unmoved while the descriptor is in use.
    pub fn tensor(&mut self, shape: &[i64]) -> sys::fer_tensor {
        let need: i64 = shape.iter().product::<i64>() * Buffer::elem_size(self.dtype) as i64;
        assert!(need as usize <= self.words.len() * 8, "shape {shape:?} exceeds the buffer");
        contiguous(self.words.as_mut_ptr().cast(), self.dtype.code(), shape)
    }
}

/// The original `synthetic_logits()`: V = 32,000, `((i*17 % 997) - 498) / 73` (heavy ties).
pub fn synthetic_logits() -> Vec<f32> {
    (0..32_000usize).map(|i| ((i * 17 % 997) as f32 - 498.0) / 73.0).collect()
}

/// The original Qwen3-sized generator: V = 151,936,
/// `((i*1103515245 + 12345) mod 1048573) / 65536 - 8` with wrapping usize arithmetic.
pub fn qwen3_logits() -> Vec<f32> {
    (0..151_936usize)
        .map(|i| (i.wrapping_mul(1103515245).wrapping_add(12345) % 1048573) as f32 / 65536.0 - 8.0)
        .collect()
}

/// The original's gather indices: `(i * 97) % rows`, as i64.
pub fn gather_indices(n: usize, rows: i64) -> Vec<i64> {
    (0..n as i64).map(|i| (i * 97) % rows).collect()
}

/// A contiguous fer_tensor over `data`; panics if ferrite refuses the descriptor (a bench bug).
pub fn contiguous(data: *mut std::ffi::c_void, dtype: sys::fer_dtype, shape: &[i64]) -> sys::fer_tensor {
    // SAFETY: fer_tensor is plain data; all-zero is a valid (empty) value that init overwrites.
    let mut t: sys::fer_tensor = unsafe { std::mem::zeroed() };
    // SAFETY: `t` and `shape` are valid for the call; ferrite only records `data`.
    let st = unsafe { sys::fer_tensor_init_contiguous(&mut t, data, dtype, shape.len() as i32, shape.as_ptr()) };
    assert_eq!(st, sys::FER_STATUS_OK as i32, "fer_tensor_init_contiguous refused {shape:?}");
    t
}

/// A `fer_sampler` created from `fer_sampling_params_init` plus `set`, freed on drop. Panics when
/// ferrite refuses (a bench bug, not a measurement).
pub struct Sampler(*mut sys::fer_sampler);

impl Sampler {
    pub fn new(set: impl FnOnce(&mut sys::fer_sampling_params)) -> Sampler {
        // SAFETY: plain-data struct, initialised by the C call.
        let mut p: sys::fer_sampling_params = unsafe { std::mem::zeroed() };
        let mut s = std::ptr::null_mut();
        // SAFETY: valid pointers for both calls.
        unsafe {
            assert_eq!(sys::fer_sampling_params_init(&mut p), 0);
            set(&mut p);
            assert_eq!(sys::fer_sampler_create(&p, &mut s), 0, "bench sampler params refused");
        }
        Sampler(s)
    }

    /// Runs the chain in place; returns the processor bits that ran.
    pub fn process(&self, logits: &mut [f32], ctx: &sys::fer_sampling_context) -> u32 {
        let mut applied = 0;
        // SAFETY: logits valid for its length; ctx borrows live vectors.
        let st = unsafe { sys::fer_sampler_process(self.0, logits.as_mut_ptr(), logits.len(), ctx, &mut applied) };
        assert_eq!(st, 0, "fer_sampler_process refused its bench input");
        applied
    }

    /// Runs the chain, then draws with the given uniform (empty history).
    pub fn sample(&self, logits: &mut [f32], u: f64) -> i32 {
        let mut tok = -1;
        let ctx = empty_ctx();
        // SAFETY: as in process.
        let st = unsafe {
            sys::fer_sampler_sample_uniform(self.0, logits.as_mut_ptr(), logits.len(), &ctx, u, &mut tok, std::ptr::null_mut())
        };
        assert_eq!(st, 0, "fer_sampler_sample_uniform refused its bench input");
        tok
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        // SAFETY: owned, freed once.
        unsafe { sys::fer_sampler_free(self.0) }
    }
}

/// A context with no history.
pub fn empty_ctx() -> sys::fer_sampling_context {
    sys::fer_sampling_context {
        prompt_tokens: std::ptr::null(),
        n_prompt: 0,
        generated_tokens: std::ptr::null(),
        n_generated: 0,
    }
}

/// The original's seven-processor chain: repetition 1.1, frequency 0.2, presence 0.1,
/// temperature 0.8, top-k 50, top-p 0.9, min-p 0.05 (its order is the chain's).
pub fn seven_processor_chain(p: &mut sys::fer_sampling_params) {
    p.repetition_penalty = 1.1;
    p.frequency_penalty = 0.2;
    p.presence_penalty = 0.1;
    p.temperature = 0.8;
    p.top_k = 50;
    p.top_p = 0.9;
    p.min_p = 0.05;
}

/// The original's `processor_context()` history: prompt `(0..128) % 97`, generated `(0..64) % 31`.
pub struct ChainHistory {
    pub prompt: Vec<i32>,
    pub generated: Vec<i32>,
}

impl ChainHistory {
    pub fn original() -> ChainHistory {
        ChainHistory { prompt: (0..128).map(|i| i % 97).collect(), generated: (0..64).map(|i| i % 31).collect() }
    }

    /// A context borrowing this history (keep `self` alive while it is used).
    pub fn ctx(&self) -> sys::fer_sampling_context {
        sys::fer_sampling_context {
            prompt_tokens: self.prompt.as_ptr(),
            n_prompt: self.prompt.len(),
            generated_tokens: self.generated.as_ptr(),
            n_generated: self.generated.len(),
        }
    }
}

/// The original bench's MXFP4 weight (`original-system.md` A.1): u8 [n, k/32, 17], every scale
/// byte 127 (2^0); for output row `out`, block `blk`, code byte `byte` (0..16) the low nibble is
/// (out + blk + byte) & 0xF and the high nibble (3 out + blk + byte) & 0xF.
pub fn mxfp4_weight(n: usize, k: usize) -> Vec<u8> {
    let kb = k / 32;
    let mut v = vec![0u8; n * kb * 17];
    for out in 0..n {
        for blk in 0..kb {
            let b = &mut v[(out * kb + blk) * 17..(out * kb + blk + 1) * 17];
            b[0] = 127;
            for byte in 0..16 {
                let lo = (out + blk + byte) & 0xF;
                let hi = (3 * out + blk + byte) & 0xF;
                b[1 + byte] = (lo | (hi << 4)) as u8;
            }
        }
    }
    v
}

/// An owned `fer_threadpool` at FER_ISA_AUTO for the benches.
pub struct Pool(*mut sys::fer_threadpool);

impl Pool {
    pub fn new(n_threads: u32) -> Pool {
        let mut opts: sys::fer_threadpool_options = unsafe { std::mem::zeroed() };
        // SAFETY: opts is a valid out-pointer; create reads it and writes the handle.
        unsafe {
            assert_eq!(sys::fer_threadpool_options_init(&mut opts), 0);
            opts.n_threads = n_threads;
            let mut p = std::ptr::null_mut();
            assert_eq!(sys::fer_threadpool_create(&opts, &mut p), 0, "pool of {n_threads} threads");
            Pool(p)
        }
    }

    pub fn ptr(&self) -> *mut sys::fer_threadpool {
        self.0
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: we own the pool and no call is running on it.
        unsafe { sys::fer_threadpool_free(self.0) }
    }
}

#[cfg(target_arch = "x86_64")]
/// 12 independent FMA chains of `iters` steps (the FMA-throughput ceiling).
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn fma_chains(iters: u64) -> f32 {
    use std::arch::x86_64::*;
    let x = _mm256_set1_ps(std::hint::black_box(0.999_999));
    let y = _mm256_set1_ps(std::hint::black_box(1e-7));
    let mut acc = [_mm256_setzero_ps(); 12];
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = _mm256_fmadd_ps(*a, x, y);
        }
    }
    let mut s = _mm256_setzero_ps();
    for a in acc {
        s = _mm256_add_ps(s, a);
    }
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), s);
    lanes.iter().sum()
}

/// Sums `v` read as eight concurrent streams, one cache line from each per step: a single
/// sequential stream per core is latency-bound well below what the memory delivers, and the
/// kernels it is the ceiling for (GEMV over 8 weight rows, attention over heads) read several.
#[cfg(target_arch = "x86_64")]
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
pub unsafe fn read_sum(v: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    const STREAMS: usize = 8;
    let seg = v.len() / STREAMS / 16 * 16;
    let p = v.as_ptr();
    let mut acc = [_mm256_setzero_ps(); STREAMS];
    let mut i = 0;
    while i < seg {
        for (s, a) in acc.iter_mut().enumerate() {
            let q = p.add(s * seg + i);
            *a = _mm256_add_ps(*a, _mm256_add_ps(_mm256_loadu_ps(q), _mm256_loadu_ps(q.add(8))));
        }
        i += 16;
    }
    let mut s = _mm256_setzero_ps();
    for a in acc {
        s = _mm256_add_ps(s, a);
    }
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), s);
    lanes.iter().sum::<f32>() + v[STREAMS * seg..].iter().sum::<f32>()
}


/// The repository root (benches/..).
pub fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where setup puts the test data: $FERRITE_DATA_DIR, else ~/.cache/ferrite.
pub fn data_dir() -> std::path::PathBuf {
    match std::env::var_os("FERRITE_DATA_DIR") {
        Some(d) if !d.is_empty() => d.into(),
        _ => std::path::Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cache/ferrite"),
    }
}

/// Whether this is a timed run (`cargo bench`, which passes `--bench`) rather than `cargo test`'s
/// smoke run, where criterion calls each benchmark once. Checks that are measurements themselves
/// (the attention layouts' rounds against the read probe) mean nothing untimed and are skipped.
pub fn timed_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}
