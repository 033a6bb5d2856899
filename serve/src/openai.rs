//! OpenAI request bodies: parsing and validation into a `ParsedRequest`.
//!
//! Parsed by hand from a `serde_json::Value` rather than derived, so every rejection names its
//! field (`param`) the way the official API does, and the rules stay explicit: unknown top-level
//! fields are accepted and ignored (as the official API does); a known field with the wrong type
//! or an out-of-range value is a 400; `null` means "not given"; a known feature this server does
//! not implement (best_of > 1, the legacy `functions`) is a 400 rather than
//! silently ignored.
//! Extensions vLLM also accepts: top_k, min_p, ignore_eos, stop_token_ids, guided_json,
//! guided_regex.

use crate::backend::{Dry, GenParams, GrammarSpec, Mirostat};
use crate::engine_thread::{Job, Prompt};
use crate::error::ApiError;
use crate::tools::{self, ToolRequest};
use serde_json::{Map, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Chat,
    Completions,
}

/// Which logprobs the response carries, in which shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logprobs {
    None,
    /// Chat: `logprobs: true`, `top_logprobs` alternatives (0..=20).
    Chat(u32),
    /// Completions: `logprobs: N` alternatives (0..=5).
    Completions(u32),
}

#[derive(Clone, Debug, PartialEq)]
pub struct ParsedRequest {
    pub endpoint: Endpoint,
    pub job: Job,
    /// The chat request's tools when its tool_choice is not none (tools.rs).
    pub tools: Option<ToolRequest>,
    /// Choices to generate (1..=MAX_N), each with seed + its index.
    pub n: u32,
    /// Completions: the prompt's text starts each choice's text.
    pub echo: bool,
    pub stop: Vec<String>,
    pub logprobs: Logprobs,
    pub stream: bool,
    pub include_usage: bool,
}

pub const MAX_STOP: usize = 4;
/// Choices one request may ask for (`n`).
pub const MAX_N: u32 = 8;
pub const MAX_TOP_LOGPROBS_CHAT: i64 = 20;
pub const MAX_LOGPROBS_COMPLETIONS: i64 = 5;
/// Tokens one request may bias (OpenAI's limit is 300 as well).
pub const MAX_LOGIT_BIAS: usize = 300;
/// The legacy completions endpoint's default max_tokens (OpenAI's, and vLLM's).
pub const COMPLETIONS_DEFAULT_MAX_TOKENS: u32 = 16;

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn wrong_type(param: &str, expected: &str, got: &Value) -> ApiError {
    ApiError::param(
        param,
        "invalid_type",
        format!("Invalid type for '{param}': expected {expected}, but got {} instead.", type_name(got)),
    )
}

fn out_of_range(param: &str, rule: &str, got: impl std::fmt::Display) -> ApiError {
    ApiError::param(
        param,
        "invalid_value",
        format!("Invalid value for '{param}': expected {rule}, but got {got}."),
    )
}

fn unsupported(param: &str, what: &str) -> ApiError {
    ApiError::param(
        param,
        "unsupported_parameter",
        format!("'{param}': {what} is not supported by this server."),
    )
}

/// Typed access to the top-level fields; `null` reads as absent.
struct Fields<'a>(&'a Map<String, Value>);

impl<'a> Fields<'a> {
    fn get(&self, k: &str) -> Option<&'a Value> {
        self.0.get(k).filter(|v| !v.is_null())
    }

    fn bool(&self, k: &str) -> Result<Option<bool>, ApiError> {
        self.get(k).map(|v| v.as_bool().ok_or_else(|| wrong_type(k, "a boolean", v))).transpose()
    }

    fn str(&self, k: &str) -> Result<Option<&'a str>, ApiError> {
        self.get(k).map(|v| v.as_str().ok_or_else(|| wrong_type(k, "a string", v))).transpose()
    }

    fn num(&self, k: &str, lo: f64, hi: f64) -> Result<Option<f64>, ApiError> {
        let Some(v) = self.get(k) else { return Ok(None) };
        let x = v.as_f64().ok_or_else(|| wrong_type(k, "a number", v))?;
        if !(lo..=hi).contains(&x) {
            return Err(out_of_range(k, &format!("a number in [{lo}, {hi}]"), x));
        }
        Ok(Some(x))
    }

    fn int(&self, k: &str, lo: i64, hi: i64) -> Result<Option<i64>, ApiError> {
        let Some(v) = self.get(k) else { return Ok(None) };
        let x = as_int(v).ok_or_else(|| wrong_type(k, "an integer", v))?;
        if x < lo || x > hi {
            return Err(out_of_range(k, &format!("an integer in [{lo}, {hi}]"), x));
        }
        Ok(Some(x))
    }
}

/// An integer, also written as a float with no fraction (`5.0`), as pydantic-based servers accept.
fn as_int(v: &Value) -> Option<i64> {
    if let Some(i) = v.as_i64() {
        return Some(i);
    }
    if v.is_u64() {
        return Some(i64::MAX); // above i64: out of every range we check
    }
    let f = v.as_f64()?;
    (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
}

/// A request body as a JSON object, or the 400 saying why not.
fn body_object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let text = std::str::from_utf8(body)
        .map_err(|e| ApiError::invalid(format!("The request body is not valid UTF-8 ({e}).")))?;
    let v: Value = serde_json::from_str(text).map_err(|e| {
        ApiError::invalid(format!(
            "We could not parse the JSON body of your request. (HINT: This likely means you aren't \
             using your HTTP library correctly. The OpenAI API expects a JSON payload.) [{e}]"
        ))
    })?;
    match v {
        Value::Object(m) => Ok(m),
        v => Err(ApiError::invalid(format!("The request body must be a JSON object, not {}.", type_name(&v)))),
    }
}

/// llama-server's POST /tokenize: (content, add_special (default false), with_pieces (default false)).
pub fn parse_tokenize(body: &[u8]) -> Result<(String, bool, bool), ApiError> {
    let obj = body_object(body)?;
    let f = Fields(&obj);
    let content = f.str("content")?.ok_or_else(|| {
        ApiError::param("content", "missing_required_parameter", "Missing required parameter: 'content'.")
    })?;
    Ok((content.to_string(), f.bool("add_special")?.unwrap_or(false), f.bool("with_pieces")?.unwrap_or(false)))
}

