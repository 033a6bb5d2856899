//! The OpenAI endpoints end to end over raw HTTP, against the fake backend (which answers the
//! last user message, or the prompt, byte by byte).
//! EVIDENCE: C-SERVE-003 C-SERVE-008 C-SERVE-009 C-SERVE-010 C-SERVE-011

mod common;

use common::*;
use ferrite_serve::args::Options;
use ferrite_serve::fake::FakeConfig;
use serde_json::{json, Value};

fn chat_body(content: &str) -> Value {
    json!({"model": "any", "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": content}]})
}

fn with(mut v: Value, extra: Value) -> Value {
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// Concatenated chat deltas, and the finish_reason of the stream's last choice.
fn chat_stream_text(events: &[String]) -> (String, Option<String>, Vec<Value>) {
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> =
        events[..events.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap()).collect();
    let mut text = String::new();
    let mut reason = None;
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk", "{c}");
        for ch in c["choices"].as_array().unwrap() {
            text.push_str(ch["delta"]["content"].as_str().unwrap_or(""));
            if let Some(r) = ch["finish_reason"].as_str() {
                reason = Some(r.to_string());
            }
        }
    }
    (text, reason, chunks)
}

#[test]
fn chat_non_streaming() {
    within(60, || {
        let s = start_default();
        let r = post(s.addr, "/v1/chat/completions", &chat_body("Hello, wörld!"));
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("content-type"), Some("application/json"));
        let v = r.json();
        assert_eq!(v["object"], "chat.completion");
        assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
        assert_eq!(v["model"], "ferrite-fake");
        let c = &v["choices"][0];
        assert_eq!(c["message"]["role"], "assistant");
        assert_eq!(c["message"]["content"], "Hello, wörld!");
        assert_eq!(c["finish_reason"], "stop");
        assert_eq!(c["logprobs"], Value::Null);
        // The fake's template: "<|system|>\nsys\n<|user|>\nHello, wörld!\n<|assistant|>\n", in bytes.
        let prompt = "<|system|>\nsys\n<|user|>\nHello, wörld!\n<|assistant|>\n".len() as u64;
        assert_eq!(v["usage"]["prompt_tokens"], prompt);
        assert_eq!(v["usage"]["completion_tokens"], "Hello, wörld!".len() as u64);
        assert_eq!(v["usage"]["total_tokens"], prompt + "Hello, wörld!".len() as u64);
        assert!(v["usage"]["prompt_tokens_details"]["cached_tokens"].is_u64());
    });
}

#[test]
fn chat_streaming_with_usage() {
    within(60, || {
        let s = start_default();
        let body =
            with(chat_body("Grüße 🦀!"), json!({"stream": true, "stream_options": {"include_usage": true}}));
        let r = post(s.addr, "/v1/chat/completions", &body);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("content-type"), Some("text/event-stream"));
        let (text, reason, chunks) = chat_stream_text(&r.events());
        assert_eq!(text, "Grüße 🦀!");
        assert_eq!(reason.as_deref(), Some("stop"));
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
        let ids: Vec<&Value> = chunks.iter().map(|c| &c["id"]).collect();
        assert!(ids.iter().all(|i| *i == ids[0]), "one id per stream");
        let last = chunks.last().unwrap();
        assert_eq!(last["choices"], json!([]));
        assert_eq!(last["usage"]["completion_tokens"], "Grüße 🦀!".len() as u64);
        assert!(chunks[..chunks.len() - 1].iter().all(|c| c["usage"].is_null()));
        // No chunk splits a character: every delta was valid UTF-8 (JSON strings are).
        assert!(chunks.iter().all(|c| c["choices"]
            .as_array()
            .unwrap()
            .iter()
            .all(|ch| ch["delta"]["content"] != "\u{FFFD}")));
    });
}

