//! The engine: [`Engine`] owns a `fer_engine` (and the model image it borrows, when it was made
//! from one), [`Seq`] borrows its engine, so a sequence cannot outlive it and `fer_engine_free`
//! never meets a live sequence (its BUSY cannot happen here).
//!
//! Sequence methods take `&self`: the C side keeps the state behind the handle, a [`Seq`] is not
//! `Sync` (so one thread uses it), and the engine turns a second concurrent call into BUSY. That
//! lets a [`Canceller`] (Send + Sync) stop a prefill or decode running on another thread.
//!
//! Enumerations are plain integers with named constants ([`matmul`], [`plan`], [`chat_flag`];
//! KV layouts and policies are [`crate::mem`]'s `HEAD_MAJOR`.. and `BUCKETED`/`FIXED_MAX`, KV
//! dtypes [`crate::dtype`]'s).

use crate::error::{check, status, Error, Result};
use crate::sys;
use std::borrow::Cow;
use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::os::raw::c_char;
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};

/// `fer_matmul_mode_code`.
pub mod matmul {
    pub const I8: i32 = crate::sys::FER_MATMUL_I8 as i32;
    pub const EXACT: i32 = crate::sys::FER_MATMUL_EXACT as i32;
}

/// `fer_device_code`: where an engine runs its forward pass.
pub mod device {
    pub const CPU: i32 = crate::sys::FER_DEVICE_CPU as i32;
    pub const CUDA: i32 = crate::sys::FER_DEVICE_CUDA as i32;
}

/// `fer_tp_wire_code`: how tensor-parallel ranks send the all-reduces' activations.
pub mod tp_wire {
    pub const F32: i32 = crate::sys::FER_TP_WIRE_F32 as i32;
    pub const Q8_0: i32 = crate::sys::FER_TP_WIRE_Q8_0 as i32;
}

/// `fer_plan_policy_code`.
pub mod plan {
    pub const OFF: i32 = crate::sys::FER_PLAN_OFF as i32;
    pub const UNCONDITIONAL: i32 = crate::sys::FER_PLAN_UNCONDITIONAL as i32;
    pub const ADDRESS_STABLE: i32 = crate::sys::FER_PLAN_ADDRESS_STABLE as i32;
}

/// `fer_chat_flag` bits.
pub mod chat_flag {
    pub const ADD_GENERATION_PROMPT: u32 = crate::sys::FER_CHAT_ADD_GENERATION_PROMPT;
    pub const VERBATIM: u32 = crate::sys::FER_CHAT_VERBATIM;
}

/// `fer_embed_flag` bits of [`Engine::embed`].
pub mod embed_flag {
    pub const NORMALIZE: u32 = crate::sys::FER_EMBED_NORMALIZE;
    pub const POOL_LAST: u32 = crate::sys::FER_EMBED_POOL_LAST;
    pub const POOL_FIRST: u32 = crate::sys::FER_EMBED_POOL_FIRST;
}

/// `fer_pooling`: [`ModelInfo::pooling`].
pub mod pooling {
    pub const NONE: u32 = crate::sys::FER_POOLING_NONE;
    pub const MEAN: u32 = crate::sys::FER_POOLING_MEAN;
    pub const CLS: u32 = crate::sys::FER_POOLING_CLS;
    pub const LAST: u32 = crate::sys::FER_POOLING_LAST;
}

/// `fer_chat_cap` bits of [`ChatTemplateInfo::caps`].
pub mod chat_cap {
    pub const SYSTEM: u32 = crate::sys::FER_CHAT_CAP_SYSTEM;
    pub const TOOLS: u32 = crate::sys::FER_CHAT_CAP_TOOLS;
    pub const TOOL_CALLS: u32 = crate::sys::FER_CHAT_CAP_TOOL_CALLS;
    pub const TOOL_RESPONSES: u32 = crate::sys::FER_CHAT_CAP_TOOL_RESPONSES;
}

/// `fer_chat_tool_format` values of [`ChatTemplateInfo::tool_format`].
pub mod tool_format {
    pub const GENERIC: u32 = crate::sys::FER_CHAT_TOOLS_GENERIC;
    pub const HERMES: u32 = crate::sys::FER_CHAT_TOOLS_HERMES;
    pub const LLAMA3: u32 = crate::sys::FER_CHAT_TOOLS_LLAMA3;
    pub const MISTRAL: u32 = crate::sys::FER_CHAT_TOOLS_MISTRAL;
}

/// A chat template's capabilities ([`chat_cap`] bits) and tool-call syntax ([`tool_format`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChatTemplateInfo {
    pub caps: u32,
    pub tool_format: u32,
}

