//! The real backend: a ferrite engine and its scheduler (continuous batching, chunked prefill,
//! the prefix cache), through the safe `ferrite` crate.
//!
//! The scheduler, the grammar vocabulary and the detokenizers borrow the engine, and the engine
//! thread owns the backend as one `Box<dyn Backend>`: so the backend owns the engine in a `Box`
//! (its address never changes) and its borrowers carry `'static`, which is sound because of two
//! rules kept here: every borrower is a field declared before `engine` (fields drop in declaration
//! order, so they are gone before it), and nothing takes `&mut` of the engine.

use crate::args::Options;
use crate::backend::{Backend, BackendMetrics, Event, Finish, GenRequest, GrammarSpec, PromptToken, SubmitError, TokenOut};
use ferrite::engine::{chat_flag, EngineTokenizer};
use ferrite::scheduler::{finish, request_flag, Event as SchedEvent, Request, Scheduler, SchedulerOptions};
use ferrite::sampling::DryBreakers;
use ferrite::tokenizer::encode_flag;
use ferrite::{status, Detokenizer, Engine, EngineConfig, Grammar, GrammarVocab};
use std::collections::HashMap;
use std::sync::Arc;

/// Prompt tokens one step runs beside the decode rows: long prompts are chunked by it.
const STEP_TOKENS: u32 = 512;
/// Tokens per prefix-cache block (vLLM's default).
const CACHE_BLOCK: u32 = 16;

pub struct FerriteBackend {
    // --- borrowers of the engine: declared (so dropped) before it ---
    /// Each running request's streaming detokenizer.
    detok: HashMap<u64, Detokenizer<'static>>,
    sched: Scheduler<'static>,
    vocab: GrammarVocab<'static>,
    tok: EngineTokenizer<'static>,
    // --- the engine itself, last ---
    engine: Box<Engine<'static>>,
    model_id: String,
    n_ctx: u32,
    n_vocab: u32,
    pending: Vec<Event>,
    /// DRY's breakers per set of strings (reading the vocabulary for each request would cost
    /// about as much as a decode step).
    dry_breakers: HashMap<Vec<String>, Arc<DryBreakers>>,
    /// Why the engine can run nothing any more (a tensor-parallel rank died: DEVICE_ERROR); then
    /// every request gets 503 with it, and the process exits with status 3 shortly after.
    broken: Option<String>,
}

/// `fer_engine_embed`'s flags for a file's pooling type: the mean unless it names the first or
/// the last token's state; unit length always.
fn embed_flags(pooling: u32) -> u32 {
    use ferrite::engine::{embed_flag, pooling};
    embed_flag::NORMALIZE
        | match pooling {
            pooling::CLS => embed_flag::POOL_FIRST,
            pooling::LAST => embed_flag::POOL_LAST,
            _ => 0,
        }
}

#[cfg(test)]
mod tests {
    use ferrite::engine::{embed_flag, pooling};

    // EVIDENCE: C-ENG-021
    #[test]
    fn the_files_pooling_picks_the_embedding() {
        assert_eq!(super::embed_flags(pooling::NONE), embed_flag::NORMALIZE);
        assert_eq!(super::embed_flags(pooling::MEAN), embed_flag::NORMALIZE);
        assert_eq!(super::embed_flags(pooling::CLS), embed_flag::NORMALIZE | embed_flag::POOL_FIRST);
        assert_eq!(super::embed_flags(pooling::LAST), embed_flag::NORMALIZE | embed_flag::POOL_LAST);
    }
}