#[test]
fn completions_non_streaming_and_streaming() {
    within(60, || {
        let s = start_default();
        let r =
            post(s.addr, "/v1/completions", &json!({"model": "x", "prompt": "abc def", "max_tokens": 50}));
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        assert_eq!(v["object"], "text_completion");
        assert_eq!(v["choices"][0]["text"], "abc def");
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        assert_eq!(v["usage"]["prompt_tokens"], 7);
        // Default max_tokens of the legacy endpoint is 16.
        let long = "x".repeat(40);
        let v = post(s.addr, "/v1/completions", &json!({"prompt": [long]})).json();
        assert_eq!(v["choices"][0]["text"], "x".repeat(16));
        assert_eq!(v["choices"][0]["finish_reason"], "length");
        // Token-id prompts.
        let v = post(s.addr, "/v1/completions", &json!({"prompt": [104, 105]})).json();
        assert_eq!(v["choices"][0]["text"], "hi");

        let r = post(s.addr, "/v1/completions", &json!({"prompt": "stream me", "stream": true}));
        let ev = r.events();
        assert_eq!(ev.last().unwrap(), "[DONE]");
        let mut text = String::new();
        let mut reason = None;
        for e in &ev[..ev.len() - 1] {
            let c: Value = serde_json::from_str(e).unwrap();
            assert_eq!(c["object"], "text_completion");
            text.push_str(c["choices"][0]["text"].as_str().unwrap());
            if let Some(f) = c["choices"][0]["finish_reason"].as_str() {
                reason = Some(f.to_string());
            }
        }
        assert_eq!((text.as_str(), reason.as_deref()), ("stream me", Some("stop")));
    });
}

#[test]
fn max_tokens_gives_length() {
    within(60, || {
        let s = start_default();
        let v =
            post(s.addr, "/v1/chat/completions", &with(chat_body("abcdef"), json!({"max_tokens": 3}))).json();
        assert_eq!(v["choices"][0]["message"]["content"], "abc");
        assert_eq!(v["choices"][0]["finish_reason"], "length");
        assert_eq!(v["usage"]["completion_tokens"], 3);
        let v = post(
            s.addr,
            "/v1/chat/completions",
            &with(chat_body("abcdef"), json!({"max_completion_tokens": 2})),
        )
        .json();
        assert_eq!(v["choices"][0]["message"]["content"], "ab");
    });
}

#[test]
fn stop_strings_streaming_and_not() {
    within(60, || {
        let s = start_default();
        // "END" arrives one byte per token; it and everything after are cut.
        let body = with(chat_body("one two END three"), json!({"stop": ["xyz", "END"]}));
        let v = post(s.addr, "/v1/chat/completions", &body).json();
        assert_eq!(v["choices"][0]["message"]["content"], "one two ");
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        assert_eq!(v["usage"]["completion_tokens"], "one two END".len() as u64);
        let r = post(s.addr, "/v1/chat/completions", &with(body, json!({"stream": true})));
        let (text, reason, _) = chat_stream_text(&r.events());
        assert_eq!((text.as_str(), reason.as_deref()), ("one two ", Some("stop")));
        // A multi-byte stop string, and a prefix of it that does not complete.
        let v = post(
            s.addr,
            "/v1/completions",
            &json!({"prompt": "a é b éé c", "stop": "éé", "max_tokens": 100}),
        )
        .json();
        assert_eq!(v["choices"][0]["text"], "a é b ");
        // Held-back text that never becomes a stop string is released at the end.
        let v = post(s.addr, "/v1/completions", &json!({"prompt": "tail EN", "stop": "END"})).json();
        assert_eq!(v["choices"][0]["text"], "tail EN");
    });
}

