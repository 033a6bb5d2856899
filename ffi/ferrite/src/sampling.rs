//! Sampling: `Sampler` owns a `fer_sampler` (the configured processor chain) and frees it in Drop.

use crate::error::{check, Result};
use crate::sys;
use std::ptr::{self, NonNull};

/// `fer_sampling_params`; start from [`params_init`].
pub type Params = sys::fer_sampling_params;

/// Processor bits of the `applied` result (`fer_logit_processor`).
pub mod processor {
    pub const LOGIT_BIAS: u32 = crate::sys::FER_PROCESSOR_LOGIT_BIAS;
    pub const REPETITION_PENALTY: u32 = crate::sys::FER_PROCESSOR_REPETITION_PENALTY;
    pub const FREQUENCY_PENALTY: u32 = crate::sys::FER_PROCESSOR_FREQUENCY_PENALTY;
    pub const PRESENCE_PENALTY: u32 = crate::sys::FER_PROCESSOR_PRESENCE_PENALTY;
    pub const NO_REPEAT_NGRAM: u32 = crate::sys::FER_PROCESSOR_NO_REPEAT_NGRAM;
    pub const MIN_NEW_TOKENS: u32 = crate::sys::FER_PROCESSOR_MIN_NEW_TOKENS;
    pub const TEMPERATURE: u32 = crate::sys::FER_PROCESSOR_TEMPERATURE;
    pub const GREEDY: u32 = crate::sys::FER_PROCESSOR_GREEDY;
    pub const TOP_K: u32 = crate::sys::FER_PROCESSOR_TOP_K;
    pub const TOP_P: u32 = crate::sys::FER_PROCESSOR_TOP_P;
    pub const TOP_K_TOP_P_FUSED: u32 = crate::sys::FER_PROCESSOR_TOP_K_TOP_P_FUSED;
    pub const MIN_P: u32 = crate::sys::FER_PROCESSOR_MIN_P;
    pub const TYPICAL_P: u32 = crate::sys::FER_PROCESSOR_TYPICAL_P;
    pub const XTC: u32 = crate::sys::FER_PROCESSOR_XTC;
    pub const GRAMMAR: u32 = crate::sys::FER_PROCESSOR_GRAMMAR;
    pub const DRY: u32 = crate::sys::FER_PROCESSOR_DRY;
    pub const MIROSTAT: u32 = crate::sys::FER_PROCESSOR_MIROSTAT;
}

/// DRY's sequence breakers as token sequences (`fer_sampling_params.dry_breaker_*`), made from
/// strings by `Tokenizer::dry_breakers` or written by hand.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DryBreakers {
    /// Tokens per breaker (each 1..=64).
    pub lengths: Vec<u32>,
    /// The breakers' tokens, concatenated.
    pub tokens: Vec<i32>,
}

impl DryBreakers {
    /// From explicit sequences (head first).
    pub fn from_sequences(seqs: &[&[i32]]) -> DryBreakers {
        DryBreakers {
            lengths: seqs.iter().map(|s| s.len() as u32).collect(),
            tokens: seqs.iter().flat_map(|s| s.iter().copied()).collect(),
        }
    }

    /// Points params' breaker fields at self (which must outlive the create call that reads them).
    pub fn fill(&self, p: &mut Params) {
        p.n_dry_breakers = self.lengths.len() as u32;
        p.n_dry_breaker_tokens = self.tokens.len() as u32;
        p.dry_breaker_lengths = if self.lengths.is_empty() { ptr::null() } else { self.lengths.as_ptr() };
        p.dry_breaker_tokens = if self.tokens.is_empty() { ptr::null() } else { self.tokens.as_ptr() };
    }