/// `fer_engine_config` without the model (given to the constructor) and with the environment as
/// owned strings. [`Default`] is `fer_engine_config_init`'s defaults; the setters chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    pub n_threads: u32,
    pub matmul: i32,
    pub kv_layout: i32,
    pub kv_policy: i32,
    pub kv_dtype: i32,
    pub kv_min_bucket: u32,
    pub plan: i32,
    pub weight_budget_bytes: u64,
    pub kv_budget_bytes: u64,
    pub max_seqs: u32,
    pub max_tokens: u32,
    /// "NAME=value" strings the engine reads FERRITE_* from at creation; None: no environment.
    /// Always None in what [`Engine::config`] reads back.
    pub environment: Option<Vec<String>>,
    /// A Jinja file replacing the model's chat template (`--chat-template`); None: the model's.
    pub chat_template_path: Option<PathBuf>,
    /// The time strftime_now formats (seconds since 1970 UTC); 0: the clock.
    pub chat_template_now_unix: i64,
    /// Tensor parallelism over the processes `mpirun -n N` started (0 or 1: one process).
    pub tensor_parallel: u32,
    /// How long a rank waits for another inside a step, in ms (0: 30 s).
    pub tensor_parallel_timeout_ms: u32,
    /// Pipeline parallelism over the processes `mpirun -n N` started (0 or 1: one process); with
    /// tensor_parallel too, stages of tensor_parallel ranks each (tp x pp processes).
    pub pipeline_parallel: u32,
    /// How the all-reduces' activations travel between tensor-parallel ranks (FER_TP_WIRE_*:
    /// 0 f32, 1 Q8_0 blocks).
    pub tensor_parallel_wire: i32,
    /// Where the forward pass runs ([`device`]: CPU or CUDA) and which CUDA device.
    pub device: i32,
    pub device_index: u32,
}

fn raw_config_init() -> sys::fer_engine_config {
    // SAFETY: plain-data struct (integers and NULL pointers are valid), overwritten by the call.
    let mut c: sys::fer_engine_config = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid out-pointer.
    check(unsafe { sys::fer_engine_config_init(&mut c) }).expect("fer_engine_config_init");
    c
}

impl EngineConfig {
    fn from_raw(c: &sys::fer_engine_config) -> EngineConfig {
        EngineConfig {
            n_threads: c.n_threads,
            matmul: c.matmul,
            kv_layout: c.kv_layout,
            kv_policy: c.kv_policy,
            kv_dtype: c.kv_dtype,
            kv_min_bucket: c.kv_min_bucket,
            plan: c.plan,
            weight_budget_bytes: c.weight_budget_bytes,
            kv_budget_bytes: c.kv_budget_bytes,
            max_seqs: c.max_seqs,
            max_tokens: c.max_tokens,
            environment: None,
            chat_template_path: if c.chat_template_path.is_null() {
                None
            } else {
                // SAFETY: a non-NULL path the engine returns is NUL-terminated and lives as long
                // as the engine, which outlives this call.
                Some(PathBuf::from(unsafe { CStr::from_ptr(c.chat_template_path) }.to_string_lossy().into_owned()))
            },
            chat_template_now_unix: c.chat_template_now_unix,
            tensor_parallel: c.tensor_parallel,
            tensor_parallel_timeout_ms: c.tensor_parallel_timeout_ms,
            pipeline_parallel: c.pipeline_parallel,
            tensor_parallel_wire: c.tensor_parallel_wire,
            device: c.device,
            device_index: c.device_index,
        }
    }

    pub fn threads(mut self, n: u32) -> Self {
        self.n_threads = n;
        self
    }
    pub fn matmul(mut self, m: i32) -> Self {
        self.matmul = m;
        self
    }
    pub fn kv_layout(mut self, l: i32) -> Self {
        self.kv_layout = l;
        self
    }
    pub fn kv_policy(mut self, p: i32) -> Self {
        self.kv_policy = p;
        self
    }
    pub fn kv_dtype(mut self, d: i32) -> Self {
        self.kv_dtype = d;
        self
    }
    pub fn kv_min_bucket(mut self, n: u32) -> Self {
        self.kv_min_bucket = n;
        self
    }
    pub fn plan(mut self, p: i32) -> Self {
        self.plan = p;
        self
    }
    pub fn weight_budget(mut self, bytes: u64) -> Self {
        self.weight_budget_bytes = bytes;
        self
    }
    pub fn kv_budget(mut self, bytes: u64) -> Self {
        self.kv_budget_bytes = bytes;
        self
    }
    pub fn max_seqs(mut self, n: u32) -> Self {
        self.max_seqs = n;
        self
    }
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = n;
        self
    }
    pub fn environment<S: Into<String>>(mut self, vars: impl IntoIterator<Item = S>) -> Self {
        self.environment = Some(vars.into_iter().map(Into::into).collect());
        self
    }
    pub fn chat_template(mut self, path: impl Into<PathBuf>) -> Self {
        self.chat_template_path = Some(path.into());
        self
    }
    pub fn chat_template_now(mut self, unix_seconds: i64) -> Self {
        self.chat_template_now_unix = unix_seconds;
        self
    }
    /// Tensor parallelism over the processes `mpirun -n N` started (0 or 1: one process).
    pub fn tensor_parallel(mut self, n: u32) -> Self {
        self.tensor_parallel = n;
        self
    }
    pub fn tensor_parallel_timeout_ms(mut self, ms: u32) -> Self {
        self.tensor_parallel_timeout_ms = ms;
        self
    }
    /// Pipeline parallelism over the processes `mpirun -n N` started (0 or 1: one process).
    pub fn pipeline_parallel(mut self, n: u32) -> Self {
        self.pipeline_parallel = n;
        self
    }
    /// The tensor-parallel all-reduces' wire format (FER_TP_WIRE_*).
    pub fn tensor_parallel_wire(mut self, wire: i32) -> Self {
        self.tensor_parallel_wire = wire;
        self
    }
    /// Where the forward pass runs ([`device`]) and, for CUDA, which device.
    pub fn device(mut self, device: i32, index: u32) -> Self {
        self.device = device;
        self.device_index = index;
        self
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig::from_raw(&raw_config_init())
    }
}

