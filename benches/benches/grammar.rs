//! Grammar masking: the original system's id (`grammar_masking/llguidance_compute_mask/32`: a mask
//! over a 32-token vocabulary, original-system.md) as ferrite's `grammar_masking/compute_mask/32`,
//! and the per-step mask over the JSON schema suite on the real vocabularies
//! (`grammar_masking/compute_mask/json_suite/{qwen2.5,llama3}`: every step of every token path of
//! testdata/grammar/json-*.txt, a new matcher per path, each grammar compiled once) beside llguidance
//! 1.9.1 on the same paths in the same run (`grammar_masking/llguidance/json_suite/*`, timed by the
//! peer itself through iter_custom: scripts/grammar/mask_suite_llg.py). Throughput is in masks.
//! A missing vocabulary or peer is reported as SKIPPED.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use ferrite_benches::{data_dir, repo_root as root};
use ferrite_sys as sys;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};



fn ok(st: i32, what: &str) {
    assert_eq!(st, 0, "{what}: status {st}");
}

/// A tokenizer and its grammar vocabulary, freed in order.
struct Vocab {
    tok: *mut sys::fer_tokenizer,
    vocab: *mut sys::fer_grammar_vocab,
    words: usize,
}

impl Vocab {
    fn new(tok: *mut sys::fer_tokenizer, n_vocab: u32, eos: i32) -> Vocab {
        let mut vocab = std::ptr::null_mut();
        // SAFETY: a valid tokenizer and out-pointer.
        ok(unsafe { sys::fer_grammar_vocab_create(tok, n_vocab, eos, &mut vocab) }, "vocabulary");
        let mut info: sys::fer_grammar_vocab_info = unsafe { std::mem::zeroed() };
        // SAFETY: valid vocabulary and out-pointer.
        ok(unsafe { sys::fer_grammar_vocab_get_info(vocab, &mut info) }, "vocabulary info");
        Vocab { tok, vocab, words: info.mask_words as usize }
    }

    fn compile(&self, kind: u32, src: &str) -> *mut sys::fer_grammar {
        let mut g = std::ptr::null_mut();
        // SAFETY: src valid for its length; valid vocabulary and out-pointer.
        ok(unsafe { sys::fer_grammar_compile(self.vocab, kind as i32, src.as_ptr().cast(), src.len(), 0, &mut g) }, src);
        g
    }
}

impl Drop for Vocab {
    fn drop(&mut self) {
        // SAFETY: made in new(); every grammar of it was freed before.
        unsafe {
            sys::fer_grammar_vocab_free(self.vocab);
            sys::fer_tokenizer_free(self.tok);
        }
    }
}

/// The original's fixture size: a WordLevel vocabulary of 32 tokens, and a JSON schema over them.
fn bench_original(c: &mut Criterion) {
    let mut words: Vec<String> = ["{", "}", "\"", ":", ",", "a", "b", "1", "2", "true", "false", "null", " ", "[", "]", "x"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    words.extend((16..31).map(|i| format!("w{i}")));
    words.push("<eos>".to_string());
    let vocab: Vec<String> = words.iter().enumerate().map(|(i, w)| format!("{}: {}", serde_json::to_string(w).unwrap(), i)).collect();
    let json = format!(
        r#"{{"added_tokens": [{{"id": 31, "content": "<eos>", "special": true, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false}}],
            "model": {{"type": "WordLevel", "vocab": {{{}}}, "unk_token": "x"}}}}"#,
        vocab.join(", ")
    );
    let mut tok = std::ptr::null_mut();
    // SAFETY: json valid for its length; tok is a valid out-pointer.
    ok(unsafe { sys::fer_tokenizer_from_json(json.as_ptr().cast(), json.len(), &mut tok) }, "fixture tokenizer");
    let v = Vocab::new(tok, 0, 31);
    let g = v.compile(sys::FER_GRAMMAR_JSON_SCHEMA, r#"{"type":"object","properties":{"a":{"type":"array","items":{"type":"boolean"}}}}"#);
    let mut m = std::ptr::null_mut();
    // SAFETY: valid grammar and out-pointer.
    ok(unsafe { sys::fer_matcher_create(g, &mut m) }, "matcher");
    for t in [0, 2, 5, 2, 3, 13] { // {"a":[  : a mid-value state
        // SAFETY: valid matcher.
        ok(unsafe { sys::fer_matcher_accept(m, t) }, "fixture path");
    }
    let mut mask = vec![0u32; v.words];
    let mut g_ = c.benchmark_group("grammar_masking");
    g_.bench_function("compute_mask/32", |b| {
        // SAFETY: valid matcher; mask holds the vocabulary's words.
        b.iter(|| ok(unsafe { sys::fer_matcher_fill_mask(m, black_box(mask.as_mut_ptr()), mask.len()) }, "mask"))
    });
    g_.finish();
    // SAFETY: made above, freed once, matcher before grammar.
    unsafe {
        sys::fer_matcher_free(m);
        sys::fer_grammar_free(g);
    }
}

