//! The scheduler: continuous batching with chunked prefill and the automatic prefix cache over an
//! [`Engine`] (`fer_scheduler_*`). A [`Scheduler`] borrows its engine, so the engine outlives it
//! and `fer_engine_free` never meets it.
//!
//! Thread-safety, as the header states it: [`Scheduler::submit`], [`Scheduler::cancel`] and
//! [`Scheduler::stats`] from any thread at any time; [`Scheduler::step`],
//! [`Scheduler::poll_events`] and [`Scheduler::clear_cache`] from one thread at a time (a second
//! one gets BUSY, never undefined behaviour). So the type is `Send` and `Sync`.
//!
//! Grammars: a request's matcher holds its grammar until the request finishes, so the scheduler
//! keeps an [`Arc`] of each request's [`Grammar`] until its FINISHED event is polled (or the
//! scheduler is dropped): dropping the caller's own `Arc` early is safe.

use crate::engine::Engine;
use crate::error::{check, Error, Result};
use crate::grammar::Grammar;
use crate::sampling::{self, Params};
use crate::sys;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex};

/// `fer_request_flag` bits.
pub mod request_flag {
    pub const IGNORE_EOS: u32 = crate::sys::FER_REQUEST_IGNORE_EOS;
    pub const LOGPROBS: u32 = crate::sys::FER_REQUEST_LOGPROBS;
}

/// `fer_finish_reason`.
pub mod finish {
    pub const STOP: i32 = crate::sys::FER_FINISH_STOP as i32;
    pub const LENGTH: i32 = crate::sys::FER_FINISH_LENGTH as i32;
    pub const CANCELLED: i32 = crate::sys::FER_FINISH_CANCELLED as i32;
    pub const ERROR: i32 = crate::sys::FER_FINISH_ERROR as i32;
}

/// The most alternatives a request may ask for (`FER_MAX_TOP_LOGPROBS`).
pub const MAX_TOP_LOGPROBS: u32 = sys::FER_MAX_TOP_LOGPROBS;

/// `fer_scheduler_options`; [`Default`] is `fer_scheduler_options_init`'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedulerOptions {
    /// Requests running at once; 0 = the engine's max_seqs.
    pub max_running: u32,
    /// Tokens one step runs (decode rows plus prompt chunks).
    pub step_tokens: u32,
    /// Requests waiting at most; a submit beyond is BUSY.
    pub max_queued: u32,
    /// Tokens per cached block; 0 = no prefix cache.
    pub prefix_block_tokens: u32,
    /// Most bytes the cache keeps; 0 = bounded by the governor only.
    pub prefix_cache_bytes: u64,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        // SAFETY: plain-data struct, filled by the call.
        let mut o: sys::fer_scheduler_options = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointer.
        check(unsafe { sys::fer_scheduler_options_init(&mut o) }).expect("options init");
        SchedulerOptions {
            max_running: o.max_running,
            step_tokens: o.step_tokens,
            max_queued: o.max_queued,
            prefix_block_tokens: o.prefix_block_tokens,
            prefix_cache_bytes: o.prefix_cache_bytes,
        }
    }
}

/// A request: everything is copied at submit.
#[derive(Clone, Debug)]
pub struct Request {
    pub prompt: Vec<i32>,
    pub max_new_tokens: u32,
    /// [`request_flag`] bits.
    pub flags: u32,
    /// Alternatives per token under [`request_flag::LOGPROBS`].
    pub top_logprobs: u32,
    /// The sampler's settings ([`sampling::params_init`], then set).
    pub sampling: Params,
    /// Tokens that end the request with STOP besides the model's end tokens.
    pub stop_ids: Vec<i32>,
    /// (token, bias) pairs added to the logits before sampling (-inf bans the token); they fill
    /// the sampling params' logit_bias arrays at submit (the sampler copies them).
    pub logit_bias: Vec<(i32, f32)>,
    /// A lazy grammar's triggers (empty: the grammar holds from the first token): the output is
    /// free until one of these tokens is generated, constrained after it.
    pub grammar_triggers: Vec<i32>,
    /// DRY's sequence breakers; they fill the sampling params' breaker arrays at submit.
    pub dry_breakers: std::sync::Arc<sampling::DryBreakers>,
    pub user_data: u64,
}

impl Request {
    /// A request for prompt with `fer_request_params_init`'s defaults (16 new tokens, sampling off).
    pub fn new(prompt: Vec<i32>) -> Request {
        Request {
            prompt,
            max_new_tokens: 16,
            flags: 0,
            top_logprobs: 0,
            sampling: sampling::params_init(),
            stop_ids: Vec::new(),
            logit_bias: Vec::new(),
            dry_breakers: Default::default(),
            grammar_triggers: Vec::new(),
            user_data: 0,
        }
    }
}

