//! One admitted generation turned into an OpenAI response: engine events in, text pieces (stop
//! strings applied), logprobs, usage and finish_reason out, either as one JSON body or as a
//! server-sent event stream. Both shapes share `Run::on_event`, so streaming and non-streaming
//! cannot disagree on text, stops or counts.

use crate::backend::{Event, Finish, TokenOut};
use crate::engine_thread::Generation;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::openai::{Endpoint, Logprobs};
use crate::sse;
use crate::stop::StopMatcher;
use crate::tools;
use hyper::body::{Bytes, HttpBody, SizeHint};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// What every response object of one request repeats.
#[derive(Clone, Debug)]
pub struct Meta {
    pub endpoint: Endpoint,
    pub id: String,
    pub created: u64,
    pub model: String,
}

impl Meta {
    pub fn new(endpoint: Endpoint, model: String) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let prefix = match endpoint {
            Endpoint::Chat => "chatcmpl",
            Endpoint::Completions => "cmpl",
        };
        // Unique within a process (counter) and across restarts (start time).
        let id = format!("{prefix}-{:012x}{:08x}", now.as_micros() as u64 & 0xffff_ffff_ffff, n);
        Meta { endpoint, id, created: now.as_secs(), model }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprob {
    pub bytes: Vec<u8>,
    pub logprob: f32,
    pub top: Vec<(Vec<u8>, f32)>,
    /// Characters of output text released before this token's (completions' text_offset).
    pub text_offset: usize,
}

/// How a chat answer with tools is read (tools.rs).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolParse {
    /// The syntax (`ferrite::engine::tool_format`).
    pub format: u32,
    /// Text the prompt already ends with that belongs to the answer (a required call's marker).
    pub prefix: String,
    /// A grammar holds the calls' syntax from the first token: streamed calls go out as written.
    pub constrained: bool,
}

