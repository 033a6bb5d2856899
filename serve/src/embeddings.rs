//! POST /v1/embeddings: OpenAI's request (input as a string, a list of strings, a list of token
//! ids or a list of such lists; encoding_format float or base64) and response shape. Each input
//! is embedded by the backend (the mean of the model's final states, unit length).

use crate::error::ApiError;
use serde_json::{json, Value};

/// Inputs one request may carry (OpenAI's limit).
pub const MAX_INPUTS: usize = 2048;

/// One input: text to tokenize, or the ids themselves.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    Text(String),
    Tokens(Vec<i32>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddingRequest {
    pub inputs: Vec<Input>,
    /// encoding_format "base64": each embedding as the base64 of its little-endian f32 bytes.
    pub base64: bool,
    /// `dimensions` when given: it must be the model's n_embd (ferrite does not truncate).
    pub dimensions: Option<u64>,
}

fn param(p: &str, code: &str, msg: impl Into<String>) -> ApiError {
    ApiError::param(p, code, msg)
}

fn token_list(v: &[Value], at: &str) -> Result<Vec<i32>, ApiError> {
    v.iter()
        .map(|t| match t.as_i64() {
            Some(i) if (0..=i32::MAX as i64).contains(&i) => Ok(i as i32),
            _ => Err(param(at, "invalid_value", format!("'{at}' must hold token ids (integers of at least 0)."))),
        })
        .collect()
}

pub fn parse(body: &Value) -> Result<EmbeddingRequest, ApiError> {
    let obj = body.as_object().ok_or_else(|| ApiError::invalid("The request body must be a JSON object."))?;
    let input = obj.get("input").filter(|v| !v.is_null()).ok_or_else(|| {
        param("input", "missing_required_parameter", "Missing required parameter: 'input'.")
    })?;
    let empty = || param("input", "invalid_value", "'input' cannot be an empty string or list.");
    let inputs = match input {
        Value::String(s) if s.is_empty() => return Err(empty()),
        Value::String(s) => vec![Input::Text(s.clone())],
        Value::Array(a) if a.is_empty() => return Err(empty()),
        Value::Array(a) if a.iter().all(Value::is_number) => vec![Input::Tokens(token_list(a, "input")?)],
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, x)| match x {
                Value::String(s) if !s.is_empty() => Ok(Input::Text(s.clone())),
                Value::Array(t) if !t.is_empty() => Ok(Input::Tokens(token_list(t, &format!("input[{i}]"))?)),
                _ => Err(param(&format!("input[{i}]"), "invalid_value", "Each input must be a non-empty string or list of token ids.")),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(param("input", "invalid_type", "'input' must be a string, a list of strings or token ids.")),
    };
    if inputs.len() > MAX_INPUTS {
        return Err(param("input", "invalid_value", format!("'input' holds {} items; at most {MAX_INPUTS}.", inputs.len())));
    }
    let base64 = match obj.get("encoding_format").filter(|v| !v.is_null()) {
        None => false,
        Some(Value::String(f)) if f == "float" => false,
        Some(Value::String(f)) if f == "base64" => true,
        Some(_) => return Err(param("encoding_format", "invalid_value", "'encoding_format' must be 'float' or 'base64'.")),
    };
    let dimensions = match obj.get("dimensions").filter(|v| !v.is_null()) {
        None => None,
        Some(v) => Some(v.as_u64().filter(|d| *d > 0).ok_or_else(|| {
            param("dimensions", "invalid_value", "'dimensions' must be a positive integer.")
        })?),
    };
    Ok(EmbeddingRequest { inputs, base64, dimensions })
}

/// Standard base64 (RFC 4648, with padding).
pub fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        out.push(A[(n >> 18) as usize & 63] as char);
        out.push(A[(n >> 12) as usize & 63] as char);
        out.push(if c.len() > 1 { A[(n >> 6) as usize & 63] as char } else { '=' });
        out.push(if c.len() > 2 { A[n as usize & 63] as char } else { '=' });
    }
    out
}

/// The response: one {"object": "embedding", "index", "embedding"} per input, and the usage.
pub fn response(model: &str, embeddings: &[Vec<f32>], base64_format: bool, prompt_tokens: u64) -> Value {
    let data: Vec<Value> = embeddings
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let emb = if base64_format {
                json!(base64(&e.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>()))
            } else {
                json!(e)
            };
            json!({"object": "embedding", "index": i, "embedding": emb})
        })
        .collect();
    json!({"object": "list", "data": data, "model": model,
           "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_and_formats() {
        let p = |v: Value| parse(&v);
        assert_eq!(p(json!({"input": "hi"})).unwrap().inputs, vec![Input::Text("hi".into())]);
        assert_eq!(p(json!({"input": [1, 2]})).unwrap().inputs, vec![Input::Tokens(vec![1, 2])]);
        assert_eq!(p(json!({"input": ["a", [3]]})).unwrap().inputs, vec![Input::Text("a".into()), Input::Tokens(vec![3])]);
        assert!(p(json!({"input": "x", "encoding_format": "base64"})).unwrap().base64);
        let bad = |v: Value, want: &str| assert_eq!(p(v).unwrap_err().param.as_deref(), Some(want));
        bad(json!({}), "input");
        bad(json!({"input": ""}), "input");
        bad(json!({"input": []}), "input");
        bad(json!({"input": [1, -1]}), "input");
        bad(json!({"input": ["a", ""]}), "input[1]");
        bad(json!({"input": [[1], [-2]]}), "input[1]");
        bad(json!({"input": 3}), "input");
        bad(json!({"input": "x", "encoding_format": "hex"}), "encoding_format");
        bad(json!({"input": "x", "dimensions": 0}), "dimensions");
    }

    #[test]
    fn base64_is_rfc4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(&1.0f32.to_le_bytes()), "AACAPw==");
    }
}