#[test]
fn logprobs_chat_and_completions() {
    within(60, || {
        let s = start_default();
        let body = with(chat_body("ab"), json!({"logprobs": true, "top_logprobs": 3}));
        let v = post(s.addr, "/v1/chat/completions", &body).json();
        let content = v["choices"][0]["logprobs"]["content"].as_array().unwrap().clone();
        assert_eq!(content.len(), 2);
        for (t, ch) in content.iter().zip(["a", "b"]) {
            assert_eq!(t["token"], ch);
            assert_eq!(t["bytes"], json!([ch.as_bytes()[0]]));
            assert!(t["logprob"].as_f64().unwrap() <= 0.0);
            let top = t["top_logprobs"].as_array().unwrap();
            assert_eq!(top.len(), 3);
            assert!(top.iter().all(|x| x["logprob"].as_f64().unwrap() <= 0.0 && x["token"].is_string()));
        }
        // Streaming carries each token's logprobs in its chunk.
        let r = post(s.addr, "/v1/chat/completions", &with(body, json!({"stream": true})));
        let (_, _, chunks) = chat_stream_text(&r.events());
        let n: usize = chunks
            .iter()
            .map(|c| c["choices"][0]["logprobs"]["content"].as_array().map_or(0, |a| a.len()))
            .sum();
        assert_eq!(n, 2);
        // Completions: logprobs = N alternatives in the legacy shape.
        let v = post(s.addr, "/v1/completions", &json!({"prompt": "xy", "logprobs": 2})).json();
        let lp = &v["choices"][0]["logprobs"];
        assert_eq!(lp["tokens"], json!(["x", "y"]));
        assert_eq!(lp["text_offset"], json!([0, 1]));
        assert_eq!(lp["top_logprobs"][0].as_object().unwrap().len(), 2);
        assert!(lp["token_logprobs"].as_array().unwrap().iter().all(|x| x.as_f64().unwrap() <= 0.0));
    });
}

#[test]
fn response_format_json() {
    within(60, || {
        let s = start_default();
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let body = with(
            chat_body("ignored"),
            json!({"response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": schema, "strict": true}}}),
        );
        let v = post(s.addr, "/v1/chat/completions", &body).json();
        assert_eq!(v["choices"][0]["message"]["content"], "{}", "the fake answers {{}} under a JSON grammar");
        let body = with(chat_body("ignored"), json!({"response_format": {"type": "json_object"}}));
        assert_eq!(
            post(s.addr, "/v1/chat/completions", &body).json()["choices"][0]["message"]["content"],
            "{}"
        );
        let body = with(chat_body("plain"), json!({"response_format": {"type": "text"}}));
        assert_eq!(
            post(s.addr, "/v1/chat/completions", &body).json()["choices"][0]["message"]["content"],
            "plain"
        );
    });
}

#[test]
fn models_health_metrics() {
    within(60, || {
        let s = start_default();
        let v = get(s.addr, "/v1/models").json();
        assert_eq!(v["object"], "list");
        assert_eq!(v["data"][0]["id"], "ferrite-fake");
        assert_eq!(get(s.addr, "/v1/models/ferrite-fake").json()["id"], "ferrite-fake");
        assert_error(&get(s.addr, "/v1/models/gpt-9"), 404);
        assert_eq!(get(s.addr, "/health").json(), json!({"status": "ok"}));
        post(s.addr, "/v1/completions", &json!({"prompt": "abcd"}));
        post(s.addr, "/v1/completions", &json!({"prompt": "abcd", "stream": true}));
        post(s.addr, "/v1/completions", &json!({"prompt": 1}));
        get(s.addr, "/nope");
        let m = metrics(s.addr);
        assert_eq!(m["ferrite_requests_total{endpoint=\"/v1/completions\",status=\"200\"}"], 2.0);
        assert_eq!(m["ferrite_requests_total{endpoint=\"/v1/completions\",status=\"400\"}"], 1.0);
        assert_eq!(m["ferrite_requests_total{endpoint=\"other\",status=\"404\"}"], 1.0);
        assert_eq!(m["ferrite_prompt_tokens_total"], 8.0);
        assert_eq!(m["ferrite_generation_tokens_total"], 8.0);
        assert_eq!(m["ferrite_time_to_first_token_seconds_count"], 2.0);
        assert_eq!(m["ferrite_inter_token_latency_seconds_count"], 6.0);
        assert_eq!(m["ferrite_request_duration_seconds_count"], 2.0);
        assert_eq!(m["ferrite_prefix_cache_hits_total"], 1.0, "the second identical prompt hits");
        assert_eq!(m["ferrite_prefix_cache_hit_rate"], 0.5);
        assert_eq!(m["ferrite_running_sequences"], 0.0);
        assert!(m.contains_key("ferrite_kv_committed_bytes") && m.contains_key("ferrite_queue_depth"));
    });
}

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    within(60, || {
        let s = start(
            FakeConfig::default(),
            Options { timeout: std::time::Duration::from_secs(2), ..Options::default() },
        );
        let mut c = connect(s.addr);
        let mut r = std::io::BufReader::new(c.try_clone().unwrap());
        for i in 0..3 {
            let body = json!({"prompt": format!("req {i}"), "stream": i == 1}).to_string();
            use std::io::Write;
            c.write_all(&raw_request("POST", "/v1/completions", body.as_bytes(), "")).unwrap();
            let resp = read_response(&mut r).unwrap();
            assert_eq!(resp.status, 200, "{}", resp.text());
            // Between requests the idle deadline runs again, but 0.5 s is well inside it.
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    });
}