/// The engine every rank of a tensor-parallel job must create alike (the options' engine part).
fn engine_config(opts: &Options) -> EngineConfig {
    let mut cfg = EngineConfig::default().max_seqs(opts.parallel.max(1));
    if let Some(t) = opts.threads {
        cfg = cfg.threads(t);
    }
    if let Some(b) = opts.kv_budget {
        cfg = cfg.kv_budget(b);
    }
    if let Some(d) = opts.kv_dtype {
        cfg = cfg.kv_dtype(d);
    }
    if let Some(c) = opts.ctx {
        cfg = cfg.max_tokens(c);
    }
    if let Some(t) = &opts.chat_template {
        cfg = cfg.chat_template(t);
    }
    // the one engine variable the server takes from its environment: the date chat templates
    // print (strftime_now), fixed for reproducible prompts; the engine checks it
    if let Ok(d) = std::env::var("FERRITE_TEMPLATE_NOW") {
        cfg = cfg.environment([format!("FERRITE_TEMPLATE_NOW={d}")]);
    }
    if let Some(m) = opts.matmul {
        cfg = cfg.matmul(m);
    }
    if opts.tp > 1 {
        cfg = cfg.tensor_parallel(opts.tp);
    }
    if opts.pp > 1 {
        cfg = cfg.pipeline_parallel(opts.pp);
    }
    if let Some(s) = opts.tp_timeout {
        cfg = cfg.tensor_parallel_timeout_ms(s * 1000);
    }
    if let Some(w) = opts.tp_wire {
        cfg = cfg.tensor_parallel_wire(w);
    }
    if let Some((d, i)) = opts.device {
        cfg = cfg.device(d, i);
    }
    cfg
}

/// A rank other than 0 of `mpirun -n N ferrite-serve --tp N` (or --pp N): opens its share of the model and
/// follows rank 0's steps until rank 0's engine is freed (no HTTP of its own).
pub fn follow_rank_0(opts: &Options) -> Result<(), String> {
    let path = opts.model.as_ref().ok_or("--model is required with --tp")?;
    let engine = Engine::from_path(path, &engine_config(opts)).map_err(|e| format!("{}: {e}", path.display()))?;
    engine.run_rank().map_err(|e| {
        // The job is broken (a rank died or stopped): dropping the engine would finalize MPI, which
        // waits for every rank, the dead one too; the process ends without it (main exits 1).
        std::mem::forget(engine);
        format!("following rank 0: {e}")
    })
}