/// llama-server's POST /detokenize: the ids of "tokens".
pub fn parse_detokenize(body: &[u8]) -> Result<Vec<i32>, ApiError> {
    let obj = body_object(body)?;
    let v = Fields(&obj).get("tokens").ok_or_else(|| {
        ApiError::param("tokens", "missing_required_parameter", "Missing required parameter: 'tokens'.")
    })?;
    let a = v.as_array().ok_or_else(|| wrong_type("tokens", "an array of token ids", v))?;
    a.iter()
        .enumerate()
        .map(|(i, t)| match as_int(t) {
            Some(x) if (0..=i32::MAX as i64).contains(&x) => Ok(x as i32),
            _ => Err(wrong_type(&format!("tokens[{i}]"), "a token id (an integer of at least 0)", t)),
        })
        .collect()
}

/// llama-server's POST /apply-template: the chat template's request of a chat body's messages and
/// chat_template_kwargs (the rest of a chat request is accepted and ignored).
pub fn parse_apply_template(body: &[u8]) -> Result<String, ApiError> {
    let obj = body_object(body)?;
    let f = Fields(&obj);
    let tool_request = tools::parse(f.get("tools"), f.get("tool_choice"), f.get("parallel_tool_calls"))?;
    chat_request(parse_messages(f.get("messages"))?, f.get("chat_template_kwargs"), tool_request.as_ref())
}

/// A number in (0, hi].
fn positive(f: &Fields, k: &str, hi: f64) -> Result<Option<f32>, ApiError> {
    match f.num(k, 0.0, hi)? {
        Some(v) if v == 0.0 => Err(out_of_range(k, &format!("a number in (0, {hi}]"), v)),
        v => Ok(v.map(|v| v as f32)),
    }
}

/// Most DRY sequence breakers a request may give, and their longest (llama.cpp cuts at 40 bytes).
const MAX_DRY_BREAKERS: usize = 32;

/// llama-server's DRY fields: dry_multiplier (0: off), dry_base, dry_allowed_length,
/// dry_penalty_last_n (-1: the whole context; 0: off) and dry_sequence_breakers.
fn parse_dry(f: &Fields) -> Result<Option<Dry>, ApiError> {
    let multiplier = f.num("dry_multiplier", 0.0, 100.0)?.unwrap_or(0.0) as f32;
    let base = f.num("dry_base", 1.0, 100.0)?.unwrap_or(1.75) as f32;
    let allowed_length = f.int("dry_allowed_length", 0, 1 << 20)?.unwrap_or(2) as i32;
    let last_n = f.int("dry_penalty_last_n", -1, i32::MAX as i64)?.unwrap_or(-1) as i32;
    let sequence_breakers = match f.get("dry_sequence_breakers") {
        None => ["\n", ":", "\"", "*"].iter().map(|s| s.to_string()).collect(),
        Some(v) => {
            let want = "an array of 1 to 32 non-empty strings";
            let a = v.as_array().ok_or_else(|| wrong_type("dry_sequence_breakers", want, v))?;
            if a.is_empty() || a.len() > MAX_DRY_BREAKERS {
                return Err(wrong_type("dry_sequence_breakers", want, v));
            }
            a.iter()
                .map(|s| match s.as_str() {
                    Some(s) if !s.is_empty() && !s.contains('\0') => Ok(s.to_string()),
                    _ => Err(wrong_type("dry_sequence_breakers", want, v)),
                })
                .collect::<Result<_, _>>()?
        }
    };
    if multiplier == 0.0 || last_n == 0 {
        return Ok(None);
    }
    Ok(Some(Dry { multiplier, base, allowed_length, penalty_last_n: last_n.max(0), sequence_breakers }))
}