/// Text released by one event, with the logprobs of the token that produced it.
#[derive(Debug, Default, PartialEq)]
pub struct Piece {
    pub text: String,
    pub logprobs: Vec<TokenLogprob>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Usage {
    pub prompt: u32,
    pub completion: u32,
    pub cached: u32,
}

pub enum Step {
    Piece(Piece),
    /// The request ended: the last text, and the finish_reason with usage or the error.
    Done(Piece, Result<(&'static str, Usage), ApiError>),
}

pub struct Run {
    pub meta: Meta,
    gen: Generation,
    stop: StopMatcher,
    logprobs: Logprobs,
    metrics: Arc<Metrics>,
    started: Instant,
    last_token: Option<Instant>,
    n_tokens: u32,
    text_chars: usize,
    stopped_by_string: bool,
    done: bool,
    /// A chat request with tools: (the syntax, text the prompt already ends with that belongs to
    /// the output, a required call's opening marker). The calls are parsed out of the text at the
    /// end; streaming sends the content as it becomes certain (tools::ContentStream).
    pub tools: Option<ToolParse>,
    /// The choice this run is (n > 1 runs one per choice).
    pub index: usize,
    /// Completions' echo: the prompt's text, put before the generated text.
    pub echo: Option<String>,
    /// With echo and logprobs: the prompt tokens' logprobs, before the generated tokens'.
    pub prompt_logprobs: Vec<TokenLogprob>,
}

impl Run {
    pub fn new(
        meta: Meta,
        gen: Generation,
        stop: &[String],
        logprobs: Logprobs,
        metrics: Arc<Metrics>,
        started: Instant,
    ) -> Self {
        Run {
            meta,
            gen,
            stop: StopMatcher::new(stop),
            logprobs,
            metrics,
            started,
            last_token: None,
            n_tokens: 0,
            text_chars: 0,
            stopped_by_string: false,
            done: false,
            tools: None,
            index: 0,
            echo: None,
            prompt_logprobs: Vec::new(),
        }
    }

    /// Completions' echo: the prompt's text first, and with logprobs the prompt tokens' (the
    /// generated tokens' text offsets then count from the start of the prompt's text).
    pub fn set_echo(&mut self, text: String, prompt_logprobs: Vec<TokenLogprob>) {
        if self.logprobs != Logprobs::None {
            self.text_chars = text.chars().count();
            self.prompt_logprobs = prompt_logprobs;
        }
        self.echo = Some(text);
    }

    fn token(&mut self, tok: TokenOut) -> Option<Step> {
        if self.stopped_by_string {
            return None; // generated before our cancel reached the engine: not part of the output
        }
        let now = Instant::now();
        match self.last_token {
            None => self.metrics.ttft.observe((now - self.started).as_secs_f64()),
            Some(t) => self.metrics.itl.observe((now - t).as_secs_f64()),
        }
        self.last_token = Some(now);
        self.n_tokens += 1;
        let r = self.stop.push(&tok.text);
        let mut piece = Piece { text: r.text, logprobs: Vec::new() };
        if self.logprobs != Logprobs::None {
            let top = tok.top.into_iter().map(|(_, b, lp)| (b, lp)).collect();
            piece.logprobs.push(TokenLogprob {
                bytes: tok.token_bytes,
                logprob: tok.logprob,
                top,
                text_offset: self.text_chars,
            });
        }
        self.text_chars += piece.text.chars().count();
        if r.stopped {
            self.stopped_by_string = true;
            self.gen.cancel();
        }
        Some(Step::Piece(piece))
    }

    /// Feeds one engine event; None when it produced nothing to send.
    pub fn on_event(&mut self, ev: Event) -> Option<Step> {
        let (finish, tail, n_prompt, n_cached) = match ev {
            Event::Token { tok, .. } => return self.token(tok),
            Event::Finished { finish, tail, n_prompt, n_cached, .. } => (finish, tail, n_prompt, n_cached),
        };
        self.done = true;
        let mut last = Piece::default();
        if !self.stopped_by_string {
            let r = self.stop.push(&tail);
            last.text = r.text;
            self.stopped_by_string = r.stopped;
            if !r.stopped {
                last.text.push_str(&self.stop.flush());
            }
        }
        self.metrics.duration.observe(self.started.elapsed().as_secs_f64());
        Metrics::add(&self.metrics.generated_tokens, self.n_tokens as u64);
        let usage = Usage { prompt: n_prompt, completion: self.n_tokens, cached: n_cached };
        let end = match finish {
            _ if self.stopped_by_string => Ok(("stop", usage)),
            Finish::Stop => Ok(("stop", usage)),
            Finish::Length => Ok(("length", usage)),
            Finish::Cancelled => Err(ApiError::server(503, "The request was cancelled by the server.")),
            Finish::Error { http_status, message } => {
                let kind = if http_status < 500 { "invalid_request_error" } else { "server_error" };
                Err(ApiError::new(http_status, kind, message))
            }
        };
        Some(Step::Done(last, end))
    }

    /// Marks the run as ended by the server (not a client disconnect).
    fn end(&mut self) {
        self.done = true;
    }

    fn logprobs_json(&self, lps: &[TokenLogprob]) -> Value {
        logprobs_json(self.logprobs, lps)
    }

    fn usage_json(u: &Usage) -> Value {
        json!({"prompt_tokens": u.prompt, "completion_tokens": u.completion,
               "total_tokens": u.prompt + u.completion,
               "prompt_tokens_details": {"cached_tokens": u.cached}})
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.meta.endpoint, chunk) {
            (Endpoint::Chat, false) => "chat.completion",
            (Endpoint::Chat, true) => "chat.completion.chunk",
            (Endpoint::Completions, _) => "text_completion",
        }
    }

    /// The text's content and tool calls, and the finish_reason ("tool_calls" when it made any).
    fn split_tools<'a>(&self, text: &str, reason: &'a str) -> (Option<String>, Vec<tools::ToolCall>, &'a str) {
        match &self.tools {
            None => (Some(text.to_string()), Vec::new(), reason),
            Some(t) => {
                let (content, calls) = tools::extract(t.format, &format!("{}{text}", t.prefix));
                let reason = if calls.is_empty() { reason } else { "tool_calls" };
                (content, calls, reason)
            }
        }
    }

    /// The non-streaming response body.
    pub fn response_json(&self, text: &str, lps: &[TokenLogprob], reason: &str, usage: &Usage) -> Value {
        let (content, calls, reason) = self.split_tools(text, reason);
        let mut choice = match self.meta.endpoint {
            Endpoint::Chat => {
                let mut m = json!({"role": "assistant", "content": content});
                if !calls.is_empty() {
                    m["tool_calls"] = tools::calls_json(&calls, false);
                }
                json!({"index": self.index, "message": m})
            }
            Endpoint::Completions => json!({"index": self.index, "text": text}),
        };
        choice["logprobs"] = self.logprobs_json(lps);
        choice["finish_reason"] = json!(reason);
        json!({"id": self.meta.id, "object": self.object(false), "created": self.meta.created,
               "model": self.meta.model, "choices": [choice], "usage": Self::usage_json(usage)})
    }

