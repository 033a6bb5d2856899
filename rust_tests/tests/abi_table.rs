//! Every entry point of ffi/ferrite.h, one row each, with the same eye (issue 18, part 3): for each
//! pointer argument in turn, the call with that argument NULL (the others valid) answers the
//! status the header promises (NULL_ARG, or OK where the header makes the pointer optional), sets
//! every out-parameter it was given to the zero / NULL / -1 state the header promises (each is
//! filled with a sentinel first), leaves a message for fer_last_error_message, and changes nothing
//! (the counters of every object in the fixture are compared before and after). Where it is cheap
//! and changes nothing, the row also makes the all-valid call and expects OK, which shows the
//! fixture is valid and so the refusal was the NULL's.
//!
//! The table is checked against the header: a function declared in ffi/ferrite.h without a row
//! (or a row naming no function of the header) fails `c_abi_011_every_declared_function_has_a_row`.

use ferrite::status::*;
use ferrite::sys::*;
use ferrite::Status;
use std::collections::BTreeSet;
use std::ffi::CString;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::FromRawFd;
use std::os::raw::{c_char, c_void};
use std::ptr::{null, null_mut};

// ---------------------------------------------------------------------------------------------
// sentinels

const SB: u8 = 0xA5;

/// A value of T with every byte SB.
fn sentinel<T>() -> T {
    let mut v = MaybeUninit::<T>::uninit();
    // SAFETY: every T used here is plain old data (integers, floats, raw pointers, arrays).
    unsafe {
        std::ptr::write_bytes(v.as_mut_ptr().cast::<u8>(), SB, size_of::<T>());
        v.assume_init()
    }
}

fn bytes_of<T>(v: &T) -> &[u8] {
    // SAFETY: reading the bytes of a plain-old-data value.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }
}

fn is_zero<T>(v: &T) -> bool {
    bytes_of(v).iter().all(|&b| b == 0)
}

/// A pointer value no call may keep: a sentinel for pointer out-parameters.
fn bad_ptr<T>() -> *mut T {
    0xA5A5_A5A0usize as *mut T
}

fn nz<T>(n: &[bool], i: usize, p: *const T) -> *const T {
    if n[i] {
        null()
    } else {
        p
    }
}

fn nzm<T>(n: &[bool], i: usize, p: *mut T) -> *mut T {
    if n[i] {
        null_mut()
    } else {
        p
    }
}

thread_local! {
    /// The buffers `leak` hands out, kept by the test's thread until `teardown` drops them (each
    /// test runs on its own thread; LeakSanitizer sees them freed).
    static KEPT: std::cell::RefCell<Vec<Box<dyn std::any::Any>>> = std::cell::RefCell::new(Vec::new());
}

/// A buffer of n copies of v that lives until the test's teardown (its address does not move:
/// the boxed slice is kept, not its contents).
fn leak<T: Clone + 'static>(v: T, n: usize) -> *mut T {
    let mut b = vec![v; n].into_boxed_slice();
    let p = b.as_mut_ptr();
    KEPT.with(|k| k.borrow_mut().push(Box::new(b)));
    p
}

fn tensor<T>(data: *mut T, dt: i32, shape: &[i64]) -> fer_tensor {
    let es = size_of::<T>() as i64;
    let mut t = fer_tensor { data: data.cast(), dtype: dt, rank: shape.len() as i32, shape: [0; 8], strides: [0; 8] };
    let mut acc = es;
    for i in (0..shape.len()).rev() {
        t.shape[i] = shape[i];
        t.strides[i] = acc;
        acc *= shape[i].max(1);
    }
    t
}

/// An output buffer of n u32 words that a refused call must leave as it is.
#[derive(Clone, Copy)]
struct OutBuf {
    p: *mut u32,
    n: usize,
}

const OUT_WORD: u32 = 0x7fa5_a5a5;

impl OutBuf {
    fn new(n: usize) -> OutBuf {
        OutBuf { p: leak(OUT_WORD, n), n }
    }
    fn fill(&self) {
        // SAFETY: p holds n words.
        unsafe { std::slice::from_raw_parts_mut(self.p, self.n).fill(OUT_WORD) }
    }
    fn untouched(&self) -> bool {
        // SAFETY: p holds n words.
        unsafe { std::slice::from_raw_parts(self.p, self.n).iter().all(|&w| w == OUT_WORD) }
    }
    fn f32(&self) -> *mut f32 {
        self.p.cast()
    }
}

// ---------------------------------------------------------------------------------------------
// the fixture: one valid object of every kind

#[derive(Clone, Copy)]
struct H {
    pool: *mut fer_threadpool,
    image: *mut c_void,
    image_bytes: usize,
    model_path: *const c_char,
    engine: *mut fer_engine,
    eseq: *mut fer_engine_seq,
    sched: *mut fer_scheduler,
    tok: *mut fer_tokenizer,
    detok: *mut fer_detokenizer,
    gvocab: *mut fer_grammar_vocab,
    grammar: *mut fer_grammar,
    matcher: *mut fer_matcher,
    sampler: *mut fer_sampler,
    vmm: *mut fer_vmm,
    range: *mut fer_vmm_range,
    granule: u64,
    vmm_kv: *mut fer_vmm,
    gov: *mut fer_governor,
    dcache: *mut fer_dense_cache,
    store: *mut fer_weight_store,
    kvcache: *mut fer_kv_cache,
    kvseq: *mut fer_kv_seq,
    pages: *mut fer_kv_pages,
    pseq: u32,
    n_vocab: usize,
    model_fd: i32,
    dir: *const c_char,
}

fn ok(st: Status, what: &str) {
    assert_eq!(st, OK, "fixture: {what}: {}", ferrite::last_error_message());
}

fn fixture() -> H {
    // SAFETY: every call gets valid pointers; the objects live until teardown().
    unsafe {
        let mut h: H = std::mem::zeroed();
        let mut po: fer_threadpool_options = std::mem::zeroed();
        ok(fer_threadpool_options_init(&mut po), "pool options");
        po.n_threads = 1;
        ok(fer_threadpool_create(&po, &mut h.pool), "pool");
        let arch = CString::new("llama").unwrap();
        ok(fer_tiny_model_image(arch.as_ptr(), 7, &mut h.image, &mut h.image_bytes), "tiny model");
        // one directory per fixture: the tests of this file run in parallel, each with its own
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let k = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("ferrite-abi-table-{}-{k}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tiny.gguf");
        std::fs::write(&path, std::slice::from_raw_parts(h.image.cast::<u8>(), h.image_bytes)).unwrap();
        h.model_path = CString::new(path.to_str().unwrap()).unwrap().into_raw();
        h.dir = CString::new(dir.to_str().unwrap()).unwrap().into_raw();
        let f = std::fs::File::open(&path).unwrap();
        h.model_fd = std::os::unix::io::IntoRawFd::into_raw_fd(f);
        let mut cfg: fer_engine_config = std::mem::zeroed();
        ok(fer_engine_config_init(&mut cfg), "engine config");
        cfg.n_threads = 1;
        cfg.model_image = h.image;
        cfg.model_image_bytes = h.image_bytes as u64;
        cfg.max_seqs = 2;
        cfg.max_tokens = 64;
        ok(fer_engine_create(&cfg, &mut h.engine), "engine");
        let mut mi: fer_model_info = std::mem::zeroed();
        ok(fer_engine_model_info(h.engine, &mut mi), "model info");
        h.n_vocab = mi.n_vocab as usize;
        ok(fer_engine_seq_create(h.engine, 16, &mut h.eseq), "engine seq");
        ok(fer_engine_prefill(h.eseq, [1i32, 2].as_ptr(), 2, null_mut(), 0), "prefill");
        let mut so: fer_scheduler_options = std::mem::zeroed();
        ok(fer_scheduler_options_init(&mut so), "scheduler options");
        so.step_tokens = 16;
        ok(fer_scheduler_create(h.engine, &so, &mut h.sched), "scheduler");
        ok(fer_tokenizer_from_gguf_file(h.model_path, &mut h.tok), "tokenizer");
        ok(fer_detokenizer_create(h.tok, 0, &mut h.detok), "detokenizer");
        ok(fer_grammar_vocab_create(h.tok, 0, -1, &mut h.gvocab), "grammar vocabulary");
        let rx = b"[a-c]+x";
        ok(fer_grammar_compile(h.gvocab, FER_GRAMMAR_REGEX as i32, rx.as_ptr().cast(), rx.len(), 0, &mut h.grammar), "grammar");
        ok(fer_matcher_create(h.grammar, &mut h.matcher), "matcher");
        let mut sp: fer_sampling_params = std::mem::zeroed();
        ok(fer_sampling_params_init(&mut sp), "sampling params");
        ok(fer_sampler_create(&sp, &mut h.sampler), "sampler");
        let mut vo: fer_vmm_options = std::mem::zeroed();
        ok(fer_vmm_options_init(&mut vo), "vmm options");
        vo.granule_bytes = 1 << 16;
        vo.max_granules = 64;
        ok(fer_vmm_create(&vo, &mut h.vmm), "vmm");
        ok(fer_vmm_create(&vo, &mut h.vmm_kv), "vmm for kv");
        ok(fer_vmm_range_reserve(h.vmm, 4 << 16, &mut h.range), "range");
        ok(fer_vmm_granule_create(h.vmm, &mut h.granule), "granule");
        ok(fer_vmm_map(h.range, 0, h.granule, FER_VMM_ACCESS_READ_WRITE as i32), "map");
        ok(fer_governor_create(1 << 30, &mut h.gov), "governor");
        ok(fer_dense_cache_create(1 << 20, null_mut(), &mut h.dcache), "dense cache");
        let mut so: fer_weight_store_options = std::mem::zeroed();
        ok(fer_weight_store_options_init(&mut so), "store options");
        so.budget_bytes = 1 << 16;
        let store_bytes = (h.image_bytes as u64).min(1 << 16);
        ok(fer_weight_store_open(h.vmm, h.model_fd, 0, store_bytes, &so, &mut h.store), "weight store");
        let mut ko: fer_kv_cache_options = std::mem::zeroed();
        ok(fer_kv_cache_options_init(&mut ko), "kv options");
        ko.geometry.layout = FER_KV_LAYOUT_SEQ_MAJOR as i32;
        ko.geometry.n_layers = 1;
        ko.geometry.n_kv_heads = 1;
        ko.geometry.head_dim = 16;
        ko.geometry.elem_bytes = 4;
        ko.geometry.capacity_tokens = 64;
        ko.dtype = FER_DTYPE_F32 as i32;
        ok(fer_kv_cache_create(h.vmm_kv, &ko, &mut h.kvcache), "kv cache");
        ok(fer_kv_seq_create(h.kvcache, &mut h.kvseq), "kv seq");
        ok(fer_kv_seq_extend(h.kvseq, 4), "kv extend");
        ok(fer_kv_pages_create(8, 4, &mut h.pages), "pages");
        ok(fer_kv_pages_seq_create(h.pages, &mut h.pseq), "pages seq");
        ok(fer_kv_pages_append(h.pages, h.pseq, 2), "pages append");
        h
    }
}