/// Parses a request body for `endpoint`. `n_ctx` bounds max_tokens.
pub fn parse_request(endpoint: Endpoint, body: &[u8], n_ctx: u32) -> Result<ParsedRequest, ApiError> {
    let obj = body_object(body)?;
    let obj = &obj;
    let f = Fields(obj);
    f.str("model")?;
    f.str("user")?;

    let mut tool_request = None;
    let prompt = match endpoint {
        Endpoint::Chat => {
            tool_request = tools::parse(f.get("tools"), f.get("tool_choice"), f.get("parallel_tool_calls"))?;
            let request = chat_request(parse_messages(f.get("messages"))?, f.get("chat_template_kwargs"), tool_request.as_ref())?;
            Prompt::Chat { request, suffix: String::new() }
        }
        Endpoint::Completions => parse_prompt(f.get("prompt"))?,
    };

    let echo = match endpoint {
        Endpoint::Completions => f.bool("echo")?.unwrap_or(false),
        Endpoint::Chat => false,
    };
    let max_tokens = match endpoint {
        Endpoint::Chat => match f.get("max_completion_tokens") {
            Some(_) => max_tokens_field(&f, "max_completion_tokens", n_ctx, 1)?,
            None => max_tokens_field(&f, "max_tokens", n_ctx, 1)?,
        },
        // with echo, 0 scores the prompt without generating (as OpenAI's legacy completions)
        Endpoint::Completions => Some(
            max_tokens_field(&f, "max_tokens", n_ctx, if echo { 0 } else { 1 })?
                .unwrap_or(COMPLETIONS_DEFAULT_MAX_TOKENS.min(n_ctx)),
        ),
    };

    let n = f.int("n", 1, MAX_N as i64)?.unwrap_or(1) as u32;
    if let Some(n) = f.int("best_of", 1, 128)? {
        if n != 1 {
            return Err(unsupported("best_of", "best_of above 1"));
        }
    }
    let presence_penalty = f.num("presence_penalty", -2.0, 2.0)?.unwrap_or(0.0) as f32;
    let frequency_penalty = f.num("frequency_penalty", -2.0, 2.0)?.unwrap_or(0.0) as f32;
    let repetition_penalty = match f.num("repetition_penalty", 0.0, 10.0)? {
        Some(r) if r == 0.0 => return Err(out_of_range("repetition_penalty", "a number in (0, 10]", r)),
        r => r.unwrap_or(1.0) as f32,
    };
    let logit_bias = parse_logit_bias(f.get("logit_bias"))?;
    let dry = parse_dry(&f)?;
    let mirostat = match f.int("mirostat", 0, 2)?.unwrap_or(0) {
        0 => None,
        version => Some(Mirostat {
            version: version as i32,
            tau: positive(&f, "mirostat_tau", 100.0)?.unwrap_or(5.0),
            eta: positive(&f, "mirostat_eta", 10.0)?.unwrap_or(0.1),
        }),
    };
    if let Some(t) = f.get("functions") {
        let a = t.as_array().ok_or_else(|| wrong_type("functions", "an array", t))?;
        if !a.is_empty() {
            return Err(unsupported("functions", "the legacy functions field (use tools)"));
        }
    }
    if f.str("suffix")?.is_some_and(|s| !s.is_empty()) {
        return Err(unsupported("suffix", "suffix (insertion)"));
    }

    let stream = f.bool("stream")?.unwrap_or(false);
    let mut include_usage = false;
    if let Some(so) = f.get("stream_options") {
        let m = so.as_object().ok_or_else(|| wrong_type("stream_options", "an object", so))?;
        if !stream {
            return Err(ApiError::param(
                "stream_options",
                "invalid_value",
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            ));
        }
        include_usage = Fields(m)
            .bool("include_usage")
            .map_err(|e| e.with_param("stream_options.include_usage"))?
            .unwrap_or(false);
    }

    let logprobs = match endpoint {
        Endpoint::Chat => {
            let on = f.bool("logprobs")?.unwrap_or(false);
            let top = f.int("top_logprobs", 0, MAX_TOP_LOGPROBS_CHAT)?.unwrap_or(0) as u32;
            if top > 0 && !on {
                return Err(ApiError::param(
                    "top_logprobs",
                    "invalid_value",
                    "'top_logprobs' needs 'logprobs' set to true.",
                ));
            }
            if on {
                Logprobs::Chat(top)
            } else {
                Logprobs::None
            }
        }
        Endpoint::Completions => match f.int("logprobs", 0, MAX_LOGPROBS_COMPLETIONS)? {
            Some(n) => Logprobs::Completions(n as u32),
            None => Logprobs::None,
        },
    };
    let top_logprobs = match logprobs {
        Logprobs::None => 0,
        Logprobs::Chat(n) | Logprobs::Completions(n) => n,
    };

    let stop = parse_stop(f.get("stop"))?;
    let stop_ids = match f.get("stop_token_ids") {
        None => Vec::new(),
        Some(v) => {
            let a = v.as_array().ok_or_else(|| wrong_type("stop_token_ids", "an array of integers", v))?;
            a.iter()
                .map(|t| match as_int(t) {
                    Some(i) if (0..=i32::MAX as i64).contains(&i) => Ok(i as i32),
                    _ => Err(wrong_type("stop_token_ids", "an array of token ids", v)),
                })
                .collect::<Result<_, _>>()?
        }
    };

    let params = GenParams {
        temperature: f.num("temperature", 0.0, 2.0)?.unwrap_or(1.0) as f32,
        top_p: f.num("top_p", 0.0, 1.0)?.unwrap_or(1.0) as f32,
        top_k: f.int("top_k", -1, i32::MAX as i64)?.unwrap_or(0).max(0) as i32,
        min_p: f.num("min_p", 0.0, 1.0)?.unwrap_or(0.0) as f32,
        seed: match f.int("seed", i64::MIN, i64::MAX)? {
            Some(s) => s as u64,
            None => random_seed(),
        },
        stop_ids,
        logprobs: logprobs != Logprobs::None,
        top_logprobs,
        grammar: match (parse_grammar(&f)?, &tool_request) {
            (Some(_), Some(t)) if t.choice != tools::Choice::Auto => {
                return Err(ApiError::param(
                    "tool_choice",
                    "invalid_value",
                    "A required tool call and a response_format cannot both constrain the output.",
                ))
            }
            (g, _) => g,
        },
        grammar_triggers: Vec::new(),
        ignore_eos: f.bool("ignore_eos")?.unwrap_or(false),
        presence_penalty,
        frequency_penalty,
        repetition_penalty,
        logit_bias,
        typical_p: match f.num("typical_p", 0.0, 1.0)? {
            Some(t) if t == 0.0 => return Err(out_of_range("typical_p", "a number in (0, 1]", t)),
            t => t.unwrap_or(1.0) as f32,
        },
        xtc_probability: f.num("xtc_probability", 0.0, 1.0)?.unwrap_or(0.0) as f32,
        xtc_threshold: f.num("xtc_threshold", 0.0, 1.0)?.unwrap_or(0.1) as f32,
        dry,
        mirostat,
    };
    Ok(ParsedRequest {
        endpoint,
        job: Job { prompt, max_tokens, params },
        tools: tool_request,
        n,
        echo,
        stop,
        logprobs,
        stream,
        include_usage,
    })
}

/// OpenAI's `logit_bias`: token ids (as JSON object keys) to a bias in [-100, 100] added to the
/// logits; -100 bans the token outright (-inf), as the API documents it ("should result in a ban").
/// Ids past the vocabulary are the backend's to refuse.
fn parse_logit_bias(v: Option<&Value>) -> Result<Vec<(i32, f32)>, ApiError> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let m = v.as_object().ok_or_else(|| wrong_type("logit_bias", "an object of token ids to numbers", v))?;
    if m.len() > MAX_LOGIT_BIAS {
        return Err(out_of_range("logit_bias", &format!("at most {MAX_LOGIT_BIAS} tokens"), m.len()));
    }
    let mut out = Vec::with_capacity(m.len());
    for (k, b) in m {
        let id: i32 = match k.parse::<i64>() {
            Ok(i) if (0..=i32::MAX as i64).contains(&i) && i.to_string() == *k => i as i32,
            _ => return Err(ApiError::param("logit_bias", "invalid_value", format!("logit_bias: '{k}' is not a token id."))),
        };
        let x = b.as_f64().ok_or_else(|| wrong_type(&format!("logit_bias.{k}"), "a number", b))?;
        if !(-100.0..=100.0).contains(&x) {
            return Err(out_of_range(&format!("logit_bias.{k}"), "a number in [-100, 100]", x));
        }
        out.push((id, if x == -100.0 { f32::NEG_INFINITY } else { x as f32 }));
    }
    Ok(out)
}