    /// One streaming chunk. `delta` is the chat delta object (ignored for completions).
    fn chunk_json(
        &self,
        delta: Value,
        text: &str,
        lps: &[TokenLogprob],
        reason: Option<&str>,
        include_usage: bool,
    ) -> Value {
        let mut choice = match self.meta.endpoint {
            Endpoint::Chat => json!({"index": self.index, "delta": delta}),
            Endpoint::Completions => json!({"index": self.index, "text": text}),
        };
        choice["logprobs"] = if lps.is_empty() { Value::Null } else { self.logprobs_json(lps) };
        choice["finish_reason"] = json!(reason);
        let mut v = json!({"id": self.meta.id, "object": self.object(true), "created": self.meta.created,
                           "model": self.meta.model, "choices": [choice]});
        if include_usage {
            v["usage"] = Value::Null;
        }
        v
    }
}

/// OpenAI's logprobs object of the tokens, in the endpoint's shape.
fn logprobs_json(kind: Logprobs, lps: &[TokenLogprob]) -> Value {
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match kind {
        Logprobs::None => Value::Null,
        Logprobs::Chat(_) => {
            let item = |b: &[u8], lp: f32| json!({"token": s(b), "logprob": lp, "bytes": b});
            let content: Vec<Value> = lps
                .iter()
                .map(|t| {
                    let mut v = item(&t.bytes, t.logprob);
                    v["top_logprobs"] = t.top.iter().map(|(b, lp)| item(b, *lp)).collect();
                    v
                })
                .collect();
            json!({ "content": content })
        }
        // a prompt's first token has no logprob (NaN here): null, as OpenAI gives it
        Logprobs::Completions(_) => json!({
            "tokens": lps.iter().map(|t| s(&t.bytes)).collect::<Vec<_>>(),
            "token_logprobs": lps.iter().map(|t| if t.logprob.is_nan() { Value::Null } else { json!(t.logprob) }).collect::<Vec<_>>(),
            "top_logprobs": lps.iter().map(|t| {
                if t.logprob.is_nan() {
                    return Value::Null;
                }
                Value::Object(t.top.iter().map(|(b, lp)| (s(b), json!(lp))).collect::<serde_json::Map<_, _>>())
            }).collect::<Vec<_>>(),
            "text_offset": lps.iter().map(|t| t.text_offset).collect::<Vec<_>>(),
        }),
    }
}

/// A chat delta of an answer with tools, as OpenAI streams one: content, a call's start (index,
/// id, type, name, empty arguments) or more of its arguments.
fn delta_json(d: &tools::Delta) -> Value {
    match d {
        tools::Delta::Content(c) => json!({ "content": c }),
        tools::Delta::CallStart { index, id, name } => json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                                                                              "function": {"name": name, "arguments": ""}}]}),
        tools::Delta::CallArgs { index, fragment } => json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}),
    }
}

/// A completions request that scores its prompt without generating (echo, max_tokens 0): n
/// choices of the prompt's text with its tokens' logprobs, finish_reason length, no completion
/// tokens.
pub fn scoring_response(meta: &Meta, n: u32, kind: Logprobs, text: &str, lps: &[TokenLogprob], n_prompt: u32) -> Value {
    let choices: Vec<Value> = (0..n)
        .map(|i| {
            let lp = if kind == Logprobs::None { Value::Null } else { logprobs_json(kind, lps) };
            json!({"index": i, "text": text, "logprobs": lp, "finish_reason": "length"})
        })
        .collect();
    json!({"id": meta.id, "object": "text_completion", "created": meta.created, "model": meta.model, "choices": choices,
           "usage": {"prompt_tokens": n_prompt, "completion_tokens": 0, "total_tokens": n_prompt,
                     "prompt_tokens_details": {"cached_tokens": 0}}})
}

impl Drop for Run {
    fn drop(&mut self) {
        if !self.done {
            Metrics::add(&self.metrics.client_disconnects, 1);
        }
    }
}

fn engine_stopped() -> ApiError {
    ApiError::server(503, "The engine stopped.")
}