/// Every counter of every object in the fixture: a refused call must not change any of them.
fn fingerprint(h: &H) -> Vec<u8> {
    let mut v = Vec::new();
    fn push<T>(v: &mut Vec<u8>, x: &T) {
        v.extend_from_slice(bytes_of(x));
    }
    // SAFETY: valid handles and out-pointers.
    unsafe {
        let mut n = 0u32;
        fer_threadpool_n_threads(h.pool, &mut n);
        push(&mut v, &n);
        for vmm in [h.vmm, h.vmm_kv] {
            let mut s: fer_vmm_stats = std::mem::zeroed();
            fer_vmm_get_stats(vmm, &mut s);
            push(&mut v, &s);
        }
        let (mut base, mut bytes) = (null_mut(), 0u64);
        fer_vmm_range_base(h.range, &mut base, &mut bytes);
        push(&mut v, &(base as usize, bytes));
        let mut g: fer_governor_stats = std::mem::zeroed();
        fer_governor_get_stats(h.gov, &mut g);
        push(&mut v, &g);
        let mut d: fer_dense_cache_stats = std::mem::zeroed();
        fer_dense_cache_get_stats(h.dcache, &mut d);
        push(&mut v, &d);
        let mut w: fer_weight_store_stats = std::mem::zeroed();
        fer_weight_store_get_stats(h.store, &mut w);
        push(&mut v, &w);
        let mut k: fer_kv_seq_stats = std::mem::zeroed();
        fer_kv_seq_get_stats(h.kvseq, &mut k);
        push(&mut v, &k);
        let mut sh: fer_kv_seq_sharing = std::mem::zeroed();
        fer_kv_seq_get_sharing(h.kvseq, &mut sh);
        push(&mut v, &sh);
        let mut p: fer_kv_pages_stats = std::mem::zeroed();
        fer_kv_pages_get_stats(h.pages, &mut p);
        push(&mut v, &p);
        let mut table = [0u32; 8];
        let (mut tn, mut tt) = (0usize, 0u64);
        fer_kv_pages_table(h.pages, h.pseq, table.as_mut_ptr(), 8, &mut tn, &mut tt);
        push(&mut v, &(table, tn, tt));
        let mut ti: fer_tokenizer_info = std::mem::zeroed();
        fer_tokenizer_get_info(h.tok, &mut ti);
        push(&mut v, &ti);
        let mut es: fer_engine_stats = std::mem::zeroed();
        fer_engine_get_stats(h.engine, &mut es);
        push(&mut v, &es);
        let mut ss: fer_scheduler_stats = std::mem::zeroed();
        fer_scheduler_get_stats(h.sched, &mut ss);
        push(&mut v, &ss);
        let mut qs: fer_engine_seq_stats = std::mem::zeroed();
        fer_engine_seq_get_stats(h.eseq, &mut qs);
        push(&mut v, &(qs.n_tokens, qs.max_tokens, qs.admitted_bytes, qs.kv_committed_bytes));
        let mut vi: fer_grammar_vocab_info = std::mem::zeroed();
        fer_grammar_vocab_get_info(h.gvocab, &mut vi);
        push(&mut v, &vi);
        let mut ms: fer_matcher_state = std::mem::zeroed();
        fer_matcher_get_state(h.matcher, &mut ms);
        push(&mut v, &ms);
        let mut em: *mut fer_matcher = null_mut();
        fer_engine_seq_matcher(h.eseq, &mut em);
        push(&mut v, &(em as usize));
    }
    v
}

// ---------------------------------------------------------------------------------------------
// the runner

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum W {
    /// NULL is refused with NULL_ARG.
    Null,
    /// The header makes this pointer optional: NULL gives OK.
    Opt,
}

/// (status, [(out-parameter, in the promised state after a refusal)]).
type Outcome = (Status, Vec<(&'static str, bool)>);

struct Ctx {
    h: H,
    failures: Vec<String>,
    rows: BTreeSet<&'static str>,
    cases: usize,
}

impl Ctx {
    fn row(&mut self, func: &'static str) -> bool {
        self.rows.insert(func);
        true
    }

    /// One case: `call` with argument `arg` NULL (or "" for the all-valid call) expecting `want`.
    fn case(&mut self, func: &'static str, arg: &str, want: Status, call: impl FnOnce(&H) -> Outcome) {
        let h = self.h;
        self.cases += 1;
        let before = fingerprint(&h); // successful calls: the message is clear now
        let (st, outs) = call(&h);
        let msg = ferrite::last_error_message();
        let after = fingerprint(&h);
        let what = if arg.is_empty() { format!("{func}(all valid)") } else { format!("{func}({arg} = NULL)") };
        let mut bad = Vec::new();
        if st != want {
            bad.push(format!("status {} ({}), want {} ({}); message {msg:?}", st, ferrite::status_str(st), want,
                             ferrite::status_str(want)));
        }
        if want != OK {
            if msg.is_empty() {
                bad.push("left no message".to_string());
            }
            for (o, fine) in outs {
                if !fine {
                    bad.push(format!("out-parameter {o} not in its failure state"));
                }
            }
            if before != after {
                bad.push("a refused call changed the fixture's counters".to_string());
            }
        }
        if !bad.is_empty() {
            self.failures.push(format!("{what}: {}", bad.join("; ")));
        }
    }

    /// Each argument of `args` NULL in turn (want per its W), then the all-valid call when `valid`.
    fn each(&mut self, func: &'static str, args: &[(&'static str, W)], valid: bool, call: impl Fn(&H, &[bool]) -> Outcome) {
        for (i, (name, w)) in args.iter().enumerate() {
            let mut mask = vec![false; args.len()];
            mask[i] = true;
            let want = if *w == W::Null { NULL_ARG } else { OK };
            self.case(func, name, want, |h| call(h, &mask));
        }
        if valid {
            let mask = vec![false; args.len()];
            self.case(func, "", OK, |h| call(h, &mask));
        }
    }

    /// A getter fn(handle, out): handle NULL (out zeroed), out NULL, then valid.
    fn getter<Hd, T>(&mut self, func: &'static str, handle: *const Hd, f: unsafe extern "C" fn(*const Hd, *mut T) -> Status) {
        if !self.row(func) {
            return;
        }
        self.each(func, &[("handle", W::Null), ("out", W::Null)], true, |_, n| {
            let mut o: T = sentinel();
            // SAFETY: the handle is valid or NULL; the out-pointer is valid or NULL.
            let st = unsafe { f(nz(n, 0, handle), nzm(n, 1, &mut o)) };
            (st, vec![("out", n[1] || is_zero(&o))])
        });
    }

    /// An initialiser fn(out): NULL refused, then valid.
    fn init<T>(&mut self, func: &'static str, f: unsafe extern "C" fn(*mut T) -> Status) {
        if !self.row(func) {
            return;
        }
        self.each(func, &[("out", W::Null)], true, |_, n| {
            let mut o: T = sentinel();
            // SAFETY: valid or NULL out-pointer.
            (unsafe { f(nzm(n, 0, &mut o)) }, vec![])
        });
    }

    /// A destructor returning a status: NULL is a no-op answering OK.
    fn free_status<T>(&mut self, func: &'static str, f: unsafe extern "C" fn(*mut T) -> Status) {
        if !self.row(func) {
            return;
        }
        // SAFETY: NULL is documented as a no-op.
        self.case(func, "handle (a no-op)", OK, |_| (unsafe { f(null_mut()) }, vec![]));
    }

    /// A destructor returning nothing: NULL is a no-op.
    fn free_void<T>(&mut self, func: &'static str, f: unsafe extern "C" fn(*mut T)) {
        if !self.row(func) {
            return;
        }
        self.case(func, "handle (a no-op)", OK, |_| {
            // SAFETY: NULL is documented as a no-op.
            unsafe { f(null_mut()) };
            (OK, vec![])
        });
    }
}

// ---------------------------------------------------------------------------------------------
// kernel inputs

struct K {
    a23: fer_tensor,
    b3: fer_tensor,
    out23: (fer_tensor, OutBuf),
    data43: fer_tensor,
    idx2: fer_tensor,
    idx2_i32: fer_tensor,
    out21: (fer_tensor, OutBuf),
    a24: fer_tensor,
    b43: fer_tensor,
    a2x32: fer_tensor,
    qm: fer_qmatrix,
    out24: (fer_tensor, OutBuf),
    out432: (fer_tensor, OutBuf),
    out232: (fer_tensor, OutBuf),
    q: fer_tensor,
    kv: fer_tensor,
    outq: (fer_tensor, OutBuf),
    w4: fer_tensor,
    x214: fer_tensor,
    pos2: fer_tensor,
    out214: (fer_tensor, OutBuf),
    out2i: (fer_tensor, OutBuf),
}

fn out_tensor(dt: i32, shape: &[i64]) -> (fer_tensor, OutBuf) {
    let n: i64 = shape.iter().product();
    let b = OutBuf::new(n as usize);
    (tensor(b.p, dt, shape), b)
}

fn kernels() -> K {
    let f = |n: usize, v: f32| leak(v, n);
    let qbuf = leak(0u8, 4 * 34); // Q8_0 blocks of zeros: a valid (zero) scale
    K {
        a23: tensor(f(6, 0.5), FER_DTYPE_F32 as i32, &[2, 3]),
        b3: tensor(f(3, 1.5), FER_DTYPE_F32 as i32, &[3]),
        out23: out_tensor(FER_DTYPE_F32 as i32, &[2, 3]),
        data43: tensor(f(12, 0.25), FER_DTYPE_F32 as i32, &[4, 3]),
        idx2: tensor(leak(1i64, 2), FER_DTYPE_I64 as i32, &[2]),
        idx2_i32: tensor(leak(1i32, 2), FER_DTYPE_I32 as i32, &[2]),
        out21: out_tensor(FER_DTYPE_F32 as i32, &[2, 1]),
        a24: tensor(f(8, 0.5), FER_DTYPE_F32 as i32, &[2, 4]),
        b43: tensor(f(12, 0.5), FER_DTYPE_F32 as i32, &[4, 3]),
        a2x32: tensor(f(64, 0.5), FER_DTYPE_F32 as i32, &[2, 32]),
        qm: fer_qmatrix { data: qbuf.cast(), bytes: 4 * 34, dtype: FER_DTYPE_Q8_0 as i32, reserved: 0, rows: 4, cols: 32, row_stride: 34 },
        out24: out_tensor(FER_DTYPE_F32 as i32, &[2, 4]),
        out432: out_tensor(FER_DTYPE_F32 as i32, &[4, 32]),
        out232: out_tensor(FER_DTYPE_F32 as i32, &[2, 32]),
        q: tensor(f(8, 0.5), FER_DTYPE_F32 as i32, &[1, 2, 4]),
        kv: tensor(f(12, 0.25), FER_DTYPE_F32 as i32, &[1, 3, 4]),
        outq: out_tensor(FER_DTYPE_F32 as i32, &[1, 2, 4]),
        w4: tensor(f(4, 1.0), FER_DTYPE_F32 as i32, &[4]),
        x214: tensor(f(8, 0.5), FER_DTYPE_F32 as i32, &[2, 1, 4]),
        pos2: tensor(leak(3i32, 2), FER_DTYPE_I32 as i32, &[2]),
        out214: out_tensor(FER_DTYPE_F32 as i32, &[2, 1, 4]),
        out2i: out_tensor(FER_DTYPE_I32 as i32, &[2]),
    }
}

/// A kernel row: `args` are the pointer arguments in order (the pool first, optional), `out` the
/// buffer a refused call must not touch.
fn kernel(c: &mut Ctx, func: &'static str, args: &[(&'static str, W)], out: OutBuf, call: impl Fn(&[bool]) -> Status) {
    if !c.row(func) {
        return;
    }
    c.each(func, args, true, |_, n| {
        out.fill();
        let st = call(n);
        (st, vec![("the output tensor's bytes", st == OK || out.untouched())])
    });
}

