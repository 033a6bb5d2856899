//! Errors, limits and misbehaving clients, over raw HTTP: every class of bad request gets its
//! status and an OpenAI error body; oversized and slow requests are cut off; a client that leaves
//! mid-stream frees its sequence; a full queue answers 503 with Retry-After.
//! EVIDENCE: C-SERVE-004

mod common;

use common::*;
use ferrite_serve::args::Options;
use ferrite_serve::fake::FakeConfig;
use serde_json::json;
use std::io::{BufReader, Read, Write};
use std::time::{Duration, Instant};

fn chat() -> serde_json::Value {
    json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
}

#[test]
fn not_found_and_method_not_allowed() {
    within(60, || {
        let s = start_default();
        let e = assert_error(&post(s.addr, "/v1/audio/speech", &json!({})), 404);
        assert!(e["message"].as_str().unwrap().contains("/v1/audio/speech"));
        assert_error(&get(s.addr, "/"), 404);
        let r = get(s.addr, "/v1/chat/completions");
        assert_error(&r, 405);
        assert_eq!(r.header("allow"), Some("POST"));
        let r = request(s.addr, "DELETE", "/v1/models", b"");
        assert_error(&r, 405);
        assert_eq!(r.header("allow"), Some("GET"));
        assert_error(&post(s.addr, "/health", &json!({})), 405);
    });
}

#[test]
fn bad_requests_are_400_with_openai_bodies() {
    within(60, || {
        let s = start(FakeConfig { n_ctx: 64, ..FakeConfig::default() }, Options::default());
        let path = "/v1/chat/completions";
        let raw = |b: &[u8]| request(s.addr, "POST", path, b);
        // Malformed JSON, not an object, invalid UTF-8, empty body.
        for b in [&b"{\"messages\": ["[..], b"[]", b"{\"messages\": \"\xc3\x28\"}", b""] {
            assert_error(&raw(b), 400);
        }
        let with = |extra: serde_json::Value| {
            let mut b = chat();
            for (k, v) in extra.as_object().unwrap() {
                b[k] = v.clone();
            }
            post(s.addr, path, &b)
        };
        // Wrong types, invalid values, unsupported features: each names its field.
        for (extra, param) in [
            (json!({"temperature": "hot"}), "temperature"),
            (json!({"messages": "hi"}), "messages"),
            (json!({"n": 9}), "n"),
            (json!({"max_tokens": 0}), "max_tokens"),
            (json!({"max_tokens": 65}), "max_tokens"),
            (json!({"stop": ["a", "b", "c", "d", "e"]}), "stop"),
            (json!({"top_logprobs": 25, "logprobs": true}), "top_logprobs"),
            (json!({"stream_options": {"include_usage": true}}), "stream_options"),
            (json!({"response_format": {"type": "yaml"}}), "response_format.type"),
            (json!({"tools": [{"type": "function", "function": {"name": "f g"}}]}), "tools[0].function.name"),
            (json!({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "maybe"}), "tool_choice"),
        ] {
            let e = assert_error(&with(extra.clone()), 400);
            assert_eq!(e["param"], param, "{extra}");
            assert_eq!(e["type"], "invalid_request_error");
        }
        // Unknown top-level fields are ignored, as the official API does.
        assert_eq!(with(json!({"some_new_field": [1, 2], "metadata": {"k": "v"}})).status, 200);
        // A prompt longer than the context: 400 context_length_exceeded.
        let long = json!({"messages": [{"role": "user", "content": "x".repeat(100)}]});
        let e = assert_error(&post(s.addr, path, &long), 400);
        assert_eq!(e["code"], "context_length_exceeded");
        // Prompt + max_tokens above the context.
        let e = assert_error(
            &post(s.addr, "/v1/completions", &json!({"prompt": "x".repeat(40), "max_tokens": 30})),
            400,
        );
        assert_eq!(e["code"], "context_length_exceeded");
        // A conversation the template refuses (the backend's render error) is a 400 with its message.
        let e = assert_error(&with(json!({"messages": [{"role": "tool", "content": "x"}]})), 400);
        assert_eq!(e["message"], "Tool messages need a tool_call_id (the fake template)");
        let e = assert_error(&with(json!({"messages": [{"role": "wizard", "content": "x"}]})), 400);
        assert_eq!(e["param"], "messages[0].role");
    });
}

#[test]
fn body_over_the_limit_is_413() {
    within(60, || {
        let limit = 64 * 1024;
        let s = start(FakeConfig::default(), Options { body_limit: limit, ..Options::default() });
        // A declared 100 MB body is refused from its headers, before any of it is sent.
        let mut c = connect(s.addr);
        c.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 104857600\r\n\r\n")
            .unwrap();
        let t0 = Instant::now();
        let r = read_response(&mut BufReader::new(c)).unwrap();
        let e = assert_error(&r, 413);
        assert_eq!(e["code"], "request_too_large");
        assert!(t0.elapsed() < Duration::from_secs(10));
        // A real oversized body (declared honestly), sent while we read the answer.
        let big = vec![b'x'; (limit * 4) as usize];
        let mut c = connect(s.addr);
        let mut w = c.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = w.write_all(&raw_request("POST", "/v1/completions", &big, ""));
        });
        let r = read_response(&mut BufReader::new(&mut c)).unwrap();
        assert_error(&r, 413);
        drop(c);
        writer.join().unwrap();
        // A chunked body with no Content-Length is counted as it arrives.
        let mut c = connect(s.addr);
        let mut w = c.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = w
                .write_all(b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
            let chunk = vec![b'y'; 8192];
            for _ in 0..32 {
                let mut m = format!("{:x}\r\n", chunk.len()).into_bytes();
                m.extend_from_slice(&chunk);
                m.extend_from_slice(b"\r\n");
                if w.write_all(&m).is_err() {
                    break;
                }
            }
        });
        let r = read_response(&mut BufReader::new(&mut c)).unwrap();
        assert_error(&r, 413);
        assert_eq!(r.header("connection"), Some("close"));
        drop(c);
        writer.join().unwrap();
        // The server is still fine.
        assert_eq!(get(s.addr, "/health").status, 200);
    });
}