fn cstring(what: &str, s: &[u8]) -> Result<CString> {
    CString::new(s).map_err(|_| Error::rust(status::INVALID_ARG, format!("{} contains a NUL byte", what)))
}

/// `fer_model_info` with the architecture as a `String`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelInfo {
    pub architecture: String,
    pub n_layer: u32,
    pub n_embd: u32,
    pub n_head: u32,
    pub n_head_kv: u32,
    pub head_dim: u32,
    pub n_ff: u32,
    pub n_vocab: u32,
    pub n_ctx_train: u32,
    pub bos_id: i32,
    pub eos_id: i32,
    pub eot_id: i32,
    /// The file's pooling type ([`pooling`]).
    pub pooling: u32,
}

/// Engine-wide counters (`fer_engine_stats`, plain data).
pub type EngineStats = sys::fer_engine_stats;

/// A sequence's state and counters (`fer_engine_seq_stats` with the reason as a `String`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeqStats {
    pub n_tokens: u32,
    pub max_tokens: u32,
    pub admitted_bytes: u64,
    pub kv_committed_bytes: u64,
    pub kv_capacity_tokens: u64,
    pub kv_growth_events: u64,
    pub kv_bytes_moved: u64,
    pub plan_captures: u64,
    pub plan_replays: u64,
    pub plan_invalidations: u64,
    pub plan_growth_keeps: u64,
    pub plan_declines: u64,
    pub plan_last_reason: String,
}

/// A NUL-terminated C char array as a String (the whole array when it has no NUL).
fn c_array_string(a: &[c_char]) -> String {
    let bytes: Vec<u8> = a.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A loaded model with its tokenizer, pool and governor. `'m` is the lifetime of a borrowed model
/// image (`'static` for a file or an owned image).
pub struct Engine<'m> {
    raw: NonNull<sys::fer_engine>,
    n_vocab: usize,
    /// The image the C engine reads from for its whole life (fer_engine_config.model_image is
    /// borrowed). An owned Vec's heap buffer does not move when the Engine moves. Dropped after
    /// `raw` is freed (Drop runs before the fields).
    _image: Option<Cow<'m, [u8]>>,
}

// SAFETY: ferrite.h: "No process-global state: engines in one process are independent.
// Thread-safety: one call at a time per engine (a second thread gets BUSY)": calls from several
// threads are refused, never racing, so the handle may move and be shared between threads. The
// image it borrows is immutable.
unsafe impl Send for Engine<'_> {}
unsafe impl Sync for Engine<'_> {}

impl Engine<'static> {
    /// An engine over a GGUF file.
    pub fn from_path(path: &Path, config: &EngineConfig) -> Result<Engine<'static>> {
        Engine::create(Some(path), None, config)
    }

    /// An engine owning its GGUF image.
    pub fn from_owned_image(image: Vec<u8>, config: &EngineConfig) -> Result<Engine<'static>> {
        Engine::create(None, Some(Cow::Owned(image)), config)
    }

    /// An engine over the seeded tiny model of `arch` ([`tiny_model_image`]).
    pub fn tiny(arch: &str, seed: u64, config: &EngineConfig) -> Result<Engine<'static>> {
        Engine::from_owned_image(tiny_model_image(arch, seed)?, config)
    }
}