// ---------------------------------------------------------------------------------------------
// the rows

fn rows(c: &mut Ctx) {
    let k = kernels();
    let pool = c.h.pool;
    use W::{Null as N, Opt as O};

    // --- pure functions without pointer arguments: they cannot fail
    for func in ["fer_abi_version", "fer_cpu_features", "fer_cuda_is_built"] {
        c.row(func);
    }
    // SAFETY: static strings, never NULL.
    unsafe {
        for (func, s) in [
            ("fer_version_string", fer_version_string()),
            ("fer_build_info", fer_build_info()),
            ("fer_status_str", fer_status_str(12345)),
        ] {
            if c.row(func) && s.is_null() {
                c.failures.push(format!("{func} returned NULL"));
            }
        }
    }

    // --- fer_last_error_message: the one function whose own failures keep the message
    if c.row("fer_last_error_message") {
        // SAFETY: a failing call sets a message, then the reader is called with NULLs.
        unsafe {
            let mut sz = 0usize;
            fer_dtype_size(99, &mut sz);
            let before = ferrite::last_error_message();
            let mut len = sentinel::<usize>();
            let st1 = fer_last_error_message(null_mut(), 8, &mut len);
            let mut buf = [0 as c_char; 8];
            let st2 = fer_last_error_message(buf.as_mut_ptr(), 8, null_mut());
            let st3 = fer_last_error_message(null_mut(), 0, &mut len);
            let after = ferrite::last_error_message();
            c.cases += 3;
            if st1 != NULL_ARG || st2 != NULL_ARG || st3 != BUFFER_TOO_SMALL || before != after || before.is_empty() {
                c.failures.push(format!(
                    "fer_last_error_message: buf NULL cap 8 -> {st1}, out_len NULL -> {st2}, NULL cap 0 -> {st3} \
                     (want 1, 1, 3); message {before:?} -> {after:?} (must stay)"
                ));
            }
        }
    }

    // --- core
    if c.row("fer_dtype_size") {
        c.each("fer_dtype_size", &[("out_size", N)], true, |_, n| {
            let mut o = 0usize;
            (unsafe { fer_dtype_size(FER_DTYPE_F32 as i32, nzm(n, 0, &mut o)) }, vec![])
        });
    }
    if c.row("fer_tensor_check") {
        let t = k.a23;
        c.each("fer_tensor_check", &[("tensor", N)], true, |_, n| (unsafe { fer_tensor_check(nz(n, 0, &t)) }, vec![]));
    }
    if c.row("fer_tensor_init_contiguous") {
        let data = k.a23.data;
        c.each("fer_tensor_init_contiguous", &[("out", N), ("data", N), ("shape", N)], true, |_, n| {
            let mut o: fer_tensor = sentinel();
            let shape = [2i64, 3];
            let st = unsafe {
                fer_tensor_init_contiguous(nzm(n, 0, &mut o), nzm(n, 1, data), FER_DTYPE_F32 as i32, 2, nz(n, 2, shape.as_ptr()))
            };
            (st, vec![("out", n[0] || is_zero(&o))])
        });
    }
    c.init("fer_threadpool_options_init", fer_threadpool_options_init);
    if c.row("fer_threadpool_create") {
        c.each("fer_threadpool_create", &[("opts", O), ("out_pool", N)], false, |_, n| {
            let mut po: fer_threadpool_options = unsafe { std::mem::zeroed() };
            unsafe { fer_threadpool_options_init(&mut po) };
            po.n_threads = 1;
            let mut p: *mut fer_threadpool = bad_ptr();
            let st = unsafe { fer_threadpool_create(nz(n, 0, &po), nzm(n, 1, &mut p)) };
            if st == OK {
                unsafe { fer_threadpool_free(p) };
            }
            (st, vec![])
        });
    }
    c.free_void("fer_threadpool_free", fer_threadpool_free);
    c.getter("fer_threadpool_n_threads", pool, fer_threadpool_n_threads);
    c.getter("fer_threadpool_isa", pool, fer_threadpool_isa);

    // --- kernels (the pool is optional everywhere: NULL runs on the caller)
    let p = pool;
    let f32_ = FER_DTYPE_F32 as i32;
    let _ = f32_;
    kernel(c, "fer_add", &[("pool", O), ("a", N), ("b", N), ("out", N)], k.out23.1, |n| unsafe {
        fer_add(nzm(n, 0, p), nz(n, 1, &k.a23), nz(n, 2, &k.b3), nz(n, 3, &k.out23.0))
    });
    kernel(c, "fer_gather", &[("pool", O), ("data", N), ("indices", N), ("out", N)], k.out23.1, |n| unsafe {
        fer_gather(nzm(n, 0, p), nz(n, 1, &k.data43), nz(n, 2, &k.idx2), nz(n, 3, &k.out23.0))
    });
    kernel(c, "fer_reduce_mean", &[("pool", O), ("x", N), ("out", N)], k.out21.1, |n| unsafe {
        fer_reduce_mean(nzm(n, 0, p), nz(n, 1, &k.a23), nz(n, 2, &k.out21.0))
    });
    if c.row("fer_matmul_workspace_bytes") {
        c.each("fer_matmul_workspace_bytes", &[("pool", O), ("a", N), ("b", N), ("out", N), ("out_bytes", N)], true, |_, n| {
            let mut o: usize = sentinel();
            let st = unsafe {
                fer_matmul_workspace_bytes(nz(n, 0, p), nz(n, 1, &k.a24), nz(n, 2, &k.b43), FER_MATMUL_B_KN as i32, nz(n, 3, &k.out23.0),
                                           nzm(n, 4, &mut o))
            };
            (st, vec![("out_bytes", n[4] || o == 0)])
        });
    }
    kernel(c, "fer_matmul", &[("pool", O), ("a", N), ("b", N), ("out", N), ("workspace", O)], k.out23.1, |n| unsafe {
        fer_matmul(nzm(n, 0, p), nz(n, 1, &k.a24), nz(n, 2, &k.b43), FER_MATMUL_B_KN as i32, nz(n, 3, &k.out23.0), null_mut(), 0)
    });
    if c.row("fer_qblock_size") {
        c.each("fer_qblock_size", &[("out_block_elems", N), ("out_block_bytes", N)], true, |_, n| {
            let (mut e, mut b): (i64, i64) = (sentinel(), sentinel());
            let st = unsafe { fer_qblock_size(FER_DTYPE_Q8_0 as i32, nzm(n, 0, &mut e), nzm(n, 1, &mut b)) };
            (st, vec![("out_block_elems", n[0] || e == 0), ("out_block_bytes", n[1] || b == 0)])
        });
    }
    if c.row("fer_qmatrix_check") {
        c.each("fer_qmatrix_check", &[("w", N)], true, |_, n| (unsafe { fer_qmatrix_check(nz(n, 0, &k.qm)) }, vec![]));
    }
    kernel(c, "fer_dequantize", &[("pool", O), ("w", N), ("out", N)], k.out432.1, |n| unsafe {
        fer_dequantize(nzm(n, 0, p), nz(n, 1, &k.qm), nz(n, 2, &k.out432.0))
    });
    type QWs = unsafe extern "C" fn(*const fer_threadpool, *const fer_tensor, *const fer_qmatrix, *const fer_tensor, *mut usize) -> Status;
    for (func, f) in [
        ("fer_matmul_quant_workspace_bytes", fer_matmul_quant_workspace_bytes as QWs),
        ("fer_matmul_quant_i8_workspace_bytes", fer_matmul_quant_i8_workspace_bytes as QWs),
    ] {
        if c.row(func) {
            c.each(func, &[("pool", O), ("a", N), ("w", N), ("out", N), ("out_bytes", N)], true, |_, n| {
                let mut o: usize = sentinel();
                let st = unsafe { f(nz(n, 0, p), nz(n, 1, &k.a2x32), nz(n, 2, &k.qm), nz(n, 3, &k.out24.0), nzm(n, 4, &mut o)) };
                (st, vec![("out_bytes", n[4] || o == 0)])
            });
        }
    }
    type QMm = unsafe extern "C" fn(*mut fer_threadpool, *const fer_tensor, *const fer_qmatrix, *const fer_tensor, *mut c_void, usize) -> Status;
    for (func, f) in [("fer_matmul_quant", fer_matmul_quant as QMm), ("fer_matmul_quant_i8", fer_matmul_quant_i8 as QMm)] {
        kernel(c, func, &[("pool", O), ("a", N), ("w", N), ("out", N), ("workspace", O)], k.out24.1, |n| unsafe {
            f(nzm(n, 0, p), nz(n, 1, &k.a2x32), nz(n, 2, &k.qm), nz(n, 3, &k.out24.0), null_mut(), 0)
        });
    }
    kernel(c, "fer_embedding_quant", &[("pool", O), ("table", N), ("ids", N), ("out", N)], k.out232.1, |n| unsafe {
        fer_embedding_quant(nzm(n, 0, p), nz(n, 1, &k.qm), nz(n, 2, &k.idx2_i32), nz(n, 3, &k.out232.0))
    });
    c.init("fer_attention_params_init", fer_attention_params_init);
    let ap = ferrite::attention_params();
    if c.row("fer_attention_workspace_bytes") {
        c.each(
            "fer_attention_workspace_bytes",
            &[("pool", O), ("q", N), ("k", N), ("v", N), ("params", N), ("out", N), ("out_bytes", N)],
            true,
            |_, n| {
                let mut o: usize = sentinel();
                let st = unsafe {
                    fer_attention_workspace_bytes(nz(n, 0, p), nz(n, 1, &k.q), nz(n, 2, &k.kv), nz(n, 3, &k.kv), nz(n, 4, &ap),
                                                  nz(n, 5, &k.outq.0), nzm(n, 6, &mut o))
                };
                (st, vec![("out_bytes", n[6] || o == 0)])
            },
        );
    }
    kernel(
        c,
        "fer_attention",
        &[("pool", O), ("q", N), ("k", N), ("v", N), ("params", N), ("out", N), ("workspace", O)],
        k.outq.1,
        |n| unsafe {
            fer_attention(nzm(n, 0, p), nz(n, 1, &k.q), nz(n, 2, &k.kv), nz(n, 3, &k.kv), nz(n, 4, &ap), nz(n, 5, &k.outq.0), null_mut(), 0)
        },
    );
    kernel(c, "fer_rms_norm", &[("pool", O), ("x", N), ("weight", O), ("out", N)], k.out24.1, |n| unsafe {
        fer_rms_norm(nzm(n, 0, p), nz(n, 1, &k.a24), nz(n, 2, &k.w4), 1e-5, nz(n, 3, &k.out24.0))
    });
    kernel(c, "fer_rope", &[("pool", O), ("x", N), ("positions", N), ("out", N)], k.out214.1, |n| unsafe {
        fer_rope(nzm(n, 0, p), nz(n, 1, &k.x214), nz(n, 2, &k.pos2), FER_ROPE_NEOX as i32, 4, 10000.0, nz(n, 3, &k.out214.0))
    });
    type Unary = unsafe extern "C" fn(*mut fer_threadpool, *const fer_tensor, *const fer_tensor) -> Status;
    for (func, f) in [("fer_silu", fer_silu as Unary), ("fer_softmax", fer_softmax as Unary)] {
        kernel(c, func, &[("pool", O), ("x", N), ("out", N)], k.out24.1, |n| unsafe {
            f(nzm(n, 0, p), nz(n, 1, &k.a24), nz(n, 2, &k.out24.0))
        });
    }
    kernel(c, "fer_swiglu", &[("pool", O), ("gate", N), ("up", N), ("out", N)], k.out24.1, |n| unsafe {
        fer_swiglu(nzm(n, 0, p), nz(n, 1, &k.a24), nz(n, 2, &k.a24), nz(n, 3, &k.out24.0))
    });
    kernel(c, "fer_argmax", &[("pool", O), ("x", N), ("out", N)], k.out2i.1, |n| unsafe {
        fer_argmax(nzm(n, 0, p), nz(n, 1, &k.a24), nz(n, 2, &k.out2i.0))
    });
    kernel(c, "fer_embedding", &[("pool", O), ("table", N), ("ids", N), ("out", N)], k.out23.1, |n| unsafe {
        fer_embedding(nzm(n, 0, p), nz(n, 1, &k.data43), nz(n, 2, &k.idx2_i32), nz(n, 3, &k.out23.0))
    });

    // --- sampling
    c.init("fer_sampling_params_init", fer_sampling_params_init);
    if c.row("fer_sampler_create") {
        c.each("fer_sampler_create", &[("params", N), ("out_sampler", N)], true, |_, n| {
            let mut sp: fer_sampling_params = unsafe { std::mem::zeroed() };
            unsafe { fer_sampling_params_init(&mut sp) };
            let mut s: *mut fer_sampler = bad_ptr();
            let st = unsafe { fer_sampler_create(nz(n, 0, &sp), nzm(n, 1, &mut s)) };
            if st == OK {
                unsafe { fer_sampler_free(s) };
            }
            (st, vec![("out_sampler", n[1] || s.is_null())])
        });
    }
    c.free_void("fer_sampler_free", fer_sampler_free);
    let ctx: fer_sampling_context = unsafe { std::mem::zeroed() };
    let base_logits = [0.5f32, 2.0, -1.0, 1.5];
    if c.row("fer_sampler_process") {
        c.each("fer_sampler_process", &[("sampler", N), ("logits", N), ("ctx", N), ("out_applied", O)], true, |h, n| {
            let mut l = base_logits;
            let mut a: u32 = sentinel();
            let st = unsafe { fer_sampler_process(nzm(n, 0, h.sampler), nzm(n, 1, l.as_mut_ptr()), 4, nz(n, 2, &ctx), nzm(n, 3, &mut a)) };
            (st, vec![("out_applied", n[3] || a == 0), ("logits (unchanged)", l == base_logits)])
        });
    }
    if c.row("fer_sampler_sample") {
        c.each(
            "fer_sampler_sample",
            &[("sampler", N), ("logits", N), ("ctx", N), ("out_token", N), ("out_logprob", O)],
            true,
            |h, n| {
                let mut l = base_logits;
                let (mut t, mut lp): (i32, f32) = (sentinel(), sentinel());
                let st = unsafe {
                    fer_sampler_sample(nzm(n, 0, h.sampler), nzm(n, 1, l.as_mut_ptr()), 4, nz(n, 2, &ctx), nzm(n, 3, &mut t), nzm(n, 4, &mut lp))
                };
                (st, vec![("out_token (-1)", n[3] || t == -1), ("out_logprob", n[4] || lp == 0.0), ("logits (unchanged)", l == base_logits)])
            },
        );
    }
    if c.row("fer_sampler_sample_uniform") {
        c.each(
            "fer_sampler_sample_uniform",
            &[("sampler", N), ("logits", N), ("ctx", N), ("out_token", N), ("out_logprob", O)],
            true,
            |h, n| {
                let mut l = base_logits;
                let (mut t, mut lp): (i32, f32) = (sentinel(), sentinel());
                let st = unsafe {
                    fer_sampler_sample_uniform(nzm(n, 0, h.sampler), nzm(n, 1, l.as_mut_ptr()), 4, nz(n, 2, &ctx), 0.5, nzm(n, 3, &mut t),
                                               nzm(n, 4, &mut lp))
                };
                (st, vec![("out_token (-1)", n[3] || t == -1), ("out_logprob", n[4] || lp == 0.0), ("logits (unchanged)", l == base_logits)])
            },
        );
    }
    if c.row("fer_sample_greedy") {
        c.each("fer_sample_greedy", &[("logits", N), ("out_token", N)], true, |_, n| {
            let mut t: i32 = sentinel();
            let st = unsafe { fer_sample_greedy(nz(n, 0, base_logits.as_ptr()), 4, nzm(n, 1, &mut t)) };
            (st, vec![("out_token (-1)", n[1] || t == -1)])
        });
    }
    if c.row("fer_logits_top_logprobs") {
        c.each(
            "fer_logits_top_logprobs",
            &[("logits", N), ("out_tokens", N), ("out_logprobs", N), ("out_n", N)],
            true,
            |_, n| {
                let (mut toks, mut lps, mut on) = ([0i32; 2], [0f32; 2], sentinel::<usize>());
                let st = unsafe {
                    fer_logits_top_logprobs(nz(n, 0, base_logits.as_ptr()), 4, 2, nzm(n, 1, toks.as_mut_ptr()), nzm(n, 2, lps.as_mut_ptr()),
                                            nzm(n, 3, &mut on))
                };
                (st, vec![("out_n", n[3] || on == 0)])
            },
        );
    }
    if c.row("fer_sampling_uniform") {
        c.each("fer_sampling_uniform", &[("out_uniform", N)], true, |_, n| {
            let mut u = 0f64;
            (unsafe { fer_sampling_uniform(1, 2, nzm(n, 0, &mut u)) }, vec![])
        });
    }

    // --- memory
    let ranges = [fer_byte_range { offset: 0, length: 100 }];
    if c.row("fer_granules_covering") {
        c.each("fer_granules_covering", &[("ranges", N), ("out_granules", N)], true, |_, n| {
            let mut o: u64 = sentinel();
            let st = unsafe { fer_granules_covering(nz(n, 0, ranges.as_ptr()), 1, 4096, nzm(n, 1, &mut o)) };
            (st, vec![("out_granules", n[1] || o == 0)])
        });
    }
    let geom = fer_kv_geometry {
        struct_size: size_of::<fer_kv_geometry>() as u32,
        layout: FER_KV_LAYOUT_SEQ_MAJOR as i32,
        n_layers: 1,
        n_kv_heads: 1,
        head_dim: 16,
        elem_bytes: 4,
        capacity_tokens: 64,
    };
    if c.row("fer_kv_committed_granules") {
        c.each("fer_kv_committed_granules", &[("geometry", N), ("out_granules", N)], true, |_, n| {
            let mut o: u64 = sentinel();
            let st = unsafe { fer_kv_committed_granules(nz(n, 0, &geom), 4, 4096, nzm(n, 1, &mut o)) };
            (st, vec![("out_granules", n[1] || o == 0)])
        });
    }
    if c.row("fer_kv_live_ranges") {
        c.each(
            "fer_kv_live_ranges",
            &[("geometry", N), ("ranges", N), ("out_n", N), ("out_n_bindings", O)],
            true,
            |_, n| {
                let mut r = [fer_byte_range { offset: 0, length: 0 }; 4];
                let (mut on, mut nb): (usize, u32) = (sentinel(), sentinel());
                let st = unsafe { fer_kv_live_ranges(nz(n, 0, &geom), 4, 0, nzm(n, 1, r.as_mut_ptr()), 4, nzm(n, 2, &mut on), nzm(n, 3, &mut nb)) };
                (st, vec![("out_n", n[2] || on == 0), ("out_n_bindings", n[3] || nb == 0)])
            },
        );
    }
    c.init("fer_vmm_options_init", fer_vmm_options_init);
    if c.row("fer_vmm_create") {
        c.each("fer_vmm_create", &[("opts", O), ("out_vmm", N)], true, |_, n| {
            let mut vo: fer_vmm_options = unsafe { std::mem::zeroed() };
            unsafe { fer_vmm_options_init(&mut vo) };
            vo.granule_bytes = 1 << 16;
            vo.max_granules = 4;
            let mut v: *mut fer_vmm = bad_ptr();
            let st = unsafe { fer_vmm_create(nz(n, 0, &vo), nzm(n, 1, &mut v)) };
            if st == OK {
                unsafe { fer_vmm_free(v) };
            }
            (st, vec![("out_vmm", n[1] || v.is_null())])
        });
    }
    c.free_status("fer_vmm_free", fer_vmm_free);
    c.getter("fer_vmm_get_stats", c.h.vmm, fer_vmm_get_stats);
    if c.row("fer_vmm_granule_create") {
        c.each("fer_vmm_granule_create", &[("vmm", N), ("out_granule", N)], false, |h, n| {
            let mut g: u64 = sentinel();
            let st = unsafe { fer_vmm_granule_create(nzm(n, 0, h.vmm), nzm(n, 1, &mut g)) };
            (st, vec![("out_granule", n[1] || g == u64::MAX)])
        });
    }
    if c.row("fer_vmm_granule_release") {
        c.each("fer_vmm_granule_release", &[("vmm", N)], false, |h, n| (unsafe { fer_vmm_granule_release(nzm(n, 0, h.vmm), h.granule) }, vec![]));
    }
    if c.row("fer_vmm_range_reserve") {
        c.each("fer_vmm_range_reserve", &[("vmm", N), ("out_range", N)], true, |h, n| {
            let mut r: *mut fer_vmm_range = bad_ptr();
            let st = unsafe { fer_vmm_range_reserve(nzm(n, 0, h.vmm), 1 << 16, nzm(n, 1, &mut r)) };
            if st == OK {
                unsafe { fer_vmm_range_free(r) };
            }
            (st, vec![("out_range", n[1] || r.is_null())])
        });
    }
    c.free_status("fer_vmm_range_free", fer_vmm_range_free);
    if c.row("fer_vmm_range_base") {
        c.each("fer_vmm_range_base", &[("range", N), ("out_base", N), ("out_bytes", N)], true, |h, n| {
            let (mut b, mut by): (*mut c_void, u64) = (bad_ptr(), sentinel());
            let st = unsafe { fer_vmm_range_base(nz(n, 0, h.range), nzm(n, 1, &mut b), nzm(n, 2, &mut by)) };
            (st, vec![("out_base", n[1] || b.is_null()), ("out_bytes", n[2] || by == 0)])
        });
    }
    if c.row("fer_vmm_map") {
        c.each("fer_vmm_map", &[("range", N)], false, |h, n| {
            (unsafe { fer_vmm_map(nzm(n, 0, h.range), 1 << 16, h.granule, FER_VMM_ACCESS_READ_ONLY as i32) }, vec![])
        });
    }
    if c.row("fer_vmm_unmap") {
        c.each("fer_vmm_unmap", &[("range", N)], false, |_, n| (unsafe { fer_vmm_unmap(nzm(n, 0, null_mut()), 0) }, vec![]));
    }
    if c.row("fer_vmm_copy_on_write") {
        c.each("fer_vmm_copy_on_write", &[("range", N), ("out_granule", N), ("out_bytes_copied", N)], false, |h, n| {
            let (mut g, mut b): (u64, u64) = (sentinel(), sentinel());
            let st = unsafe { fer_vmm_copy_on_write(nzm(n, 0, h.range), 0, nzm(n, 1, &mut g), nzm(n, 2, &mut b)) };
            (st, vec![("out_granule", n[1] || g == u64::MAX), ("out_bytes_copied", n[2] || b == 0)])
        });
    }
    if c.row("fer_vmm_set_frozen") {
        c.each("fer_vmm_set_frozen", &[("vmm", N)], false, |_, n| (unsafe { fer_vmm_set_frozen(nzm(n, 0, null_mut()), true) }, vec![]));
    }
    if c.row("fer_governor_create") {
        c.each("fer_governor_create", &[("out_governor", N)], true, |_, n| {
            let mut g: *mut fer_governor = bad_ptr();
            let st = unsafe { fer_governor_create(1 << 20, nzm(n, 0, &mut g)) };
            if st == OK {
                unsafe { fer_governor_free(g) };
            }
            (st, vec![])
        });
    }
    c.free_status("fer_governor_free", fer_governor_free);
    c.getter("fer_governor_get_stats", c.h.gov, fer_governor_get_stats);
    type Charge = unsafe extern "C" fn(*mut fer_governor, fer_mem_role, u64) -> Status;
    for (func, f) in [("fer_governor_charge", fer_governor_charge as Charge), ("fer_governor_release", fer_governor_release as Charge)] {
        if c.row(func) {
            c.each(func, &[("governor", N)], false, |_, n| (unsafe { f(nzm(n, 0, null_mut()), FER_MEM_ROLE_KV as i32, 1) }, vec![]));
        }
    }
    if c.row("fer_governor_grant_begin") {
        c.each("fer_governor_grant_begin", &[("governor", N), ("out_grant", N)], true, |h, n| {
            let mut g: *mut fer_grant = bad_ptr();
            let st = unsafe { fer_governor_grant_begin(nzm(n, 0, h.gov), FER_MEM_ROLE_KV as i32, 100, nzm(n, 1, &mut g)) };
            if st == OK {
                unsafe { fer_grant_cancel(g) };
            }
            (st, vec![("out_grant", n[1] || g.is_null())])
        });
    }
    if c.row("fer_grant_commit") {
        c.each("fer_grant_commit", &[("grant", N)], false, |_, n| (unsafe { fer_grant_commit(nzm(n, 0, null_mut()), 0) }, vec![]));
    }
    c.free_status("fer_grant_cancel", fer_grant_cancel);
    if c.row("fer_governor_admit_sequence") {
        c.each("fer_governor_admit_sequence", &[("governor", N), ("geometry", N), ("out_bytes", N)], false, |h, n| {
            let mut o: u64 = sentinel();
            let st = unsafe { fer_governor_admit_sequence(nzm(n, 0, h.gov), nz(n, 1, &geom), 8, 4096, nzm(n, 2, &mut o)) };
            (st, vec![("out_bytes", n[2] || o == 0)])
        });
    }
    if c.row("fer_vmm_set_governor") {
        // governor NULL detaches (optional), but only while nothing is mapped: the fixture's vmm
        // has a window mapped, so the cases run on a vmm of their own, with nothing mapped
        let v = unsafe {
            let mut vo: fer_vmm_options = std::mem::zeroed();
            fer_vmm_options_init(&mut vo);
            vo.granule_bytes = 1 << 16;
            vo.max_granules = 2;
            let mut v = null_mut();
            ok(fer_vmm_create(&vo, &mut v), "a vmm with nothing mapped");
            v
        };
        c.each("fer_vmm_set_governor", &[("vmm", N), ("governor", O)], true, |h, n| {
            (unsafe { fer_vmm_set_governor(nzm(n, 0, v), nzm(n, 1, h.gov), FER_MEM_ROLE_KV as i32) }, vec![])
        });
        // SAFETY: v is this row's own vmm, detached from the governor and freed once.
        unsafe {
            ok(fer_vmm_set_governor(v, null_mut(), FER_MEM_ROLE_KV as i32), "detach the governor");
            ok(fer_vmm_free(v), "free the row's vmm");
        }
    }
    if c.row("fer_dense_cache_create") {
        c.each("fer_dense_cache_create", &[("governor", O), ("out_cache", N)], false, |h, n| {
            let mut d: *mut fer_dense_cache = bad_ptr();
            let st = unsafe { fer_dense_cache_create(1 << 16, nzm(n, 0, h.gov), nzm(n, 1, &mut d)) };
            if st == OK {
                unsafe { fer_dense_cache_free(d) };
            }
            (st, vec![])
        });
    }
    c.free_status("fer_dense_cache_free", fer_dense_cache_free);
    if c.row("fer_dense_cache_get") {
        c.each("fer_dense_cache_get", &[("cache", N), ("w", N), ("out_dense", N)], false, |h, n| {
            let mut o: *const f32 = bad_ptr();
            let st = unsafe { fer_dense_cache_get(nzm(n, 0, h.dcache), h.pool, 1, nz(n, 1, &k.qm), 0, nzm(n, 2, &mut o)) };
            (st, vec![("out_dense", n[2] || o.is_null())])
        });
    }
    c.getter("fer_dense_cache_get_stats", c.h.dcache, fer_dense_cache_get_stats);
    c.init("fer_weight_store_options_init", fer_weight_store_options_init);
    if c.row("fer_weight_store_open") {
        c.each("fer_weight_store_open", &[("vmm", N), ("opts", N), ("out_store", N)], false, |h, n| {
            let mut so: fer_weight_store_options = unsafe { std::mem::zeroed() };
            unsafe { fer_weight_store_options_init(&mut so) };
            so.budget_bytes = 1 << 16;
            let mut s: *mut fer_weight_store = bad_ptr();
            let st = unsafe { fer_weight_store_open(nzm(n, 0, h.vmm), h.model_fd, 0, 4096, nz(n, 1, &so), nzm(n, 2, &mut s)) };
            (st, vec![("out_store", n[2] || s.is_null())])
        });
    }
    c.free_status("fer_weight_store_free", fer_weight_store_free);
    c.getter("fer_weight_store_base", c.h.store, fer_weight_store_base);
    if c.row("fer_weight_store_acquire") {
        c.each("fer_weight_store_acquire", &[("store", N), ("out_ptr", N)], false, |h, n| {
            let mut o: *const c_void = bad_ptr();
            let st = unsafe { fer_weight_store_acquire(nzm(n, 0, h.store), 0, 16, nzm(n, 1, &mut o)) };
            (st, vec![("out_ptr", n[1] || o.is_null())])
        });
    }
    c.getter("fer_weight_store_get_stats", c.h.store, fer_weight_store_get_stats);
    c.init("fer_moe_params_init", fer_moe_params_init);
    if c.row("fer_moe") {
        let (e, hd, i) = (2i64, 32i64, 32i64);
        let qm = |rows: i64, cols: i64| {
            let b = leak(0u8, (rows * cols / 32 * 34) as usize);
            fer_qmatrix { data: b.cast(), bytes: (rows * cols / 32 * 34) as u64, dtype: FER_DTYPE_Q8_0 as i32, reserved: 0, rows, cols,
                          row_stride: cols / 32 * 34 }
        };
        let (fc1, fc2) = (qm(e * i, hd), qm(e * hd, i));
        let x = tensor(leak(0.5f32, hd as usize), FER_DTYPE_F32 as i32, &[1, hd]);
        let lg = tensor(leak(0.25f32, e as usize), FER_DTYPE_F32 as i32, &[1, e]);
        let (out, ob) = out_tensor(FER_DTYPE_F32 as i32, &[1, hd]);
        let mp = ferrite::moe_params();
        kernel(
            c,
            "fer_moe",
            &[("pool", O), ("x", N), ("router_logits", N), ("fc1", N), ("fc2", N), ("params", N), ("out", N)],
            ob,
            |n| unsafe { fer_moe(nzm(n, 0, p), nz(n, 1, &x), nz(n, 2, &lg), nz(n, 3, &fc1), nz(n, 4, &fc2), nz(n, 5, &mp), nz(n, 6, &out)) },
        );
    }

    // --- KV cache (c/kv)
    c.init("fer_kv_cache_options_init", fer_kv_cache_options_init);
    if c.row("fer_kv_cache_create") {
        c.each("fer_kv_cache_create", &[("vmm", N), ("opts", N), ("out_cache", N)], false, |h, n| {
            let mut ko: fer_kv_cache_options = unsafe { std::mem::zeroed() };
            unsafe { fer_kv_cache_options_init(&mut ko) };
            ko.geometry = geom;
            ko.dtype = FER_DTYPE_F32 as i32;
            let mut kc: *mut fer_kv_cache = bad_ptr();
            let st = unsafe { fer_kv_cache_create(nzm(n, 0, h.vmm_kv), nz(n, 1, &ko), nzm(n, 2, &mut kc)) };
            (st, vec![("out_cache", n[2] || kc.is_null())])
        });
    }
    c.free_status("fer_kv_cache_free", fer_kv_cache_free);
    if c.row("fer_kv_seq_create") {
        c.each("fer_kv_seq_create", &[("cache", N), ("out_seq", N)], false, |h, n| {
            let mut s: *mut fer_kv_seq = bad_ptr();
            let st = unsafe { fer_kv_seq_create(nzm(n, 0, h.kvcache), nzm(n, 1, &mut s)) };
            (st, vec![("out_seq", n[1] || s.is_null())])
        });
    }
    c.free_status("fer_kv_seq_free", fer_kv_seq_free);
    type SeqU64 = unsafe extern "C" fn(*mut fer_kv_seq, u64) -> Status;
    for (func, f) in [("fer_kv_seq_extend", fer_kv_seq_extend as SeqU64), ("fer_kv_seq_truncate", fer_kv_seq_truncate as SeqU64)] {
        if c.row(func) {
            c.each(func, &[("seq", N)], false, |_, n| (unsafe { f(nzm(n, 0, null_mut()), 2) }, vec![]));
        }
    }
    c.getter("fer_kv_seq_get_stats", c.h.kvseq, fer_kv_seq_get_stats);
    if c.row("fer_kv_seq_view") {
        c.each("fer_kv_seq_view", &[("seq", N), ("out_view", N)], true, |h, n| {
            let mut v: fer_tensor = sentinel();
            let st = unsafe { fer_kv_seq_view(nz(n, 0, h.kvseq), 0, 0, nzm(n, 1, &mut v)) };
            (st, vec![("out_view", n[1] || is_zero(&v))])
        });
    }
    if c.row("fer_kv_seq_fork") {
        c.each("fer_kv_seq_fork", &[("parent", N), ("out_child", N)], false, |h, n| {
            let mut ch: *mut fer_kv_seq = bad_ptr();
            let st = unsafe { fer_kv_seq_fork(nz(n, 0, h.kvseq), 2, nzm(n, 1, &mut ch)) };
            (st, vec![("out_child", n[1] || ch.is_null())])
        });
    }
    if c.row("fer_kv_seq_release_before") {
        c.each("fer_kv_seq_release_before", &[("seq", N)], false, |_, n| (unsafe { fer_kv_seq_release_before(nzm(n, 0, null_mut()), 0, 0) }, vec![]));
    }
    if c.row("fer_kv_seq_make_writable") {
        c.each("fer_kv_seq_make_writable", &[("seq", N)], false, |_, n| (unsafe { fer_kv_seq_make_writable(nzm(n, 0, null_mut()), 0, 1) }, vec![]));
    }
    c.getter("fer_kv_seq_get_sharing", c.h.kvseq, fer_kv_seq_get_sharing);
    if c.row("fer_kv_pages_create") {
        c.each("fer_kv_pages_create", &[("out_pages", N)], true, |_, n| {
            let mut pg: *mut fer_kv_pages = bad_ptr();
            let st = unsafe { fer_kv_pages_create(4, 4, nzm(n, 0, &mut pg)) };
            if st == OK {
                unsafe { fer_kv_pages_free(pg) };
            }
            (st, vec![])
        });
    }
    c.free_status("fer_kv_pages_free", fer_kv_pages_free);
    if c.row("fer_kv_pages_seq_create") {
        c.each("fer_kv_pages_seq_create", &[("pages", N), ("out_seq", N)], false, |h, n| {
            let mut s: u32 = sentinel();
            let st = unsafe { fer_kv_pages_seq_create(nzm(n, 0, h.pages), nzm(n, 1, &mut s)) };
            (st, vec![("out_seq", n[1] || s == u32::MAX)])
        });
    }
    if c.row("fer_kv_pages_append") {
        c.each("fer_kv_pages_append", &[("pages", N)], false, |h, n| (unsafe { fer_kv_pages_append(nzm(n, 0, null_mut()), h.pseq, 1) }, vec![]));
    }
    if c.row("fer_kv_pages_fork") {
        c.each("fer_kv_pages_fork", &[("pages", N), ("out_child", N)], false, |h, n| {
            let mut s: u32 = sentinel();
            let st = unsafe { fer_kv_pages_fork(nzm(n, 0, h.pages), h.pseq, nzm(n, 1, &mut s)) };
            (st, vec![("out_child", n[1] || s == u32::MAX)])
        });
    }
    if c.row("fer_kv_pages_seq_free") {
        c.each("fer_kv_pages_seq_free", &[("pages", N)], false, |h, n| (unsafe { fer_kv_pages_seq_free(nzm(n, 0, null_mut()), h.pseq) }, vec![]));
    }
    if c.row("fer_kv_pages_table") {
        c.each(
            "fer_kv_pages_table",
            &[("pages", N), ("pages_out", N), ("out_n", N), ("out_tokens", O)],
            true,
            |h, n| {
                let mut t = [0u32; 8];
                let (mut on, mut ot): (usize, u64) = (sentinel(), sentinel());
                let st = unsafe { fer_kv_pages_table(nz(n, 0, h.pages), h.pseq, nzm(n, 1, t.as_mut_ptr()), 8, nzm(n, 2, &mut on), nzm(n, 3, &mut ot)) };
                (st, vec![("out_n", n[2] || on == 0), ("out_tokens", n[3] || ot == 0)])
            },
        );
    }
    c.getter("fer_kv_pages_get_stats", c.h.pages, fer_kv_pages_get_stats);

    // --- CUDA (NULL_ARG before UNSUPPORTED / NO_DEVICE, built with CUDA or not)
    if c.row("fer_cuda_device_count") {
        c.each("fer_cuda_device_count", &[("out_count", N)], false, |_, n| {
            let mut o = 0i32;
            (unsafe { fer_cuda_device_count(nzm(n, 0, &mut o)) }, vec![])
        });
    }
    if c.row("fer_cuda_add_f32_rows") {
        let a = leak(1f32, 4);
        let ob = OutBuf::new(4);
        c.each("fer_cuda_add_f32_rows", &[("a", N), ("b", N), ("out", N)], false, |_, n| {
            ob.fill();
            let st = unsafe { fer_cuda_add_f32_rows(nz(n, 0, a), nz(n, 1, a), nzm(n, 2, ob.f32()), 2, 2) };
            (st, vec![("out (untouched)", ob.untouched())])
        });
    }

    // --- tokenizer
    let json = br#"{"added_tokens":[],"model":{"type":"WordLevel","vocab":{"a":0,"b":1},"unk_token":"a"}}"#;
    if c.row("fer_tokenizer_from_json") {
        c.each("fer_tokenizer_from_json", &[("json", N), ("out", N)], true, |_, n| {
            let mut t: *mut fer_tokenizer = bad_ptr();
            let st = unsafe { fer_tokenizer_from_json(nz(n, 0, json.as_ptr().cast()), json.len(), nzm(n, 1, &mut t)) };
            if st == OK {
                unsafe { fer_tokenizer_free(t) };
            }
            (st, vec![("out", n[1] || t.is_null())])
        });
    }
    type FromPath = unsafe extern "C" fn(*const c_char, *mut *mut fer_tokenizer) -> Status;
    for (func, f) in [("fer_tokenizer_from_json_file", fer_tokenizer_from_json_file as FromPath), ("fer_tokenizer_from_gguf_file", fer_tokenizer_from_gguf_file as FromPath)] {
        if c.row(func) {
            c.each(func, &[("path", N), ("out", N)], false, |h, n| {
                let mut t: *mut fer_tokenizer = bad_ptr();
                let st = unsafe { f(nz(n, 0, h.model_path), nzm(n, 1, &mut t)) };
                (st, vec![("out", n[1] || t.is_null())])
            });
        }
    }
    c.free_status("fer_tokenizer_free", fer_tokenizer_free);
    c.getter("fer_tokenizer_get_info", c.h.tok, fer_tokenizer_get_info);
    let text = b"hello";
    if c.row("fer_tokenizer_encode") {
        c.each("fer_tokenizer_encode", &[("tok", N), ("text", N), ("ids", N), ("out_n", N)], true, |h, n| {
            let mut ids = [0i32; 16];
            let mut on: usize = sentinel();
            let st = unsafe {
                fer_tokenizer_encode(nz(n, 0, h.tok), nz(n, 1, text.as_ptr().cast()), 5, 0, nzm(n, 2, ids.as_mut_ptr()), 16, nzm(n, 3, &mut on))
            };
            (st, vec![("out_n", n[3] || on == 0)])
        });
    }
    let ids = [1i32, 2];
    if c.row("fer_tokenizer_decode") {
        c.each("fer_tokenizer_decode", &[("tok", N), ("ids", N), ("out", N), ("out_len", N)], true, |h, n| {
            let mut out = [0 as c_char; 64];
            let mut ol: usize = sentinel();
            let st = unsafe { fer_tokenizer_decode(nz(n, 0, h.tok), nz(n, 1, ids.as_ptr()), 2, 0, nzm(n, 2, out.as_mut_ptr()), 64, nzm(n, 3, &mut ol)) };
            (st, vec![("out_len", n[3] || ol == 0)])
        });
    }
    if c.row("fer_tokenizer_token_to_id") {
        c.each("fer_tokenizer_token_to_id", &[("tok", N), ("text", N), ("out_id", N)], false, |h, n| {
            let mut id: i32 = sentinel();
            let st = unsafe { fer_tokenizer_token_to_id(nz(n, 0, h.tok), nz(n, 1, b"a".as_ptr().cast()), 1, nzm(n, 2, &mut id)) };
            (st, vec![("out_id (-1)", n[2] || id == -1)])
        });
    }
    if c.row("fer_amx_info_get") {
        c.each("fer_amx_info_get", &[("out_info", N)], true, |_h, n| {
            let mut info: fer_amx_info = unsafe { std::mem::zeroed() };
            let st = unsafe { fer_amx_info_get(nzm(n, 0, &mut info)) };
            (st, vec![("reason", n[0] || info.reason[0] != 0)])
        });
    }
    if c.row("fer_tokenizer_dry_breakers") {
        c.each("fer_tokenizer_dry_breakers", &[("tok", N), ("strings", N), ("out_n_breakers", N), ("out_n_tokens", N)], true, |h, n| {
            let strings: [*const c_char; 1] = [b"zz\0".as_ptr().cast()];
            let (mut lengths, mut tokens) = (vec![0u32; 1 << 16], vec![0i32; 1 << 18]);
            let (mut nb, mut nt): (usize, usize) = (sentinel(), sentinel());
            let st = unsafe {
                fer_tokenizer_dry_breakers(
                    nz(n, 0, h.tok),
                    nz(n, 1, strings.as_ptr()),
                    1,
                    lengths.as_mut_ptr(),
                    lengths.len(),
                    tokens.as_mut_ptr(),
                    tokens.len(),
                    nzm(n, 2, &mut nb),
                    nzm(n, 3, &mut nt),
                )
            };
            (st, vec![("out_n_breakers (0)", n[2] || st == OK || nb == 0), ("out_n_tokens (0)", n[3] || st == OK || nt == 0)])
        });
    }
    if c.row("fer_detokenizer_create") {
        c.each("fer_detokenizer_create", &[("tok", N), ("out", N)], true, |h, n| {
            let mut d: *mut fer_detokenizer = bad_ptr();
            let st = unsafe { fer_detokenizer_create(nz(n, 0, h.tok), 0, nzm(n, 1, &mut d)) };
            if st == OK {
                unsafe { fer_detokenizer_free(d) };
            }
            (st, vec![("out", n[1] || d.is_null())])
        });
    }
    if c.row("fer_detokenizer_push") {
        c.each("fer_detokenizer_push", &[("d", N), ("out", N), ("out_len", N)], false, |h, n| {
            let mut out = [0 as c_char; 64];
            let mut ol: usize = sentinel();
            let st = unsafe { fer_detokenizer_push(nzm(n, 0, h.detok), 1, nzm(n, 1, out.as_mut_ptr()), 64, nzm(n, 2, &mut ol)) };
            (st, vec![("out_len", n[2] || ol == 0)])
        });
    }
    if c.row("fer_detokenizer_flush") {
        c.each("fer_detokenizer_flush", &[("d", N), ("out", N), ("out_len", N)], true, |h, n| {
            let mut out = [0 as c_char; 64];
            let mut ol: usize = sentinel();
            let st = unsafe { fer_detokenizer_flush(nzm(n, 0, h.detok), nzm(n, 1, out.as_mut_ptr()), 64, nzm(n, 2, &mut ol)) };
            (st, vec![("out_len", n[2] || ol == 0)])
        });
    }
    c.free_void("fer_detokenizer_free", fer_detokenizer_free);

    // --- structured output
    if c.row("fer_grammar_vocab_create") {
        c.each("fer_grammar_vocab_create", &[("tok", N), ("out", N)], true, |h, n| {
            let mut v: *mut fer_grammar_vocab = bad_ptr();
            let st = unsafe { fer_grammar_vocab_create(nz(n, 0, h.tok), 0, -1, nzm(n, 1, &mut v)) };
            if st == OK {
                unsafe { fer_grammar_vocab_free(v) };
            }
            (st, vec![("out", n[1] || v.is_null())])
        });
    }
    c.free_status("fer_grammar_vocab_free", fer_grammar_vocab_free);
    c.getter("fer_grammar_vocab_get_info", c.h.gvocab, fer_grammar_vocab_get_info);
    if c.row("fer_grammar_compile") {
        c.each("fer_grammar_compile", &[("vocab", N), ("src", N), ("out", N)], true, |h, n| {
            let src = b"[0-9]+";
            let mut g: *mut fer_grammar = bad_ptr();
            let st = unsafe {
                fer_grammar_compile(nz(n, 0, h.gvocab), FER_GRAMMAR_REGEX as i32, nz(n, 1, src.as_ptr().cast()), src.len(), 0, nzm(n, 2, &mut g))
            };
            if st == OK {
                unsafe { fer_grammar_free(g) };
            }
            (st, vec![("out", n[2] || g.is_null())])
        });
    }
    c.free_status("fer_grammar_free", fer_grammar_free);
    if c.row("fer_matcher_create") {
        c.each("fer_matcher_create", &[("grammar", N), ("out", N)], true, |h, n| {
            let mut m: *mut fer_matcher = bad_ptr();
            let st = unsafe { fer_matcher_create(nz(n, 0, h.grammar), nzm(n, 1, &mut m)) };
            if st == OK {
                unsafe { fer_matcher_free(m) };
            }
            (st, vec![("out", n[1] || m.is_null())])
        });
    }
    c.free_void("fer_matcher_free", fer_matcher_free);
    if c.row("fer_matcher_fill_mask") {
        c.each("fer_matcher_fill_mask", &[("matcher", N), ("mask", N)], true, |h, n| {
            let mut mask = [u32::MAX; 16];
            let st = unsafe { fer_matcher_fill_mask(nzm(n, 0, h.matcher), nzm(n, 1, mask.as_mut_ptr()), 16) };
            (st, vec![("mask (zeroed)", n[1] || mask.iter().all(|&w| w == 0))])
        });
    }
    if c.row("fer_matcher_accept") {
        c.each("fer_matcher_accept", &[("matcher", N)], false, |_, n| (unsafe { fer_matcher_accept(nzm(n, 0, null_mut()), 97) }, vec![]));
    }
    if c.row("fer_matcher_rollback") {
        c.each("fer_matcher_rollback", &[("matcher", N)], true, |h, n| (unsafe { fer_matcher_rollback(nzm(n, 0, h.matcher), 0) }, vec![]));
    }
    c.getter("fer_matcher_get_state", c.h.matcher, fer_matcher_get_state);
    if c.row("fer_matcher_forced_tokens") {
        c.each("fer_matcher_forced_tokens", &[("matcher", N), ("ids", N), ("out_n", N)], true, |h, n| {
            let mut ids = [0i32; 4];
            let mut on: usize = sentinel();
            let st = unsafe { fer_matcher_forced_tokens(nzm(n, 0, h.matcher), nzm(n, 1, ids.as_mut_ptr()), 4, nzm(n, 2, &mut on)) };
            (st, vec![("out_n", n[2] || on == 0)])
        });
    }
    if c.row("fer_sampler_set_matcher") {
        c.each("fer_sampler_set_matcher", &[("sampler", N), ("matcher", O)], true, |h, n| {
            let st = unsafe { fer_sampler_set_matcher(nzm(n, 0, h.sampler), nzm(n, 1, h.matcher)) };
            if st == OK {
                unsafe { fer_sampler_set_matcher(h.sampler, null_mut()) }; // the sampler rows run without it
            }
            (st, vec![])
        });
    }
    if c.row("fer_engine_seq_set_grammar") {
        // grammar NULL: no grammar, which the sequence already has (nothing changes)
        c.each("fer_engine_seq_set_grammar", &[("seq", N), ("grammar", O)], false, |h, n| {
            (unsafe { fer_engine_seq_set_grammar(nzm(n, 0, h.eseq), nz(n, 1, h.grammar)) }, vec![])
        });
    }
    if c.row("fer_engine_seq_matcher") {
        c.each("fer_engine_seq_matcher", &[("seq", N), ("out", N)], true, |h, n| {
            let mut m: *mut fer_matcher = bad_ptr();
            let st = unsafe { fer_engine_seq_matcher(nzm(n, 0, h.eseq), nzm(n, 1, &mut m)) };
            (st, vec![("out", n[1] || m.is_null())])
        });
    }

    // --- engine
    c.init("fer_engine_config_init", fer_engine_config_init);
    if c.row("fer_engine_create") {
        c.each("fer_engine_create", &[("config", N), ("out_engine", N)], false, |h, n| {
            let mut cfg: fer_engine_config = unsafe { std::mem::zeroed() };
            unsafe { fer_engine_config_init(&mut cfg) };
            cfg.model_image = h.image;
            cfg.model_image_bytes = h.image_bytes as u64;
            let mut e: *mut fer_engine = bad_ptr();
            let st = unsafe { fer_engine_create(nz(n, 0, &cfg), nzm(n, 1, &mut e)) };
            (st, vec![("out_engine", n[1] || e.is_null())])
        });
    }
    c.free_status("fer_engine_free", fer_engine_free);
    c.getter("fer_engine_get_config", c.h.engine, fer_engine_get_config);
    c.getter("fer_engine_model_info", c.h.engine, fer_engine_model_info);
    c.getter("fer_engine_tokenizer", c.h.engine, fer_engine_tokenizer);
    if c.row("fer_engine_parallel_info") {
        c.each("fer_engine_parallel_info", &[("engine", N), ("out_rank", N), ("out_size", N)], true, |h, n| {
            let (mut r, mut s): (u32, u32) = (sentinel(), sentinel());
            let st = unsafe { fer_engine_parallel_info(nz(n, 0, h.engine), nzm(n, 1, &mut r), nzm(n, 2, &mut s)) };
            // one process: rank 0 of 1 when all is valid; both zero on a refusal
            let want = if n.iter().any(|&b| b) { (0, 0) } else { (0, 1) };
            (st, vec![("out_rank", n[1] || r == want.0), ("out_size", n[2] || s == want.1)])
        });
    }
    if c.row("fer_engine_run_rank") {
        // NULL is NULL_ARG; the fixture's one-process engine is MISUSE (checked in tests/engine.rs)
        c.each("fer_engine_run_rank", &[("engine", N)], false, |_, n| (unsafe { fer_engine_run_rank(nzm(n, 0, null_mut())) }, vec![]));
    }
    let role = CString::new("user").unwrap();
    let content = CString::new("hi").unwrap();
    let msgs = [fer_chat_message { role: role.as_ptr(), content: content.as_ptr() }];
    if c.row("fer_engine_chat_render") {
        // the tiny model has no chat template: the all-valid call is UNSUPPORTED, not run here
        c.each("fer_engine_chat_render", &[("engine", N), ("messages", N), ("out", N), ("out_len", N)], false, |h, n| {
            let mut out = [0 as c_char; 256];
            let mut ol: usize = sentinel();
            let st = unsafe {
                fer_engine_chat_render(nz(n, 0, h.engine), nz(n, 1, msgs.as_ptr()), 1, 0, nzm(n, 2, out.as_mut_ptr()), 256, nzm(n, 3, &mut ol))
            };
            (st, vec![("out_len", n[3] || ol == 0)])
        });
    }
    if c.row("fer_engine_embed") {
        c.each("fer_engine_embed", &[("engine", N), ("ids", N), ("out", N), ("out_n", N)], true, |h, n| {
            let mut out = vec![0f32; 256];
            let mut on: usize = sentinel();
            let st = unsafe {
                fer_engine_embed(nzm(n, 0, h.engine), nz(n, 1, [1i32, 2, 3].as_ptr()), 3, 0, nzm(n, 2, out.as_mut_ptr()), out.len(),
                                 nzm(n, 3, &mut on))
            };
            (st, vec![("out_n", n[3] || on == 0)])
        });
    }
    if c.row("fer_engine_prompt_logprobs") {
        c.each(
            "fer_engine_prompt_logprobs",
            &[("engine", N), ("ids", N), ("out_logprobs", N), ("out_top_tokens", N), ("out_top_logprobs", N)],
            true,
            |h, n| {
                let mut lp = [7f32; 3];
                let mut tt = [7i32; 6];
                let mut tl = [7f32; 6];
                let st = unsafe {
                    fer_engine_prompt_logprobs(nzm(n, 0, h.engine), nz(n, 1, [1i32, 2, 3].as_ptr()), 3, 2, nzm(n, 2, lp.as_mut_ptr()),
                                               nzm(n, 3, tt.as_mut_ptr()), nzm(n, 4, tl.as_mut_ptr()))
                };
                // a refused call leaves the outputs as they were
                let untouched = lp.iter().all(|&v| v == 7.0) && tt.iter().all(|&v| v == 7);
                (st, vec![("outputs (untouched)", st == OK || untouched)])
            },
        );
    }
    if c.row("fer_engine_chat_template") {
        // the tiny model has no chat template: the all-valid call is UNSUPPORTED, not run here
        c.each("fer_engine_chat_template", &[("engine", N), ("out_template", N)], false, |h, n| {
            let mut t: *const fer_chat_template = bad_ptr();
            let st = unsafe { fer_engine_chat_template(nz(n, 0, h.engine), nzm(n, 1, &mut t)) };
            (st, vec![("out_template", n[1] || t.is_null())])
        });
    }
    let request = br#"{"messages": [{"role": "user", "content": "hi"}]}"#;
    if c.row("fer_engine_chat_apply") {
        c.each("fer_engine_chat_apply", &[("engine", N), ("request_json", N), ("out_text", N), ("out_len", N)], false, |h, n| {
            let mut text: *mut c_char = bad_ptr();
            let mut len: u64 = sentinel();
            let st = unsafe {
                fer_engine_chat_apply(nz(n, 0, h.engine), nz(n, 1, request.as_ptr().cast()), request.len() as u64, 0,
                                      nzm(n, 2, &mut text), nzm(n, 3, &mut len))
            };
            (st, vec![("out_text", n[2] || text.is_null()), ("out_len", n[3] || len == 0)])
        });
    }
    c.init("fer_chat_template_options_init", fer_chat_template_options_init);
    let src = b"{{ bos_token }}{{ messages | length }}";
    let mut opts: fer_chat_template_options = unsafe { std::mem::zeroed() };
    unsafe { fer_chat_template_options_init(&mut opts) };
    if c.row("fer_chat_template_create") {
        c.each("fer_chat_template_create", &[("source", N), ("options", O), ("out_template", N)], true, |_, n| {
            let mut t: *mut fer_chat_template = bad_ptr();
            let st = unsafe { fer_chat_template_create(nz(n, 0, src.as_ptr().cast()), src.len() as u64, nz(n, 1, &opts), nzm(n, 2, &mut t)) };
            let fine = n[2] || t.is_null();
            if st == OK {
                unsafe { fer_chat_template_free(t) };
            }
            (st, vec![("out_template", fine)])
        });
    }
    c.free_status("fer_chat_template_free", fer_chat_template_free);
    let mut tmpl: *mut fer_chat_template = null_mut();
    ok(unsafe { fer_chat_template_create(src.as_ptr().cast(), src.len() as u64, &opts, &mut tmpl) }, "chat template");
    if c.row("fer_chat_template_apply") {
        c.each("fer_chat_template_apply", &[("chat_template", N), ("request_json", N), ("out_text", N), ("out_len", N)], true, |_, n| {
            let mut text: *mut c_char = bad_ptr();
            let mut len: u64 = sentinel();
            let st = unsafe {
                fer_chat_template_apply(nz(n, 0, tmpl), nz(n, 1, request.as_ptr().cast()), request.len() as u64, 0, nzm(n, 2, &mut text),
                                        nzm(n, 3, &mut len))
            };
            let fine = (n[2] || text.is_null()) && (n[3] || len == 0);
            if st == OK {
                // SAFETY: on OK the text is the library's, released once here
                unsafe {
                    assert_eq!(std::ffi::CStr::from_ptr(text).to_bytes(), b"1");
                    fer_buffer_free(text.cast());
                }
            }
            (st, vec![("out_text", fine), ("out_len", fine)])
        });
    }
    if c.row("fer_chat_template_get_info") {
        c.each("fer_chat_template_get_info", &[("chat_template", N), ("out_info", N)], true, |_, n| {
            let mut info: fer_chat_template_info = sentinel();
            info.struct_size = std::mem::size_of::<fer_chat_template_info>() as u32;
            let st = unsafe { fer_chat_template_get_info(nz(n, 0, tmpl), nzm(n, 1, &mut info)) };
            (st, vec![("out_info", n[1] || is_zero(&info))])
        });
    }
    unsafe { fer_chat_template_free(tmpl) };
    if c.row("fer_engine_seq_create") {
        c.each("fer_engine_seq_create", &[("engine", N), ("out_seq", N)], false, |h, n| {
            let mut s: *mut fer_engine_seq = bad_ptr();
            let st = unsafe { fer_engine_seq_create(nzm(n, 0, h.engine), 8, nzm(n, 1, &mut s)) };
            (st, vec![("out_seq", n[1] || s.is_null())])
        });
    }
    c.free_status("fer_engine_seq_free", fer_engine_seq_free);
    if c.row("fer_engine_prefill") {
        c.each("fer_engine_prefill", &[("seq", N), ("ids", N)], false, |h, n| {
            let lg = OutBuf::new(h.n_vocab);
            let st = unsafe { fer_engine_prefill(nzm(n, 0, h.eseq), nz(n, 1, ids.as_ptr()), 2, lg.f32(), h.n_vocab) };
            (st, vec![("logits (untouched)", lg.untouched())])
        });
    }
    if c.row("fer_engine_decode") {
        c.each("fer_engine_decode", &[("engine", N), ("seqs", N), ("ids", N), ("logits", N)], false, |h, n| {
            let lg = OutBuf::new(h.n_vocab);
            let seqs = [h.eseq];
            let st = unsafe { fer_engine_decode(nzm(n, 0, h.engine), nz(n, 1, seqs.as_ptr()), nz(n, 2, ids.as_ptr()), 1, nzm(n, 3, lg.f32()), h.n_vocab) };
            (st, vec![("logits (untouched)", lg.untouched())])
        });
        // a NULL element of seqs too
        c.case("fer_engine_decode", "seqs[0]", NULL_ARG, |h| {
            let lg = OutBuf::new(h.n_vocab);
            let seqs = [null_mut()];
            let st = unsafe { fer_engine_decode(h.engine, seqs.as_ptr(), ids.as_ptr(), 1, lg.f32(), h.n_vocab) };
            (st, vec![("logits (untouched)", lg.untouched())])
        });
    }
    if c.row("fer_engine_seq_rewind") {
        c.each("fer_engine_seq_rewind", &[("seq", N)], false, |_, n| (unsafe { fer_engine_seq_rewind(nzm(n, 0, null_mut()), 0) }, vec![]));
    }
    if c.row("fer_engine_seq_cancel") {
        c.each("fer_engine_seq_cancel", &[("seq", N)], false, |_, n| (unsafe { fer_engine_seq_cancel(nzm(n, 0, null_mut())) }, vec![]));
    }
    c.getter("fer_engine_seq_get_stats", c.h.eseq, fer_engine_seq_get_stats);
    c.getter("fer_engine_get_stats", c.h.engine, fer_engine_get_stats);

    // --- scheduler
    c.init("fer_scheduler_options_init", fer_scheduler_options_init);
    c.init("fer_request_params_init", fer_request_params_init);
    if c.row("fer_scheduler_create") {
        // no valid call: the fixture's engine has its scheduler (a second is BUSY)
        c.each("fer_scheduler_create", &[("engine", N), ("options", N), ("out_scheduler", N)], false, |h, n| {
            let mut o: fer_scheduler_options = unsafe { std::mem::zeroed() };
            unsafe { fer_scheduler_options_init(&mut o) };
            let mut out: *mut fer_scheduler = bad_ptr();
            let st = unsafe { fer_scheduler_create(nzm(n, 0, h.engine), nz(n, 1, &o), nzm(n, 2, &mut out)) };
            (st, vec![("out_scheduler", n[2] || out.is_null())])
        });
    }
    c.free_status("fer_scheduler_free", fer_scheduler_free);
    static PROMPT: [i32; 3] = [5, 6, 7];
    if c.row("fer_scheduler_submit") {
        c.each("fer_scheduler_submit", &[("scheduler", N), ("params", N), ("out_request_id", N)], true, |h, n| {
            let mut p: fer_request_params = unsafe { std::mem::zeroed() };
            unsafe { fer_request_params_init(&mut p) };
            p.prompt = PROMPT.as_ptr();
            p.n_prompt = PROMPT.len();
            p.max_new_tokens = 2;
            let mut id: u64 = sentinel();
            let st = unsafe { fer_scheduler_submit(nzm(n, 0, h.sched), nz(n, 1, &p), nzm(n, 2, &mut id)) };
            (st, vec![("out_request_id", n[2] || id == 0)])
        });
    }
    if c.row("fer_scheduler_cancel") {
        c.each("fer_scheduler_cancel", &[("scheduler", N)], false, |h, n| {
            (unsafe { fer_scheduler_cancel(nzm(n, 0, h.sched), 1) }, vec![])
        });
    }
    if c.row("fer_scheduler_step") {
        c.each("fer_scheduler_step", &[("scheduler", N), ("out_info", O)], true, |h, n| {
            let mut info: fer_scheduler_step_info = sentinel();
            let st = unsafe { fer_scheduler_step(nzm(n, 0, h.sched), nzm(n, 1, &mut info)) };
            (st, vec![("out_info", n[1] || is_zero(&info))])
        });
    }
    if c.row("fer_scheduler_poll_events") {
        c.each("fer_scheduler_poll_events", &[("scheduler", N), ("events", N), ("out_n", N)], true, |h, n| {
            let mut ev: [fer_scheduler_event; 4] = unsafe { std::mem::zeroed() };
            let mut got: usize = sentinel();
            let st = unsafe { fer_scheduler_poll_events(nzm(n, 0, h.sched), nzm(n, 1, ev.as_mut_ptr()), 4, nzm(n, 2, &mut got)) };
            (st, vec![("out_n", n[2] || got == 0)])
        });
    }
    c.getter("fer_scheduler_get_stats", c.h.sched, fer_scheduler_get_stats);
    if c.row("fer_scheduler_clear_cache") {
        c.each("fer_scheduler_clear_cache", &[("scheduler", N)], true, |h, n| {
            (unsafe { fer_scheduler_clear_cache(nzm(n, 0, h.sched)) }, vec![])
        });
    }
    if c.row("fer_tiny_model_image") {
        let arch = CString::new("llama").unwrap();
        c.each("fer_tiny_model_image", &[("architecture", N), ("out_image", N), ("out_bytes", N)], true, |_, n| {
            let (mut im, mut b): (*mut c_void, usize) = (bad_ptr(), sentinel());
            let st = unsafe { fer_tiny_model_image(nz(n, 0, arch.as_ptr()), 1, nzm(n, 1, &mut im), nzm(n, 2, &mut b)) };
            if st == OK {
                unsafe { fer_buffer_free(im) };
            }
            (st, vec![("out_image", n[1] || im.is_null()), ("out_bytes", n[2] || b == 0)])
        });
    }
    c.free_void("fer_buffer_free", fer_buffer_free);
}