    /// `fer_tokenizer_dry_breakers` on a raw tokenizer.
    ///
    /// # Safety
    /// `tok` must be a live tokenizer for the duration of the call.
    pub unsafe fn from_strings_raw(tok: *const sys::fer_tokenizer, strings: &[&str]) -> Result<DryBreakers> {
        let owned: Vec<std::ffi::CString> = strings
            .iter()
            .map(|s| std::ffi::CString::new(s.replace('\0', "")).expect("NULs removed"))
            .collect();
        let ptrs: Vec<*const std::os::raw::c_char> = owned.iter().map(|s| s.as_ptr()).collect();
        let (mut nb, mut nt) = (0usize, 0usize);
        // SAFETY: tok is live (caller); ptrs point at NUL-terminated strings alive through the
        // call; NULL arrays with caps 0 ask for the counts.
        let st = unsafe {
            sys::fer_tokenizer_dry_breakers(tok, ptrs.as_ptr(), ptrs.len(), ptr::null_mut(), 0, ptr::null_mut(), 0, &mut nb, &mut nt)
        };
        if st != crate::status::BUFFER_TOO_SMALL {
            check(st)?;
        }
        let mut out = DryBreakers { lengths: vec![0; nb], tokens: vec![0; nt] };
        // SAFETY: as above, with arrays of the sizes asked for.
        check(unsafe {
            sys::fer_tokenizer_dry_breakers(
                tok,
                ptrs.as_ptr(),
                ptrs.len(),
                out.lengths.as_mut_ptr(),
                nb,
                out.tokens.as_mut_ptr(),
                nt,
                &mut nb,
                &mut nt,
            )
        })?;
        Ok(out)
    }
}

/// `fer_sampling_flag` bits.
pub mod flag {
    pub const ALLOW_NONFINITE: u32 = crate::sys::FER_SAMPLING_FLAG_ALLOW_NONFINITE;
    pub const FUSE_TOP_K_TOP_P: u32 = crate::sys::FER_SAMPLING_FLAG_FUSE_TOP_K_TOP_P;
}

/// Every processor off (`fer_sampling_params_init`).
pub fn params_init() -> Params {
    // SAFETY: plain-data struct; all-zero is a valid value that init then overwrites.
    let mut p: Params = unsafe { std::mem::zeroed() };
    // SAFETY: p is a valid out-pointer.
    check(unsafe { sys::fer_sampling_params_init(&mut p) }).expect("params_init cannot fail");
    p
}

/// The token history the penalties read.
#[derive(Clone, Copy, Debug, Default)]
pub struct Context<'a> {
    pub prompt: &'a [i32],
    pub generated: &'a [i32],
}

impl Context<'_> {
    fn raw(&self) -> sys::fer_sampling_context {
        sys::fer_sampling_context {
            prompt_tokens: self.prompt.as_ptr(),
            n_prompt: self.prompt.len(),
            generated_tokens: self.generated.as_ptr(),
            n_generated: self.generated.len(),
        }
    }
}

/// An owned `fer_sampler`.
#[derive(Debug)]
pub struct Sampler {
    ptr: NonNull<sys::fer_sampler>,
}

// SAFETY: ferrite.h: "Thread-safety: one call at a time; a second thread entering a sampler in use
// gets FER_STATUS_BUSY." Nothing ties it to a thread (Send); calls take &mut self (not Sync).
unsafe impl Send for Sampler {}

impl Sampler {
    /// Creates a sampler; `bias` is copied by C (it overrides the params' bias fields).
    pub fn new(params: &Params, bias: &[(i32, f32)]) -> Result<Sampler> {
        Sampler::with_breakers(params, bias, &DryBreakers::default())
    }