impl<'m> Engine<'m> {
    /// An engine borrowing its GGUF image for its lifetime.
    pub fn from_image(image: &'m [u8], config: &EngineConfig) -> Result<Engine<'m>> {
        Engine::create(None, Some(Cow::Borrowed(image)), config)
    }

    fn create(path: Option<&Path>, image: Option<Cow<'m, [u8]>>, config: &EngineConfig) -> Result<Engine<'m>> {
        let mut c = sys::fer_engine_config {
            struct_size: std::mem::size_of::<sys::fer_engine_config>() as u32,
            n_threads: config.n_threads,
            model_path: ptr::null(),
            model_image: ptr::null(),
            model_image_bytes: 0,
            matmul: config.matmul,
            kv_layout: config.kv_layout,
            kv_policy: config.kv_policy,
            kv_dtype: config.kv_dtype,
            kv_min_bucket: config.kv_min_bucket,
            plan: config.plan,
            weight_budget_bytes: config.weight_budget_bytes,
            kv_budget_bytes: config.kv_budget_bytes,
            max_seqs: config.max_seqs,
            max_tokens: config.max_tokens,
            environment: ptr::null(),
            chat_template_path: ptr::null(),
            chat_template_now_unix: config.chat_template_now_unix,
            tensor_parallel: config.tensor_parallel,
            tensor_parallel_timeout_ms: config.tensor_parallel_timeout_ms,
            pipeline_parallel: config.pipeline_parallel,
            tensor_parallel_wire: config.tensor_parallel_wire,
            device: config.device,
            device_index: config.device_index,
        };
        // The path and the environment are read during the call only (the engine copies the path;
        // the environment is read "there and only there"): locals suffice.
        let path_c = match path {
            Some(p) => Some(cstring("model path", p.to_string_lossy().as_bytes())?),
            None => None,
        };
        if let Some(p) = &path_c {
            c.model_path = p.as_ptr();
        }
        let template_c = match &config.chat_template_path {
            Some(p) => Some(cstring("chat template path", p.to_string_lossy().as_bytes())?),
            None => None,
        };
        if let Some(p) = &template_c {
            c.chat_template_path = p.as_ptr();
        }
        if let Some(img) = &image {
            c.model_image = img.as_ptr().cast();
            c.model_image_bytes = img.len() as u64;
        }
        let env_c: Option<Vec<CString>> = match &config.environment {
            Some(vars) => Some(vars.iter().map(|v| cstring("environment entry", v.as_bytes())).collect::<Result<_>>()?),
            None => None,
        };
        let env_ptrs: Option<Vec<*const c_char>> =
            env_c.as_ref().map(|v| v.iter().map(|s| s.as_ptr()).chain(std::iter::once(ptr::null())).collect());
        if let Some(p) = &env_ptrs {
            c.environment = p.as_ptr();
        }
        let mut out = ptr::null_mut();
        // SAFETY: c is a fully initialised config whose pointers (path, environment array and its
        // strings) live until the call returns; the image, when set, is kept in the Engine and so
        // outlives the C engine, as the header requires; out is a valid out-pointer.
        check(unsafe { sys::fer_engine_create(&c, &mut out) })?;
        let mut e = Engine { raw: NonNull::new(out).expect("OK implies an engine"), n_vocab: 0, _image: image };
        e.n_vocab = e.model_info().n_vocab as usize;
        Ok(e)
    }

    pub fn as_ptr(&self) -> *mut sys::fer_engine {
        self.raw.as_ptr()
    }

    /// What the engine runs with (environment applied; `environment` None).
    pub fn config(&self) -> EngineConfig {
        EngineConfig::from_raw(&self.raw_config())
    }

    fn raw_config(&self) -> sys::fer_engine_config {
        // SAFETY: plain-data struct, overwritten by the call.
        let mut c: sys::fer_engine_config = unsafe { std::mem::zeroed() };
        // SAFETY: valid engine and out-pointer.
        check(unsafe { sys::fer_engine_get_config(self.raw.as_ptr(), &mut c) }).expect("fer_engine_get_config");
        c
    }

    /// The model file the engine opened (None for an image).
    pub fn model_path(&self) -> Option<PathBuf> {
        let c = self.raw_config();
        if c.model_path.is_null() {
            return None;
        }
        // SAFETY: the header says model_path points to the engine's own NUL-terminated copy,
        // valid while the engine lives (it does: &self); it is copied out at once.
        let s = unsafe { CStr::from_ptr(c.model_path) };
        Some(PathBuf::from(s.to_string_lossy().into_owned()))
    }

    /// This process's rank in its tensor-parallel job and the job's size ((0, 1) alone).
    pub fn parallel_info(&self) -> (u32, u32) {
        let (mut rank, mut size) = (0u32, 0u32);
        // SAFETY: valid engine and out-pointers.
        check(unsafe { sys::fer_engine_parallel_info(self.raw.as_ptr(), &mut rank, &mut size) }).expect("fer_engine_parallel_info");
        (rank, size)
    }

    /// On a rank other than 0: runs rank 0's calls on this rank's share of the model until rank 0
    /// frees its engine (fer_engine_run_rank).
    pub fn run_rank(&self) -> Result<()> {
        // SAFETY: valid engine; the call takes the engine's guard itself.
        check(unsafe { sys::fer_engine_run_rank(self.raw.as_ptr()) })
    }

    pub fn model_info(&self) -> ModelInfo {
        // SAFETY: plain-data struct, overwritten by the call.
        let mut i: sys::fer_model_info = unsafe { std::mem::zeroed() };
        // SAFETY: valid engine and out-pointer.
        check(unsafe { sys::fer_engine_model_info(self.raw.as_ptr(), &mut i) }).expect("fer_engine_model_info");
        ModelInfo {
            architecture: c_array_string(&i.architecture),
            n_layer: i.n_layer,
            n_embd: i.n_embd,
            n_head: i.n_head,
            n_head_kv: i.n_head_kv,
            head_dim: i.head_dim,
            n_ff: i.n_ff,
            n_vocab: i.n_vocab,
            n_ctx_train: i.n_ctx_train,
            bos_id: i.bos_id,
            eos_id: i.eos_id,
            eot_id: i.eot_id,
            pooling: i.pooling,
        }
    }

    pub fn n_vocab(&self) -> usize {
        self.n_vocab
    }

    pub fn stats(&self) -> EngineStats {
        // SAFETY: plain-data struct, overwritten by the call.
        let mut s: EngineStats = unsafe { std::mem::zeroed() };
        // SAFETY: valid engine and out-pointer.
        check(unsafe { sys::fer_engine_get_stats(self.raw.as_ptr(), &mut s) }).expect("fer_engine_get_stats");
        s
    }

    /// The model's tokenizer, borrowed from the engine.
    pub fn tokenizer(&self) -> EngineTokenizer<'_> {
        let mut t = ptr::null();
        // SAFETY: valid engine and out-pointer.
        check(unsafe { sys::fer_engine_tokenizer(self.raw.as_ptr(), &mut t) }).expect("fer_engine_tokenizer");
        EngineTokenizer { raw: NonNull::new(t as *mut _).expect("OK implies a tokenizer"), _engine: PhantomData }
    }

    /// Renders (role, content) messages with the model's chat template.
    pub fn chat_render(&self, messages: &[(&str, &str)], flags: u32) -> Result<String> {
        let owned: Vec<(CString, CString)> = messages
            .iter()
            .map(|(r, c)| Ok((cstring("role", r.as_bytes())?, cstring("content", c.as_bytes())?)))
            .collect::<Result<_>>()?;
        let raw: Vec<sys::fer_chat_message> =
            owned.iter().map(|(r, c)| sys::fer_chat_message { role: r.as_ptr(), content: c.as_ptr() }).collect();
        let mut need = 0usize;
        // SAFETY: raw holds n valid messages whose strings live in `owned`; cap 0 with a NULL
        // buffer asks for the length.
        let st = unsafe { sys::fer_engine_chat_render(self.raw.as_ptr(), raw.as_ptr(), raw.len(), flags, ptr::null_mut(), 0, &mut need) };
        if st != status::BUFFER_TOO_SMALL {
            check(st)?;
        }
        let mut buf = vec![0u8; need + 1];
        let mut len = 0usize;
        // SAFETY: as above, with room for the text and its NUL.
        check(unsafe {
            sys::fer_engine_chat_render(self.raw.as_ptr(), raw.as_ptr(), raw.len(), flags, buf.as_mut_ptr().cast(), buf.len(), &mut len)
        })?;
        buf.truncate(len);
        String::from_utf8(buf).map_err(|_| Error::rust(status::INVALID_UTF8, "chat_render: the text is not UTF-8"))
    }

    /// Renders a chat request (OpenAI JSON: `{"messages": [...], "tools": [...],
    /// "chat_template_kwargs": {...}}`) with the engine's chat template into the prompt to encode
    /// with `FER_ENCODE_ADD_SPECIAL` (`fer_engine_chat_apply`). A template's own raise is
    /// `status::TEMPLATE_ERROR` with its message.
    pub fn chat_apply(&self, request_json: &str, flags: u32) -> Result<String> {
        let mut p: *mut c_char = ptr::null_mut();
        let mut n = 0u64;
        // SAFETY: the request is request_json.len() valid bytes (no NUL needed); p and n are valid
        // out-pointers.
        check(unsafe {
            sys::fer_engine_chat_apply(self.raw.as_ptr(), request_json.as_ptr().cast(), request_json.len() as u64, flags, &mut p, &mut n)
        })?;
        // SAFETY: on OK, p holds n bytes allocated by the library, copied and then released once
        // with fer_buffer_free as the header asks.
        let bytes = unsafe {
            let v = std::slice::from_raw_parts(p as *const u8, n as usize).to_vec();
            sys::fer_buffer_free(p.cast());
            v
        };
        String::from_utf8(bytes).map_err(|_| Error::rust(status::INVALID_UTF8, "chat_apply: the text is not UTF-8"))
    }

    /// The embedding of `ids` (`fer_engine_embed`): n_embd floats, mean-pooled unless
    /// [`embed_flag::POOL_LAST`], unit-length with [`embed_flag::NORMALIZE`].
    pub fn embed(&self, ids: &[i32], flags: u32) -> Result<Vec<f32>> {
        let mut out = vec![0f32; self.model_info().n_embd as usize];
        let mut n = 0usize;
        // SAFETY: ids and out are valid for their lengths; n is a valid out-pointer.
        check(unsafe {
            sys::fer_engine_embed(self.raw.as_ptr(), ids.as_ptr(), ids.len(), flags, out.as_mut_ptr(), out.len(), &mut n)
        })?;
        out.truncate(n);
        Ok(out)
    }

    /// Each prompt token's log-probability after the ones before it and, with `top_n` > 0, the
    /// most likely tokens at each position (`fer_engine_prompt_logprobs`). Position 0 has none:
    /// (NaN, empty).
    pub fn prompt_logprobs(&self, ids: &[i32], top_n: u32) -> Result<Vec<(f32, Vec<(i32, f32)>)>> {
        let n = ids.len();
        let mut lp = vec![0f32; n];
        let mut tt = vec![0i32; n * top_n as usize];
        let mut tl = vec![0f32; n * top_n as usize];
        let (tp, lpp) = if top_n > 0 { (tt.as_mut_ptr(), tl.as_mut_ptr()) } else { (ptr::null_mut(), ptr::null_mut()) };
        // SAFETY: ids valid for n; lp holds n floats; tt and tl hold n x top_n entries (or NULL with 0).
        check(unsafe { sys::fer_engine_prompt_logprobs(self.raw.as_ptr(), ids.as_ptr(), n, top_n, lp.as_mut_ptr(), tp, lpp) })?;
        let k = top_n as usize;
        Ok((0..n)
            .map(|i| {
                let top = (0..k).map(|j| (tt[i * k + j], tl[i * k + j])).filter(|t| t.0 >= 0).collect();
                (lp[i], top)
            })
            .collect())
    }

    /// The engine's chat template's capabilities and tool syntax (`fer_chat_template_get_info`);
    /// UNSUPPORTED for a model without a template.
    pub fn chat_template_info(&self) -> Result<ChatTemplateInfo> {
        let mut t = ptr::null();
        // SAFETY: valid engine and out-pointer; the template is the engine's, alive as long as it.
        check(unsafe { sys::fer_engine_chat_template(self.raw.as_ptr(), &mut t) })?;
        // SAFETY: plain-data struct; struct_size set as the header asks.
        let mut info: sys::fer_chat_template_info = unsafe { std::mem::zeroed() };
        info.struct_size = std::mem::size_of::<sys::fer_chat_template_info>() as u32;
        // SAFETY: t is a valid template (OK above), info a valid out-pointer.
        check(unsafe { sys::fer_chat_template_get_info(t, &mut info) })?;
        Ok(ChatTemplateInfo { caps: info.caps, tool_format: info.tool_format })
    }

    /// Admits a new sequence of up to `max_tokens` positions.
    pub fn seq(&self, max_tokens: u32) -> Result<Seq<'_>> {
        let mut out = ptr::null_mut();
        // SAFETY: valid engine and out-pointer; the Seq borrows self, so it is freed first.
        check(unsafe { sys::fer_engine_seq_create(self.raw.as_ptr(), max_tokens, &mut out) })?;
        Ok(Seq { raw: NonNull::new(out).expect("OK implies a sequence"), engine: self })
    }