/// A golden file's paths: (schema, steps' tokens).
fn golden_paths(path: &Path) -> (String, u32, i32, Vec<(String, Vec<i32>)>) {
    let text = std::fs::read_to_string(path).expect("golden file");
    let mut lines = text.lines();
    let head = lines.next().expect("header");
    let field = |k: &str| head.split(k).nth(1).unwrap().split(|c| c == ';' || c == ' ').find(|s| !s.is_empty()).unwrap().to_string();
    let (name, n_vocab, eos) = (field("tokenizer "), field("vocab ").parse().unwrap(), field("eos ").parse().unwrap());
    let mut paths: Vec<(String, Vec<i32>)> = Vec::new();
    for l in lines {
        if let Some(s) = l.strip_prefix("schema ") {
            paths.push((serde_json::from_str(s).unwrap(), Vec::new()));
        } else if let Some(s) = l.strip_prefix("step ") {
            paths.last_mut().unwrap().1.push(s.split(' ').nth(3).unwrap().parse().unwrap());
        }
    }
    (name, n_vocab, eos, paths)
}

fn peer_seconds(golden: &Path, iters: u64) -> Option<f64> {
    let py = Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cache/ferrite-peers/llguidance-venv/bin/python");
    if !py.is_file() {
        return None;
    }
    let out = Command::new(py)
        .arg(root().join("scripts/grammar/mask_suite_llg.py"))
        .arg(golden)
        .arg(iters.to_string())
        .arg("--seconds")
        .output()
        .ok()?;
    assert!(out.status.success(), "peer failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

fn bench_suite(c: &mut Criterion) {
    let mut g_ = c.benchmark_group("grammar_masking");
    g_.sample_size(10).measurement_time(Duration::from_secs(8)).warm_up_time(Duration::from_secs(2));
    for vocab_name in ["qwen2.5", "llama3"] {
        let golden = root().join(format!("testdata/grammar/json-{vocab_name}.txt"));
        let (tok_name, n_vocab, eos, paths) = golden_paths(&golden);
        let tok_path = data_dir().join(&tok_name);
        if !tok_path.is_file() {
            println!("SKIPPED: grammar_masking/*/json_suite/{vocab_name}: {} is absent (scripts/fetch-test-data.sh)", tok_path.display());
            continue;
        }
        let c_path = std::ffi::CString::new(tok_path.to_str().unwrap()).unwrap();
        let mut tok = std::ptr::null_mut();
        // SAFETY: NUL-terminated path; valid out-pointer.
        ok(unsafe { sys::fer_tokenizer_from_json_file(c_path.as_ptr(), &mut tok) }, "tokenizer");
        let v = Vocab::new(tok, n_vocab, eos);
        let grammars: Vec<*mut sys::fer_grammar> = paths.iter().map(|(s, _)| v.compile(sys::FER_GRAMMAR_JSON_SCHEMA, s)).collect();
        let masks: u64 = paths.iter().map(|(_, t)| t.len() as u64).sum();
        g_.throughput(Throughput::Elements(masks));
        let mut mask = vec![0u32; v.words];
        g_.bench_function(format!("compute_mask/json_suite/{vocab_name}"), |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    for (g, (_, steps)) in grammars.iter().zip(&paths) {
                        let mut m = std::ptr::null_mut();
                        // SAFETY: valid grammar and out-pointer; the matcher is freed below.
                        ok(unsafe { sys::fer_matcher_create(*g, &mut m) }, "matcher");
                        for &t in steps {
                            let t0 = Instant::now();
                            // SAFETY: valid matcher; mask holds the vocabulary's words.
                            ok(unsafe { sys::fer_matcher_fill_mask(m, mask.as_mut_ptr(), mask.len()) }, "mask");
                            spent += t0.elapsed();
                            // SAFETY: valid matcher; the golden path's tokens are allowed (C-GRM-004).
                            if t >= 0 && unsafe { sys::fer_matcher_accept(m, t) } != 0 {
                                break;
                            }
                        }
                        // SAFETY: made above.
                        unsafe { sys::fer_matcher_free(m) };
                    }
                }
                spent
            })
        });
        if peer_seconds(&golden, 1).is_none() {
            println!("SKIPPED: grammar_masking/llguidance/json_suite/{vocab_name}: the peer is not installed (scripts/grammar/setup-llguidance.sh)");
        } else {
            g_.bench_function(format!("llguidance/json_suite/{vocab_name}"), |b| {
                b.iter_custom(|iters| Duration::from_secs_f64(peer_seconds(&golden, iters).expect("peer")))
            });
        }
        for g in grammars {
            // SAFETY: compiled above; no matcher of it is alive.
            unsafe { sys::fer_grammar_free(g) };
        }
    }
    g_.finish();
}

criterion_group!(benches, bench_original, bench_suite);
criterion_main!(benches);
