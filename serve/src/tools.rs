//! Tool calling: the request's `tools`, `tool_choice` and `parallel_tool_calls`, the grammar that
//! makes a call certain when the choice requires one, and the calls parsed back out of the text.
//!
//! The syntax is the model's, as its chat template shows it (`fer_chat_template_get_info`):
//! Hermes and Qwen `<tool_call>{"name", "arguments"}</tool_call>`, Llama 3.x `{"name",
//! "parameters"}`, Mistral `[TOOL_CALLS][{"name", "arguments"}]`, and for templates that show no
//! tools the generic JSON form llama.cpp uses (`{"tool_call": {...}}` or `{"response": "..."}`,
//! with the tools and these instructions put into the system message by the engine). `required`
//! and a named function constrain the whole output with a JSON Schema grammar built from the tools'
//! parameter schemas, after the syntax's opening marker is put at the end of the prompt; `auto`
//! lets the model choose, with a lazy grammar that holds from the syntax's marker on where the
//! marker is a token (Hermes, Mistral), and parses what it wrote.

use crate::error::ApiError;
use crate::json_scan;
use ferrite::engine::tool_format;
use serde_json::{json, Map, Value};

#[derive(Clone, Debug, PartialEq)]
pub enum Choice {
    Auto,
    Required,
    /// One function by name: required, and only it.
    Named(String),
}

/// The tools of a request whose tool_choice is not `none`.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolRequest {
    /// The request's tools as sent (each {"type": "function", "function": {...}}).
    pub tools: Vec<Value>,
    pub choice: Choice,
    /// parallel_tool_calls: several calls allowed in one answer (default false, as llama-server).
    pub parallel: bool,
}

/// A call as the response carries it: arguments as JSON text.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

fn param(p: &str, code: &str, msg: impl Into<String>) -> ApiError {
    ApiError::param(p, code, msg)
}

/// Checks `tools`, `tool_choice` and `parallel_tool_calls`; None when there are no tools or the
/// choice is `none` (the model is then not told of them).
pub fn parse(tools: Option<&Value>, choice: Option<&Value>, parallel: Option<&Value>) -> Result<Option<ToolRequest>, ApiError> {
    let list: Vec<Value> = match tools {
        None => Vec::new(),
        Some(v) => v.as_array().ok_or_else(|| param("tools", "invalid_type", "'tools' must be an array of tools."))?.clone(),
    };
    let mut names = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let at = |k: &str| format!("tools[{i}]{k}");
        if t.get("type").and_then(Value::as_str) != Some("function") {
            return Err(param(&at(".type"), "invalid_value", format!("'{}' must be 'function'.", at(".type"))));
        }
        let f = t.get("function").and_then(Value::as_object).ok_or_else(|| {
            param(&at(".function"), "missing_required_parameter", format!("'{}' must be an object.", at(".function")))
        })?;
        let name = f.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() || name.len() > 64 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return Err(param(
                &at(".function.name"),
                "invalid_value",
                format!("'{}' must be 1 to 64 letters, digits, underscores or dashes.", at(".function.name")),
            ));
        }
        if let Some(p) = f.get("parameters") {
            if !p.is_object() {
                return Err(param(&at(".function.parameters"), "invalid_type", "A function's parameters must be a JSON Schema object."));
            }
        }
        names.push(name.to_string());
    }
    let choice = match choice {
        None if list.is_empty() => return Ok(None),
        None => Choice::Auto,
        Some(Value::String(s)) => match s.as_str() {
            "none" => return Ok(None),
            "auto" if list.is_empty() => return Ok(None),
            "auto" => Choice::Auto,
            "required" => Choice::Required,
            _ => return Err(param("tool_choice", "invalid_value", "'tool_choice' must be 'none', 'auto', 'required' or a function.")),
        },
        Some(Value::Object(o)) => {
            let name = o.get("function").and_then(|f| f.get("name")).and_then(Value::as_str);
            match (o.get("type").and_then(Value::as_str), name) {
                (Some("function"), Some(n)) => Choice::Named(n.to_string()),
                _ => return Err(param("tool_choice", "invalid_value", "A named tool_choice is {\"type\": \"function\", \"function\": {\"name\": ...}}.")),
            }
        }
        Some(_) => return Err(param("tool_choice", "invalid_type", "'tool_choice' must be a string or an object.")),
    };
    if let Choice::Named(n) = &choice {
        if !names.contains(n) {
            return Err(param("tool_choice", "invalid_value", format!("tool_choice names '{n}', which is not among the tools.")));
        }
    }
    if list.is_empty() {
        return Err(param("tool_choice", "invalid_value", "'tool_choice' requires tools, but 'tools' is empty."));
    }
    // llama-server's default, not OpenAI's: small models asked for a list of calls tend to repeat
    // the call until max_tokens (SmolLM2-135M does); a client that wants several says so
    let parallel = match parallel {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(param("parallel_tool_calls", "invalid_type", "'parallel_tool_calls' must be a boolean.")),
    };
    Ok(Some(ToolRequest { tools: list, choice, parallel }))
}