/// A generated token with its logprob and alternatives (empty without LOGPROBS).
#[derive(Clone, Debug, PartialEq)]
pub struct TokenEvent {
    pub request_id: u64,
    pub user_data: u64,
    pub token: i32,
    pub logprob: f32,
    pub top: Vec<(i32, f32)>,
}

/// The end of a request: always its last event.
#[derive(Clone, Debug, PartialEq)]
pub struct FinishEvent {
    pub request_id: u64,
    pub user_data: u64,
    /// A [`finish`] value.
    pub reason: i32,
    /// The token that stopped it (STOP), else -1.
    pub stop_token: i32,
    pub n_prompt_tokens: u32,
    pub n_cached_tokens: u32,
    pub n_generated: u32,
    /// Set with ERROR: the status and message.
    pub error: Option<Error>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    Token(TokenEvent),
    Finished(FinishEvent),
}

pub type StepInfo = sys::fer_scheduler_step_info;
pub type SchedulerStats = sys::fer_scheduler_stats;

pub struct Scheduler<'e> {
    raw: NonNull<sys::fer_scheduler>,
    /// Each running request's grammar, held until its FINISHED event is polled.
    grammars: Mutex<HashMap<u64, Arc<Grammar<'e>>>>,
    _engine: PhantomData<&'e Engine<'e>>,
}

// SAFETY: the header allows submit, cancel and get_stats from any thread at any time, and turns a
// second concurrent step, poll or clear into BUSY; the Rust-side map is behind a Mutex.
unsafe impl Send for Scheduler<'_> {}
unsafe impl Sync for Scheduler<'_> {}