    /// One batched decode step: `ids[i]` appended to `seqs[i]`; returns `seqs.len()` rows of
    /// `n_vocab` logits. The sequences must be distinct (checked here: C requires it).
    pub fn decode(&self, seqs: &[&Seq], ids: &[i32]) -> Result<Vec<f32>> {
        let mut out = vec![0f32; seqs.len() * self.n_vocab];
        self.decode_into(seqs, ids, &mut out)?;
        Ok(out)
    }

    /// [`Engine::decode`] into a caller buffer of at least `seqs.len() * n_vocab` floats.
    pub fn decode_into(&self, seqs: &[&Seq], ids: &[i32], logits: &mut [f32]) -> Result<()> {
        if seqs.len() != ids.len() {
            return Err(Error::rust(status::INVALID_ARG, format!("decode: {} sequences, {} ids", seqs.len(), ids.len())));
        }
        for (i, a) in seqs.iter().enumerate() {
            if seqs[..i].iter().any(|b| b.raw == a.raw) {
                return Err(Error::rust(status::INVALID_ARG, format!("decode: sequence {} appears twice", i)));
            }
        }
        let raw: Vec<*mut sys::fer_engine_seq> = seqs.iter().map(|s| s.raw.as_ptr()).collect();
        // SAFETY: raw holds distinct live sequences (each borrowed for the call; one of another
        // engine is refused by C), ids has one id per sequence, logits is valid for its length.
        check(unsafe {
            sys::fer_engine_decode(self.raw.as_ptr(), raw.as_ptr(), ids.as_ptr(), raw.len(), logits.as_mut_ptr(), logits.len())
        })
    }
}