fn max_tokens_field(f: &Fields, k: &str, n_ctx: u32, min: i64) -> Result<Option<u32>, ApiError> {
    let Some(v) = f.get(k) else { return Ok(None) };
    let n = as_int(v).ok_or_else(|| wrong_type(k, "an integer", v))?;
    if n < min {
        return Err(out_of_range(k, &format!("an integer of at least {min}"), n));
    }
    if n > n_ctx as i64 {
        return Err(ApiError::param(
            k,
            "context_length_exceeded",
            format!("'{k}' is {n}, above this model's maximum context length of {n_ctx} tokens."),
        ));
    }
    Ok(Some(n as u32))
}

/// A seed that differs per call (requests without a seed; tool call ids).
pub(crate) fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// The chat template's request: the checked messages and the client's chat_template_kwargs (an
/// object: `enable_thinking` and the like, as vLLM and llama-server pass them to the template).
fn chat_request(messages: Vec<Value>, kwargs: Option<&Value>, tools: Option<&ToolRequest>) -> Result<String, ApiError> {
    let mut req = Map::new();
    req.insert("messages".into(), Value::Array(messages));
    if let Some(t) = tools {
        req.insert("tools".into(), Value::Array(t.tools.clone()));
    }
    if let Some(k) = kwargs {
        if !k.is_object() {
            return Err(wrong_type("chat_template_kwargs", "an object", k));
        }
        req.insert("chat_template_kwargs".into(), k.clone());
    }
    Ok(Value::Object(req).to_string())
}

/// Checks the messages, naming the field of each problem; returns them as the template will see
/// them: as sent, with `developer` (OpenAI's newer name) as `system`. Content may be a string, a
/// list of text parts (the engine joins them) or, for an assistant turn, null or absent.
fn parse_messages(v: Option<&Value>) -> Result<Vec<Value>, ApiError> {
    let v = v.ok_or_else(|| {
        ApiError::param("messages", "missing_required_parameter", "Missing required parameter: 'messages'.")
    })?;
    let arr = v.as_array().ok_or_else(|| wrong_type("messages", "an array", v))?;
    if arr.is_empty() {
        return Err(ApiError::param("messages", "empty_array", "'messages' must hold at least one message."));
    }
    let mut out = Vec::with_capacity(arr.len());
    for (i, m) in arr.iter().enumerate() {
        let at = |k: &str| format!("messages[{i}].{k}");
        let o = m.as_object().ok_or_else(|| wrong_type(&format!("messages[{i}]"), "an object", m))?;
        let role = match o.get("role") {
            Some(Value::String(r)) => r.as_str(),
            Some(r) => return Err(wrong_type(&at("role"), "a string", r)),
            None => {
                return Err(ApiError::param(
                    &at("role"),
                    "missing_required_parameter",
                    format!("Missing required parameter: '{}'.", at("role")),
                ))
            }
        };
        let role = match role {
            "system" | "developer" => "system",
            "user" | "assistant" | "tool" => role,
            "function" => return Err(unsupported(&at("role"), "function messages (use tool)")),
            r => {
                return Err(out_of_range(
                    &at("role"),
                    "one of 'system', 'developer', 'user', 'assistant', 'tool'",
                    format!("'{r}'"),
                ))
            }
        };
        match o.get("content") {
            Some(Value::String(_)) => {}
            Some(Value::Null) | None if role == "assistant" => {}
            None | Some(Value::Null) => {
                return Err(ApiError::param(
                    &at("content"),
                    "missing_required_parameter",
                    format!("Missing required parameter: '{}'.", at("content")),
                ))
            }
            Some(Value::Array(parts)) => {
                for (j, p) in parts.iter().enumerate() {
                    let pp = format!("messages[{i}].content[{j}]");
                    let po = p.as_object().ok_or_else(|| wrong_type(&pp, "an object", p))?;
                    match po.get("type").and_then(Value::as_str) {
                        Some("text") => match po.get("text") {
                            Some(Value::String(_)) => {}
                            Some(t) => return Err(wrong_type(&format!("{pp}.text"), "a string", t)),
                            None => {
                                return Err(ApiError::param(
                                    &format!("{pp}.text"),
                                    "missing_required_parameter",
                                    "A text part needs 'text'.",
                                ))
                            }
                        },
                        Some(t) => {
                            return Err(unsupported(&format!("{pp}.type"), &format!("content of type '{t}'")))
                        }
                        None => {
                            return Err(ApiError::param(
                                &format!("{pp}.type"),
                                "missing_required_parameter",
                                "A content part needs a string 'type'.",
                            ))
                        }
                    }
                }
            }
            Some(c) => return Err(wrong_type(&at("content"), "a string or an array of content parts", c)),
        }
        let mut kept = o.clone();
        kept.insert("role".into(), Value::String(role.into()));
        out.push(Value::Object(kept));
    }
    Ok(out)
}