// ---------------------------------------------------------------------------------------------
// the header's functions

/// Names of the functions ffi/ferrite.h declares: the first `fer_name(` of each line that starts
/// a declaration (not a comment, not indented).
fn declared_functions() -> BTreeSet<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../ffi/ferrite.h");
    let header = std::fs::read_to_string(path).expect("read ffi/ferrite.h");
    let mut names = BTreeSet::new();
    for line in header.lines() {
        let first = line.chars().next().unwrap_or(' ');
        if !first.is_ascii_lowercase() || line.starts_with("typedef") {
            continue;
        }
        let b = line.as_bytes();
        let mut i = 0;
        while let Some(pos) = line[i..].find("fer_") {
            let s = i + pos;
            let mut e = s + 4;
            while e < b.len() && (b[e].is_ascii_alphanumeric() || b[e] == b'_') {
                e += 1;
            }
            let boundary = s == 0 || !(b[s - 1].is_ascii_alphanumeric() || b[s - 1] == b'_');
            if boundary && e < b.len() && b[e] == b'(' {
                names.insert(line[s..e].to_string());
                break;
            }
            i = e;
        }
    }
    names
}

/// Frees every object of the fixture, children before parents, each free checked, then the
/// test's buffers, names, file and directory.
fn teardown(h: &H) {
    // SAFETY: every handle was made by fixture() and is freed once here; the rows freed none of
    // them (their free rows pass NULL or objects of their own).
    unsafe {
        ok(fer_engine_seq_free(h.eseq), "free engine seq");
        ok(fer_scheduler_free(h.sched), "free scheduler");
        ok(fer_engine_free(h.engine), "free engine");
        fer_detokenizer_free(h.detok);
        fer_matcher_free(h.matcher);
        ok(fer_grammar_free(h.grammar), "free grammar");
        ok(fer_grammar_vocab_free(h.gvocab), "free grammar vocabulary");
        ok(fer_tokenizer_free(h.tok), "free tokenizer");
        fer_sampler_free(h.sampler);
        ok(fer_kv_pages_seq_free(h.pages, h.pseq), "free pages seq");
        ok(fer_kv_pages_free(h.pages), "free pages");
        ok(fer_kv_seq_free(h.kvseq), "free kv seq");
        ok(fer_kv_cache_free(h.kvcache), "free kv cache");
        ok(fer_weight_store_free(h.store), "free weight store");
        ok(fer_dense_cache_free(h.dcache), "free dense cache");
        ok(fer_vmm_range_free(h.range), "free range");
        ok(fer_vmm_granule_release(h.vmm, h.granule), "release granule");
        ok(fer_vmm_free(h.vmm), "free vmm");
        ok(fer_vmm_free(h.vmm_kv), "free kv vmm");
        ok(fer_governor_free(h.gov), "free governor");
        fer_threadpool_free(h.pool);
        fer_buffer_free(h.image);
        drop(std::fs::File::from(std::os::fd::OwnedFd::from_raw_fd(h.model_fd)));
        drop(CString::from_raw(h.model_path as *mut c_char));
        let dir = CString::from_raw(h.dir as *mut c_char);
        let _ = std::fs::remove_dir_all(dir.to_str().unwrap());
    }
    KEPT.with(|k| k.borrow_mut().clear());
}