impl Drop for Engine<'_> {
    fn drop(&mut self) {
        // SAFETY: raw came from fer_engine_create and is freed once; no Seq can be alive (they
        // borrow self), so BUSY cannot happen. The image field is dropped after this.
        let st = unsafe { sys::fer_engine_free(self.raw.as_ptr()) };
        debug_assert_eq!(st, status::OK);
    }
}

/// The engine's tokenizer, valid while the engine lives.
pub struct EngineTokenizer<'e> {
    raw: NonNull<sys::fer_tokenizer>,
    _engine: PhantomData<&'e Engine<'e>>,
}

impl<'e> EngineTokenizer<'e> {
    pub fn as_ptr(&self) -> *const sys::fer_tokenizer {
        self.raw.as_ptr()
    }

    /// A streaming detokenizer over the engine's tokenizer (it borrows the engine).
    pub fn detokenizer(&self, flags: u32) -> Result<crate::tokenizer::Detokenizer<'e>> {
        // SAFETY: the engine's tokenizer lives as long as the engine, borrowed for 'e.
        unsafe { crate::tokenizer::Detokenizer::on(self.raw.as_ptr(), flags) }
    }

    /// A grammar vocabulary of the engine's tokenizer (n_vocab 0: the tokenizer's size; eos -1:
    /// its end token). The engine cannot be freed while it lives (the C side says BUSY; here the
    /// borrow forbids it).
    pub fn grammar_vocab(&self, n_vocab: u32, eos: i32) -> Result<crate::grammar::GrammarVocab<'e>> {
        // SAFETY: as above.
        unsafe { crate::grammar::GrammarVocab::on(self.raw.as_ptr(), n_vocab, eos) }
    }

    /// `fer_tokenizer_token_to_id`: the id of a token's exact text.
    pub fn token_to_id(&self, text: &[u8]) -> Result<i32> {
        let mut id = 0;
        // SAFETY: the engine's tokenizer is live; text is valid for its length; id a valid out-pointer.
        check(unsafe { sys::fer_tokenizer_token_to_id(self.raw.as_ptr(), text.as_ptr().cast(), text.len(), &mut id) })?;
        Ok(id)
    }

    /// DRY's sequence breakers for these strings (`fer_tokenizer_dry_breakers`).
    pub fn dry_breakers(&self, strings: &[&str]) -> Result<crate::sampling::DryBreakers> {
        // SAFETY: the engine's tokenizer lives as long as the engine.
        unsafe { crate::sampling::DryBreakers::from_strings_raw(self.raw.as_ptr(), strings) }
    }

    /// `fer_tokenizer_encode` (flags: [`crate::tokenizer::encode_flag`]).
    pub fn encode(&self, text: &[u8], flags: u32) -> Result<Vec<i32>> {
        let mut n = 0usize;
        // SAFETY: text is valid for its length; a NULL buffer with cap 0 asks for the count.
        let st = unsafe {
            sys::fer_tokenizer_encode(self.raw.as_ptr(), text.as_ptr().cast(), text.len(), flags, ptr::null_mut(), 0, &mut n)
        };
        if st != status::BUFFER_TOO_SMALL {
            check(st)?;
        }
        let mut ids = vec![0i32; n];
        // SAFETY: as above, with room for n ids.
        check(unsafe {
            sys::fer_tokenizer_encode(self.raw.as_ptr(), text.as_ptr().cast(), text.len(), flags, ids.as_mut_ptr(), ids.len(), &mut n)
        })?;
        ids.truncate(n);
        Ok(ids)
    }

    /// `fer_tokenizer_decode` (flags: [`crate::tokenizer::decode_flag`]).
    pub fn decode(&self, ids: &[i32], flags: u32) -> Result<Vec<u8>> {
        let mut need = 0usize;
        // SAFETY: ids valid for its length; cap 0 with a NULL buffer asks for the size.
        let st = unsafe { sys::fer_tokenizer_decode(self.raw.as_ptr(), ids.as_ptr(), ids.len(), flags, ptr::null_mut(), 0, &mut need) };
        if st != status::BUFFER_TOO_SMALL {
            check(st)?;
        }
        let mut out = vec![0u8; need];
        let mut len = 0usize;
        // SAFETY: out has room for need bytes.
        check(unsafe {
            sys::fer_tokenizer_decode(self.raw.as_ptr(), ids.as_ptr(), ids.len(), flags, out.as_mut_ptr().cast(), out.len(), &mut len)
        })?;
        out.truncate(len);
        Ok(out)
    }
}