fn function(t: &Value) -> (&str, Value) {
    let f = &t["function"];
    let params = f.get("parameters").cloned().unwrap_or_else(|| json!({"type": "object"}));
    (f["name"].as_str().unwrap_or(""), params)
}

/// What tools add to a request's generation.
#[derive(Clone, Debug, PartialEq)]
pub struct Constraint {
    /// Text put after the prompt (a required call's opening marker), which belongs to the output.
    pub prefix: String,
    /// The JSON Schema the output (or, with triggers, the output after a trigger) must follow.
    pub schema: String,
    /// A lazy grammar's triggers: the syntax's opening marker (empty: the grammar holds from the
    /// first token).
    pub triggers: Vec<String>,
}

/// The constraint a request's tools put on the output, as llama.cpp's chat formats do it:
/// `required` and a named function constrain the whole output after the syntax's opening marker;
/// `auto` waits for the marker (a lazy grammar) in the Hermes and Mistral syntaxes, and in the
/// generic one holds the whole output to a call or a {"response": ...} object. None for `auto` in
/// the Llama 3.x syntax, whose call is a bare JSON object with no marker to wait for.
pub fn constraint(r: &ToolRequest, format: u32) -> Option<Constraint> {
    let args_key = if format == tool_format::LLAMA3 { "parameters" } else { "arguments" };
    let calls: Vec<Value> = r
        .tools
        .iter()
        .map(function)
        .filter(|(name, _)| match &r.choice {
            Choice::Named(n) => n == name,
            _ => true,
        })
        .map(|(name, params)| {
            let mut props = Map::new();
            props.insert("name".into(), json!({ "const": name }));
            props.insert(args_key.into(), params);
            json!({"type": "object", "properties": props, "required": ["name", args_key], "additionalProperties": false})
        })
        .collect();
    let one = if calls.len() == 1 { calls[0].clone() } else { json!({ "anyOf": calls }) };
    let list = |one: Value| {
        let mut a = json!({"type": "array", "items": one, "minItems": 1});
        if !r.parallel {
            a["maxItems"] = json!(1);
        }
        a
    };
    let generic_call = if r.parallel {
        json!({"type": "object", "properties": {"tool_calls": list(one.clone())}, "required": ["tool_calls"], "additionalProperties": false})
    } else {
        json!({"type": "object", "properties": {"tool_call": one.clone()}, "required": ["tool_call"], "additionalProperties": false})
    };
    let made = |prefix: &str, schema: Value, trigger: Option<&str>| {
        Some(Constraint { prefix: prefix.to_string(), schema: schema.to_string(), triggers: trigger.into_iter().map(String::from).collect() })
    };
    if r.choice == Choice::Auto {
        return match format {
            tool_format::HERMES => made("", one, Some("<tool_call>")),
            tool_format::MISTRAL => made("", list(one), Some("[TOOL_CALLS]")),
            tool_format::LLAMA3 => None,
            _ => {
                let response = json!({"type": "object", "properties": {"response": {"type": "string"}}, "required": ["response"],
                                      "additionalProperties": false});
                made("", json!({ "anyOf": [generic_call, response] }), None)
            }
        };
    }
    match format {
        tool_format::HERMES => made("<tool_call>\n", one, None),
        tool_format::LLAMA3 => made("", one, None),
        tool_format::MISTRAL => made("[TOOL_CALLS]", list(one), None),
        _ => made("", generic_call, None),
    }
}

/// A call id as OpenAI's look: "call_" and 24 letters and digits.
fn call_id() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut id = String::from("call_");
    for half in [crate::openai::random_seed(), crate::openai::random_seed()] {
        let mut x = half;
        for _ in 0..12 {
            id.push(ALPHABET[(x % 62) as usize] as char); // 62^12 < 2^64: twelve digits per draw
            x /= 62;
        }
    }
    id
}

/// A call object's arguments as the model wrote them: the raw text of its member `args_key` (or
/// "arguments"), the text a JSON string holds when they were given as one, "{}" when absent. Raw,
/// not re-serialized, so a stream that sends them as they are written adds up to the same string.
fn raw_arguments(obj: &str, args_key: &str) -> String {
    let b = obj.as_bytes();
    let (members, _) = json_scan::object_members(b, json_scan::skip_ws(b, 0));
    let m = members.iter().find(|m| m.key == args_key).or_else(|| members.iter().find(|m| m.key == "arguments"));
    match m {
        Some(json_scan::Member { start, value: json_scan::Scan::Done(end), .. }) => {
            let raw = &obj[*start..*end];
            if raw.starts_with('"') {
                serde_json::from_str::<String>(raw).unwrap_or_default()
            } else {
                raw.to_string()
            }
        }
        _ => "{}".to_string(),
    }
}