impl FerriteBackend {
    pub fn open(opts: &Options) -> Result<FerriteBackend, String> {
        let path = opts.model.as_ref().ok_or("--model is required (or --fake)")?;
        let cfg = engine_config(opts);
        let engine = Box::new(Engine::from_path(path, &cfg).map_err(|e| format!("{}: {e}", path.display()))?);
        // SAFETY: the engine is boxed (its address is stable) and outlives every borrower: they
        // are fields declared before `engine`, and nothing moves out of or mutably borrows it.
        let e: &'static Engine<'static> = unsafe { &*(engine.as_ref() as *const Engine<'static>) };
        let tok = e.tokenizer();
        let vocab = tok.grammar_vocab(0, -1).map_err(|err| format!("grammar vocabulary: {err}"))?;
        let so = SchedulerOptions {
            max_running: opts.parallel.max(1),
            step_tokens: STEP_TOKENS.max(opts.parallel),
            max_queued: opts.max_queued.max(1),
            prefix_block_tokens: if opts.prefix_cache { CACHE_BLOCK } else { 0 },
            prefix_cache_bytes: 0,
        };
        let sched = Scheduler::new(e, &so).map_err(|err| format!("scheduler: {err}"))?;
        let model_id = path.file_stem().map_or_else(|| "ferrite".to_string(), |s| s.to_string_lossy().into_owned());
        let n_ctx = e.config().max_tokens;
        let n_vocab = e.model_info().n_vocab;
        Ok(FerriteBackend { detok: HashMap::new(), sched, vocab, tok, engine, model_id, n_ctx, n_vocab, pending: Vec::new(), dry_breakers: HashMap::new(), broken: None })
    }

    /// The engine failed for good: from now on every request gets 503 with `why`, and after two
    /// seconds (for the requests in flight to get theirs) the process exits with status 3, so that
    /// mpirun ends the job.
    fn break_down(&mut self, why: &str) {
        if self.broken.is_some() {
            return;
        }
        eprintln!("ferrite-serve: the engine cannot go on: {why}; answering 503 and exiting");
        self.broken = Some(format!("The engine cannot go on: {why}"));
        std::thread::spawn(|| {
            std::thread::sleep(std::time::Duration::from_secs(2));
            eprintln!("ferrite-serve: exiting with status 3 (the engine failed)");
            std::process::exit(3);
        });
    }

    fn compile(&self, g: &GrammarSpec) -> Result<Arc<Grammar<'static>>, String> {
        use ferrite::grammar::kind;
        let (k, src): (i32, &[u8]) = match g {
            GrammarSpec::JsonSchema(s) | GrammarSpec::ToolCalls(s) => (kind::JSON_SCHEMA, s.as_bytes()),
            GrammarSpec::JsonObject => (kind::JSON_SCHEMA, br#"{"type": "object"}"#),
            GrammarSpec::Regex(r) => (kind::REGEX, r.as_bytes()),
        };
        // SAFETY of the 'static: the vocabulary is a field declared before the engine and after
        // the scheduler, which holds the grammars; the scheduler (and its Arcs) drop first.
        let vocab: &'static GrammarVocab<'static> = unsafe { &*(&self.vocab as *const GrammarVocab<'static>) };
        vocab.compile(k, src, 0).map(Arc::new).map_err(|e| e.message)
    }

    fn token_bytes(&self, t: i32) -> Vec<u8> {
        self.tok.decode(&[t], 0).unwrap_or_default()
    }

    fn convert(&mut self, ev: SchedEvent) -> Event {
        match ev {
            SchedEvent::Token(t) => {
                let mut text = Vec::new();
                if let Some(d) = self.detok.get_mut(&t.request_id) {
                    let _ = d.push(t.token, &mut text);
                }
                let top = t.top.iter().map(|&(id, lp)| (id, self.token_bytes(id), lp)).collect();
                Event::Token {
                    id: t.request_id,
                    tok: TokenOut { token: t.token, text, token_bytes: self.token_bytes(t.token), logprob: t.logprob, top },
                }
            }
            SchedEvent::Finished(f) => {
                let mut tail = Vec::new();
                if let Some(mut d) = self.detok.remove(&f.request_id) {
                    let _ = d.flush(&mut tail);
                }
                let finish = match f.reason {
                    finish::STOP => Finish::Stop,
                    finish::LENGTH => Finish::Length,
                    finish::CANCELLED => Finish::Cancelled,
                    _ => {
                        let err = f.error.unwrap_or(ferrite::Error { code: status::MISUSE, message: "unknown".into() });
                        if err.code == status::DEVICE_ERROR {
                            self.break_down(&err.message);
                        }
                        // a request that can never fit the KV budget is the client's to shrink; the
                        // ranks out of step (DEVICE_ERROR) is the server's, for good
                        let http_status = match err.code {
                            status::BUDGET_EXCEEDED => 400,
                            status::DEVICE_ERROR => 503,
                            _ => 500,
                        };
                        Finish::Error { http_status, message: err.message }
                    }
                };
                Event::Finished {
                    id: f.request_id,
                    finish,
                    tail,
                    n_prompt: f.n_prompt_tokens,
                    n_cached: f.n_cached_tokens,
                    n_generated: f.n_generated,
                }
            }
        }
    }
}

impl Backend for FerriteBackend {
    fn model_id(&self) -> String {
        self.model_id.clone()
    }

    fn n_ctx(&self) -> u32 {
        self.n_ctx
    }

    fn tool_format(&self) -> u32 {
        self.engine.chat_template_info().map_or(ferrite::engine::tool_format::GENERIC, |i| i.tool_format)
    }

    fn tokenize(&mut self, text: &str, add_special: bool) -> Result<Vec<i32>, String> {
        self.tok.encode(text.as_bytes(), if add_special { encode_flag::ADD_SPECIAL } else { 0 }).map_err(|e| e.message)
    }

    fn embed(&mut self, ids: &[i32]) -> Result<Vec<f32>, String> {
        self.engine.embed(ids, embed_flags(self.engine.model_info().pooling)).map_err(|e| e.message)
    }

    fn prompt_logprobs(&mut self, ids: &[i32], top_n: u32) -> Result<Vec<PromptToken>, String> {
        let rows = self.engine.prompt_logprobs(ids, top_n).map_err(|e| e.message)?;
        let mut detok = self.tok.detokenizer(0).map_err(|e| e.message)?;
        let (mut chars, mut piece) = (0usize, Vec::new());
        let mut out = Vec::with_capacity(ids.len());
        for (&id, (lp, top)) in ids.iter().zip(rows) {
            out.push(PromptToken {
                bytes: self.token_bytes(id),
                text_offset: chars,
                logprob: (!lp.is_nan()).then_some(lp),
                top: top.into_iter().map(|(t, l)| (self.token_bytes(t), l)).collect(),
            });
            piece.clear();
            detok.push(id, &mut piece).map_err(|e| e.message)?;
            chars += String::from_utf8_lossy(&piece).chars().count();
        }
        Ok(out)
    }

    fn n_embd(&self) -> u32 {
        self.engine.model_info().n_embd
    }

    fn detokenize(&mut self, ids: &[i32]) -> Result<Vec<u8>, String> {
        self.tok.decode(ids, 0).map_err(|e| e.message)
    }

    fn render_chat(&mut self, request_json: &str) -> Result<String, String> {
        self.engine.chat_apply(request_json, chat_flag::ADD_GENERATION_PROMPT).map_err(|e| e.message)
    }

    fn submit(&mut self, r: GenRequest) -> Result<u64, SubmitError> {
        if let Some(why) = &self.broken {
            return Err(SubmitError::Unavailable(why.clone()));
        }
        let GenRequest { prompt, max_new_tokens, params: p } = r;
        // a lazy grammar's triggers: the texts that are one token here
        let triggers: Vec<i32> = p.grammar_triggers.iter().filter_map(|t| self.tok.token_to_id(t.as_bytes()).ok()).collect();
        let lazy_without_trigger = !p.grammar_triggers.is_empty() && triggers.is_empty();
        let grammar = match &p.grammar {
            Some(_) if lazy_without_trigger => None,
            Some(g) => {
                let what = if matches!(g, GrammarSpec::ToolCalls(_)) { "tools (a function's parameters)" } else { "response_format" };
                Some(self.compile(g).map_err(|m| SubmitError::Invalid(format!("{what}: {m}")))?)
            }
            None => None,
        };
        let mut req = Request::new(prompt);
        req.max_new_tokens = max_new_tokens;
        req.flags = if p.logprobs { request_flag::LOGPROBS } else { 0 } | if p.ignore_eos { request_flag::IGNORE_EOS } else { 0 };
        req.top_logprobs = if p.logprobs { p.top_logprobs } else { 0 };
        req.stop_ids = p.stop_ids;
        req.grammar_triggers = triggers;
        if let Some(&(bad, _)) = p.logit_bias.iter().find(|b| b.0 as u32 >= self.n_vocab) {
            return Err(SubmitError::Invalid(format!("logit_bias: token {bad} is not in the vocabulary (0..{})", self.n_vocab)));
        }
        req.logit_bias = p.logit_bias;
        let s = &mut req.sampling;
        s.temperature = p.temperature;
        s.top_p = p.top_p;
        s.top_k = p.top_k.max(0);
        s.min_p = p.min_p;
        s.seed = p.seed;
        s.presence_penalty = p.presence_penalty;
        s.frequency_penalty = p.frequency_penalty;
        s.repetition_penalty = p.repetition_penalty;
        s.typical_p = p.typical_p;
        s.xtc_probability = p.xtc_probability;
        s.xtc_threshold = p.xtc_threshold;
        if let Some(d) = &p.dry {
            s.dry_multiplier = d.multiplier;
            s.dry_base = d.base;
            s.dry_allowed_length = d.allowed_length;
            s.dry_penalty_last_n = d.penalty_last_n;
            req.dry_breakers = match self.dry_breakers.get(&d.sequence_breakers) {
                Some(b) => b.clone(),
                None => {
                    let strings: Vec<&str> = d.sequence_breakers.iter().map(|s| s.as_str()).collect();
                    let b = Arc::new(self.tok.dry_breakers(&strings).map_err(|e| SubmitError::Invalid(format!("dry_sequence_breakers: {e}")))?);
                    if self.dry_breakers.len() >= 64 {
                        self.dry_breakers.clear(); // a bound: clients rarely vary them
                    }
                    self.dry_breakers.insert(d.sequence_breakers.clone(), b.clone());
                    b
                }
            };
        }
        if let Some(m) = p.mirostat {
            let s = &mut req.sampling;
            (s.mirostat, s.mirostat_tau, s.mirostat_eta) = (m.version, m.tau, m.eta);
            // as llama-server: mirostat takes the place of the truncation samplers
            (s.top_k, s.top_p, s.min_p, s.typical_p, s.xtc_probability) = (0, 1.0, 0.0, 1.0, 0.0);
        }
        let id = self.sched.submit(&req, grammar).map_err(|e| match e.code {
            status::BUSY => SubmitError::QueueFull { retry_after_s: 1 },
            status::BUDGET_EXCEEDED => SubmitError::TooLarge(e.message),
            _ => SubmitError::Invalid(e.message),
        })?;
        // SAFETY of the 'static: detokenizers are a field declared before the engine.
        let tok: &'static EngineTokenizer<'static> = unsafe { &*(&self.tok as *const EngineTokenizer<'static>) };
        match tok.detokenizer(0) {
            Ok(d) => {
                self.detok.insert(id, d);
                Ok(id)
            }
            Err(e) => {
                let _ = self.sched.cancel(id);
                Err(SubmitError::Invalid(format!("detokenizer: {e}")))
            }
        }
    }

    fn cancel(&mut self, id: u64) {
        let _ = self.sched.cancel(id); // an unknown or finished id: nothing to do
    }

    fn step(&mut self) -> bool {
        let ran = match self.sched.step() {
            Ok(info) => info.decode_tokens + info.prefill_tokens > 0 || info.events > 0,
            Err(_) => false, // BUSY cannot happen: this thread is the only caller
        };
        let mut evs = Vec::new();
        if self.sched.poll_events(&mut evs).is_ok() {
            for ev in evs {
                let e = self.convert(ev);
                self.pending.push(e);
            }
        }
        ran
    }

    fn drain(&mut self, out: &mut Vec<Event>) {
        out.append(&mut self.pending);
    }

    fn metrics(&self) -> BackendMetrics {
        let s = self.sched.stats();
        BackendMetrics {
            running: s.running,
            queued: s.queued,
            prefix_cache_hits: s.cache_hits,
            prefix_cache_misses: s.cache_misses,
            prefix_cache_hit_tokens: s.cache_hit_tokens,
            kv_committed_bytes: s.kv_physical_bytes,
            kv_live_bytes: s.kv_live_bytes,
            kv_os_bytes: s.kv_os_bytes,
            prefix_cache_bytes: s.cache_bytes,
            prefix_cache_entries: s.cache_entries,
            steps: s.steps,
        }
    }

    fn idle(&self) -> bool {
        let s = self.sched.stats();
        s.running == 0 && s.queued == 0 && self.pending.is_empty()
    }
}