    /// As `new`, with DRY's sequence breakers (copied by C).
    pub fn with_breakers(params: &Params, bias: &[(i32, f32)], breakers: &DryBreakers) -> Result<Sampler> {
        let tokens: Vec<i32> = bias.iter().map(|b| b.0).collect();
        let values: Vec<f32> = bias.iter().map(|b| b.1).collect();
        let mut p = *params;
        p.n_logit_bias = bias.len() as u32;
        p.logit_bias_tokens = if bias.is_empty() { ptr::null() } else { tokens.as_ptr() };
        p.logit_bias_values = if bias.is_empty() { ptr::null() } else { values.as_ptr() };
        breakers.fill(&mut p);
        let mut out: *mut sys::fer_sampler = ptr::null_mut();
        // SAFETY: p and the bias vectors live through the call; C copies what it keeps.
        check(unsafe { sys::fer_sampler_create(&p, &mut out) })?;
        Ok(Sampler { ptr: NonNull::new(out).expect("create returned OK with NULL") })
    }

    /// Runs the chain in place; returns the processor bits that ran.
    pub fn process(&mut self, logits: &mut [f32], ctx: &Context<'_>) -> Result<u32> {
        let mut applied = 0u32;
        let c = ctx.raw();
        // SAFETY: logits is valid for its length; ctx's slices outlive the call.
        check(unsafe { sys::fer_sampler_process(self.ptr.as_ptr(), logits.as_mut_ptr(), logits.len(), &c, &mut applied) })?;
        Ok(applied)
    }

    /// Process, then draw with the seeded generator: (token, logprob).
    pub fn sample(&mut self, logits: &mut [f32], ctx: &Context<'_>) -> Result<(i32, f32)> {
        let (mut tok, mut lp) = (-1i32, 0f32);
        let c = ctx.raw();
        // SAFETY: as in process; tok and lp are valid out-pointers.
        check(unsafe { sys::fer_sampler_sample(self.ptr.as_ptr(), logits.as_mut_ptr(), logits.len(), &c, &mut tok, &mut lp) })?;
        Ok((tok, lp))
    }

    /// Process, then draw with a caller-given uniform in [0, 1).
    pub fn sample_uniform(&mut self, logits: &mut [f32], ctx: &Context<'_>, u: f64) -> Result<(i32, f32)> {
        let (mut tok, mut lp) = (-1i32, 0f32);
        let c = ctx.raw();
        // SAFETY: as in sample.
        check(unsafe {
            sys::fer_sampler_sample_uniform(self.ptr.as_ptr(), logits.as_mut_ptr(), logits.len(), &c, u, &mut tok, &mut lp)
        })?;
        Ok((tok, lp))
    }

    pub fn as_ptr(&self) -> *mut sys::fer_sampler {
        self.ptr.as_ptr()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        // SAFETY: we own the pointer; it is freed exactly once.
        unsafe { sys::fer_sampler_free(self.ptr.as_ptr()) }
    }
}

/// Argmax, ties to the lowest id (`fer_sample_greedy`).
pub fn greedy(logits: &[f32]) -> Result<i32> {
    let mut tok = -1;
    // SAFETY: logits valid for its length; tok a valid out-pointer.
    check(unsafe { sys::fer_sample_greedy(logits.as_ptr(), logits.len(), &mut tok) })?;
    Ok(tok)
}

/// The n most likely tokens with their log-probabilities (`fer_logits_top_logprobs`).
pub fn top_logprobs(logits: &[f32], n: usize) -> Result<Vec<(i32, f32)>> {
    let mut toks = vec![0i32; n];
    let mut lps = vec![0f32; n];
    let mut got = 0usize;
    // SAFETY: the output arrays hold n entries; got is a valid out-pointer.
    check(unsafe {
        sys::fer_logits_top_logprobs(logits.as_ptr(), logits.len(), n, toks.as_mut_ptr(), lps.as_mut_ptr(), &mut got)
    })?;
    Ok(toks.into_iter().zip(lps).take(got).collect())
}

/// The generator's uniform for (seed, counter) (`fer_sampling_uniform`).
pub fn uniform(seed: u64, counter: u64) -> f64 {
    let mut u = 0f64;
    // SAFETY: u is a valid out-pointer.
    check(unsafe { sys::fer_sampling_uniform(seed, counter, &mut u) }).expect("uniform cannot fail");
    u
}