// C-SERVE-008: llama-server's utility endpoints. /tokenize gives the backend's ids (the fake's are
// bytes) and, with with_pieces, each id's text or bytes; /detokenize inverts it; /apply-template
// renders a chat request's messages without generating; bad bodies are 400s naming the field.
#[test]
fn tokenize_detokenize_apply_template() {
    within(60, || {
        let s = start_default();
        let r = post(s.addr, "/tokenize", &json!({"content": "hé!"}));
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json(), json!({"tokens": [104, 195, 169, 33]}));
        let r = post(s.addr, "/tokenize", &json!({"content": "hé", "with_pieces": true, "add_special": true}));
        assert_eq!(r.json(), json!({"tokens": [{"id": 104, "piece": "h"}, {"id": 195, "piece": [195]}, {"id": 169, "piece": [169]}]}));
        let r = post(s.addr, "/detokenize", &json!({"tokens": [104, 195, 169, 33]}));
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json(), json!({"content": "hé!"}));
        let r = post(s.addr, "/apply-template", &chat_body("Hi"));
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json(), json!({"prompt": "<|system|>\nsys\n<|user|>\nHi\n<|assistant|>\n"}));
        // the errors: each a 400 naming its field; a template's refusal carries its message
        assert_eq!(assert_error(&post(s.addr, "/tokenize", &json!({})), 400)["param"], "content");
        assert_eq!(assert_error(&post(s.addr, "/tokenize", &json!({"content": 3})), 400)["param"], "content");
        assert_eq!(assert_error(&post(s.addr, "/tokenize", &json!({"content": "x", "add_special": 1})), 400)["param"], "add_special");
        assert_eq!(assert_error(&post(s.addr, "/detokenize", &json!({"tokens": [1, -2]})), 400)["param"], "tokens[1]");
        assert_eq!(assert_error(&post(s.addr, "/detokenize", &json!({"tokens": "1"})), 400)["param"], "tokens");
        let e = assert_error(&post(s.addr, "/detokenize", &json!({"tokens": [300]})), 400);
        assert!(e["message"].as_str().unwrap().contains("300"), "{e}");
        assert_eq!(assert_error(&post(s.addr, "/apply-template", &json!({"messages": []})), 400)["param"], "messages");
        let e = assert_error(&post(s.addr, "/apply-template", &json!({"messages": [{"role": "tool", "content": "x"}]})), 400);
        assert_eq!(e["message"], "Tool messages need a tool_call_id (the fake template)");
        assert_eq!(get(s.addr, "/tokenize").status, 405);
    });
}

