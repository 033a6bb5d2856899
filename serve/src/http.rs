//! Routing, request bodies under a size limit and a deadline, and the responses: JSON, errors
//! with their headers, and event streams.

use crate::backend::{GrammarSpec, SubmitError};
use crate::completion::{self, Meta, RespBody, Run, SseBody, TokenLogprob};
use crate::conn::ConnShared;
use crate::engine_thread::{Engine, EngineError, Prompt};
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::openai::{self, Endpoint, Logprobs};
use crate::embeddings;
use crate::tools;
use hyper::body::HttpBody;
use hyper::header::{HeaderValue, CONTENT_LENGTH};
use hyper::{Body, Request, Response, StatusCode};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What every request handler shares.
pub struct App {
    pub engine: Engine,
    pub metrics: Arc<Metrics>,
    pub body_limit: u64,
    /// Deadline for a request body to arrive in full.
    pub timeout: Duration,
    /// Server start, reported as the model's `created`.
    pub created: u64,
}

/// hyper's entry point for one request on one connection.
pub async fn serve(
    req: Request<Body>,
    app: Arc<App>,
    conn: Arc<ConnShared>,
) -> Result<Response<RespBody>, Infallible> {
    let busy = conn.busy();
    let (label, mut resp) = route(req, &app).await;
    app.metrics.count_request(label, resp.status().as_u16());
    resp.body_mut().busy = Some(busy);
    Ok(resp)
}

/// (the route's metrics label, the methods it allows)
fn route_of(path: &str) -> Option<(&'static str, &'static str)> {
    Some(match path {
        "/v1/chat/completions" => ("/v1/chat/completions", "POST"),
        "/v1/completions" => ("/v1/completions", "POST"),
        "/v1/models" => ("/v1/models", "GET"),
        "/health" => ("/health", "GET"),
        "/metrics" => ("/metrics", "GET"),
        "/v1/embeddings" => ("/v1/embeddings", "POST"),
        "/tokenize" => ("/tokenize", "POST"),
        "/detokenize" => ("/detokenize", "POST"),
        "/apply-template" => ("/apply-template", "POST"),
        p if p.starts_with("/v1/models/") => ("/v1/models/{id}", "GET"),
        _ => return None,
    })
}