impl<'e> Scheduler<'e> {
    /// `fer_scheduler_create` over engine.
    pub fn new(engine: &'e Engine<'_>, options: &SchedulerOptions) -> Result<Scheduler<'e>> {
        // SAFETY: plain-data struct, filled by the call.
        let mut o: sys::fer_scheduler_options = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointer.
        check(unsafe { sys::fer_scheduler_options_init(&mut o) })?;
        o.max_running = options.max_running;
        o.step_tokens = options.step_tokens;
        o.max_queued = options.max_queued;
        o.prefix_block_tokens = options.prefix_block_tokens;
        o.prefix_cache_bytes = options.prefix_cache_bytes;
        let mut out = ptr::null_mut();
        // SAFETY: a live engine (borrowed for 'e), valid options and out-pointer.
        check(unsafe { sys::fer_scheduler_create(engine.as_ptr(), &o, &mut out) })?;
        Ok(Scheduler {
            raw: NonNull::new(out).expect("OK implies a scheduler"),
            grammars: Mutex::new(HashMap::new()),
            _engine: PhantomData,
        })
    }

    /// `fer_scheduler_submit`: the request's id. With a grammar the output follows it; the
    /// scheduler keeps the grammar alive until the request's FINISHED event is polled.
    pub fn submit(&self, r: &Request, grammar: Option<Arc<Grammar<'e>>>) -> Result<u64> {
        // SAFETY: plain-data struct, filled by the call.
        let mut p: sys::fer_request_params = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointer.
        check(unsafe { sys::fer_request_params_init(&mut p) })?;
        p.flags = r.flags;
        p.prompt = r.prompt.as_ptr();
        p.n_prompt = r.prompt.len();
        p.max_new_tokens = r.max_new_tokens;
        p.top_logprobs = r.top_logprobs;
        p.sampling = r.sampling;
        let bias_tokens: Vec<i32> = r.logit_bias.iter().map(|b| b.0).collect();
        let bias_values: Vec<f32> = r.logit_bias.iter().map(|b| b.1).collect();
        if !r.logit_bias.is_empty() {
            p.sampling.n_logit_bias = r.logit_bias.len() as u32;
            p.sampling.logit_bias_tokens = bias_tokens.as_ptr();
            p.sampling.logit_bias_values = bias_values.as_ptr();
        }
        r.dry_breakers.fill(&mut p.sampling);
        p.grammar_triggers = if r.grammar_triggers.is_empty() { ptr::null() } else { r.grammar_triggers.as_ptr() };
        p.n_grammar_triggers = r.grammar_triggers.len();
        p.grammar = grammar.as_ref().map_or(ptr::null(), |g| g.as_ptr());
        p.stop_ids = if r.stop_ids.is_empty() { ptr::null() } else { r.stop_ids.as_ptr() };
        p.n_stop_ids = r.stop_ids.len();
        p.user_data = r.user_data;
        // The map's lock is held across the submit, so a step on another thread cannot poll this
        // request's FINISHED event (and look for its grammar) before the grammar is recorded.
        let mut grammars = self.grammars.lock().expect("grammar map");
        let mut id = 0u64;
        // SAFETY: every pointer in p is valid for the call (the C side copies what it keeps; the
        // grammar stays alive through the Arc recorded below).
        check(unsafe { sys::fer_scheduler_submit(self.raw.as_ptr(), &p, &mut id) })?;
        if let Some(g) = grammar {
            grammars.insert(id, g);
        }
        Ok(id)
    }

    /// `fer_scheduler_cancel`: the request ends with CANCELLED at the next step boundary.
    pub fn cancel(&self, request_id: u64) -> Result<()> {
        // SAFETY: valid scheduler; any thread.
        check(unsafe { sys::fer_scheduler_cancel(self.raw.as_ptr(), request_id) })
    }

    /// `fer_scheduler_step`: one batched pass (or nothing, when nothing runs).
    pub fn step(&self) -> Result<StepInfo> {
        // SAFETY: plain-data struct, overwritten by the call.
        let mut info: StepInfo = unsafe { std::mem::zeroed() };
        // SAFETY: valid scheduler and out-pointer.
        check(unsafe { sys::fer_scheduler_step(self.raw.as_ptr(), &mut info) })?;
        Ok(info)
    }

    /// `fer_scheduler_poll_events`: every queued event, oldest first, appended to out.
    pub fn poll_events(&self, out: &mut Vec<Event>) -> Result<()> {
        // SAFETY: plain-data array, filled by the call.
        let mut buf: [sys::fer_scheduler_event; 32] = unsafe { std::mem::zeroed() };
        loop {
            let mut n = 0usize;
            // SAFETY: buf holds 32 events; valid out-pointer.
            check(unsafe { sys::fer_scheduler_poll_events(self.raw.as_ptr(), buf.as_mut_ptr(), buf.len(), &mut n) })?;
            for ev in &buf[..n] {
                out.push(self.convert(ev));
            }
            if n < buf.len() {
                return Ok(());
            }
        }
    }

    fn convert(&self, ev: &sys::fer_scheduler_event) -> Event {
        if ev.kind == sys::FER_EVENT_TOKEN as i32 {
            let n = (ev.n_top as usize).min(ev.top_tokens.len());
            return Event::Token(TokenEvent {
                request_id: ev.request_id,
                user_data: ev.user_data,
                token: ev.token,
                logprob: ev.logprob,
                top: (0..n).map(|i| (ev.top_tokens[i], ev.top_logprobs[i])).collect(),
            });
        }
        self.grammars.lock().expect("grammar map").remove(&ev.request_id);
        let error = (ev.finish_reason == finish::ERROR).then(|| {
            // SAFETY: the C side NUL-terminates message within its array.
            let msg = unsafe { std::ffi::CStr::from_ptr(ev.message.as_ptr()) };
            Error { code: ev.status, message: msg.to_string_lossy().into_owned() }
        });
        Event::Finished(FinishEvent {
            request_id: ev.request_id,
            user_data: ev.user_data,
            reason: ev.finish_reason,
            stop_token: ev.stop_token,
            n_prompt_tokens: ev.n_prompt_tokens,
            n_cached_tokens: ev.n_cached_tokens,
            n_generated: ev.n_generated,
            error,
        })
    }

    /// `fer_scheduler_get_stats`.
    pub fn stats(&self) -> SchedulerStats {
        // SAFETY: plain-data struct, overwritten by the call.
        let mut s: SchedulerStats = unsafe { std::mem::zeroed() };
        // SAFETY: valid scheduler and out-pointer.
        check(unsafe { sys::fer_scheduler_get_stats(self.raw.as_ptr(), &mut s) }).expect("scheduler stats");
        s
    }

    /// `fer_scheduler_clear_cache`: every cached prefix dropped.
    pub fn clear_cache(&self) -> Result<()> {
        // SAFETY: valid scheduler.
        check(unsafe { sys::fer_scheduler_clear_cache(self.raw.as_ptr()) })
    }

    pub fn as_ptr(&self) -> *mut sys::fer_scheduler {
        self.raw.as_ptr()
    }
}

impl Drop for Scheduler<'_> {
    fn drop(&mut self) {
        // SAFETY: raw came from new(); &mut self means no other thread is inside. The C side
        // frees the unfinished requests' matchers; the grammars they held drop after this.
        let st = unsafe { sys::fer_scheduler_free(self.raw.as_ptr()) };
        debug_assert_eq!(st, crate::error::status::OK);
    }
}