// C-SERVE-009: tool calling over raw HTTP (the fake backend answers a required call in the generic
// form with the grammar's first function): the call comes back as tool_calls with arguments as
// JSON text, content null and finish_reason tool_calls, streamed as OpenAI streams a call (a
// delta with its index, id, type and name, then its arguments in pieces as they are generated)
// before the finish chunk; the tool's result in the next request renders; tool_choice none leaves
// the tools out.
#[test]
fn tool_calls() {
    within(60, || {
        let s = start_default();
        let tools = json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
        let body = with(chat_body("Weather in Paris?"), json!({"tools": tools, "tool_choice": "required"}));
        let r = post(s.addr, "/v1/chat/completions", &body);
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        let c = &v["choices"][0];
        assert_eq!(c["finish_reason"], "tool_calls", "{v}");
        assert_eq!(c["message"]["content"], Value::Null);
        let call = &c["message"]["tool_calls"][0];
        assert_eq!((call["type"].as_str(), call["function"]["name"].as_str(), call["function"]["arguments"].as_str()),
                   (Some("function"), Some("get_weather"), Some("{}")));
        let id = call["id"].as_str().unwrap().to_string();
        assert!(id.starts_with("call_") && id.len() == 29, "{id}");
        // streamed: the call's start, its arguments in pieces (the fake writes a byte per token),
        // then the finish
        let r = post(s.addr, "/v1/chat/completions", &with(body.clone(), json!({"stream": true})));
        let events = r.events();
        let (text, reason, chunks) = chat_stream_text(&events);
        assert_eq!((text.as_str(), reason.as_deref()), ("", Some("tool_calls")));
        let deltas: Vec<&Value> = chunks.iter().filter_map(|c| c["choices"][0]["delta"].get("tool_calls")).collect();
        assert_eq!(deltas.len(), 3, "{chunks:?}");
        let first = &deltas[0][0];
        assert_eq!((first["index"].as_u64(), first["type"].as_str(), first["function"]["name"].as_str(), first["function"]["arguments"].as_str()),
                   (Some(0), Some("function"), Some("get_weather"), Some("")));
        assert!(first["id"].as_str().unwrap().starts_with("call_"));
        let args: String = deltas[1..].iter().map(|d| {
            assert!(d[0].get("id").is_none() && d[0]["index"] == 0);
            d[0]["function"]["arguments"].as_str().unwrap().to_string()
        }).collect();
        assert_eq!(args, "{}");
        // the tool's result in the next turn; none: plain text
        let turn2 = json!({"messages": [{"role": "user", "content": "Weather in Paris?"},
                                        {"role": "assistant", "content": null, "tool_calls": [call]},
                                        {"role": "tool", "tool_call_id": id, "content": "18C and sunny"}],
                           "tools": tools, "tool_choice": "none"});
        let r = post(s.addr, "/v1/chat/completions", &turn2);
        assert_eq!(r.status, 200, "{}", r.text());
        let c = &r.json()["choices"][0];
        assert_eq!((c["finish_reason"].as_str(), c["message"]["content"].as_str()), (Some("stop"), Some("Weather in Paris?")));
        assert!(c["message"].get("tool_calls").is_none());
        let r = post(s.addr, "/apply-template", &turn2);
        assert!(r.json()["prompt"].as_str().unwrap().contains("<|tool|>\n18C and sunny\n"), "{}", r.text());
        // auto on text that is no call: content, stop
        let r = post(s.addr, "/v1/chat/completions", &with(chat_body("Hi"), json!({"tools": tools})));
        let c = &r.json()["choices"][0];
        assert_eq!((c["finish_reason"].as_str(), c["message"]["content"].as_str()), (Some("stop"), Some("Hi")));
    });
}