async fn route(req: Request<Body>, app: &App) -> (&'static str, Response<RespBody>) {
    let path = req.uri().path().to_string();
    let Some((label, allowed)) = route_of(&path) else {
        let e = ApiError::new(404, "invalid_request_error", format!("Invalid URL ({} {path})", req.method()));
        return ("other", error_response(&e));
    };
    if req.method().as_str() != allowed {
        let mut e = ApiError::new(
            405,
            "invalid_request_error",
            format!("Method {} is not allowed for {path}; use {allowed}.", req.method()),
        );
        e.allow = Some(allowed);
        return (label, error_response(&e));
    }
    let r = match label {
        "/v1/chat/completions" => completion(req, app, Endpoint::Chat).await,
        "/v1/completions" => completion(req, app, Endpoint::Completions).await,
        "/v1/models" => Ok(json_response(200, &json!({"object": "list", "data": [model_json(app)]}))),
        "/v1/models/{id}" => {
            let id = &path["/v1/models/".len()..];
            if id == app.engine.model_id {
                Ok(json_response(200, &model_json(app)))
            } else {
                Err(ApiError::new(404, "invalid_request_error", format!("The model '{id}' does not exist"))
                    .with_param("model")
                    .with_code("model_not_found"))
            }
        }
        "/health" => Ok(json_response(200, &json!({"status": "ok"}))),
        "/v1/embeddings" => embeddings(req, app).await,
        "/tokenize" => tokenize(req, app).await,
        "/detokenize" => detokenize(req, app).await,
        "/apply-template" => apply_template(req, app).await,
        "/metrics" => {
            let text = app.metrics.render(&app.engine.metrics());
            let mut r = Response::new(RespBody::full(text));
            r.headers_mut()
                .insert("content-type", HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
            Ok(r)
        }
        _ => unreachable!("route_of and this match list the same labels"),
    };
    (label, r.unwrap_or_else(|e| error_response(&e)))
}

/// POST /v1/embeddings: each input tokenized (BOS as a prompt gets it) and embedded on the engine
/// thread between steps; an input past the context is a 400 naming it.
async fn embeddings(req: Request<Body>, app: &App) -> Result<Response<RespBody>, ApiError> {
    let body = read_body(req, app.body_limit, app.timeout).await?;
    let v: Value = serde_json::from_slice(&body).map_err(|e| ApiError::invalid(format!("We could not parse the JSON body of your request. [{e}]")))?;
    let r = embeddings::parse(&v)?;
    let n_ctx = app.engine.n_ctx as usize;
    let inputs = r.inputs.clone();
    let dims = r.dimensions;
    let out = app
        .engine
        .with(move |b| -> Result<(Vec<Vec<f32>>, u64), ApiError> {
            if let Some(d) = dims.filter(|d| *d != b.n_embd() as u64) {
                return Err(ApiError::param("dimensions", "invalid_value", format!("'dimensions' is {d}; this model's embeddings have {}.", b.n_embd())));
            }
            let mut all = Vec::with_capacity(inputs.len());
            let mut tokens = 0u64;
            for (i, input) in inputs.iter().enumerate() {
                let at = if inputs.len() == 1 { "input".to_string() } else { format!("input[{i}]") };
                let ids = match input {
                    embeddings::Input::Text(t) => b.tokenize(t, true).map_err(|m| ApiError::param(&at, "invalid_value", m))?,
                    embeddings::Input::Tokens(t) => t.clone(),
                };
                if ids.len() > n_ctx {
                    return Err(ApiError::param(&at, "context_length_exceeded", format!("'{at}' is {} tokens; this model's maximum context length is {n_ctx}.", ids.len())));
                }
                tokens += ids.len() as u64;
                all.push(b.embed(&ids).map_err(|m| ApiError::param(&at, "invalid_value", m))?);
            }
            Ok((all, tokens))
        })
        .await
        .map_err(|e| engine_error(e, "input"))??;
    Ok(json_response(200, &embeddings::response(&app.engine.model_id, &out.0, r.base64, out.1)))
}

/// llama-server's POST /tokenize: {"tokens": [ids]}, or with `with_pieces` [{"id", "piece"}]
/// where a piece is its text, or its bytes when they are not UTF-8 on their own.
async fn tokenize(req: Request<Body>, app: &App) -> Result<Response<RespBody>, ApiError> {
    let body = read_body(req, app.body_limit, app.timeout).await?;
    let (content, add_special, with_pieces) = openai::parse_tokenize(&body)?;
    let r = app
        .engine
        .with(move |b| -> Result<Value, String> {
            let ids = b.tokenize(&content, add_special)?;
            if !with_pieces {
                return Ok(json!({ "tokens": ids }));
            }
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                let bytes = b.detokenize(&[id])?;
                let piece = match String::from_utf8(bytes) {
                    Ok(s) => json!(s),
                    Err(e) => json!(e.into_bytes()),
                };
                out.push(json!({"id": id, "piece": piece}));
            }
            Ok(json!({ "tokens": out }))
        })
        .await
        .map_err(|e| engine_error(e, "content"))?;
    r.map(|v| json_response(200, &v)).map_err(|m| ApiError::param("content", "invalid_value", m))
}

/// llama-server's POST /detokenize: {"content": text} (invalid UTF-8 replaced, as its decoder does).
async fn detokenize(req: Request<Body>, app: &App) -> Result<Response<RespBody>, ApiError> {
    let body = read_body(req, app.body_limit, app.timeout).await?;
    let ids = openai::parse_detokenize(&body)?;
    let r = app.engine.with(move |b| b.detokenize(&ids)).await.map_err(|e| engine_error(e, "tokens"))?;
    r.map(|bytes| json_response(200, &json!({"content": String::from_utf8_lossy(&bytes)})))
        .map_err(|m| ApiError::param("tokens", "invalid_value", m))
}

/// llama-server's POST /apply-template: {"prompt": the chat template's render of the messages},
/// what a chat request would prefill; a template's raise is a 400 with its message.
async fn apply_template(req: Request<Body>, app: &App) -> Result<Response<RespBody>, ApiError> {
    let body = read_body(req, app.body_limit, app.timeout).await?;
    let request = openai::parse_apply_template(&body)?;
    let r = app.engine.with(move |b| b.render_chat(&request)).await.map_err(|e| engine_error(e, "messages"))?;
    r.map(|prompt| json_response(200, &json!({ "prompt": prompt })))
        .map_err(|m| ApiError::invalid(m).with_param("messages").with_code("invalid_value"))
}

fn model_json(app: &App) -> Value {
    json!({"id": app.engine.model_id, "object": "model", "created": app.created, "owned_by": "ferrite",
           "max_model_len": app.engine.n_ctx})
}

