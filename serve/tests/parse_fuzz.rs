//! Property: the request parser never panics, and answers every body (valid ones, ones with
//! fields replaced by arbitrary JSON or removed, byte-mutated ones, random bytes) with either a
//! request that respects every documented bound or a 4xx error.
//! EVIDENCE: C-SERVE-005

use ferrite_serve::openai::{parse_request, Endpoint, Logprobs, ParsedRequest};
use proptest::prelude::*;
use serde_json::{json, Value};

const CTX: u32 = 4096;

fn bases() -> Vec<(Endpoint, Value)> {
    vec![
        (Endpoint::Chat, json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})),
        (
            Endpoint::Chat,
            json!({"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "a"}]}],
            "max_tokens": 5, "temperature": 0.7, "top_p": 0.9, "stop": ["x"], "stream": true,
            "stream_options": {"include_usage": true}, "logprobs": true, "top_logprobs": 2, "seed": 3}),
        ),
        (
            Endpoint::Chat,
            json!({"messages": [{"role": "user", "content": "j"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}, "strict": true}}}),
        ),
        (
            Endpoint::Completions,
            json!({"model": "m", "prompt": "once upon", "max_tokens": 7, "logprobs": 2, "stop": "\n"}),
        ),
        (
            Endpoint::Completions,
            json!({"prompt": [1, 2, 3], "stream": true, "n": 1, "echo": false, "top_k": 5, "min_p": 0.1}),
        ),
    ]
}

const FIELDS: &[&str] = &[
    "model",
    "messages",
    "prompt",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "stop",
    "n",
    "best_of",
    "logprobs",
    "top_logprobs",
    "stream",
    "stream_options",
    "response_format",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "logit_bias",
    "tools",
    "functions",
    "tool_choice",
    "echo",
    "suffix",
    "user",
    "ignore_eos",
    "stop_token_ids",
    "guided_json",
    "guided_regex",
    "unknown_field",
    "/messages/0",
    "/messages/0/role",
    "/messages/0/content",
    "/messages/0/content/0",
    "/messages/0/content/0/text",
    "/messages/0/content/0/type",
    "/response_format/type",
    "/response_format/json_schema",
    "/response_format/json_schema/name",
    "/response_format/json_schema/schema",
    "/stream_options/include_usage",
    "/prompt/0",
    "/stop/0",
];

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e300f64..1e300).prop_map(Value::from),
        prop::sample::select(vec![-2i64, -1, 0, 1, 2, 4, 5, 6, 16, 20, 21, 4095, 4096, 4097])
            .prop_map(Value::from),
        prop::sample::select(vec![0.0f64, 0.5, 1.0, 1.5, 2.0, 2.5, -0.1, 3.0]).prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::from),
        prop::sample::select(vec![
            "text",
            "json_object",
            "json_schema",
            "user",
            "system",
            "assistant",
            "tool",
            "developer",
            "none",
            "auto",
            "image_url"
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop::sample::select(vec![
                        "type",
                        "text",
                        "role",
                        "content",
                        "name",
                        "schema",
                        "include_usage",
                        "x"
                    ]),
                    inner
                ),
                0..4
            )
            .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

/// Sets (Some) or removes (None) a top-level field or a /json/pointer inside the body.
fn apply(body: &mut Value, field: &str, v: Option<Value>) {
    let (parent, key) = match field.strip_prefix('/') {
        None => ("".to_string(), field.to_string()),
        Some(p) => match p.rsplit_once('/') {
            Some((a, b)) => (format!("/{a}"), b.to_string()),
            None => ("".to_string(), p.to_string()),
        },
    };
    match body.pointer_mut(&parent) {
        Some(Value::Object(m)) => {
            match v {
                Some(v) => m.insert(key, v),
                None => m.remove(&key),
            };
        }
        Some(Value::Array(a)) => {
            if let Ok(i) = key.parse::<usize>() {
                if i < a.len() {
                    match v {
                        Some(v) => a[i] = v,
                        None => {
                            a.remove(i);
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

fn check(endpoint: Endpoint, body: &[u8]) -> Result<(), TestCaseError> {
    match parse_request(endpoint, body, CTX) {
        Err(e) => {
            prop_assert!(
                (400..500).contains(&e.status),
                "status {} for {:?}",
                e.status,
                String::from_utf8_lossy(body)
            );
            prop_assert!(!e.message.is_empty());
        }
        Ok(ParsedRequest { job, stop, logprobs, stream, include_usage, .. }) => {
            if let Some(m) = job.max_tokens {
                prop_assert!((1..=CTX).contains(&m));
            }
            let p = &job.params;
            prop_assert!((0.0..=2.0).contains(&p.temperature));
            prop_assert!((0.0..=1.0).contains(&p.top_p) && (0.0..=1.0).contains(&p.min_p));
            prop_assert!(p.top_k >= 0);
            prop_assert!(stop.len() <= 4);
            prop_assert!(include_usage <= stream);
            match logprobs {
                Logprobs::None => prop_assert_eq!(p.top_logprobs, 0),
                Logprobs::Chat(n) => prop_assert!(n <= 20 && endpoint == Endpoint::Chat),
                Logprobs::Completions(n) => prop_assert!(n <= 5 && endpoint == Endpoint::Completions),
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn field_mutations(base in 0..5usize,
                       ops in prop::collection::vec((prop::sample::select(FIELDS), prop::option::weighted(0.8, arb_json())), 0..5)) {
        let (endpoint, mut body) = bases()[base].clone();
        for (f, v) in ops {
            apply(&mut body, f, v);
        }
        check(endpoint, body.to_string().as_bytes())?;
    }

    #[test]
    fn byte_mutations(base in 0..5usize,
                      ops in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..6)) {
        let (endpoint, body) = bases()[base].clone();
        let mut b = body.to_string().into_bytes();
        for (at, byte, kind) in ops {
            let i = at.index(b.len() + 1);
            match kind {
                0 if i < b.len() => b[i] = byte,
                1 => b.insert(i, byte),
                _ if i < b.len() => { b.remove(i); }
                _ => {}
            }
        }
        check(endpoint, &b)?;
        let other = if endpoint == Endpoint::Chat { Endpoint::Completions } else { Endpoint::Chat };
        check(other, &b)?;
    }

    #[test]
    fn random_bytes(b in prop::collection::vec(any::<u8>(), 0..256)) {
        check(Endpoint::Chat, &b)?;
        check(Endpoint::Completions, &b)?;
    }
}

/// The mutations do reach the accepting side too (a fuzzer that only ever sees errors would
/// prove little): some mutated bodies still parse.
#[test]
fn mutated_bodies_are_sometimes_accepted() {
    let mut accepted = 0;
    for (i, (endpoint, mut body)) in bases().into_iter().enumerate() {
        apply(&mut body, "temperature", Some(json!(0.25 * i as f64)));
        apply(&mut body, "unknown_field", Some(json!({"any": [1, null]})));
        accepted += parse_request(endpoint, body.to_string().as_bytes(), CTX).is_ok() as usize;
    }
    assert_eq!(accepted, 5);
}