// C-SERVE-010 (the raw protocol): n choices carry indexes 0..n, usage counts the prompt once and
// every choice's tokens; streamed, each choice's chunks and finish carry its index, and the usage
// chunk and [DONE] come once. Completions' echo puts the prompt (text or token ids) before the
// text, streamed as the first chunk; with logprobs the prompt tokens' come first (the first one's
// null) and max_tokens 0 scores the prompt without generating.
#[test]
fn n_choices_and_echo() {
    within(60, || {
        let s = start_default();
        let r = post(s.addr, "/v1/chat/completions", &with(chat_body("abc"), json!({"n": 3})));
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        let idx: Vec<u64> = v["choices"].as_array().unwrap().iter().map(|c| c["index"].as_u64().unwrap()).collect();
        assert_eq!(idx, [0, 1, 2]);
        assert!(v["choices"].as_array().unwrap().iter().all(|c| c["message"]["content"] == "abc"));
        let one = post(s.addr, "/v1/chat/completions", &chat_body("abc")).json();
        assert_eq!(v["usage"]["prompt_tokens"], one["usage"]["prompt_tokens"]);
        assert_eq!(v["usage"]["completion_tokens"].as_u64(), one["usage"]["completion_tokens"].as_u64().map(|c| 3 * c));
        let r = post(s.addr, "/v1/chat/completions",
                     &with(chat_body("abc"), json!({"n": 2, "stream": true, "stream_options": {"include_usage": true}})));
        let events = r.events();
        assert_eq!(events.iter().filter(|e| *e == "[DONE]").count(), 1);
        let chunks: Vec<Value> = events[..events.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap()).collect();
        let mut text = [String::new(), String::new()];
        let mut finishes = 0;
        for c in &chunks {
            for ch in c["choices"].as_array().unwrap() {
                let i = ch["index"].as_u64().unwrap() as usize;
                text[i].push_str(ch["delta"]["content"].as_str().unwrap_or(""));
                finishes += ch["finish_reason"].is_string() as usize;
            }
        }
        assert_eq!((text[0].as_str(), text[1].as_str(), finishes), ("abc", "abc", 2));
        let usage: Vec<&Value> = chunks.iter().filter(|c| c["usage"].is_object()).map(|c| &c["usage"]).collect();
        assert_eq!(usage.len(), 1);
        assert_eq!(usage[0]["completion_tokens"].as_u64(), one["usage"]["completion_tokens"].as_u64().map(|c| 2 * c));
        // echo
        let r = post(s.addr, "/v1/completions", &json!({"prompt": "hey", "echo": true, "max_tokens": 5}));
        assert_eq!(r.json()["choices"][0]["text"], "heyhey");
        let r = post(s.addr, "/v1/completions", &json!({"prompt": [104, 105], "echo": true, "max_tokens": 5}));
        assert_eq!(r.json()["choices"][0]["text"], "hihi");
        let r = post(s.addr, "/v1/completions", &json!({"prompt": "yo", "echo": true, "max_tokens": 5, "stream": true}));
        let ev = r.events();
        let first: Value = serde_json::from_str(&ev[0]).unwrap();
        assert_eq!(first["choices"][0]["text"], "yo");
        let all: String = ev[..ev.len() - 1].iter().map(|e| serde_json::from_str::<Value>(e).unwrap()["choices"][0]["text"].as_str().unwrap_or("").to_string()).collect();
        assert_eq!(all, "yoyo");
        // echo with logprobs: the prompt tokens' first (the first token's null), then the
        // generated ones', text offsets counting from the start of the prompt
        let r = post(s.addr, "/v1/completions", &json!({"prompt": "hey", "echo": true, "max_tokens": 3, "logprobs": 2}));
        let lp = &r.json()["choices"][0]["logprobs"];
        assert_eq!(lp["tokens"], json!(["h", "e", "y", "h", "e", "y"]));
        assert_eq!(lp["token_logprobs"][0], Value::Null);
        assert_eq!(lp["top_logprobs"][0], Value::Null);
        assert!((lp["token_logprobs"][1].as_f64().unwrap() - 0.5f64.ln()).abs() < 1e-6);
        assert_eq!(lp["top_logprobs"][1].as_object().unwrap().len(), 2);
        assert_eq!(lp["text_offset"], json!([0, 1, 2, 3, 4, 5]));
        // scoring only: max_tokens 0 with echo, n choices of the prompt, no completion tokens
        let r = post(s.addr, "/v1/completions", &json!({"prompt": "abc", "echo": true, "max_tokens": 0, "logprobs": 1, "n": 2}));
        let v = r.json();
        assert_eq!((v["choices"][1]["text"].as_str(), v["choices"][1]["finish_reason"].as_str()), (Some("abc"), Some("length")));
        assert_eq!(v["choices"][0]["logprobs"]["tokens"], json!(["a", "b", "c"]));
        assert_eq!((v["usage"]["prompt_tokens"].as_u64(), v["usage"]["completion_tokens"].as_u64()), (Some(3), Some(0)));
        let r = post(s.addr, "/v1/completions", &json!({"prompt": "abc", "echo": true, "max_tokens": 0, "stream": true,
                                                        "stream_options": {"include_usage": true}}));
        let ev = r.events();
        assert_eq!(ev.len(), 3, "{ev:?}");
        let first: Value = serde_json::from_str(&ev[0]).unwrap();
        assert_eq!((first["choices"][0]["text"].as_str(), first["choices"][0]["logprobs"].is_null()), (Some("abc"), true));
        assert_eq!(serde_json::from_str::<Value>(&ev[1]).unwrap()["usage"]["prompt_tokens"], 3);
        assert_eq!(ev[2], "[DONE]");
        let r = post(s.addr, "/v1/completions", &json!({"prompt": "abc", "max_tokens": 0}));
        assert_eq!(r.status, 400, "max_tokens 0 needs echo");
    });
}