/// A call object (v, written as `raw`): its name and its arguments (under `args_key`, or
/// "arguments") as JSON text.
fn call_of(v: &Value, raw: &str, args_key: &str) -> Option<ToolCall> {
    let name = v.get("name")?.as_str()?.to_string();
    Some(ToolCall { id: call_id(), name, arguments: raw_arguments(raw, args_key) })
}

/// The calls of an array of call objects `a`, written as `raw`.
fn calls_of_array(a: &[Value], raw: &str, args_key: &str) -> Vec<ToolCall> {
    let b = raw.as_bytes();
    let (starts, _) = json_scan::array_elements(b, json_scan::skip_ws(b, 0));
    a.iter()
        .zip(starts)
        .filter_map(|(v, s)| match json_scan::scan_value(b, s) {
            json_scan::Scan::Done(e) => call_of(v, &raw[s..e], args_key),
            _ => None,
        })
        .collect()
}

fn non_empty(s: &str) -> Option<String> {
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// The first JSON value at the start of s (leading space skipped), its text, and the rest of s.
fn leading_json(s: &str) -> Option<(Value, &str, &str)> {
    let t = s.trim_start();
    let mut it = serde_json::Deserializer::from_str(t).into_iter::<Value>();
    let v = it.next()?.ok()?;
    Some((v, &t[..it.byte_offset()], &t[it.byte_offset()..]))
}

/// The content (None when only calls were written) and the calls in text, per the syntax.
pub fn extract(format: u32, text: &str) -> (Option<String>, Vec<ToolCall>) {
    let mut calls = Vec::new();
    match format {
        tool_format::HERMES => {
            let mut content = String::new();
            let mut rest = text;
            while let Some(at) = rest.find("<tool_call>") {
                content.push_str(&rest[..at]);
                let body = &rest[at + "<tool_call>".len()..];
                let (inner, after) = match body.find("</tool_call>") {
                    Some(e) => (&body[..e], &body[e + "</tool_call>".len()..]),
                    None => (body, ""),
                };
                match serde_json::from_str::<Value>(inner.trim()).ok().and_then(|v| call_of(&v, inner.trim(), "arguments")) {
                    Some(c) => calls.push(c),
                    None => content.push_str(&rest[at..rest.len() - after.len()]),
                }
                rest = after;
            }
            content.push_str(rest);
            (non_empty(&content), calls)
        }
        tool_format::MISTRAL => match text.find("[TOOL_CALLS]") {
            Some(at) => match leading_json(&text[at + "[TOOL_CALLS]".len()..]) {
                Some((Value::Array(a), raw, after)) => {
                    calls.extend(calls_of_array(&a, raw, "arguments"));
                    (non_empty(&format!("{}{}", &text[..at], after)), calls)
                }
                _ => (non_empty(text), calls),
            },
            None => (non_empty(text), calls),
        },
        tool_format::LLAMA3 => {
            let body = text.trim_start().strip_prefix("<|python_tag|>").unwrap_or(text);
            match leading_json(body) {
                Some((v @ Value::Object(_), raw, after)) if v.get("name").is_some() => {
                    calls.extend(call_of(&v, raw, "parameters"));
                    (non_empty(after), calls)
                }
                _ => (non_empty(text), calls),
            }
        }
        _ => match leading_json(text) {
            Some((Value::Object(o), raw, after)) if after.trim().is_empty() => {
                let b = raw.as_bytes();
                let member = |key: &str| -> Option<&str> {
                    json_scan::object_members(b, 0).0.into_iter().find(|m| m.key == key).and_then(|m| match m.value {
                        json_scan::Scan::Done(e) => Some(&raw[m.start..e]),
                        _ => None,
                    })
                };
                if let (Some(c), Some(r)) = (o.get("tool_call"), member("tool_call")) {
                    calls.extend(call_of(c, r, "arguments"));
                } else if let (Some(Value::Array(a)), Some(r)) = (o.get("tool_calls"), member("tool_calls")) {
                    calls.extend(calls_of_array(a, r, "arguments"));
                }
                match (o.get("response"), calls.is_empty()) {
                    (Some(Value::String(r)), true) => (Some(r.clone()), calls),
                    (_, true) => (non_empty(text), calls),
                    (_, false) => (None, calls),
                }
            }
            // an answer cut short (max_tokens) inside its response string: what it said so far
            _ => match generic_response(text) {
                Some((r, false)) => (Some(r), calls),
                _ => (non_empty(text), calls),
            },
        },
    }
}

/// The decoded characters of a JSON string's body (s starts just after its opening quote), as
/// far as they are known: stops at the closing quote (true) or before an escape not yet whole.
fn partial_json_string(s: &str) -> (String, bool) {
    let mut out = String::new();
    let b = s.as_bytes();
    let mut i = 0;
    let hex = |at: usize| -> Option<u32> { s.get(at..at + 4).and_then(|h| u32::from_str_radix(h, 16).ok()) };
    while i < b.len() {
        match b[i] {
            b'"' => return (out, true),
            b'\\' => {
                let Some(&e) = b.get(i + 1) else { break };
                let simple = match e {
                    b'n' => Some('\n'),
                    b't' => Some('\t'),
                    b'r' => Some('\r'),
                    b'b' => Some('\u{8}'),
                    b'f' => Some('\u{c}'),
                    b'/' => Some('/'),
                    b'\\' => Some('\\'),
                    b'"' => Some('"'),
                    _ => None,
                };
                if let Some(c) = simple {
                    out.push(c);
                    i += 2;
                    continue;
                }
                if e != b'u' {
                    break; // not JSON: nothing more is known
                }
                let Some(u) = hex(i + 2) else { break };
                if (0xD800..0xDC00).contains(&u) {
                    // a high surrogate: its pair must be whole too
                    if s.get(i + 6..i + 8) != Some("\\u") {
                        if i + 8 > b.len() {
                            break;
                        }
                        out.push('\u{fffd}');
                        i += 6;
                        continue;
                    }
                    let Some(lo) = hex(i + 8) else { break };
                    let c = 0x10000 + ((u - 0xD800) << 10) + (lo.wrapping_sub(0xDC00) & 0x3ff);
                    out.push(char::from_u32(c).unwrap_or('\u{fffd}'));
                    i += 12;
                } else {
                    out.push(char::from_u32(u).unwrap_or('\u{fffd}'));
                    i += 6;
                }
            }
            _ => {
                let c = s[i..].chars().next().expect("i is on a char boundary");
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    (out, false)
}

/// The generic syntax's answer as it streams: after `{"response": "` (JSON whitespace allowed),
/// the string's characters so far and whether it closed. None while the text could still be that
/// opening, or when it is something else (a call).
fn generic_response(text: &str) -> Option<(String, bool)> {
    let mut rest = text.trim_start_matches([' ', '\t', '\n', '\r']);
    for part in ["{", "\"response\"", ":", "\""] {
        rest = rest.strip_prefix(part)?;
        rest = if part == "\"" { rest } else { rest.trim_start_matches([' ', '\t', '\n', '\r']) };
    }
    Some(partial_json_string(rest))
}

/// Where a call of the answer stands while it is written: its name once whole, where its
/// arguments start and end (end None while they go on).
#[derive(Clone, Debug, PartialEq)]
struct CallSpan {
    name: Option<String>,
    args_start: Option<usize>,
    args_end: Option<usize>,
}

/// The call object at b[i] as far as the text goes.
fn call_at(b: &[u8], i: usize, args_key: &str) -> CallSpan {
    let (members, _) = json_scan::object_members(b, i);
    let name = members.iter().find(|m| m.key == "name").and_then(|m| match m.value {
        json_scan::Scan::Done(e) if b[m.start] == b'"' => std::str::from_utf8(&b[m.start..e]).ok().and_then(|t| serde_json::from_str(t).ok()),
        _ => None,
    });
    let args = members.iter().find(|m| m.key == args_key).or_else(|| members.iter().find(|m| m.key == "arguments"));
    CallSpan {
        name,
        args_start: args.map(|m| m.start),
        args_end: args.and_then(|m| match m.value {
            json_scan::Scan::Done(e) => Some(e),
            _ => None,
        }),
    }
}

/// The calls of an answer as far as it is written, in order, per the syntax.
fn call_spans(format: u32, text: &str) -> Vec<CallSpan> {
    let b = text.as_bytes();
    let objects = |starts: Vec<usize>| starts.into_iter().filter(|&s| b.get(s) == Some(&b'{')).collect::<Vec<_>>();
    let starts: Vec<usize> = match format {
        tool_format::HERMES => objects(text.match_indices("<tool_call>").map(|(at, m)| json_scan::skip_ws(b, at + m.len())).collect()),
        tool_format::MISTRAL => match text.find("[TOOL_CALLS]") {
            Some(at) => objects(json_scan::array_elements(b, json_scan::skip_ws(b, at + "[TOOL_CALLS]".len())).0),
            None => Vec::new(),
        },
        tool_format::LLAMA3 => {
            let t = json_scan::skip_ws(b, 0);
            let t = if text[t..].starts_with("<|python_tag|>") { json_scan::skip_ws(b, t + "<|python_tag|>".len()) } else { t };
            objects(vec![t])
        }
        _ => {
            let (members, _) = json_scan::object_members(b, json_scan::skip_ws(b, 0));
            let mut starts = Vec::new();
            for m in members {
                match m.key.as_str() {
                    "tool_call" => starts.push(m.start),
                    "tool_calls" => starts.extend(json_scan::array_elements(b, m.start).0),
                    _ => {}
                }
            }
            objects(starts)
        }
    };
    let args_key = if format == tool_format::LLAMA3 { "parameters" } else { "arguments" };
    starts.into_iter().map(|s| call_at(b, s, args_key)).collect()
}

/// What a streamed answer with tools sends, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Delta {
    Content(String),
    /// A call begins: its index among the answer's calls, id and name (arguments follow).
    CallStart { index: usize, id: String, name: String },
    /// More of a call's arguments, as the model writes them.
    CallArgs { index: usize, fragment: String },
}

/// An answer with tools as it streams: the text `extract` will call content, sent as soon as it
/// can no longer turn out to be part of a call (text before a call's marker, the generic syntax's
/// response string, and nothing in the Llama 3.x syntax once the answer starts as a JSON object);
/// and, when a grammar holds the calls' syntax (`constrained`), each call as OpenAI streams one:
/// its id and name once the name is whole, then its arguments as they are written. What is sent
/// is always a prefix of what the whole answer carries; `finish` sends the rest.
#[derive(Debug)]
pub struct ContentStream {
    format: u32,
    constrained: bool,
    text: String,
    sent: String,
    /// The calls begun: (id, name, arguments sent).
    calls: Vec<(String, String, String)>,
}

impl ContentStream {
    /// `prefix`: text the prompt already ends with that belongs to the answer.
    pub fn new(format: u32, prefix: &str, constrained: bool) -> ContentStream {
        ContentStream { format, constrained, text: prefix.to_string(), sent: String::new(), calls: Vec::new() }
    }

    /// The content known now (whitespace at either end held back, as extract trims it).
    fn ready(&self) -> String {
        let t = self.text.as_str();
        let before_marker = |marker: &str| -> String {
            let end = match t.find(marker) {
                Some(at) => at,
                // hold back an end that may be the start of the marker
                None => (1..marker.len().min(t.len() + 1)).rev().find(|&k| t.ends_with(&marker[..k])).map_or(t.len(), |k| t.len() - k),
            };
            t[..end].trim().to_string()
        };
        match self.format {
            tool_format::HERMES => before_marker("<tool_call>"),
            tool_format::MISTRAL => before_marker("[TOOL_CALLS]"),
            tool_format::LLAMA3 => match t.trim_start().chars().next() {
                None | Some('{') | Some('<') => String::new(),
                Some(_) => t.trim().to_string(),
            },
            _ => generic_response(t).map_or_else(String::new, |(r, _)| r),
        }
    }

    /// Appends generated text; returns what to send now.
    pub fn push(&mut self, piece: &str) -> Vec<Delta> {
        self.text.push_str(piece);
        let mut out = Vec::new();
        let ready = self.ready();
        if let Some(d) = ready.strip_prefix(self.sent.as_str()).filter(|d| !d.is_empty()) {
            out.push(Delta::Content(d.to_string()));
            self.sent = ready.clone();
        }
        if !self.constrained {
            return out;
        }
        for (index, span) in call_spans(self.format, &self.text).into_iter().enumerate() {
            let (Some(name), Some(start)) = (span.name, span.args_start) else { break };
            match self.text.as_bytes().get(start) {
                None => break,                      // the arguments have not begun
                Some(b'"') => break,                // given as a JSON string: known only whole
                Some(_) => {}
            }
            if index == self.calls.len() {
                let id = call_id();
                out.push(Delta::CallStart { index, id: id.clone(), name: name.clone() });
                self.calls.push((id, name, String::new()));
            }
            let now = &self.text[start..span.args_end.unwrap_or(self.text.len())];
            let sent = &mut self.calls[index].2;
            if let Some(more) = now.strip_prefix(sent.as_str()).filter(|m| !m.is_empty()) {
                out.push(Delta::CallArgs { index, fragment: more.to_string() });
                *sent = now.to_string();
            }
        }
        out
    }

    /// The rest to send at the end (content, calls not begun, the arguments not yet sent) and
    /// whether the answer made calls.
    pub fn finish(&self) -> (Vec<Delta>, bool) {
        let (content, calls) = extract(self.format, &self.text);
        let mut out = Vec::new();
        if let Some(rest) = content.and_then(|c| c.strip_prefix(self.sent.as_str()).map(str::to_string)).filter(|r| !r.is_empty()) {
            out.push(Delta::Content(rest));
        }
        for (index, call) in calls.iter().enumerate() {
            let sent = match self.calls.get(index) {
                Some((_, name, sent)) if *name == call.name => sent.as_str(),
                Some(_) => continue, // cannot happen under a grammar: the stream saw another call here
                None => {
                    out.push(Delta::CallStart { index, id: call.id.clone(), name: call.name.clone() });
                    ""
                }
            };
            if let Some(more) = call.arguments.strip_prefix(sent).filter(|m| !m.is_empty()) {
                out.push(Delta::CallArgs { index, fragment: more.to_string() });
            }
        }
        (out, !calls.is_empty())
    }
}

/// The response's `tool_calls`: each {"id", "type": "function", "function": {"name", "arguments"}}
/// (with "index" in a stream's delta).
pub fn calls_json(calls: &[ToolCall], indexed: bool) -> Value {
    Value::Array(
        calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut v = json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}});
                if indexed {
                    v["index"] = json!(i);
                }
                v
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Value {
        json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
                "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
               {"type": "function", "function": {"name": "add"}}])
    }

    #[test]
    fn parses_the_request_fields() {
        let t = tools();
        assert_eq!(parse(None, None, None).unwrap(), None);
        assert_eq!(parse(Some(&t), Some(&json!("none")), None).unwrap(), None);
        let r = parse(Some(&t), None, None).unwrap().unwrap();
        assert_eq!((r.choice, r.parallel, r.tools.len()), (Choice::Auto, false, 2), "one call unless asked");
        let r = parse(Some(&t), Some(&json!({"type": "function", "function": {"name": "add"}})), Some(&json!(false))).unwrap().unwrap();
        assert_eq!((r.choice, r.parallel), (Choice::Named("add".into()), false));
        let bad = |tl: Value, c: Value, want: &str| {
            let e = parse(Some(&tl), Some(&c), None).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(want), "{e:?}");
        };
        bad(t.clone(), json!("sometimes"), "tool_choice");
        bad(t.clone(), json!({"type": "function", "function": {"name": "nope"}}), "tool_choice");
        bad(t.clone(), json!(3), "tool_choice");
        bad(json!([]), json!("required"), "tool_choice");
        bad(json!([{"type": "code"}]), json!("auto"), "tools[0].type");
        bad(json!([{"type": "function"}]), json!("auto"), "tools[0].function");
        bad(json!([{"type": "function", "function": {"name": "a b"}}]), json!("auto"), "tools[0].function.name");
        bad(json!([{"type": "function", "function": {"name": "a", "parameters": 1}}]), json!("auto"), "tools[0].function.parameters");
        assert_eq!(parse(Some(&t), None, Some(&json!(1))).unwrap_err().param.as_deref(), Some("parallel_tool_calls"));
    }

    #[test]
    fn constraints_per_format() {
        let t = tools();
        let named = parse(Some(&t), Some(&json!({"type": "function", "function": {"name": "get_weather"}})), Some(&json!(false)))
            .unwrap()
            .unwrap();
        let c = constraint(&named, tool_format::HERMES).unwrap();
        assert_eq!((c.prefix.as_str(), c.triggers.len()), ("<tool_call>\n", 0));
        let v: Value = serde_json::from_str(&c.schema).unwrap();
        assert_eq!(v["properties"]["name"], json!({"const": "get_weather"}));
        assert_eq!(v["required"], json!(["name", "arguments"]));
        let c = constraint(&named, tool_format::LLAMA3).unwrap();
        assert!(c.schema.contains("\"parameters\":{\"type\":\"object\""), "{}", c.schema);
        let c = constraint(&named, tool_format::MISTRAL).unwrap();
        assert_eq!((c.prefix.as_str(), serde_json::from_str::<Value>(&c.schema).unwrap()["maxItems"].clone()), ("[TOOL_CALLS]", json!(1)));
        let c = constraint(&named, tool_format::GENERIC).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&c.schema).unwrap()["required"], json!(["tool_call"]));
        let req = parse(Some(&t), Some(&json!("required")), Some(&json!(true))).unwrap().unwrap();
        let c = constraint(&req, tool_format::GENERIC).unwrap();
        let v: Value = serde_json::from_str(&c.schema).unwrap();
        assert_eq!(v["properties"]["tool_calls"]["items"]["anyOf"].as_array().unwrap().len(), 2);
        // auto: a lazy grammar from the marker on (Hermes, Mistral), the whole output in the
        // generic syntax (a call or a response), nothing for Llama 3.x's bare object
        let auto = parse(Some(&t), None, None).unwrap().unwrap();
        let c = constraint(&auto, tool_format::HERMES).unwrap();
        assert_eq!((c.prefix.as_str(), c.triggers.clone()), ("", vec!["<tool_call>".to_string()]));
        assert_eq!(serde_json::from_str::<Value>(&c.schema).unwrap()["anyOf"].as_array().unwrap().len(), 2);
        let c = constraint(&auto, tool_format::MISTRAL).unwrap();
        assert_eq!((c.prefix.as_str(), c.triggers.clone()), ("", vec!["[TOOL_CALLS]".to_string()]));
        assert_eq!(serde_json::from_str::<Value>(&c.schema).unwrap()["type"], json!("array"));
        let c = constraint(&auto, tool_format::GENERIC).unwrap();
        let v: Value = serde_json::from_str(&c.schema).unwrap();
        assert!(c.triggers.is_empty() && c.prefix.is_empty());
        assert_eq!(v["anyOf"][1]["required"], json!(["response"]));
        assert_eq!(v["anyOf"][0]["required"], json!(["tool_call"]));
        assert_eq!(constraint(&auto, tool_format::LLAMA3), None);
    }

    /// Streams `pieces` unconstrained; returns the content sent while streaming, the content
    /// sent at the end, and the calls sent at the end (whole: name and arguments).
    fn stream(format: u32, pieces: &[&str]) -> (Vec<String>, Option<String>, Vec<ToolCall>) {
        let mut s = ContentStream::new(format, "", false);
        let sent: Vec<String> = pieces
            .iter()
            .flat_map(|p| s.push(p))
            .map(|d| match d {
                Delta::Content(c) => c,
                other => panic!("unconstrained streams send calls at the end: {other:?}"),
            })
            .collect();
        let (rest, _) = s.finish();
        let (content, calls) = reassemble(&rest);
        (sent, (!content.is_empty()).then_some(content), calls)
    }

    /// Content and calls from deltas, as the openai SDK reassembles them.
    fn reassemble(deltas: &[Delta]) -> (String, Vec<ToolCall>) {
        let mut content = String::new();
        let mut calls: Vec<ToolCall> = Vec::new();
        for d in deltas {
            match d {
                Delta::Content(c) => content.push_str(c),
                Delta::CallStart { index, id, name } => {
                    assert_eq!(*index, calls.len(), "calls begin in order");
                    calls.push(ToolCall { id: id.clone(), name: name.clone(), arguments: String::new() });
                }
                Delta::CallArgs { index, fragment } => calls[*index].arguments.push_str(fragment),
            }
        }
        (content, calls)
    }

    #[test]
    fn content_streams_before_a_call_and_never_part_of_one() {
        let (sent, rest, calls) = stream(
            tool_format::HERMES,
            &["Let me ", "check.", "\n<tool", "_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"],
        );
        assert_eq!((sent, rest, calls.len()), (vec!["Let me".to_string(), " check.".to_string()], None, 1));
        let (sent, rest, calls) = stream(tool_format::GENERIC, &["{\"resp", "onse\": \"Hel", "lo \\u00e9", "\\n wor", "ld\"}"]);
        assert_eq!((sent.concat(), rest, calls.len()), ("Hello é\n world".to_string(), None, 0));
        assert_eq!(sent[0], "Hel", "streamed as it comes");
        let (sent, rest, calls) = stream(tool_format::GENERIC, &["{\"tool_call\": {\"name\": \"add\",", " \"arguments\": {}}}"]);
        assert_eq!((sent.len(), rest, calls[0].name.as_str()), (0, None, "add"));
        let (sent, _, calls) = stream(tool_format::LLAMA3, &["{\"name\": \"add\", ", "\"parameters\": {\"a\": 1}}"]);
        assert_eq!((sent.len(), calls.len()), (0, 1));
        let (sent, rest, _) = stream(tool_format::LLAMA3, &["Sure, ", "2 plus 3 is 5."]);
        assert_eq!((sent.concat(), rest), ("Sure, 2 plus 3 is 5.".to_string(), None));
        let (sent, _, calls) = stream(tool_format::MISTRAL, &["[TOOL", "_CALLS][{\"name\": \"add\", \"arguments\": {}}]"]);
        assert_eq!((sent.len(), calls.len()), (0, 1));
        // an escape split across pieces waits until whole (a surrogate pair too)
        let (sent, _, _) = stream(tool_format::GENERIC, &["{\"response\": \"a\\", "n\\ud83d", "\\ude00\"}"]);
        assert_eq!(sent, vec!["a".to_string(), "\n".to_string(), "😀".to_string()]);
        // a generic answer cut by max_tokens inside its string: what it said so far
        assert_eq!(extract(tool_format::GENERIC, "{\"response\": \"Hi th").0.as_deref(), Some("Hi th"));
        assert_eq!(partial_json_string("x\\u00"), ("x".to_string(), false));
        assert_eq!(partial_json_string("\\ud800x\""), ("\u{fffd}x".to_string(), true), "a lone surrogate");
    }

    // EVIDENCE: C-SERVE-009
    /// For every way of cutting each answer into three pieces, the streamed content plus the rest
    /// at the end is exactly what the non-streaming response carries.
    #[test]
    fn streamed_content_is_the_response_content_at_every_cut() {
        let answers: [(u32, &str); 7] = [
            (tool_format::HERMES, "  Sure.  <tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call> Done. "),
            (tool_format::HERMES, "No call here, just <tool text."),
            (tool_format::HERMES, "<tool_call>{\"name\": \"a\""),
            (tool_format::MISTRAL, "Hm [TOOL_CALLS] not json"),
            (tool_format::LLAMA3, " Plain answer. "),
            (tool_format::GENERIC, "{ \"response\" : \"q\\\"uo\\\\te\\t\\u00e9\\ud83d\\ude00\" }"),
            (tool_format::GENERIC, "Not JSON at all"),
        ];
        for (format, text) in answers {
            let want = extract(format, text).0;
            let cuts: Vec<usize> = (0..=text.len()).filter(|&i| text.is_char_boundary(i)).collect();
            for &a in &cuts {
                for &b in cuts.iter().filter(|&&b| b >= a) {
                    let (sent, rest, _) = stream(format, &[&text[..a], &text[a..b], &text[b..]]);
                    let got = sent.concat() + rest.as_deref().unwrap_or("");
                    assert_eq!(got, want.clone().unwrap_or_default(), "{text:?} cut at {a}, {b}");
                }
            }
        }
    }

    // EVIDENCE: C-SERVE-009
    /// Under a grammar, calls stream as OpenAI streams them: for every cut of each answer into
    /// three pieces, the deltas reassembled (as the openai SDK does) give the non-streaming
    /// content and calls (names and arguments as written); arguments go out before the answer
    /// ends; calls begin in order, each once.
    #[test]
    fn constrained_calls_stream_as_written_at_every_cut() {
        let answers: [(u32, &str); 6] = [
            (tool_format::GENERIC, "{\"tool_call\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"n\": 12}}}"),
            (tool_format::GENERIC, "{ \"tool_calls\" : [ {\"name\":\"a\",\"arguments\":{\"x\":[1,{\"y\":\"}\"}]}} , {\"name\":\"b\",\"arguments\":{}} ] }"),
            (tool_format::GENERIC, "{\"response\": \"No call: \\\"quoted\\\" text.\"}"),
            (tool_format::HERMES, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}"),
            (tool_format::MISTRAL, "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1}}, {\"name\": \"sub\", \"arguments\": {\"b\": -2.5e3}}]"),
            (tool_format::LLAMA3, "{\"name\": \"add\", \"parameters\": {\"a\": true, \"b\": null}}"),
        ];
        for (format, text) in answers {
            let (want_content, want_calls) = extract(format, text);
            let cuts: Vec<usize> = (0..=text.len()).filter(|&i| text.is_char_boundary(i)).collect();
            for &a in &cuts {
                for &b in cuts.iter().filter(|&&b| b >= a) {
                    let mut s = ContentStream::new(format, "", true);
                    let mut deltas: Vec<Delta> = [&text[..a], &text[a..b], &text[b..]].iter().flat_map(|p| s.push(p)).collect();
                    let streamed_args = deltas.iter().any(|d| matches!(d, Delta::CallArgs { .. }));
                    let (rest, made) = s.finish();
                    deltas.extend(rest);
                    let (content, calls) = reassemble(&deltas);
                    assert_eq!(content, want_content.clone().unwrap_or_default(), "{text:?} cut at {a}, {b}");
                    let names: Vec<(&str, &str)> = calls.iter().map(|c| (c.name.as_str(), c.arguments.as_str())).collect();
                    let want: Vec<(&str, &str)> = want_calls.iter().map(|c| (c.name.as_str(), c.arguments.as_str())).collect();
                    assert_eq!(names, want, "{text:?} cut at {a}, {b}");
                    assert_eq!(made, !want_calls.is_empty());
                    // the whole answer in one piece but the closing bytes: the arguments went out
                    if !want_calls.is_empty() && b == text.len() && a + 4 >= text.len() && a < text.len() {
                        assert!(streamed_args, "{text:?}: nothing of the arguments before the end");
                    }
                }
            }
        }
    }

    #[test]
    fn extracts_calls_per_format() {
        let (c, k) = extract(tool_format::HERMES, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
        assert_eq!(c.as_deref(), Some("Let me check."));
        assert_eq!((k[0].name.as_str(), k[0].arguments.as_str()), ("get_weather", "{\"city\": \"Paris\"}"), "as written");
        assert!(k[0].id.starts_with("call_") && k[0].id.len() == 29);
        let (c, k) = extract(tool_format::HERMES, "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\"");
        assert_eq!((k.len(), c.as_deref()), (1, Some("<tool_call>{\"name\": \"b\"")), "a cut call stays text");
        let (c, k) = extract(tool_format::LLAMA3, "{\"name\": \"add\", \"parameters\": {\"a\": 1}}");
        assert_eq!((c, k[0].arguments.as_str()), (None, "{\"a\": 1}"));
        let (c, k) = extract(tool_format::MISTRAL, "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": \"{}\"}]");
        assert_eq!((c, k.len(), k[1].arguments.as_str()), (None, 2, "{}"));
        let (c, k) = extract(tool_format::GENERIC, "{\"tool_call\": {\"name\": \"add\", \"arguments\": {\"a\": 2}}}");
        assert_eq!((c, k[0].name.as_str(), k[0].arguments.as_str()), (None, "add", "{\"a\": 2}"));
        let (_, k) = extract(tool_format::GENERIC, "{\"tool_calls\": [{\"name\": \"add\", \"arguments\": {\"a\": [1, 2]}}, {\"name\": \"b\"}]}");
        assert_eq!((k.len(), k[0].arguments.as_str(), k[1].arguments.as_str()), (2, "{\"a\": [1, 2]}", "{}"));
        let (c, k) = extract(tool_format::GENERIC, "{\"response\": \"It is sunny.\"}");
        assert_eq!((c.as_deref(), k.len()), (Some("It is sunny."), 0));
        let (c, k) = extract(tool_format::GENERIC, "Just text {\"tool_call\": 1}");
        assert_eq!((c.as_deref(), k.len()), (Some("Just text {\"tool_call\": 1}"), 0));
        let j = calls_json(&k, true);
        assert_eq!(j, json!([]));
    }
}