/// Sends `prefix` then one byte of `rest` per second, and returns (what came back, when).
fn dribble(addr: std::net::SocketAddr, prefix: &[u8], rest: &[u8]) -> (Vec<u8>, Duration) {
    let mut c = connect(addr);
    c.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let t0 = Instant::now();
    c.write_all(prefix).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    for &b in rest {
        let next = Instant::now() + Duration::from_secs(1);
        while Instant::now() < next {
            match c.read(&mut buf) {
                Ok(0) => return (got, t0.elapsed()),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => return (got, t0.elapsed()),
            }
        }
        if c.write_all(&[b]).is_err() {
            break;
        }
    }
    (got, t0.elapsed())
}

#[test]
fn slow_body_is_dropped_after_the_timeout() {
    within(60, || {
        let s =
            start(FakeConfig::default(), Options { timeout: Duration::from_secs(2), ..Options::default() });
        let body = chat().to_string();
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let (got, took) = dribble(s.addr, head.as_bytes(), body.as_bytes());
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        assert!(took >= Duration::from_millis(1500) && took < Duration::from_secs(12), "{took:?}");
    });
}

#[test]
fn slow_headers_are_dropped_after_the_timeout() {
    within(60, || {
        let s =
            start(FakeConfig::default(), Options { timeout: Duration::from_secs(2), ..Options::default() });
        let head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
        let (got, took) = dribble(s.addr, b"P", &head[1..]);
        assert!(got.is_empty() || String::from_utf8_lossy(&got).starts_with("HTTP/1.1 4"), "{got:?}");
        assert!(took >= Duration::from_millis(1500) && took < Duration::from_secs(12), "{took:?}");
        // A connection that sends nothing at all is closed too.
        let (_, took) = dribble(s.addr, b"", &[b' '; 30][..]);
        assert!(took < Duration::from_secs(12), "{took:?}");
    });
}

#[test]
fn client_disconnect_mid_stream_cancels_the_sequence() {
    within(60, || {
        let cfg = FakeConfig { step_delay: Duration::from_millis(20), ..FakeConfig::default() };
        let s = start(cfg, Options::default());
        let body =
            json!({"prompt": "loop", "stream": true, "ignore_eos": true, "max_tokens": 3000}).to_string();
        let mut c = connect(s.addr);
        c.write_all(&raw_request("POST", "/v1/completions", body.as_bytes(), "")).unwrap();
        let mut r = BufReader::new(c.try_clone().unwrap());
        let (status, _) = read_head(&mut r).unwrap();
        assert_eq!(status, 200);
        let first = read_chunk(&mut r).unwrap().unwrap();
        assert!(first.starts_with(b"data: "));
        assert_eq!(s.stats.get(&s.stats.cancelled), 0);
        drop(r);
        c.shutdown(std::net::Shutdown::Both).unwrap();
        drop(c);
        eventually(20, "the fake backend saw the cancel", || s.stats.get(&s.stats.cancelled) == 1);
        eventually(20, "metrics show the disconnect and no running sequence", || {
            let m = metrics(s.addr);
            m["ferrite_client_disconnects_total"] == 1.0 && m["ferrite_running_sequences"] == 0.0
        });
        // Far fewer than 3000 tokens were made.
        assert!(s.stats.get(&s.stats.steps) < 1000);
    });
}

#[test]
fn client_disconnect_before_a_non_streaming_answer_cancels_too() {
    within(60, || {
        let cfg = FakeConfig { step_delay: Duration::from_millis(20), ..FakeConfig::default() };
        let s = start(cfg, Options::default());
        let body = json!({"prompt": "loop", "ignore_eos": true, "max_tokens": 3000}).to_string();
        let mut c = connect(s.addr);
        c.write_all(&raw_request("POST", "/v1/completions", body.as_bytes(), "")).unwrap();
        eventually(20, "generation started", || s.stats.get(&s.stats.steps) > 2);
        c.shutdown(std::net::Shutdown::Both).unwrap();
        drop(c);
        eventually(20, "the fake backend saw the cancel", || s.stats.get(&s.stats.cancelled) == 1);
    });
}

#[test]
fn queue_full_is_503_with_retry_after() {
    within(60, || {
        let cfg = FakeConfig {
            max_running: 1,
            max_queued: 0,
            step_delay: Duration::from_millis(20),
            ..FakeConfig::default()
        };
        let s = start(cfg, Options::default());
        let body =
            json!({"prompt": "busy", "stream": true, "ignore_eos": true, "max_tokens": 3000}).to_string();
        let mut c = connect(s.addr);
        c.write_all(&raw_request("POST", "/v1/completions", body.as_bytes(), "")).unwrap();
        let mut r = BufReader::new(c.try_clone().unwrap());
        assert_eq!(read_head(&mut r).unwrap().0, 200);
        read_chunk(&mut r).unwrap();
        let busy = post(s.addr, "/v1/chat/completions", &chat());
        let e = assert_error(&busy, 503);
        assert_eq!(e["code"], "queue_full");
        let ra: u32 = busy.header("retry-after").expect("Retry-After").parse().unwrap();
        assert!(ra >= 1);
        drop(r);
        drop(c);
        // Once the first client left, its slot frees and requests run again.
        eventually(20, "slot freed", || post(s.addr, "/v1/chat/completions", &chat()).status == 200);
    });
}
