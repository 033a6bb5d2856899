//! Server-sent events framing, as OpenAI streams: one `data: <json>` line per event, a blank line
//! after each, and `data: [DONE]` last. serde_json escapes every control character inside strings,
//! so a JSON payload is always one line and a newline in generated text cannot split an event.

use hyper::body::Bytes;
use serde_json::Value;

pub const DONE: &[u8] = b"data: [DONE]\n\n";

pub fn event(v: &Value) -> Bytes {
    let mut b = Vec::with_capacity(128);
    b.extend_from_slice(b"data: ");
    serde_json::to_writer(&mut b, v).expect("a Value always serializes");
    b.extend_from_slice(b"\n\n");
    Bytes::from(b)
}

/// Splits an SSE byte stream into its `data:` payloads (for tests and the proptest client side).
pub fn parse_events(body: &[u8]) -> Result<Vec<String>, String> {
    let text = std::str::from_utf8(body).map_err(|e| e.to_string())?;
    if !text.is_empty() && !text.ends_with("\n\n") {
        return Err("stream does not end with a blank line".into());
    }
    let mut out = Vec::new();
    for block in text.split("\n\n").filter(|b| !b.is_empty()) {
        let mut data = Vec::new();
        for line in block.split('\n') {
            match line.strip_prefix("data: ") {
                Some(d) => data.push(d),
                None if line.starts_with(':') => {}
                None => return Err(format!("unexpected line `{line}`")),
            }
        }
        out.push(data.join("\n"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_line_per_event_even_with_newlines_in_text() {
        let v = json!({"choices": [{"delta": {"content": "a\n\nb\r\nc\u{2028}"}}]});
        let b = event(&v);
        let s = std::str::from_utf8(&b).unwrap();
        assert!(s.starts_with("data: {"));
        assert!(s.ends_with("}\n\n"));
        assert_eq!(s.matches('\n').count(), 2, "{s:?}");
        let mut stream = b.to_vec();
        stream.extend_from_slice(DONE);
        let ev = parse_events(&stream).unwrap();
        assert_eq!(ev.len(), 2);
        assert_eq!(serde_json::from_str::<Value>(&ev[0]).unwrap(), v);
        assert_eq!(ev[1], "[DONE]");
    }

    #[test]
    fn parser_rejects_bad_framing() {
        assert!(parse_events(b"data: 1\n").is_err());
        assert!(parse_events(b"event: x\ndata: 1\n\n").is_err());
        assert_eq!(parse_events(b": keep-alive\n\ndata: 1\n\n").unwrap(), ["", "1"]);
    }
}
