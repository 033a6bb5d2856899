//! Tokenizer benchmarks: the original system's ids and fixture (`tokenization/*`, a WordLevel
//! vocabulary of 32 tokens with a Whitespace pre-tokenizer; original-system.md A.2), and
//! throughput on the real vocabularies over the committed corpus (testdata/tokenizer/corpus.txt),
//! side by side in the same run with Hugging Face tokenizers on one thread (benches/peers/
//! hf_tokenizers.py, timed by the peer itself through iter_custom, so both sides count only the
//! encode/decode passes). Throughput is in corpus bytes. Real vocabularies that the setup script
//! has not fetched, and a missing peer, are reported as SKIPPED.
//! EVIDENCE: C-TOK-011, C-TOK-012

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use ferrite_benches::{data_dir, repo_root as root};
use ferrite_sys as sys;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

struct Tok(*mut sys::fer_tokenizer);

impl Drop for Tok {
    fn drop(&mut self) {
        // SAFETY: created by a loader below, freed once, no detokenizers alive.
        unsafe { sys::fer_tokenizer_free(self.0) };
    }
}

fn load(path: &Path) -> Tok {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let mut t = std::ptr::null_mut();
    // SAFETY: c is NUL-terminated; t is a valid out-pointer.
    let st = unsafe {
        if path.extension().map_or(false, |e| e == "gguf") {
            sys::fer_tokenizer_from_gguf_file(c.as_ptr(), &mut t)
        } else {
            sys::fer_tokenizer_from_json_file(c.as_ptr(), &mut t)
        }
    };
    assert_eq!(st, 0, "loading {}", path.display());
    Tok(t)
}

fn encode(t: &Tok, text: &[u8], ids: &mut Vec<i32>) {
    let mut n = 0usize;
    ids.resize(text.len() + 16, 0);
    // SAFETY: buffers valid for their lengths; a byte-level BPE gives at most one id per byte.
    let st = unsafe { sys::fer_tokenizer_encode(t.0, text.as_ptr() as *const _, text.len(), 0, ids.as_mut_ptr(), ids.len(), &mut n) };
    assert_eq!(st, 0);
    ids.truncate(n);
}

fn decode(t: &Tok, ids: &[i32], out: &mut Vec<u8>) -> usize {
    let mut len = 0usize;
    // SAFETY: buffers valid for their lengths.
    let st = unsafe { sys::fer_tokenizer_decode(t.0, ids.as_ptr(), ids.len(), 0, out.as_mut_ptr() as *mut _, out.len(), &mut len) };
    assert_eq!(st, 0);
    len
}