fn run_table() -> Ctx {
    let mut c = Ctx { h: fixture(), failures: Vec::new(), rows: BTreeSet::new(), cases: 0 };
    rows(&mut c);
    teardown(&c.h);
    c
}

// EVIDENCE: C-ABI-011
#[test]
fn c_abi_011_every_declared_function_has_a_row() {
    let declared = declared_functions();
    assert!(declared.len() >= 100, "the header parse found only {} functions", declared.len());
    let c = run_table();
    let rows: BTreeSet<String> = c.rows.iter().map(|s| s.to_string()).collect();
    let missing: Vec<_> = declared.difference(&rows).collect();
    let unknown: Vec<_> = rows.difference(&declared).collect();
    assert!(missing.is_empty(), "functions of ffi/ferrite.h without a row in the table: {missing:?}");
    assert!(unknown.is_empty(), "rows naming no function of ffi/ferrite.h: {unknown:?}");
}

// EVIDENCE: C-ABI-004
// EVIDENCE: C-ABI-006
// EVIDENCE: C-ABI-007
// EVIDENCE: C-ABI-011
#[test]
fn c_abi_011_null_arguments_of_every_entry_point() {
    let c = run_table();
    assert!(c.cases > 200, "only {} cases ran", c.cases);
    assert!(c.failures.is_empty(), "{} of {} cases broke a promise:\n{}", c.failures.len(), c.cases, c.failures.join("\n"));
    eprintln!("{} cases over {} rows", c.cases, c.rows.len());
}