// C-SERVE-011: POST /v1/embeddings over raw HTTP (the fake's embedding: byte-range counts, unit
// length): a string, a list of strings, token ids and lists of them give one embedding each in
// order, float or base64 (little-endian f32), usage counting the tokens; bad inputs are 400s
// naming the field.
#[test]
fn embeddings() {
    within(60, || {
        let s = start_default();
        let r = post(s.addr, "/v1/embeddings", &json!({"model": "any", "input": ["ab", "xyz"]}));
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        assert_eq!((v["object"].as_str(), v["usage"]["prompt_tokens"].as_u64()), (Some("list"), Some(5)));
        let data = v["data"].as_array().unwrap();
        assert_eq!(data.len(), 2);
        assert_eq!((data[1]["index"].as_u64(), data[1]["object"].as_str()), (Some(1), Some("embedding")));
        let e0: Vec<f64> = data[0]["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!(e0, vec![0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0], "'a' and 'b' are both in 96..128");
        let ids = post(s.addr, "/v1/embeddings", &json!({"input": [97, 98]})).json();
        assert_eq!(ids["data"][0]["embedding"], data[0]["embedding"], "token ids embed as their text");
        let b = post(s.addr, "/v1/embeddings", &json!({"input": [[97, 98]], "encoding_format": "base64"})).json();
        // [0, 0, 0, 1.0, 0, 0, 0, 0] as little-endian f32
        assert_eq!(b["data"][0]["embedding"], "AAAAAAAAAAAAAAAAAACAPwAAAAAAAAAAAAAAAAAAAAA=");
        assert_eq!(assert_error(&post(s.addr, "/v1/embeddings", &json!({"input": ""})), 400)["param"], "input");
        assert_eq!(assert_error(&post(s.addr, "/v1/embeddings", &json!({"input": ["a", 3]})), 400)["param"], "input[1]");
        assert_eq!(assert_error(&post(s.addr, "/v1/embeddings", &json!({"input": "a", "dimensions": 4})), 400)["param"], "dimensions");
        let long = "x".repeat(5000);
        assert_eq!(assert_error(&post(s.addr, "/v1/embeddings", &json!({"input": long})), 400)["code"], "context_length_exceeded");
    });
}