fn parse_prompt(v: Option<&Value>) -> Result<Prompt, ApiError> {
    let v = v.ok_or_else(|| {
        ApiError::param("prompt", "missing_required_parameter", "Missing required parameter: 'prompt'.")
    })?;
    let bad = || wrong_type("prompt", "a string, an array of one string, or an array of token ids", v);
    let tokens = |a: &[Value]| -> Result<Vec<i32>, ApiError> {
        a.iter()
            .map(|t| match as_int(t) {
                Some(i) if (0..=i32::MAX as i64).contains(&i) => Ok(i as i32),
                _ => Err(bad()),
            })
            .collect()
    };
    match v {
        Value::String(s) => Ok(Prompt::Text(s.clone())),
        Value::Array(a) if a.is_empty() => {
            Err(ApiError::param("prompt", "empty_array", "'prompt' must not be an empty array."))
        }
        Value::Array(a) if a.len() > 1 && (a[0].is_string() || a[0].is_array()) => Err(ApiError::param(
            "prompt",
            "invalid_value",
            "Batched prompts are not supported: send one prompt per request.",
        )),
        Value::Array(a) => match &a[0] {
            Value::String(s) => Ok(Prompt::Text(s.clone())),
            Value::Array(inner) => Ok(Prompt::Tokens(tokens(inner)?)),
            _ => Ok(Prompt::Tokens(tokens(a)?)),
        },
        _ => Err(bad()),
    }
}

fn parse_stop(v: Option<&Value>) -> Result<Vec<String>, ApiError> {
    match v {
        None => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) => {
            if a.len() > MAX_STOP {
                return Err(out_of_range("stop", &format!("at most {MAX_STOP} sequences"), a.len()));
            }
            a.iter()
                .map(|s| {
                    s.as_str()
                        .map(String::from)
                        .ok_or_else(|| wrong_type("stop", "a string or an array of strings", s))
                })
                .collect()
        }
        Some(o) => Err(wrong_type("stop", "a string or an array of strings", o)),
    }
}

fn parse_grammar(f: &Fields) -> Result<Option<GrammarSpec>, ApiError> {
    let mut found: Vec<(&str, GrammarSpec)> = Vec::new();
    if let Some(rf) = f.get("response_format") {
        let o = rf.as_object().ok_or_else(|| wrong_type("response_format", "an object", rf))?;
        let g = match o.get("type") {
            Some(Value::String(t)) if t == "text" => None,
            Some(Value::String(t)) if t == "json_object" => Some(GrammarSpec::JsonObject),
            Some(Value::String(t)) if t == "json_schema" => Some(json_schema_format(o.get("json_schema"))?),
            Some(Value::String(t)) => {
                return Err(out_of_range(
                    "response_format.type",
                    "one of 'text', 'json_object', 'json_schema'",
                    format!("'{t}'"),
                ))
            }
            Some(t) => return Err(wrong_type("response_format.type", "a string", t)),
            None => {
                return Err(ApiError::param(
                    "response_format.type",
                    "missing_required_parameter",
                    "Missing required parameter: 'response_format.type'.",
                ))
            }
        };
        if let Some(g) = g {
            found.push(("response_format", g));
        }
    }
    if let Some(gj) = f.get("guided_json") {
        let text = match gj {
            Value::String(s) => {
                serde_json::from_str::<Value>(s).map_err(|e| {
                    ApiError::param("guided_json", "invalid_value", format!("'guided_json' is not JSON: {e}"))
                })?;
                s.clone()
            }
            Value::Object(_) | Value::Bool(_) => gj.to_string(),
            _ => return Err(wrong_type("guided_json", "a JSON schema (object or string)", gj)),
        };
        found.push(("guided_json", GrammarSpec::JsonSchema(text)));
    }
    if let Some(re) = f.str("guided_regex")? {
        found.push(("guided_regex", GrammarSpec::Regex(re.to_string())));
    }
    match found.len() {
        0 | 1 => Ok(found.pop().map(|(_, g)| g)),
        _ => Err(ApiError::param(
            found[1].0,
            "invalid_value",
            "Give at most one of response_format, guided_json, guided_regex.",
        )),
    }
}