/// The original's fixture: WordLevel, Whitespace, TemplateProcessing <bos> $A <eos>, 32 tokens.
fn fixture_json() -> String {
    let mut words: Vec<String> = ["<pad>", "<unk>", "<bos>", "<eos>", "hello", "world", "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", ".", ","]
        .iter()
        .map(|s| s.to_string())
        .collect();
    words.extend((16..32).map(|i| format!("tok{}", i)));
    let vocab: Vec<String> = words.iter().enumerate().map(|(i, w)| format!("{:?}: {}", w, i)).collect();
    format!(
        r#"{{"added_tokens": [
            {{"id": 0, "content": "<pad>", "special": true, "normalized": false}},
            {{"id": 1, "content": "<unk>", "special": true, "normalized": false}},
            {{"id": 2, "content": "<bos>", "special": true, "normalized": false}},
            {{"id": 3, "content": "<eos>", "special": true, "normalized": false}}],
          "normalizer": null, "pre_tokenizer": {{"type": "Whitespace"}}, "decoder": null,
          "post_processor": {{"type": "TemplateProcessing",
            "single": [{{"SpecialToken": {{"id": "<bos>", "type_id": 0}}}}, {{"Sequence": {{"id": "A", "type_id": 0}}}}, {{"SpecialToken": {{"id": "<eos>", "type_id": 0}}}}],
            "special_tokens": {{"<bos>": {{"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}}, "<eos>": {{"id": "<eos>", "ids": [3], "tokens": ["<eos>"]}}}}}},
          "model": {{"type": "WordLevel", "unk_token": "<unk>", "vocab": {{{}}}}}}}"#,
        vocab.join(", ")
    )
}

fn bench_original(c: &mut Criterion) {
    let json = fixture_json();
    let mut t = std::ptr::null_mut();
    // SAFETY: json valid for its length; t is a valid out-pointer.
    assert_eq!(unsafe { sys::fer_tokenizer_from_json(json.as_ptr() as *const _, json.len(), &mut t) }, 0);
    let tok = Tok(t);
    let text = "the quick brown fox jumps over the lazy dog. ".repeat(128);
    let mut ids = Vec::new();
    encode(&tok, text.as_bytes(), &mut ids);
    assert_eq!(ids.len(), 1280, "10 tokens per repeat");
    let mut g = c.benchmark_group("tokenization");
    g.throughput(Throughput::Elements(ids.len() as u64));
    g.bench_function("encode_tokens_per_second", |b| b.iter(|| encode(&tok, black_box(text.as_bytes()), &mut ids)));
    let many: Vec<i32> = ids.iter().cycle().take(ids.len() * 128).copied().collect();
    let mut out = vec![0u8; text.len() * 128 * 2];
    g.throughput(Throughput::Elements(many.len() as u64));
    g.bench_function("decode_tokens_per_second", |b| b.iter(|| decode(&tok, black_box(&many), &mut out)));
    g.finish();
}

/// HF tokenizers timing `iters` passes itself; None when the peer is not installed.
fn peer_seconds(json: &Path, mode: &str, iters: u64) -> Option<f64> {
    let py = data_dir().join("py");
    if !py.join("tokenizers").is_dir() {
        return None;
    }
    let out = Command::new("python3")
        .env("PYTHONPATH", &py)
        .arg(root().join("benches/peers/hf_tokenizers.py"))
        .arg(json)
        .arg(root().join("testdata/tokenizer/corpus.txt"))
        .arg(mode)
        .arg(iters.to_string())
        .output()
        .ok()?;
    assert!(out.status.success(), "peer failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

fn bench_corpus(c: &mut Criterion) {
    let corpus = std::fs::read(root().join("testdata/tokenizer/corpus.txt")).expect("corpus");
    let docs: Vec<&[u8]> = corpus.split(|&b| b == 0x1e).collect();
    let mut g = c.benchmark_group("tokenization_corpus");
    g.sample_size(10).measurement_time(Duration::from_secs(6)).warm_up_time(Duration::from_secs(2));
    g.throughput(Throughput::Bytes(corpus.len() as u64 - (docs.len() as u64 - 1)));
    let vocabs = [
        ("qwen2.5", "qwen2.5-tokenizer.json"),
        ("llama3", "llama3-tokenizer.json"),
        ("smollm2-gguf", "smollm2-135m-instruct-q4_1.gguf"),
        ("llama-spm-gguf", "llamacpp-vocab/ggml-vocab-llama-spm.gguf"),
    ];
    for (name, file) in vocabs {
        let path = data_dir().join(file);
        if !path.is_file() {
            println!("SKIPPED: tokenization_corpus/*/{}: {} is absent (scripts/fetch-test-data.sh)", name, path.display());
            continue;
        }
        let tok = load(&path);
        let mut ids = Vec::new();
        let all_ids: Vec<Vec<i32>> = docs
            .iter()
            .map(|d| {
                encode(&tok, d, &mut ids);
                ids.clone()
            })
            .collect();
        let mut out = vec![0u8; 1 << 20];
        g.bench_function(format!("encode/{}", name), |b| {
            b.iter(|| {
                for d in &docs {
                    encode(&tok, d, &mut ids);
                }
            })
        });
        g.bench_function(format!("decode/{}", name), |b| {
            b.iter(|| {
                for i in &all_ids {
                    black_box(decode(&tok, i, &mut out));
                }
            })
        });
        if file.ends_with(".gguf") {
            continue; // the HF peer reads tokenizer.json only
        }
        if peer_seconds(&path, "encode", 0).is_none() {
            println!("SKIPPED: tokenization_corpus/hf_tokenizers_*/{}: the peer is not installed (scripts/setup.sh)", name);
            continue;
        }
        for mode in ["encode", "decode"] {
            g.bench_function(format!("hf_tokenizers_{}/{}", mode, name), |b| {
                b.iter_custom(|iters| Duration::from_secs_f64(peer_seconds(&path, mode, iters).expect("peer")))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench_original, bench_corpus);
criterion_main!(benches);