/// A sequence of an engine.
pub struct Seq<'e> {
    raw: NonNull<sys::fer_engine_seq>,
    engine: &'e Engine<'e>,
}

// SAFETY: a sequence is used by one thread at a time (Seq is not Sync; its engine guards every
// call with BUSY), and may move to another thread with the engine it borrows (Engine is Sync).
unsafe impl Send for Seq<'_> {}

impl<'e> Seq<'e> {
    pub fn as_ptr(&self) -> *mut sys::fer_engine_seq {
        self.raw.as_ptr()
    }

    pub fn engine(&self) -> &'e Engine<'e> {
        self.engine
    }

    /// Runs `ids` at the next positions; returns the logits after the last.
    pub fn prefill(&self, ids: &[i32]) -> Result<Vec<f32>> {
        let mut logits = vec![0f32; self.engine.n_vocab];
        // SAFETY: live sequence; ids and logits are valid for their lengths.
        check(unsafe { sys::fer_engine_prefill(self.raw.as_ptr(), ids.as_ptr(), ids.len(), logits.as_mut_ptr(), logits.len()) })?;
        Ok(logits)
    }

    /// [`Seq::prefill`] without logits.
    pub fn prefill_only(&self, ids: &[i32]) -> Result<()> {
        // SAFETY: live sequence; ids valid for its length; NULL logits are allowed.
        check(unsafe { sys::fer_engine_prefill(self.raw.as_ptr(), ids.as_ptr(), ids.len(), ptr::null_mut(), 0) })
    }

