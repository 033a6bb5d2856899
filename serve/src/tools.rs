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
//! lets the model choose and parses what it wrote.

use crate::error::ApiError;
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

/// What a required call adds to the request: text after the prompt (the syntax's opening marker)
/// and the JSON Schema the rest of the output must follow. None for `auto`.
pub fn constraint(r: &ToolRequest, format: u32) -> Option<(String, String)> {
    if r.choice == Choice::Auto {
        return None;
    }
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
            json!({"type": "object", "properties": props, "required": ["name", args_key]})
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
    let (prefix, schema) = match format {
        tool_format::HERMES => ("<tool_call>\n", one),
        tool_format::LLAMA3 => ("", one),
        tool_format::MISTRAL => ("[TOOL_CALLS]", list(one)),
        _ if r.parallel => ("", json!({"type": "object", "properties": {"tool_calls": list(one)}, "required": ["tool_calls"]})),
        _ => ("", json!({"type": "object", "properties": {"tool_call": one}, "required": ["tool_call"]})),
    };
    Some((prefix.to_string(), schema.to_string()))
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

/// A parsed call object: its name and its arguments (under `args_key`, or "arguments") as JSON text.
fn call_of(v: &Value, args_key: &str) -> Option<ToolCall> {
    let name = v.get("name")?.as_str()?.to_string();
    let args = v.get(args_key).or_else(|| v.get("arguments")).cloned().unwrap_or_else(|| json!({}));
    let arguments = match args {
        Value::String(s) => s,
        a => a.to_string(),
    };
    Some(ToolCall { id: call_id(), name, arguments })
}

fn non_empty(s: &str) -> Option<String> {
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// The first JSON value at the start of s (leading space skipped) and the rest of s after it.
fn leading_json(s: &str) -> Option<(Value, &str)> {
    let t = s.trim_start();
    let mut it = serde_json::Deserializer::from_str(t).into_iter::<Value>();
    let v = it.next()?.ok()?;
    Some((v, &t[it.byte_offset()..]))
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
                match serde_json::from_str::<Value>(inner.trim()).ok().and_then(|v| call_of(&v, "arguments")) {
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
                Some((Value::Array(a), after)) => {
                    calls.extend(a.iter().filter_map(|v| call_of(v, "arguments")));
                    (non_empty(&format!("{}{}", &text[..at], after)), calls)
                }
                _ => (non_empty(text), calls),
            },
            None => (non_empty(text), calls),
        },
        tool_format::LLAMA3 => {
            let body = text.trim_start().strip_prefix("<|python_tag|>").unwrap_or(text);
            match leading_json(body) {
                Some((v @ Value::Object(_), after)) if v.get("name").is_some() => {
                    calls.extend(call_of(&v, "parameters"));
                    (non_empty(after), calls)
                }
                _ => (non_empty(text), calls),
            }
        }
        _ => match leading_json(text) {
            Some((Value::Object(o), after)) if after.trim().is_empty() => {
                if let Some(c) = o.get("tool_call") {
                    calls.extend(call_of(c, "arguments"));
                } else if let Some(Value::Array(a)) = o.get("tool_calls") {
                    calls.extend(a.iter().filter_map(|c| call_of(c, "arguments")));
                }
                match (o.get("response"), calls.is_empty()) {
                    (Some(Value::String(r)), true) => (Some(r.clone()), calls),
                    (_, true) => (non_empty(text), calls),
                    (_, false) => (None, calls),
                }
            }
            _ => (non_empty(text), calls),
        },
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
        let (p, s) = constraint(&named, tool_format::HERMES).unwrap();
        assert_eq!(p, "<tool_call>\n");
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["properties"]["name"], json!({"const": "get_weather"}));
        assert_eq!(v["required"], json!(["name", "arguments"]));
        let (_, s) = constraint(&named, tool_format::LLAMA3).unwrap();
        assert!(s.contains("\"parameters\":{\"type\":\"object\""), "{s}");
        let (p, s) = constraint(&named, tool_format::MISTRAL).unwrap();
        assert_eq!((p.as_str(), serde_json::from_str::<Value>(&s).unwrap()["maxItems"].clone()), ("[TOOL_CALLS]", json!(1)));
        let (_, s) = constraint(&named, tool_format::GENERIC).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&s).unwrap()["required"], json!(["tool_call"]));
        let req = parse(Some(&t), Some(&json!("required")), Some(&json!(true))).unwrap().unwrap();
        let (_, s) = constraint(&req, tool_format::GENERIC).unwrap();
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["properties"]["tool_calls"]["items"]["anyOf"].as_array().unwrap().len(), 2);
        let auto = parse(Some(&t), None, None).unwrap().unwrap();
        assert_eq!(constraint(&auto, tool_format::HERMES), None);
    }

    #[test]
    fn extracts_calls_per_format() {
        let (c, k) = extract(tool_format::HERMES, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
        assert_eq!(c.as_deref(), Some("Let me check."));
        assert_eq!((k[0].name.as_str(), k[0].arguments.as_str()), ("get_weather", "{\"city\":\"Paris\"}"));
        assert!(k[0].id.starts_with("call_") && k[0].id.len() == 29);
        let (c, k) = extract(tool_format::HERMES, "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\"");
        assert_eq!((k.len(), c.as_deref()), (1, Some("<tool_call>{\"name\": \"b\"")), "a cut call stays text");
        let (c, k) = extract(tool_format::LLAMA3, "{\"name\": \"add\", \"parameters\": {\"a\": 1}}");
        assert_eq!((c, k[0].arguments.as_str()), (None, "{\"a\":1}"));
        let (c, k) = extract(tool_format::MISTRAL, "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": \"{}\"}]");
        assert_eq!((c, k.len(), k[1].arguments.as_str()), (None, 2, "{}"));
        let (c, k) = extract(tool_format::GENERIC, "{\"tool_call\": {\"name\": \"add\", \"arguments\": {\"a\": 2}}}");
        assert_eq!((c, k[0].name.as_str()), (None, "add"));
        let (c, k) = extract(tool_format::GENERIC, "{\"response\": \"It is sunny.\"}");
        assert_eq!((c.as_deref(), k.len()), (Some("It is sunny."), 0));
        let (c, k) = extract(tool_format::GENERIC, "Just text {\"tool_call\": 1}");
        assert_eq!((c.as_deref(), k.len()), (Some("Just text {\"tool_call\": 1}"), 0));
        let j = calls_json(&k, true);
        assert_eq!(j, json!([]));
    }
}