async fn completion(
    req: Request<Body>,
    app: &App,
    endpoint: Endpoint,
) -> Result<Response<RespBody>, ApiError> {
    let started = Instant::now();
    let body = read_body(req, app.body_limit, app.timeout).await?;
    let mut parsed = openai::parse_request(endpoint, &body, app.engine.n_ctx)?;
    // a required tool call: the syntax's opening marker after the prompt, the rest by grammar
    let tool_format = app.engine.tool_format;
    let mut tool_prefix = String::new();
    let mut constrained = false;
    if let Some(c) = parsed.tools.as_ref().and_then(|t| tools::constraint(t, tool_format)) {
        if let Prompt::Chat { suffix, .. } = &mut parsed.job.prompt {
            suffix.push_str(&c.prefix);
        }
        // an auto choice with a response_format: the response format wins (no tool grammar)
        if parsed.job.params.grammar.is_none() {
            // a lazy grammar may never hold (its marker is not a token of every vocabulary)
            constrained = c.triggers.is_empty();
            parsed.job.params.grammar = Some(GrammarSpec::ToolCalls(c.schema));
            parsed.job.params.grammar_triggers = c.triggers;
        }
        tool_prefix = c.prefix;
    }
    let tool_parse =
        parsed.tools.as_ref().map(|_| completion::ToolParse { format: tool_format, prefix: tool_prefix, constrained });
    let prompt_param = match endpoint {
        Endpoint::Chat => "messages",
        Endpoint::Completions => "prompt",
    };
    // n choices: n requests with seeds seed, seed + 1, ...; submitted together, the later ones
    // wait for the first one's prompt blocks and fork them from the prefix cache (prefill once)
    let echo = match (&parsed.job.prompt, parsed.echo) {
        (_, false) => None,
        (Prompt::Text(t), true) => Some(t.clone()),
        (Prompt::Tokens(ids), true) => {
            let ids = ids.clone();
            let bytes = app.engine.with(move |b| b.detokenize(&ids)).await.map_err(|e| engine_error(e, "prompt"))?;
            Some(String::from_utf8_lossy(&bytes.map_err(|m| ApiError::param("prompt", "invalid_value", m))?).into_owned())
        }
        (Prompt::Chat { .. }, true) => None,
    };
    let meta = Meta::new(endpoint, app.engine.model_id.clone());
    // echo with logprobs: the prompt tokens' logprobs; echo with max_tokens 0: scoring only
    let scoring = echo.is_some() && parsed.job.max_tokens == Some(0);
    let prompt_logprobs: Vec<TokenLogprob> = match (&echo, parsed.logprobs) {
        (Some(_), Logprobs::Completions(k)) => prompt_logprobs(app, &parsed.job.prompt, k).await?,
        (Some(_), _) if scoring => prompt_logprobs(app, &parsed.job.prompt, 0).await?,
        _ => Vec::new(),
    };
    if scoring {
        let text = echo.unwrap_or_default();
        let kind = parsed.logprobs;
        let v = completion::scoring_response(&meta, parsed.n, kind, &text, &prompt_logprobs, prompt_logprobs.len() as u32);
        Metrics::add(&app.metrics.prompt_tokens, prompt_logprobs.len() as u64);
        if !parsed.stream {
            return Ok(json_response(200, &v));
        }
        // streamed: the same choices as one chunk, the usage when asked, [DONE]
        let mut chunk = v.clone();
        chunk.as_object_mut().expect("an object").remove("usage");
        let mut body = crate::sse::event(&chunk).to_vec();
        if parsed.include_usage {
            let u = json!({"id": v["id"], "object": "text_completion", "created": v["created"], "model": v["model"],
                           "choices": [], "usage": v["usage"]});
            body.extend_from_slice(&crate::sse::event(&u));
        }
        body.extend_from_slice(crate::sse::DONE);
        let mut r = Response::new(RespBody::full(body));
        r.headers_mut().insert("content-type", HeaderValue::from_static("text/event-stream"));
        return Ok(r);
    }
    let mut runs = Vec::with_capacity(parsed.n as usize);
    for i in 0..parsed.n {
        let mut job = parsed.job.clone();
        job.params.seed = job.params.seed.wrapping_add(i as u64);
        let gen = app.engine.generate(job).await.map_err(|e| engine_error(e, prompt_param))?;
        if i == 0 {
            Metrics::add(&app.metrics.prompt_tokens, gen.n_prompt as u64);
        }
        let mut run = Run::new(meta.clone(), gen, &parsed.stop, parsed.logprobs, app.metrics.clone(), started);
        run.tools = tool_parse.clone();
        run.index = i as usize;
        if let Some(e) = &echo {
            run.set_echo(e.clone(), prompt_logprobs.clone());
        }
        runs.push(run);
    }
    if parsed.stream {
        let mut r = Response::new(RespBody::sse(SseBody::new(runs, parsed.include_usage)));
        let h = r.headers_mut();
        h.insert("content-type", HeaderValue::from_static("text/event-stream"));
        h.insert("cache-control", HeaderValue::from_static("no-cache"));
        h.insert("x-accel-buffering", HeaderValue::from_static("no")); // proxies: do not buffer
        return Ok(r);
    }
    let v = completion::collect_all(runs).await?;
    Ok(json_response(200, &v))
}