    /// One decode step of this sequence alone (its decode plan): `Engine::decode(&[self], &[id])`.
    pub fn decode(&self, id: i32) -> Result<Vec<f32>> {
        self.engine.decode(&[self], &[id])
    }

    pub fn rewind(&self, n_tokens: u32) -> Result<()> {
        // SAFETY: live sequence.
        check(unsafe { sys::fer_engine_seq_rewind(self.raw.as_ptr(), n_tokens) })
    }

    /// Asks the running (or next) prefill or decode to stop with CANCELLED.
    pub fn cancel(&self) {
        self.canceller().cancel()
    }

    /// A handle any thread may cancel this sequence through while it lives.
    pub fn canceller(&self) -> Canceller<'_> {
        Canceller { raw: self.raw, _seq: PhantomData }
    }

    pub fn stats(&self) -> SeqStats {
        // SAFETY: plain-data struct, overwritten by the call.
        let mut s: sys::fer_engine_seq_stats = unsafe { std::mem::zeroed() };
        // SAFETY: live sequence and valid out-pointer.
        check(unsafe { sys::fer_engine_seq_get_stats(self.raw.as_ptr(), &mut s) }).expect("fer_engine_seq_get_stats");
        SeqStats {
            n_tokens: s.n_tokens,
            max_tokens: s.max_tokens,
            admitted_bytes: s.admitted_bytes,
            kv_committed_bytes: s.kv_committed_bytes,
            kv_capacity_tokens: s.kv_capacity_tokens,
            kv_growth_events: s.kv_growth_events,
            kv_bytes_moved: s.kv_bytes_moved,
            plan_captures: s.plan_captures,
            plan_replays: s.plan_replays,
            plan_invalidations: s.plan_invalidations,
            plan_growth_keeps: s.plan_growth_keeps,
            plan_declines: s.plan_declines,
            plan_last_reason: c_array_string(&s.plan_last_reason),
        }
    }
}

impl Drop for Seq<'_> {
    fn drop(&mut self) {
        // SAFETY: raw came from fer_engine_seq_create and is freed once; no Canceller can be alive
        // (they borrow self).
        let st = unsafe { sys::fer_engine_seq_free(self.raw.as_ptr()) };
        debug_assert_eq!(st, status::OK);
    }
}

/// Cancels a sequence from any thread.
#[derive(Clone, Copy)]
pub struct Canceller<'s> {
    raw: NonNull<sys::fer_engine_seq>,
    _seq: PhantomData<&'s Seq<'s>>,
}

// SAFETY: ferrite.h: fer_engine_seq_cancel is the exception to one-call-at-a-time: "any thread
// may call at any time"; the borrow keeps the sequence alive.
unsafe impl Send for Canceller<'_> {}
unsafe impl Sync for Canceller<'_> {}

impl Canceller<'_> {
    pub fn cancel(&self) {
        // SAFETY: the sequence is alive (borrowed); cancel only sets an atomic flag.
        let st = unsafe { sys::fer_engine_seq_cancel(self.raw.as_ptr()) };
        debug_assert_eq!(st, status::OK);
    }
}

/// The seeded tiny model of `arch` ("llama", "qwen2", "qwen3") as a GGUF image.
pub fn tiny_model_image(arch: &str, seed: u64) -> Result<Vec<u8>> {
    let a = cstring("architecture", arch.as_bytes())?;
    let mut p = ptr::null_mut();
    let mut n = 0usize;
    // SAFETY: a is NUL-terminated; p and n are valid out-pointers.
    check(unsafe { sys::fer_tiny_model_image(a.as_ptr(), seed, &mut p, &mut n) })?;
    // SAFETY: on OK, p holds n bytes allocated by the library; they are copied, then released
    // once with fer_buffer_free as the header asks.
    let v = unsafe {
        let v = std::slice::from_raw_parts(p as *const u8, n).to_vec();
        sys::fer_buffer_free(p);
        v
    };
    Ok(v)
}