fn json_schema_format(v: Option<&Value>) -> Result<GrammarSpec, ApiError> {
    let p = "response_format.json_schema";
    let v = v.ok_or_else(|| {
        ApiError::param(p, "missing_required_parameter", format!("Missing required parameter: '{p}'."))
    })?;
    let o = v.as_object().ok_or_else(|| wrong_type(p, "an object", v))?;
    match o.get("name") {
        Some(Value::String(n))
            if !n.is_empty()
                && n.len() <= 64
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') => {}
        Some(Value::String(n)) => {
            return Err(out_of_range(
                &format!("{p}.name"),
                "1 to 64 characters of a-z, A-Z, 0-9, _ and -",
                format!("'{n}'"),
            ))
        }
        Some(n) => return Err(wrong_type(&format!("{p}.name"), "a string", n)),
        None => {
            return Err(ApiError::param(
                &format!("{p}.name"),
                "missing_required_parameter",
                format!("Missing required parameter: '{p}.name'."),
            ))
        }
    }
    let sub = Fields(o);
    sub.bool("strict").map_err(|e| e.with_param(&format!("{p}.strict")))?;
    sub.str("description").map_err(|e| e.with_param(&format!("{p}.description")))?;
    match sub.get("schema") {
        None => Ok(GrammarSpec::JsonObject),
        Some(s @ (Value::Object(_) | Value::Bool(_))) => Ok(GrammarSpec::JsonSchema(s.to_string())),
        Some(s) => Err(wrong_type(&format!("{p}.schema"), "an object", s)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CTX: u32 = 1000;

    fn chat(extra: Value) -> Result<ParsedRequest, ApiError> {
        let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        parse_request(Endpoint::Chat, body.to_string().as_bytes(), CTX)
    }

    fn completion(extra: Value) -> Result<ParsedRequest, ApiError> {
        let mut body = json!({"model": "m", "prompt": "once"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        parse_request(Endpoint::Completions, body.to_string().as_bytes(), CTX)
    }

    /// Asserts a 400 naming `param`.
    fn bad<T: std::fmt::Debug>(r: Result<T, ApiError>, param: &str) {
        let e = r.expect_err("accepted a bad request");
        assert_eq!(e.status, 400, "{e:?}");
        assert_eq!(e.kind, "invalid_request_error");
        assert_eq!(e.param.as_deref(), Some(param), "{e:?}");
    }

    #[test]
    fn a_full_chat_request() {
        let r = chat(json!({
            "messages": [{"role": "system", "content": "be brief"},
                         {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                         {"role": "assistant", "content": null}, {"role": "developer", "content": "d"}],
            "max_completion_tokens": 5, "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40,
            "min_p": 0.05, "seed": 42, "stop": ["x", "y"], "n": 1, "logprobs": true, "top_logprobs": 3,
            "stream": true, "stream_options": {"include_usage": true},
            "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "object"}, "strict": true}},
            "some_future_field": {"x": 1}, "user": "u", "presence_penalty": 0, "tool_choice": "none", "tools": []
        }))
        .unwrap();
        let Prompt::Chat { request: m, .. } = &r.job.prompt else { panic!() };
        // the messages go to the template as sent (parts joined there), developer as system
        let m: Value = serde_json::from_str(m).unwrap();
        assert_eq!(m["messages"][1]["content"], json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]));
        assert_eq!(m["messages"][2], json!({"role": "assistant", "content": null}));
        assert_eq!(m["messages"][3], json!({"role": "system", "content": "d"}));
        assert!(m.get("chat_template_kwargs").is_none());
        let k = chat(json!({"chat_template_kwargs": {"enable_thinking": false},
                            "messages": [{"role": "user", "content": "q", "z": 1, "a": 2}]}))
        .unwrap();
        let Prompt::Chat { request: m, .. } = &k.job.prompt else { panic!() };
        assert_eq!(m, r#"{"messages":[{"role":"user","content":"q","z":1,"a":2}],"chat_template_kwargs":{"enable_thinking":false}}"#);
        assert_eq!(r.job.max_tokens, Some(5), "max_completion_tokens wins");
        let p = &r.job.params;
        assert_eq!((p.temperature, p.top_p, p.top_k, p.min_p, p.seed), (0.5, 0.9, 40, 0.05, 42));
        assert_eq!(r.stop, ["x", "y"]);
        assert_eq!(r.logprobs, Logprobs::Chat(3));
        assert!(p.logprobs);
        assert_eq!(p.top_logprobs, 3);
        assert!(r.stream && r.include_usage);
        assert_eq!(p.grammar, Some(GrammarSpec::JsonSchema("{\"type\":\"object\"}".into())));
    }

    #[test]
    fn defaults() {
        let r = chat(json!({})).unwrap();
        assert_eq!(r.job.max_tokens, None);
        assert_eq!((r.job.params.temperature, r.job.params.top_p, r.job.params.top_k), (1.0, 1.0, 0));
        assert_eq!((r.logprobs, r.stream, r.include_usage), (Logprobs::None, false, false));
        assert!(r.stop.is_empty() && r.job.params.grammar.is_none());
        assert!(!r.job.params.logprobs, "no logprobs unless asked: the engine skips their cost");
        let r = completion(json!({})).unwrap();
        assert_eq!(r.job.max_tokens, Some(COMPLETIONS_DEFAULT_MAX_TOKENS));
        assert_eq!(r.job.prompt, Prompt::Text("once".into()));
        // null is "not given"
        let r = chat(json!({"temperature": null, "stop": null, "max_tokens": null})).unwrap();
        assert_eq!(r.job.params.temperature, 1.0);
    }

    #[test]
    fn completion_prompts_and_logprobs() {
        assert_eq!(completion(json!({"prompt": ["one"]})).unwrap().job.prompt, Prompt::Text("one".into()));
        assert_eq!(
            completion(json!({"prompt": [1, 2, 3]})).unwrap().job.prompt,
            Prompt::Tokens(vec![1, 2, 3])
        );
        assert_eq!(completion(json!({"prompt": [[4, 5]]})).unwrap().job.prompt, Prompt::Tokens(vec![4, 5]));
        assert_eq!(completion(json!({"logprobs": 2})).unwrap().logprobs, Logprobs::Completions(2));
        assert_eq!(completion(json!({"logprobs": 0})).unwrap().logprobs, Logprobs::Completions(0));
        assert!(completion(json!({"logprobs": 0})).unwrap().job.params.logprobs, "logprobs: 0 is the sampled token's");
        assert_eq!(completion(json!({"max_tokens": 3.0})).unwrap().job.max_tokens, Some(3));
        bad(completion(json!({"prompt": ["a", "b"]})), "prompt");
        bad(completion(json!({"prompt": []})), "prompt");
        bad(completion(json!({"prompt": [1, -2]})), "prompt");
        bad(completion(json!({"prompt": [1, "a"]})), "prompt");
        bad(completion(json!({"prompt": 5})), "prompt");
        bad(completion(json!({"prompt": null})), "prompt");
        bad(completion(json!({"logprobs": 6})), "logprobs");
        bad(completion(json!({"logprobs": true})), "logprobs");
        let e = completion(json!({"echo": true, "logprobs": 1, "max_tokens": 0})).unwrap();
        assert_eq!((e.echo, e.job.max_tokens, e.logprobs), (true, Some(0), Logprobs::Completions(1)), "scoring a prompt");
        bad(completion(json!({"max_tokens": 0})), "max_tokens");
        assert!(completion(json!({"echo": true})).unwrap().echo);
        assert!(!chat(json!({"echo": true})).unwrap().echo, "echo is the completions endpoint's");
        bad(completion(json!({"suffix": "x"})), "suffix");
        bad(completion(json!({"best_of": 2})), "best_of");
    }

    #[test]
    fn malformed_bodies() {
        for body in [&b"{"[..], b"", b"nul", b"{\"a\":1}}", b"{'a':1}", b"{\"a\":1e999}"] {
            let e = parse_request(Endpoint::Chat, body, CTX).unwrap_err();
            assert_eq!((e.status, e.param.clone()), (400, None), "{body:?}");
        }
        let e = parse_request(Endpoint::Chat, b"[1,2]", CTX).unwrap_err();
        assert!(e.message.contains("JSON object"), "{e:?}");
        let e = parse_request(Endpoint::Chat, b"{\"messages\": \"\xff\"}", CTX).unwrap_err();
        assert!(e.message.contains("UTF-8"), "{e:?}");
    }

    #[test]
    fn wrong_types_are_400_naming_the_field() {
        for (k, v) in [
            ("model", json!(1)),
            ("temperature", json!("hot")),
            ("top_p", json!([1])),
            ("top_k", json!(1.5)),
            ("min_p", json!(true)),
            ("seed", json!("1")),
            ("max_tokens", json!("5")),
            ("n", json!("1")),
            ("stream", json!(1)),
            ("logprobs", json!(1)),
            ("top_logprobs", json!("3")),
            ("stop", json!(1)),
            ("response_format", json!("json")),
            ("user", json!(5)),
            ("stream_options", json!(true)),
            ("logit_bias", json!([1])),
            ("tools", json!({})),
            ("ignore_eos", json!("yes")),
            ("stop_token_ids", json!(3)),
            ("guided_regex", json!(3)),
            ("guided_json", json!(3)),
        ] {
            let e = chat(json!({ k: v })).expect_err(k);
            assert_eq!(e.status, 400);
            assert_eq!(e.param.as_deref(), Some(k), "{k}: {e:?}");
        }
        bad(chat(json!({"stop": ["a", 1]})), "stop");
        bad(
            chat(json!({"stream": true, "stream_options": {"include_usage": "y"}})),
            "stream_options.include_usage",
        );
    }

    #[test]
    fn invalid_values_are_400_naming_the_field() {
        bad(chat(json!({"temperature": 2.5})), "temperature");
        bad(chat(json!({"temperature": -0.1})), "temperature");
        bad(chat(json!({"top_p": 1.5})), "top_p");
        bad(chat(json!({"top_k": -2})), "top_k");
        bad(chat(json!({"min_p": 2})), "min_p");
        bad(chat(json!({"n": 9})), "n");
        bad(chat(json!({"n": 0})), "n");
        bad(chat(json!({"max_tokens": 0})), "max_tokens");
        bad(chat(json!({"max_tokens": -1})), "max_tokens");
        bad(chat(json!({"max_completion_tokens": 0})), "max_completion_tokens");
        let e = chat(json!({"max_tokens": CTX + 1})).unwrap_err();
        assert_eq!(e.code.as_deref(), Some("context_length_exceeded"));
        bad(chat(json!({"max_tokens": u64::MAX})), "max_tokens");
        bad(chat(json!({"stop": ["a", "b", "c", "d", "e"]})), "stop");
        bad(chat(json!({"top_logprobs": 21, "logprobs": true})), "top_logprobs");
        bad(chat(json!({"top_logprobs": 2})), "top_logprobs");
        bad(chat(json!({"stream_options": {"include_usage": true}})), "stream_options");
        bad(chat(json!({"presence_penalty": 2.5})), "presence_penalty");
        bad(chat(json!({"frequency_penalty": 3})), "frequency_penalty");
        bad(chat(json!({"frequency_penalty": "1"})), "frequency_penalty");
        bad(chat(json!({"repetition_penalty": 0})), "repetition_penalty");
        bad(chat(json!({"repetition_penalty": 11})), "repetition_penalty");
        bad(chat(json!({"logit_bias": {"x": 5}})), "logit_bias");
        bad(chat(json!({"logit_bias": {"-1": 5}})), "logit_bias");
        bad(chat(json!({"logit_bias": {"01": 5}})), "logit_bias");
        bad(chat(json!({"logit_bias": {"1": 101}})), "logit_bias.1");
        bad(chat(json!({"logit_bias": {"1": "5"}})), "logit_bias.1");
        let many: serde_json::Map<String, Value> = (0..301).map(|i| (i.to_string(), json!(1))).collect();
        bad(chat(json!({ "logit_bias": many })), "logit_bias");
        bad(chat(json!({"tools": [{"type": "function"}]})), "tools[0].function");
        bad(chat(json!({"functions": [{"name": "f"}]})), "functions");
        bad(
            chat(json!({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "required",
                        "response_format": {"type": "json_object"}})),
            "tool_choice",
        );
        bad(chat(json!({"tool_choice": "required"})), "tool_choice");
        bad(chat(json!({"stop_token_ids": [-1]})), "stop_token_ids");
    }

    #[test]
    fn penalties_and_logit_bias_reach_the_params() {
        let r = chat(json!({"presence_penalty": 0.5, "frequency_penalty": -1.5, "repetition_penalty": 1.3,
                            "logit_bias": {"7": -100, "12": 3.5, "0": 100}}))
        .unwrap();
        let p = &r.job.params;
        assert_eq!((p.presence_penalty, p.frequency_penalty, p.repetition_penalty), (0.5, -1.5, 1.3));
        let mut b = p.logit_bias.clone();
        b.sort_by_key(|x| x.0);
        assert_eq!(b, vec![(0, 100.0), (7, f32::NEG_INFINITY), (12, 3.5)], "-100 bans");
        let d = chat(json!({})).unwrap();
        assert_eq!((d.job.params.presence_penalty, d.job.params.frequency_penalty, d.job.params.repetition_penalty), (0.0, 0.0, 1.0));
        assert!(d.job.params.logit_bias.is_empty());
    }

    #[test]
    fn dry_mirostat_typical_and_xtc_reach_the_params() {
        let r = chat(json!({"dry_multiplier": 0.8, "dry_base": 2, "dry_allowed_length": 3, "dry_penalty_last_n": 64,
                            "dry_sequence_breakers": ["\n", "###"], "mirostat": 2, "mirostat_tau": 4, "mirostat_eta": 0.2,
                            "typical_p": 0.9, "xtc_probability": 0.5, "xtc_threshold": 0.2}))
        .unwrap();
        let p = &r.job.params;
        let d = p.dry.as_ref().expect("DRY on");
        assert_eq!((d.multiplier, d.base, d.allowed_length, d.penalty_last_n), (0.8, 2.0, 3, 64));
        assert_eq!(d.sequence_breakers, vec!["\n".to_string(), "###".to_string()]);
        assert_eq!(p.mirostat, Some(Mirostat { version: 2, tau: 4.0, eta: 0.2 }));
        assert_eq!((p.typical_p, p.xtc_probability, p.xtc_threshold), (0.9, 0.5, 0.2));
        // llama-server's defaults: breakers newline, colon, quote, star; -1 is the whole context
        let r = chat(json!({"dry_multiplier": 0.8})).unwrap();
        let d = r.job.params.dry.unwrap();
        assert_eq!((d.base, d.allowed_length, d.penalty_last_n), (1.75, 2, 0));
        assert_eq!(d.sequence_breakers, vec!["\n", ":", "\"", "*"]);
        assert_eq!(chat(json!({"dry_multiplier": 0.8, "dry_penalty_last_n": 0})).unwrap().job.params.dry, None, "0 turns DRY off");
        let d = chat(json!({})).unwrap();
        assert_eq!((d.job.params.dry.clone(), d.job.params.mirostat, d.job.params.typical_p), (None, None, 1.0));
        let m = chat(json!({"mirostat": 1})).unwrap().job.params.mirostat.unwrap();
        assert_eq!((m.version, m.tau, m.eta), (1, 5.0, 0.1));
        bad(chat(json!({"dry_multiplier": -1})), "dry_multiplier");
        bad(chat(json!({"dry_base": 0.5})), "dry_base");
        bad(chat(json!({"dry_allowed_length": -1})), "dry_allowed_length");
        bad(chat(json!({"dry_penalty_last_n": -2})), "dry_penalty_last_n");
        bad(chat(json!({"dry_sequence_breakers": "\n"})), "dry_sequence_breakers");
        bad(chat(json!({"dry_sequence_breakers": [""]})), "dry_sequence_breakers");
        bad(chat(json!({"dry_sequence_breakers": []})), "dry_sequence_breakers");
        bad(chat(json!({"dry_sequence_breakers": [1]})), "dry_sequence_breakers");
        let many: Vec<String> = (0..33).map(|i| i.to_string()).collect();
        bad(chat(json!({ "dry_sequence_breakers": many })), "dry_sequence_breakers");
        bad(chat(json!({"mirostat": 3})), "mirostat");
        bad(chat(json!({"mirostat": 2, "mirostat_tau": 0})), "mirostat_tau");
        bad(chat(json!({"mirostat": 2, "mirostat_eta": 11})), "mirostat_eta");
        bad(chat(json!({"typical_p": 0})), "typical_p");
        bad(chat(json!({"xtc_probability": 1.5})), "xtc_probability");
    }

    #[test]
    fn messages() {
        bad(chat(json!({"messages": []})), "messages");
        bad(chat(json!({"messages": "hi"})), "messages");
        bad(chat(json!({"messages": null})), "messages");
        bad(chat(json!({"messages": [1]})), "messages[0]");
        bad(chat(json!({"messages": [{"content": "x"}]})), "messages[0].role");
        bad(chat(json!({"messages": [{"role": 1, "content": "x"}]})), "messages[0].role");
        bad(chat(json!({"messages": [{"role": "wizard", "content": "x"}]})), "messages[0].role");
        bad(chat(json!({"messages": [{"role": "function", "content": "x"}]})), "messages[0].role");
        bad(chat(json!({"messages": [{"role": "tool"}]})), "messages[0].content");
        bad(chat(json!({"messages": [{"role": "user", "content": null}]})), "messages[0].content");
        bad(chat(json!({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": []})), "chat_template_kwargs");
        bad(chat(json!({"messages": [{"role": "user"}]})), "messages[0].content");
        bad(chat(json!({"messages": [{"role": "user", "content": 3}]})), "messages[0].content");
        bad(
            chat(json!({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})),
            "messages[0].content[0].type",
        );
        bad(
            chat(json!({"messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]})),
            "messages[0].content[0].text",
        );
        let e = parse_request(Endpoint::Chat, b"{\"prompt\":\"x\"}", CTX).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages"));
    }

    #[test]
    fn response_formats() {
        let g = |rf: Value| chat(json!({ "response_format": rf })).map(|r| r.job.params.grammar);
        assert_eq!(g(json!({"type": "text"})).unwrap(), None);
        assert_eq!(g(json!({"type": "json_object"})).unwrap(), Some(GrammarSpec::JsonObject));
        assert_eq!(
            g(json!({"type": "json_schema", "json_schema": {"name": "x"}})).unwrap(),
            Some(GrammarSpec::JsonObject)
        );
        bad(g(json!({"type": "xml"})), "response_format.type");
        bad(g(json!({})), "response_format.type");
        bad(g(json!({"type": "json_schema"})), "response_format.json_schema");
        bad(
            g(json!({"type": "json_schema", "json_schema": {"schema": {}}})),
            "response_format.json_schema.name",
        );
        bad(
            g(json!({"type": "json_schema", "json_schema": {"name": "a b", "schema": {}}})),
            "response_format.json_schema.name",
        );
        bad(
            g(json!({"type": "json_schema", "json_schema": {"name": "a", "schema": "s"}})),
            "response_format.json_schema.schema",
        );
        bad(
            g(json!({"type": "json_schema", "json_schema": {"name": "a", "strict": 1}})),
            "response_format.json_schema.strict",
        );
        let r = chat(json!({"guided_regex": "[0-9]+"})).unwrap();
        assert_eq!(r.job.params.grammar, Some(GrammarSpec::Regex("[0-9]+".into())));
        let r = chat(json!({"guided_json": "{\"type\":\"integer\"}"})).unwrap();
        assert_eq!(r.job.params.grammar, Some(GrammarSpec::JsonSchema("{\"type\":\"integer\"}".into())));
        bad(chat(json!({"guided_json": "{"})), "guided_json");
        bad(chat(json!({"guided_regex": "a", "response_format": {"type": "json_object"}})), "guided_regex");
    }

    #[test]
    fn vllm_extensions() {
        let r = chat(json!({"ignore_eos": true, "stop_token_ids": [7, 9], "top_k": -1})).unwrap();
        assert!(r.job.params.ignore_eos);
        assert_eq!(r.job.params.stop_ids, vec![7, 9]);
        assert_eq!(r.job.params.top_k, 0, "-1 means off");
    }
}
