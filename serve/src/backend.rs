//! The server's only view of the engine.
//!
//! Everything behind this trait runs on one OS thread, the engine thread (engine_thread.rs), which
//! owns the `Backend`: the engine's session objects are one-thread-at-a-time, and a single owner
//! makes batching decisions in one place. HTTP tasks never touch a `Backend`; they send commands to
//! the engine thread and receive `Event`s on a per-request channel. That is why the trait needs
//! neither `Send` nor `Sync`: the backend is created on the engine thread and never leaves it.
//!
//! The contract every implementation keeps (the server relies on it):
//! - `submit` returns a fresh id; every accepted id later produces exactly one `Event::Finished`
//!   (also after `cancel`), and no event for that id follows it.
//! - `cancel` of an unknown or already finished id does nothing.
//! - `step` runs at most one engine step (prefill chunk and/or one batched decode) and returns
//!   promptly; it returns false when there was nothing to run.
//! - `drain` appends the events produced since the last drain, in order per id.
//! - `idle` is true only when no submitted work remains and every event has been drained; the
//!   engine thread then blocks until the next command instead of spinning.

/// One generation request, after the server has rendered the chat template and tokenized.
#[derive(Clone, Debug, PartialEq)]
pub struct GenRequest {
    pub prompt: Vec<i32>,
    /// At least 1; the server has checked `prompt.len() + max_new_tokens <= n_ctx()`.
    pub max_new_tokens: u32,
    pub params: GenParams,
}

/// How to sample and when to stop: everything of a request the server decides before the prompt
/// is tokenized.
#[derive(Clone, Debug, PartialEq)]
pub struct GenParams {
    /// 0 means greedy.
    pub temperature: f32,
    /// 1.0 disables nucleus sampling.
    pub top_p: f32,
    /// 0 or negative disables top-k.
    pub top_k: i32,
    /// 0.0 disables min-p.
    pub min_p: f32,
    pub seed: u64,
    /// Extra token ids that end generation (finish Stop; the token's text is not emitted).
    pub stop_ids: Vec<i32>,
    /// The client asked for logprobs: `TokenOut::logprob` is set and `TokenOut::top` carries
    /// `top_logprobs` alternatives. Without it both are empty (0.0 and none), and the engine skips
    /// the log-softmax over the vocabulary that they cost.
    pub logprobs: bool,
    /// How many alternatives `TokenOut::top` carries under `logprobs` (0..=20).
    pub top_logprobs: u32,
    pub grammar: Option<GrammarSpec>,
    /// A lazy grammar: the texts of the tokens that switch `grammar` on (llama.cpp's grammar
    /// triggers). Empty: the grammar holds from the first token. The backend keeps those that are
    /// one token of its vocabulary; when none is, the output is left free.
    pub grammar_triggers: Vec<String>,
    /// Keep generating past the end-of-generation token(s) until `max_new_tokens`.
    pub ignore_eos: bool,
    /// OpenAI's penalties on tokens already in the output (0: off): presence subtracts once per
    /// token seen, frequency once per occurrence.
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    /// llama.cpp's and vLLM's multiplicative penalty on tokens of the prompt and the output (1: off).
    pub repetition_penalty: f32,
    /// (token, bias) added to the logits; -inf bans the token.
    pub logit_bias: Vec<(i32, f32)>,
    /// 1.0 disables locally typical sampling.
    pub typical_p: f32,
    /// XTC (exclude top choices): the chance per step (0: off) and the probability threshold.
    pub xtc_probability: f32,
    pub xtc_threshold: f32,
    /// DRY, the repeated-sequence penalty (None: off).
    pub dry: Option<Dry>,
    /// Mirostat (None: off); it replaces top-k, top-p, min-p, typical-p and XTC, as in llama-server.
    pub mirostat: Option<Mirostat>,
}

/// DRY's settings as llama-server takes them.
#[derive(Clone, Debug, PartialEq)]
pub struct Dry {
    pub multiplier: f32,
    pub base: f32,
    pub allowed_length: i32,
    /// 0: the whole prompt and output.
    pub penalty_last_n: i32,
    /// Strings that end a repeated sequence (llama-server's default: newline, colon, quote, star).
    pub sequence_breakers: Vec<String>,
}

/// Mirostat's version (1 or 2), target surprise and learning rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mirostat {
    pub version: i32,
    pub tau: f32,
    pub eta: f32,
}

#[cfg(test)]
impl GenParams {
    /// Greedy, no stop ids, no logprobs, no grammar: the unit tests' request.
    pub(crate) fn greedy(seed: u64) -> GenParams {
        GenParams {
            temperature: 0.0,
            top_p: 1.0,
            top_k: 0,
            min_p: 0.0,
            seed,
            stop_ids: vec![],
            logprobs: false,
            top_logprobs: 0,
            grammar: None,
            grammar_triggers: vec![],
            ignore_eos: false,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            repetition_penalty: 1.0,
            logit_bias: vec![],
            typical_p: 1.0,
            xtc_probability: 0.0,
            xtc_threshold: 0.1,
            dry: None,
            mirostat: None,
        }
    }
}

/// Structured output, compiled by the backend against its vocabulary.
#[derive(Clone, Debug, PartialEq)]
pub enum GrammarSpec {
    /// A JSON Schema, as JSON text.
    JsonSchema(String),
    /// Any JSON object.
    JsonObject,
    /// A regular expression (Rust regex syntax) the whole output must match.
    Regex(String),
    /// A required tool call's JSON Schema (tools.rs): a JSON Schema whose errors are the tools'.
    ToolCalls(String),
}

