//! ferrite-serve on the real model (SmolLM2-135M-Instruct Q4_1) with clients no one here wrote:
//! the official `openai` Python package (pinned, installed by scripts/serve/setup-openai.sh, which
//! setup runs) and a load of streaming clients of which a third hang up mid-stream
//! (scripts/serve/load_bench.py, standard library only). The server is the built binary, started
//! on a loopback port and killed at the end. SKIPPED (printed) without the model file or the venv.
//! EVIDENCE: C-SERVE-001 C-SERVE-002 C-SERVE-010 C-SERVE-011 C-CHAT-006 C-CHAT-008

mod common;

use serde_json::Value;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ferrite-serve");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn data_file(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("FERRITE_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/ferrite"));
    let p = dir.join(name);
    p.is_file().then_some(p)
}

fn openai_python() -> Option<PathBuf> {
    let venv = std::env::var_os("FERRITE_OPENAI_VENV").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/ferrite-peers/openai-venv")
    });
    let py = venv.join("bin/python");
    py.is_file().then_some(py)
}

/// The server on the model, killed on drop.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(model: &PathBuf, extra: &[&str]) -> Server {
        let mut cmd = Command::new(BIN);
        if under_asan() {
            // ASan's quarantine keeps freed chunks out of reuse up to 256 MiB, which would read as
            // heap growth in the resident-memory check; without it a freed chunk is reused at once
            let opts = std::env::var("ASAN_OPTIONS").unwrap_or_default();
            cmd.env("ASAN_OPTIONS", format!("{opts}:quarantine_size_mb=0").trim_start_matches(':'));
            // f32 K and V: the unoptimised sanitizer build converts every f16 element in scalar
            // code, which made this run 485 s against 86 s with f32 (2026-12-06); f16 KV's memory
            // safety is the C tests' under the same sanitizers
            cmd.args(["--kv-dtype", "f32"]);
        }
        let mut child = cmd
            .arg("--model")
            .arg(model)
            .args(["--port", "0", "--threads", "2"])
            .env("FERRITE_TEMPLATE_NOW", "2026-01-15") // the date Llama 3's template prints
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let addr = common::listening_addr(&mut child);
        Server { child, addr }
    }

    fn metric(&self, name: &str) -> f64 {
        let text = common::get(self.addr, "/metrics").text();
        let line = text.lines().find(|l| l.split(' ').next() == Some(name)).unwrap_or_else(|| panic!("{name} missing"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether this test runs with AddressSanitizer's runtime preloaded (`make test-sanitize`): the
/// server is then several times slower, and the load is scaled down to fit the same deadlines.
fn under_asan() -> bool {
    std::env::var("LD_PRELOAD").is_ok_and(|p| p.contains("libasan"))
}

/// A python child without the sanitizer runtime the test runner may preload for this process.
fn python(py: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(py);
    c.env_remove("LD_PRELOAD").env_remove("ASAN_OPTIONS").env_remove("UBSAN_OPTIONS");
    c
}

// C-SAMP-016 (DRY and mirostat through the server, the dry_mirostat group); C-SERVE-009 (tools
// auto, streamed and not, through the openai client); C-ENG-022 (echo with logprobs, scoring).
// C-SERVE-001: the openai client's chat and completions, streaming and not, a JSON schema response
// that validates, stop sequences, logprobs and error responses, against the real model; a schema
// the grammar compiler refuses is a 400 naming it.
fn openai_client(model: &PathBuf, py: &PathBuf) {
    let s = Server::start(model, &["--parallel", "4"]);
    let out = python(py)
        .arg(repo().join("serve/tests/openai_client.py"))
        .args(["--base-url", &format!("http://{}/v1", s.addr), "--timeout", "240"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "openai_client.py failed:\n{text}");
    assert!(text.contains("all checks passed"), "{text}");
    // a schema the grammar compiler refuses is the client's error, with the compiler's reason
    let bad = serde_json::json!({"messages": [{"role": "user", "content": "An address?"}], "max_tokens": 8,
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "string", "format": "ipv6"}}}});
    let r = common::post(s.addr, "/v1/chat/completions", &bad);
    assert_eq!(r.status, 400, "{}", r.text());
    let msg = r.json()["error"]["message"].as_str().unwrap_or_default().to_string();
    assert!(msg.contains("response_format") && msg.contains("ipv6"), "{msg}");
}

// C-CHAT-006: a non-ChatML template drives the real model end to end: SmolLM2 served with Llama
// 3.2's template (--chat-template, from the templates setup extracts) renders the conversation with
// Llama 3's headers (/apply-template) and answers the question with Paris; served with Gemma 2's, a
// conversation the template refuses (two user turns in a row) is a 400 carrying the template's
// own message, and a system message (which that template raises on) is merged into the user turn.
fn non_chatml_templates(model: &PathBuf, py: &PathBuf) {
    let (Some(llama), Some(gemma)) = (
        data_file("templates/meta-llama-Llama-3.2-3B-Instruct.jinja"),
        data_file("templates/google-gemma-2-2b-it.jinja"),
    ) else {
        println!("SKIPPED real_model: non-ChatML templates (no templates/ in the data directory: scripts/template/fetch-templates.sh)");
        return;
    };
    let q = serde_json::json!({"messages": [{"role": "system", "content": "You are a helpful assistant."},
                                            {"role": "user", "content": "What is the capital of France?"}],
                               "max_tokens": 40, "temperature": 0});
    let s = Server::start(model, &["--chat-template", llama.to_str().unwrap()]);
    let r = common::post(s.addr, "/apply-template", &q);
    assert_eq!(r.status, 200, "{}", r.text());
    let prompt = r.json()["prompt"].as_str().unwrap_or_default().to_string();
    assert!(prompt.contains("<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023")
            && prompt.ends_with("<|start_header_id|>user<|end_header_id|>\n\nWhat is the capital of France?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"),
            "{prompt}");
    let r = common::post(s.addr, "/v1/chat/completions", &q);
    assert_eq!(r.status, 200, "{}", r.text());
    let answer = r.json()["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_string();
    assert!(answer.contains("Paris"), "SmolLM2 through Llama 3.2's template: {answer:?}");
    drop(s);
    // C-CHAT-008: the Hermes/Qwen tool syntax, through Qwen2.5's template on the same file (its
    // ChatML turns are SmolLM2's): the openai client's tool flow, streamed and not
    if let Some(qwen) = data_file("templates/Qwen-Qwen2.5-7B-Instruct.jinja") {
        let q = Server::start(model, &["--chat-template", qwen.to_str().unwrap()]);
        let out = python(py)
            .arg(repo().join("serve/tests/openai_client.py"))
            .args(["--base-url", &format!("http://{}/v1", q.addr), "--timeout", "240", "--only", "tools"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && text.contains("all checks passed") && text.contains("ok   tools: one call"), "{text}");
    }
    let s = Server::start(model, &["--chat-template", gemma.to_str().unwrap()]);
    let two_users = serde_json::json!({"messages": [{"role": "user", "content": "Hi"}, {"role": "user", "content": "Hi again"}],
                                       "max_tokens": 4});
    let r = common::post(s.addr, "/v1/chat/completions", &two_users);
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["message"], "Conversation roles must alternate user/assistant/user/assistant/...");
    let r = common::post(s.addr, "/apply-template", &q);
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["prompt"].as_str().unwrap_or_default().ends_with(
        "<start_of_turn>user\nYou are a helpful assistant.\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n"), "{}", r.text());
}

// C-SERVE-010: n = 3 prefills the prompt once: on a fresh server the two later choices take every
// whole 16-token block of the prompt from the prefix cache (they wait for the first choice's
// blocks instead of computing them), and usage counts the prompt once.
fn n_choices_prefill_once(model: &PathBuf) {
    let s = Server::start(model, &["--parallel", "4"]);
    let words = "The quick brown fox jumps over the lazy dog near the river bank. ".repeat(8);
    let body = serde_json::json!({"messages": [{"role": "user", "content": format!("{words}Summarise this.")}],
                                  "max_tokens": 8, "temperature": 0.8, "seed": 1, "n": 3});
    let r = common::post(s.addr, "/v1/chat/completions", &body);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["choices"].as_array().map(Vec::len), Some(3), "{v}");
    let prompt = v["usage"]["prompt_tokens"].as_u64().unwrap();
    let blocks = (prompt - 1) / 16 * 16; // the whole blocks a lookup can take (the last token runs)
    assert_eq!(s.metric("ferrite_prefix_cache_misses_total"), 1.0);
    assert_eq!(s.metric("ferrite_prefix_cache_hits_total"), 2.0);
    assert_eq!(s.metric("ferrite_prefix_cache_hit_tokens_total"), 2.0 * blocks as f64, "prompt {prompt}");
    assert!(blocks >= 96, "a prompt of several blocks: {prompt}");
}