/// The prompt tokens' logprobs (top k alternatives each), on the engine thread with its tokenizer.
async fn prompt_logprobs(app: &App, prompt: &Prompt, k: u32) -> Result<Vec<TokenLogprob>, ApiError> {
    let prompt = prompt.clone();
    let rows = app
        .engine
        .with(move |b| {
            let ids = match prompt {
                Prompt::Text(t) => b.tokenize(&t, true)?,
                Prompt::Tokens(ids) => ids,
                Prompt::Chat { .. } => return Err("echo is the completions endpoint's".to_string()),
            };
            b.prompt_logprobs(&ids, k)
        })
        .await
        .map_err(|e| engine_error(e, "prompt"))?
        .map_err(|m| ApiError::param("prompt", "invalid_value", m))?;
    Ok(rows
        .into_iter()
        .map(|p| TokenLogprob { bytes: p.bytes, logprob: p.logprob.unwrap_or(f32::NAN), top: p.top, text_offset: p.text_offset })
        .collect())
}

fn engine_error(e: EngineError, prompt_param: &str) -> ApiError {
    match e {
        EngineError::Rejected(SubmitError::Invalid(m)) => ApiError::invalid(m).with_code("invalid_value"),
        EngineError::Rejected(SubmitError::TooLarge(m)) => {
            ApiError::param(prompt_param, "context_length_exceeded", m)
        }
        EngineError::Rejected(SubmitError::QueueFull { retry_after_s }) => {
            let mut e =
                ApiError::server(503, "The server is at capacity; retry later.").with_code("queue_full");
            e.retry_after = Some(retry_after_s.max(1));
            e
        }
        EngineError::Rejected(SubmitError::Unavailable(m)) => ApiError::server(503, m).with_code("engine_unavailable"),
        EngineError::Stopped => ApiError::server(503, "The engine stopped."),
    }
}

/// Reads the whole body: 413 past `limit` (decided from Content-Length before reading when there
/// is one, so a 100 MB upload is refused without being received), 408 when it has not arrived
/// within `timeout`.
pub async fn read_body(req: Request<Body>, limit: u64, timeout: Duration) -> Result<Vec<u8>, ApiError> {
    let too_large = || {
        ApiError::new(
            413,
            "invalid_request_error",
            format!("The request body is larger than the limit of {limit} bytes."),
        )
        .with_code("request_too_large")
    };
    let declared =
        req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let mut body = req.into_body();
    let read = async {
        let mut buf = Vec::with_capacity(declared.unwrap_or(0) as usize);
        while let Some(chunk) = body.data().await {
            let chunk =
                chunk.map_err(|e| ApiError::invalid(format!("Reading the request body failed: {e}")))?;
            if (buf.len() + chunk.len()) as u64 > limit {
                return Err(too_large());
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(buf)
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(r) => r,
        Err(_) => Err(ApiError::new(
            408,
            "invalid_request_error",
            format!("The request body did not arrive within {} s.", timeout.as_secs()),
        )
        .with_code("request_timeout")),
    }
}

pub fn json_response(status: u16, v: &Value) -> Response<RespBody> {
    let mut r = Response::new(RespBody::full(serde_json::to_vec(v).expect("a Value always serializes")));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert("content-type", HeaderValue::from_static("application/json"));
    r
}

pub fn error_response(e: &ApiError) -> Response<RespBody> {
    let mut r = json_response(e.status, &e.to_json());
    let h = r.headers_mut();
    if let Some(s) = e.retry_after {
        h.insert("retry-after", HeaderValue::from(s));
    }
    if let Some(a) = e.allow {
        h.insert("allow", HeaderValue::from_static(a));
    }
    if matches!(e.status, 408 | 413) {
        // The body was not (fully) read: the connection cannot carry another request.
        h.insert("connection", HeaderValue::from_static("close"));
    }
    r
}