/// One generated token.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenOut {
    pub token: i32,
    /// This token's contribution to the output text from a streaming detokenizer: always whole
    /// UTF-8 characters, so it may be empty until a character's last byte arrives.
    pub text: Vec<u8>,
    /// The token's own bytes (possibly a partial UTF-8 character), for logprobs.
    pub token_bytes: Vec<u8>,
    /// Natural log of the probability the model gave this token (the raw logits' softmax, before
    /// temperature and the filters; <= 0); 0.0 when the request did not ask for logprobs.
    pub logprob: f32,
    /// The `top_logprobs` most likely tokens, most likely first: (id, bytes, logprob).
    pub top: Vec<(i32, Vec<u8>, f32)>,
}

/// One prompt token's logprobs.
#[derive(Clone, Debug, PartialEq)]
pub struct PromptToken {
    /// The token's own bytes.
    pub bytes: Vec<u8>,
    /// Characters of the prompt's text before this token.
    pub text_offset: usize,
    /// None for the first token (nothing precedes it).
    pub logprob: Option<f32>,
    /// The most likely tokens at this position: (bytes, logprob).
    pub top: Vec<(Vec<u8>, f32)>,
}

/// Why a sequence ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Finish {
    /// An end-of-generation token, a stop id, or a grammar that accepts nothing more.
    Stop,
    /// `max_new_tokens` reached.
    Length,
    /// `cancel` was called.
    Cancelled,
    /// The engine failed this sequence; the status the client should see.
    Error { http_status: u16, message: String },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    Token {
        id: u64,
        tok: TokenOut,
    },
    Finished {
        id: u64,
        finish: Finish,
        /// What the streaming detokenizer still held (an incomplete character, lossily).
        tail: Vec<u8>,
        n_prompt: u32,
        /// Prompt tokens served from the prefix cache.
        n_cached: u32,
        n_generated: u32,
    },
}

impl Event {
    pub fn id(&self) -> u64 {
        match self {
            Event::Token { id, .. } | Event::Finished { id, .. } => *id,
        }
    }
}

/// Why `submit` refused a request; the server turns each into an HTTP status.
#[derive(Clone, Debug, PartialEq)]
pub enum SubmitError {
    /// 400: the request cannot run (bad token id, grammar that does not compile, ...).
    Invalid(String),
    /// 503 with Retry-After: admission refused now, try again later.
    QueueFull { retry_after_s: u32 },
    /// 400 with code context_length_exceeded: the prompt (plus max tokens) does not fit.
    TooLarge(String),
    /// 503: the engine cannot run anything any more (a tensor-parallel rank died); the message says why.
    Unavailable(String),
}

/// What /metrics reports about the engine; published by the engine thread after every step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BackendMetrics {
    pub running: u32,
    pub queued: u32,
    pub prefix_cache_hits: u64,
    pub prefix_cache_misses: u64,
    pub prefix_cache_hit_tokens: u64,
    /// The KV pool's physical bytes: running requests and the prefix cache (a shared granule once).
    pub kv_committed_bytes: u64,
    /// The kernel's count of the pool's bytes (its memfd's allocated blocks).
    pub kv_os_bytes: u64,
    /// The running requests' KV bytes (0 when nothing runs).
    pub kv_live_bytes: u64,
    /// Bytes the prefix cache holds, and its entries.
    pub prefix_cache_bytes: u64,
    pub prefix_cache_entries: u64,
    pub steps: u64,
}

pub trait Backend {
    /// The id /v1/models reports and responses carry.
    fn model_id(&self) -> String;
    /// Most tokens one sequence may hold (prompt + generated).
    fn n_ctx(&self) -> u32;
    /// The chat template's tool-call syntax (`ferrite::engine::tool_format`; generic when unknown).
    fn tool_format(&self) -> u32;
    /// The text's ids; with `add_special` the tokenizer's own (BOS where the model adds one), as
    /// a prompt is encoded.
    fn tokenize(&mut self, text: &str, add_special: bool) -> Result<Vec<i32>, String>;
    /// The bytes the ids decode to (special tokens as their text); an id outside the vocabulary
    /// is an error naming it.
    fn detokenize(&mut self, ids: &[i32]) -> Result<Vec<u8>, String>;
    /// The model's embedding of ids: the mean of its final states, unit length.
    fn embed(&mut self, ids: &[i32]) -> Result<Vec<f32>, String>;
    /// Each prompt token's log-probability after the ones before it, with the `top_n` most likely
    /// tokens there (completions' echo with logprobs).
    fn prompt_logprobs(&mut self, ids: &[i32], top_n: u32) -> Result<Vec<PromptToken>, String>;
    /// The length of an embedding (the model's n_embd).
    fn n_embd(&self) -> u32;
    /// Renders a chat request (`{"messages": [...], "chat_template_kwargs": {...}}`, the
    /// messages as the client sent them) with the model's chat template, generation prompt added;
    /// an error (the template's own raise among them) is the request's, its message for the 400.
    fn render_chat(&mut self, request_json: &str) -> Result<String, String>;
    fn submit(&mut self, r: GenRequest) -> Result<u64, SubmitError>;
    fn cancel(&mut self, id: u64);
    /// Runs one engine step; true when work ran.
    fn step(&mut self) -> bool;
    fn drain(&mut self, out: &mut Vec<Event>);
    fn metrics(&self) -> BackendMetrics;
    fn idle(&self) -> bool;
}