/// Waits for every choice's generation: the non-streaming response, one choice per run, usage
/// counting the prompt once (the choices share it) and every choice's tokens.
pub async fn collect_all(runs: Vec<Run>) -> Result<Value, ApiError> {
    let mut merged: Option<Value> = None;
    for run in runs {
        let v = collect(run).await?;
        match &mut merged {
            None => merged = Some(v),
            Some(m) => {
                let c = v["choices"][0].clone();
                m["choices"].as_array_mut().expect("choices").push(c);
                let add = v["usage"]["completion_tokens"].as_u64().unwrap_or(0);
                let total = m["usage"]["completion_tokens"].as_u64().unwrap_or(0) + add;
                m["usage"]["completion_tokens"] = json!(total);
                m["usage"]["total_tokens"] = json!(m["usage"]["prompt_tokens"].as_u64().unwrap_or(0) + total);
            }
        }
    }
    merged.ok_or_else(engine_stopped)
}

/// Waits for the whole generation: the non-streaming response.
pub async fn collect(mut run: Run) -> Result<Value, ApiError> {
    let mut text = run.echo.clone().unwrap_or_default();
    let mut lps = std::mem::take(&mut run.prompt_logprobs);
    loop {
        let Some(ev) = run.gen.next_event().await else {
            run.end();
            return Err(engine_stopped());
        };
        match run.on_event(ev) {
            None => {}
            Some(Step::Piece(p)) => {
                text.push_str(&p.text);
                lps.extend(p.logprobs);
            }
            Some(Step::Done(last, end)) => {
                text.push_str(&last.text);
                let (reason, usage) = end?;
                return Ok(run.response_json(&text, &lps, reason, &usage));
            }
        }
    }
}

/// The streaming response body: pulls engine events as hyper asks for data, so a client that
/// reads slowly slows nothing but itself, and dropping the body (client gone) drops the
/// `Generation`s, which cancels the sequences. With n > 1 the choices' chunks interleave, each
/// with its index; the usage chunk and `[DONE]` come once, after the last choice finished.
pub struct SseBody {
    runs: Vec<Choice>,
    include_usage: bool,
    queue: VecDeque<Bytes>,
    finished: bool,
    usage: Option<Usage>,
}

/// One choice of a stream.
struct Choice {
    run: Run,
    /// With tools: the content streamed as it becomes certain, the calls at the end.
    content: Option<tools::ContentStream>,
    done: bool,
}

/// Engine events turned into frames per poll at most, so one busy stream cannot hog a worker.
const EVENTS_PER_FRAME: usize = 64;

impl SseBody {
    pub fn new(runs: Vec<Run>, include_usage: bool) -> Self {
        let mut s = SseBody { runs: Vec::new(), include_usage, queue: VecDeque::new(), finished: false, usage: None };
        for run in runs {
            if run.meta.endpoint == Endpoint::Chat {
                let first = run.chunk_json(json!({"role": "assistant", "content": ""}), "", &[], None, include_usage);
                s.queue.push_back(sse::event(&first));
            }
            if let Some(e) = run.echo.as_deref().filter(|e| !e.is_empty()) {
                let first = run.chunk_json(json!({}), e, &run.prompt_logprobs, None, include_usage);
                s.queue.push_back(sse::event(&first));
            }
            let content = run.tools.as_ref().map(|t| tools::ContentStream::new(t.format, &t.prefix, t.constrained));
            s.runs.push(Choice { run, content, done: false });
        }
        s
    }

    fn push_piece(&mut self, i: usize, p: &Piece) {
        if p.text.is_empty() && p.logprobs.is_empty() {
            return;
        }
        let c = &mut self.runs[i];
        if let Some(stream) = &mut c.content {
            for d in stream.push(&p.text) {
                let v = c.run.chunk_json(delta_json(&d), "", &[], None, self.include_usage);
                self.queue.push_back(sse::event(&v));
            }
            return;
        }
        let v = c.run.chunk_json(json!({"content": p.text}), &p.text, &p.logprobs, None, self.include_usage);
        self.queue.push_back(sse::event(&v));
    }

    fn push_error(&mut self, e: &ApiError) {
        self.queue.push_back(sse::event(&e.to_json()));
        self.queue.push_back(Bytes::from_static(sse::DONE));
        self.finished = true;
        for c in &mut self.runs {
            c.run.end();
        }
    }