// C-SERVE-002: nothing lost, nothing leaked. 16 streaming requests from 8 clients, a third of them
// hanging up mid-stream (under ASan 9 shorter ones, so the slower server meets the same client
// deadlines): every other request completes, then nothing runs or waits, the running
// requests' KV is 0, what the pool still maps is the prefix cache's (the ledger, and the kernel's
// count of the pool's memfd no higher), the anonymous resident memory (RssAnon: heaps, scratch) is
// back within 16 MiB of its level after a warm-up round, and the shared resident memory (RssShmem)
// is no more than the pool holds: what stays resident beyond the heap is the cache's KV.
fn nothing_lost_nothing_leaked(model: &PathBuf) {
    let s = Server::start(model, &["--parallel", "8", "--ctx", "2048"]);
    // a first round warms what a load allocates once (the step's scratch, the allocator's arenas,
    // hyper's buffers); the resident memory after it is the baseline
    // (warm-up requests, requests, longest prompt in words, longest output in tokens)
    let (warm_n, n, words, tokens) = if under_asan() { ("2", "9", "80", "32") } else { ("4", "16", "480", "160") };
    let load = |args: &[&str]| {
        let mut c = python("python3");
        c.arg(repo().join("scripts/serve/load_bench.py"))
            .args(["--url", &format!("http://{}", s.addr), "--workload", "mixed", "--clients", "8", "--timeout", "300"])
            .args(["--max-prompt-words", words, "--max-output-tokens", tokens])
            .args(args)
            .output()
            .unwrap()
    };
    let warm = load(&["--requests", warm_n, "--seed", "5"]);
    assert!(warm.status.success(), "{}", String::from_utf8_lossy(&warm.stdout));
    let anon_before = s.metric("ferrite_process_resident_anon_bytes");
    let out = load(&["--requests", n, "--disconnect", "0.33", "--seed", "3"]);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("load_bench.py: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report["failures"], 0, "{report}");
    let cut = report["disconnected"].as_u64().unwrap();
    assert!(cut >= 2, "the draw should cut about a third of {n}: {report}");
    assert_eq!(report["short_outputs"], 0, "{report}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while s.metric("ferrite_running_sequences") + s.metric("ferrite_queue_depth") > 0.0 {
        assert!(Instant::now() < deadline, "requests still running 30 s after every client finished");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(s.metric("ferrite_client_disconnects_total") >= cut as f64);
    assert_eq!(s.metric("ferrite_kv_live_bytes"), 0.0);
    let committed = s.metric("ferrite_kv_committed_bytes");
    let cached = s.metric("ferrite_prefix_cache_bytes");
    assert!(committed <= cached, "the pool maps {committed} bytes, the cache holds {cached}");
    let os = s.metric("ferrite_kv_os_bytes");
    assert!(os <= committed, "the kernel counts {os} bytes for the pool, the ledger {committed}");
    // the heap is back where it was; the shared pages resident are the pool's, which is the cache's
    let anon_after = s.metric("ferrite_process_resident_anon_bytes");
    let shmem = s.metric("ferrite_process_resident_shmem_bytes");
    assert!(anon_before > 0.0 && anon_after <= anon_before + 16.0 * 1048576.0, "RssAnon {anon_before} -> {anon_after}");
    assert!(shmem <= os, "RssShmem {shmem} above the pool's {os} bytes");
    eprintln!("reliability: {report}; RssAnon {anon_before} -> {anon_after}, RssShmem {shmem}, cache {cached}");
}

#[test]
fn real_clients_on_the_real_model() {
    let Some(model) = data_file("smollm2-135m-instruct-q4_1.gguf") else {
        println!("SKIPPED real_model: smollm2-135m-instruct-q4_1.gguf not found (scripts/fetch-test-data.sh)");
        return;
    };
    let Some(py) = openai_python() else {
        println!("SKIPPED real_model: the openai venv is missing (scripts/serve/setup-openai.sh)");
        return;
    };
    common::within(600, move || {
        // Under the sanitizer only the load: the client's checks are the protocol's (Rust and
        // Python), run in the normal build; the disconnects and leaks are where ASan finds what the
        // normal build cannot (about 40 of the 106 s this test took under ASan)
        if under_asan() {
            println!("SKIPPED real_model: the openai client's checks under the sanitizer (the normal run makes them)");
        } else {
            openai_client(&model, &py);
            non_chatml_templates(&model, &py);
            n_choices_prefill_once(&model);
        }
        nothing_lost_nothing_leaked(&model);
    });
}