    fn on_step(&mut self, i: usize, step: Step) {
        match step {
            Step::Piece(p) => self.push_piece(i, &p),
            Step::Done(last, end) => {
                self.push_piece(i, &last);
                match end {
                    Err(e) => self.push_error(&e),
                    Ok((reason, usage)) => {
                        let include_usage = self.include_usage;
                        let c = &mut self.runs[i];
                        c.done = true;
                        let mut reason = reason;
                        if let Some(stream) = &c.content {
                            let (deltas, made_calls) = stream.finish();
                            if made_calls {
                                reason = "tool_calls";
                            }
                            for d in &deltas {
                                let v = c.run.chunk_json(delta_json(d), "", &[], None, include_usage);
                                self.queue.push_back(sse::event(&v));
                            }
                        }
                        let fin = c.run.chunk_json(json!({}), "", &[], Some(reason), include_usage);
                        self.queue.push_back(sse::event(&fin));
                        // the prompt once (the choices share it), every choice's tokens
                        let u = self.usage.get_or_insert(Usage { completion: 0, ..usage });
                        u.completion += usage.completion;
                        if self.runs.iter().all(|c| c.done) {
                            self.finish();
                        }
                    }
                }
            }
        }
    }

    fn finish(&mut self) {
        if self.include_usage {
            let r = &self.runs[0].run;
            let mut u = json!({"id": r.meta.id, "object": r.object(true), "created": r.meta.created, "model": r.meta.model,
                               "choices": []});
            u["usage"] = Run::usage_json(&self.usage.unwrap_or(Usage { prompt: 0, completion: 0, cached: 0 }));
            self.queue.push_back(sse::event(&u));
        }
        self.queue.push_back(Bytes::from_static(sse::DONE));
        self.finished = true;
    }

    /// Next frame: everything ready now, joined.
    pub fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let mut n = 0;
        for i in 0..self.runs.len() {
            while !self.finished && !self.runs[i].done && n < EVENTS_PER_FRAME {
                match self.runs[i].run.gen.poll_event(cx) {
                    Poll::Pending => break,
                    Poll::Ready(None) => self.push_error(&engine_stopped()),
                    Poll::Ready(Some(ev)) => {
                        n += 1;
                        if let Some(step) = self.runs[i].run.on_event(ev) {
                            self.on_step(i, step);
                        }
                    }
                }
            }
        }
        match self.queue.len() {
            0 if self.finished => Poll::Ready(None),
            0 if n == EVENTS_PER_FRAME => {
                cx.waker().wake_by_ref(); // events that produced no bytes: come back for more
                Poll::Pending
            }
            0 => Poll::Pending,
            1 => Poll::Ready(self.queue.pop_front()),
            _ => {
                let mut all = Vec::with_capacity(self.queue.iter().map(|b| b.len()).sum());
                self.queue.drain(..).for_each(|b| all.extend_from_slice(&b));
                Poll::Ready(Some(Bytes::from(all)))
            }
        }
    }
}

/// Every response body the server sends: a complete buffer or an event stream. It also carries
/// the connection's busy guard, so the connection counts as idle again only when the body is done.
pub struct RespBody {
    kind: Kind,
    pub(crate) busy: Option<crate::conn::BusyGuard>,
}

enum Kind {
    Full(Option<Bytes>),
    Sse(Box<SseBody>),
}

impl RespBody {
    pub fn full(b: impl Into<Bytes>) -> Self {
        RespBody { kind: Kind::Full(Some(b.into())), busy: None }
    }

    pub fn sse(s: SseBody) -> Self {
        RespBody { kind: Kind::Sse(Box::new(s)), busy: None }
    }
}

impl HttpBody for RespBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_data(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Self::Error>>> {
        let this = self.get_mut();
        let p = match &mut this.kind {
            Kind::Full(b) => Poll::Ready(b.take()),
            Kind::Sse(s) => s.poll_frame(cx),
        };
        if let Poll::Ready(None) = p {
            this.busy = None; // the response is complete: the connection may time out again
        }
        p.map(|o| o.map(Ok))
    }

    fn poll_trailers(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Result<Option<hyper::HeaderMap>, Self::Error>> {
        Poll::Ready(Ok(None))
    }

    fn is_end_stream(&self) -> bool {
        matches!(&self.kind, Kind::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Kind::Full(None) => SizeHint::with_exact(0),
            Kind::Sse(_) => SizeHint::default(),
        }
    }
}
