//! Tokenizer: token-for-token agreement with the reference tokenizers on the committed corpus
//! (golden ids made by scripts/tokenizer/make_goldens.py), property tests against the oracles in
//! ferrite_spec::oracle::tokenizer, invalid UTF-8, streaming, and bad input.

mod common;

use ferrite_spec::oracle::tokenizer::{self as oracle, Behavior};
use ferrite::tokenizer::{data_dir, decode_flag, encode_flag};
use ferrite::{status, Tokenizer};
use proptest::prelude::*;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/tokenizer").join(name)
}

fn corpus() -> Vec<Vec<u8>> {
    let bytes = std::fs::read(testdata("corpus.txt")).expect("testdata/tokenizer/corpus.txt");
    bytes.split(|&b| b == 0x1e).map(|d| d.to_vec()).collect()
}

/// One golden line per document: (reference round-trips, ids).
fn golden(name: &str) -> Vec<(bool, Vec<i32>)> {
    let f = std::fs::File::open(testdata(name)).expect("golden file");
    let mut text = String::new();
    flate2::read::GzDecoder::new(f).read_to_string(&mut text).expect("gzip golden");
    text.lines()
        .map(|line| {
            let (rt, ids) = line.split_once('\t').expect("rt<TAB>ids");
            let ids = ids.split_whitespace().map(|t| t.parse().expect("id")).collect();
            (rt == "1", ids)
        })
        .collect()
}

/// The real vocabulary file, or None (printing SKIPPED) when the setup script has not fetched it.
fn real_file(name: &str) -> Option<PathBuf> {
    let p = data_dir().join(name);
    if p.is_file() {
        Some(p)
    } else {
        println!("SKIPPED: {} is absent (scripts/fetch-test-data.sh fetches it)", p.display());
        None
    }
}

/// Encodes every corpus document and compares with the golden ids; decodes and compares with the
/// text wherever the reference round-trips; streams the ids and compares with the full decode.
fn check_against_golden(tok: &Tokenizer, golden_name: &str) {
    check_against_golden_with(tok, golden_name, 0);
}

fn check_against_golden_with(tok: &Tokenizer, golden_name: &str, flags: u32) {
    let docs = corpus();
    let gold = golden(golden_name);
    assert_eq!(docs.len(), gold.len(), "{}: one golden line per document", golden_name);
    let mut differ = Vec::new();
    let (mut ids_total, mut round_trips) = (0usize, 0usize);
    for (i, (doc, (rt, want))) in docs.iter().zip(&gold).enumerate() {
        let got = tok.encode(doc, flags).unwrap_or_else(|e| panic!("doc {}: {}", i, e));
        ids_total += got.len();
        if &got != want {
            let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
            differ.push(format!("doc {} (first difference at id {}: got {:?}, want {:?})", i, at, got.get(at), want.get(at)));
            continue;
        }
        let text = tok.decode(&got, 0).unwrap();
        if *rt {
            assert_eq!(text, *doc, "{}: doc {} does not round-trip", golden_name, i);
            round_trips += 1;
        }
        let mut detok = tok.detokenizer(0).unwrap();
        let mut streamed = Vec::new();
        for &id in &got {
            let before = streamed.len();
            detok.push(id, &mut streamed).unwrap();
            assert!(std::str::from_utf8(&streamed[before..]).is_ok() || !*rt, "doc {}: streamed a partial character", i);
        }
        detok.flush(&mut streamed).unwrap();
        assert_eq!(streamed, text, "{}: doc {} streams differently from its decode", golden_name, i);
    }
    assert!(differ.is_empty(), "{}: {} of {} documents differ:\n{}", golden_name, differ.len(), docs.len(), differ.join("\n"));
    println!("{}: {} documents, {} ids identical; {} round-trips checked", golden_name, docs.len(), ids_total, round_trips);
}

// EVIDENCE: C-TOK-001
#[test]
fn c_tok_001_qwen_tokenizer_json_matches_hf_tokenizers_on_the_corpus() {
    let Some(path) = real_file("qwen2.5-tokenizer.json") else { return };
    let tok = Tokenizer::from_json_file(&path).unwrap();
    check_against_golden(&tok, "qwen2.5.golden.gz");
}

// EVIDENCE: C-TOK-001
#[test]
fn c_tok_001_llama3_tokenizer_json_matches_hf_tokenizers_on_the_corpus() {
    let Some(path) = real_file("llama3-tokenizer.json") else { return };
    let tok = Tokenizer::from_json_file(&path).unwrap();
    check_against_golden(&tok, "llama3.golden.gz");
    // this (3.0) file's post-processor is ByteLevel alone: no BOS, as the reference
    assert_eq!(tok.encode(b"Hello", encode_flag::ADD_SPECIAL).unwrap(), tok.encode(b"Hello", 0).unwrap());
}

/// The edits scripts/tokenizer/make_variant_golden.py applies to the Qwen2.5 tokenizer.json.
fn variant_json(qwen: &[u8]) -> Vec<u8> {
    let mut j: serde_json::Value = serde_json::from_slice(qwen).unwrap();
    j["normalizer"] = serde_json::json!({"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]});
    j["pre_tokenizer"] = serde_json::json!({"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": false},
        {"type": "Whitespace"},
        {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": false}]});
    j.to_string().into_bytes()
}

// EVIDENCE: C-TOK-010
#[test]
fn c_tok_010_nfkc_lowercase_digits_whitespace_match_hf_tokenizers_on_the_corpus() {
    let Some(path) = real_file("qwen2.5-tokenizer.json") else { return };
    let tok = Tokenizer::from_json(&variant_json(&std::fs::read(path).unwrap())).unwrap();
    // the corpus holds U+0897 (ARABIC PEPET, new in Unicode 16.0): a word character (\w) to the
    // reference's Oniguruma tables, unknown to Debian 12's PCRE2 unless widened
    assert!(corpus().iter().filter(|d| d.windows(3).any(|w| w == "\u{0897}".as_bytes())).count() >= 5);
    check_against_golden(&tok, "qwen2.5-normalizers.golden.gz");
}

fn added_variant_json(qwen: &[u8]) -> Vec<u8> {
    let mut j: serde_json::Value = serde_json::from_slice(qwen).unwrap();
    let added = j["added_tokens"].as_array_mut().unwrap();
    for t in added.iter_mut() {
        if t["content"] == "<|im_start|>" {
            t["lstrip"] = true.into();
        }
        if t["content"] == "<|im_end|>" {
            t["rstrip"] = true.into();
        }
    }
    let top = added.iter().map(|t| t["id"].as_i64().unwrap()).max().unwrap();
    added.push(serde_json::json!({"id": top + 1, "content": "The quick", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false}));
    added.push(serde_json::json!({"id": top + 2, "content": "fox", "single_word": true, "lstrip": false, "rstrip": false, "normalized": false, "special": false}));
    j["post_processor"] = serde_json::json!({"type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                   {"SpecialToken": {"id": "<|im_end|>", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<|im_start|>": {"id": "<|im_start|>", "ids": [151644], "tokens": ["<|im_start|>"]},
                           "<|im_end|>": {"id": "<|im_end|>", "ids": [151645], "tokens": ["<|im_end|>"]}}});
    j.to_string().into_bytes()
}

// EVIDENCE: C-TOK-016
#[test]
fn c_tok_016_added_token_flags_and_template_match_hf_tokenizers_on_the_corpus() {
    let Some(path) = real_file("qwen2.5-tokenizer.json") else { return };
    let tok = Tokenizer::from_json(&added_variant_json(&std::fs::read(path).unwrap())).unwrap();
    check_against_golden_with(&tok, "qwen2.5-added.golden.gz", encode_flag::ADD_SPECIAL);
}

// EVIDENCE: C-TOK-002
#[test]
fn c_tok_002_smollm2_gguf_vocabulary_matches_llama_cpp_on_the_corpus() {
    let Some(path) = real_file("smollm2-135m-instruct-q4_1.gguf") else { return };
    let tok = Tokenizer::from_gguf_file(&path).unwrap();
    let info = tok.info();
    assert_eq!((info.vocab_size, info.n_merges, info.bos_id, info.eos_id), (49152, 48900, 1, 2));
    check_against_golden(&tok, "smollm2-gguf.golden.gz");
}

// EVIDENCE: C-TOK-014
#[test]
fn c_tok_014_sentencepiece_gguf_vocabulary_matches_llama_cpp_on_the_corpus() {
    let Some(path) = real_file("llamacpp-vocab/ggml-vocab-llama-spm.gguf") else { return };
    let tok = Tokenizer::from_gguf_file(&path).unwrap();
    assert_eq!(tok.info().byte_level, 0);
    check_against_golden(&tok, "llama-spm-gguf.golden.gz");
    // BOS by default for this model type (add_special)
    assert_eq!(tok.encode(b"Hi", encode_flag::ADD_SPECIAL).unwrap()[0], tok.info().bos_id);
}

/// llama.cpp's own tokenizer tests: `.inp` texts separated by "\n__ggml_vocab_test__\n", `.out`
/// one line of ids per text, made by llama.cpp with add_special = false, parse_special = false.
fn llama_cpp_cases(vocab: &Path) -> Vec<(Vec<u8>, Vec<i32>)> {
    let inp = std::fs::read(vocab.with_extension("gguf.inp")).unwrap();
    let out = std::fs::read_to_string(vocab.with_extension("gguf.out")).unwrap();
    let sep = b"\n__ggml_vocab_test__\n";
    let mut texts = Vec::new();
    let mut rest = &inp[..];
    loop {
        match rest.windows(sep.len()).position(|w| w == sep) {
            Some(p) => {
                texts.push(rest[..p].to_vec());
                rest = &rest[p + sep.len()..];
            }
            None => {
                if !rest.is_empty() {
                    texts.push(rest.to_vec()); // as llama.cpp's reader: no empty text after the last separator
                }
                break;
            }
        }
    }
    let ids: Vec<Vec<i32>> = out.lines().map(|l| l.split_whitespace().map(|t| t.parse().unwrap()).collect()).collect();
    assert_eq!(texts.len(), ids.len(), "{}", vocab.display());
    texts.into_iter().zip(ids).collect()
}

// EVIDENCE: C-TOK-015
#[test]
fn c_tok_015_llama_cpp_test_vocabularies_give_llama_cpp_ids() {
    let names = ["gpt-2", "llama-bpe", "qwen2", "starcoder", "refact", "command-r", "mpt", "falcon", "llama-spm", "phi-3"];
    let mut total = 0;
    for name in names {
        let Some(path) = real_file(&format!("llamacpp-vocab/ggml-vocab-{}.gguf", name)) else { return };
        let tok = Tokenizer::from_gguf_file(&path).unwrap_or_else(|e| panic!("{}: {}", name, e));
        for (text, want) in llama_cpp_cases(&path) {
            let got = tok.encode(&text, encode_flag::NO_SPECIAL_SPLIT).unwrap();
            assert_eq!(got, want, "{}: {:?}", name, String::from_utf8_lossy(&text));
            total += 1;
        }
    }
    assert_eq!(total, 460);
}

// ---- synthetic tokenizers ----------------------------------------------------------------------

/// A byte-level BPE tokenizer.json over the given merges (pairs of byte strings), with the GPT-2
/// byte alphabet so that any byte string is a word.
fn byte_level_json(merges: &[(Vec<u8>, Vec<u8>)], pre_tokenizer: serde_json::Value) -> (String, HashMap<Vec<u8>, u32>) {
    let mut vocab: HashMap<Vec<u8>, u32> = (0..=255u8).map(|b| (vec![b], b as u32)).collect();
    let mut merge_strings = Vec::new();
    for (a, b) in merges {
        let mut ab = a.clone();
        ab.extend_from_slice(b);
        let n = vocab.len() as u32;
        vocab.entry(ab).or_insert(n);
        merge_strings.push(serde_json::json!([byte_level_text(a), byte_level_text(b)]));
    }
    let vocab_json: serde_json::Map<String, serde_json::Value> =
        vocab.iter().map(|(k, v)| (byte_level_text(k), serde_json::json!(v))).collect();
    let json = serde_json::json!({
        "version": "1.0",
        "added_tokens": [],
        "normalizer": null,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": null,
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab_json, "merges": merge_strings}
    });
    (json.to_string(), vocab)
}

/// GPT-2's bytes_to_unicode, written out independently of the C table.
fn byte_level_char(b: u8) -> char {
    let own = |x: u8| (b'!'..=b'~').contains(&x) || (0xA1..=0xAC).contains(&x) || x >= 0xAE;
    if own(b) {
        return b as char;
    }
    let k = (0..b).filter(|&x| !own(x)).count() as u32;
    char::from_u32(256 + k).unwrap()
}

fn byte_level_text(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| byte_level_char(b)).collect()
}

// EVIDENCE: C-TOK-004
#[test]
fn c_tok_004_bpe_merges_equal_the_rescanning_oracle() {
    // Random merges over a 3-letter alphabet (so that merges chain and compete) and random words;
    // one word per text (ByteLevel without its regex), so the oracle sees exactly what BPE sees.
    let strategy = (
        prop::collection::vec((0usize..12, 0usize..12), 1..40),
        prop::collection::vec(prop::sample::select(b"abc".to_vec()), 1..200),
    );
    common::run_prop(common::config(200, file!()), strategy, |(picks, word)| {
        // build merges whose parts exist: start from the letters, add each merge's result
        let mut pieces: Vec<Vec<u8>> = vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()];
        let mut merges: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for (x, y) in picks {
            let (a, b) = (pieces[x % pieces.len()].clone(), pieces[y % pieces.len()].clone());
            if merges.iter().any(|(p, q)| *p == a && *q == b) {
                continue;
            }
            let mut ab = a.clone();
            ab.extend_from_slice(&b);
            merges.push((a, b));
            if !pieces.contains(&ab) {
                pieces.push(ab);
            }
        }
        let pre = serde_json::json!({"type": "ByteLevel", "add_prefix_space": false, "use_regex": false});
        let (json, vocab) = byte_level_json(&merges, pre);
        let tok = Tokenizer::from_json(json.as_bytes()).unwrap();
        let table: HashMap<(u32, u32), (u32, u32)> = merges
            .iter()
            .enumerate()
            .map(|(rank, (a, b))| {
                let mut ab = a.clone();
                ab.extend_from_slice(b);
                ((vocab[a], vocab[b]), (rank as u32, vocab[&ab]))
            })
            .collect();
        let want: Vec<i32> = oracle::bpe(word.iter().map(|&b| b as u32).collect(), &table).into_iter().map(|x| x as i32).collect();
        let got = tok.encode(&word, 0).unwrap();
        prop_assert_eq!(&got, &want, "word {:?}", String::from_utf8_lossy(&word));
        // twice: the second call is served from the word cache when short enough
        prop_assert_eq!(&tok.encode(&word, 0).unwrap(), &want);
        prop_assert_eq!(tok.decode(&got, 0).unwrap(), word);
        Ok(())
    });
}

/// Every string of up to `max_len` characters over `alphabet`.
fn all_strings(alphabet: &[char], max_len: usize) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut frontier = vec![String::new()];
    for _ in 0..max_len {
        let mut next = Vec::new();
        for s in &frontier {
            for &c in alphabet {
                next.push(format!("{}{}", s, c));
            }
        }
        out.extend(next.iter().cloned());
        frontier = next;
    }
    out.remove(0);
    out
}

// EVIDENCE: C-TOK-005
#[test]
fn c_tok_005_split_behaviours_equal_the_oracle() {
    // WordLevel over every string of up to 7 characters of {a, b, -}: each piece the pre-tokenizer
    // makes is one id, so the ids spell out the pieces.
    let words = all_strings(&['a', 'b', '-'], 7);
    let vocab: serde_json::Map<String, serde_json::Value> =
        words.iter().enumerate().map(|(i, w)| (w.clone(), serde_json::json!(i))).collect();
    let mut toks = Vec::new();
    for behavior in Behavior::ALL {
        for invert in [false, true] {
            let json = serde_json::json!({
                "added_tokens": [],
                "pre_tokenizer": {"type": "Split", "pattern": {"String": "-"}, "behavior": behavior.name(), "invert": invert},
                "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "a"}
            });
            toks.push((behavior, invert, Tokenizer::from_json(json.to_string().as_bytes()).unwrap()));
        }
    }
    let strategy = prop::collection::vec(prop::sample::select(vec!['a', 'b', '-']), 0..7);
    common::run_prop(common::config(300, file!()), strategy, |chars| {
        let text: String = chars.into_iter().collect();
        for (behavior, invert, tok) in &toks {
            let want: Vec<String> = oracle::split(&text, '-', *behavior, *invert);
            let got: Vec<String> = tok.encode(text.as_bytes(), 0).unwrap().into_iter().map(|id| words[id as usize].clone()).collect();
            prop_assert_eq!(&got, &want, "{:?} invert={} on {:?}", behavior, invert, text);
        }
        Ok(())
    });
}

// EVIDENCE: C-TOK-003
#[test]
fn c_tok_003_invalid_utf8_refused_or_replaced_as_python_does() {
    let Some(path) = real_file("qwen2.5-tokenizer.json") else { return };
    let tok = Tokenizer::from_json_file(&path).unwrap();
    let cases: serde_json::Value =
        serde_json::from_slice(&std::fs::read(testdata("invalid_utf8.json")).expect("invalid_utf8.json")).unwrap();
    let cases = cases.as_array().or_else(|| cases["cases"].as_array()).expect("a list of cases");
    assert!(cases.len() >= 20);
    for case in cases {
        let hex = case["hex"].as_str().expect("hex");
        let bytes: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
        let replaced = case["replaced"].as_str().expect("replaced");
        let want: Vec<i32> = case["qwen2.5_ids"].as_array().expect("ids").iter().map(|v| v.as_i64().unwrap() as i32).collect();
        // refused by default, naming the offset, nothing written
        let mut ids = vec![-7i32; 64];
        let mut n = 99usize;
        // SAFETY: valid tokenizer, buffers valid for their lengths.
        let st = unsafe {
            ferrite::sys::fer_tokenizer_encode(tok.as_ptr(), bytes.as_ptr() as *const _, bytes.len(), 0, ids.as_mut_ptr(), ids.len(), &mut n)
        };
        if std::str::from_utf8(&bytes).is_ok() {
            continue;
        }
        assert_eq!(st, status::INVALID_UTF8, "{}", hex);
        assert_eq!(n, 0);
        assert!(ids.iter().all(|&x| x == -7), "ids written on refusal");
        assert!(ferrite::last_error_message().contains("byte"), "{}", ferrite::last_error_message());
        // replaced: the ids the reference gives for Python's replacement
        let got = tok.encode(&bytes, encode_flag::REPLACE_INVALID_UTF8).unwrap();
        assert_eq!(got, want, "{} (python: {:?})", hex, replaced);
        assert_eq!(tok.decode(&got, 0).unwrap(), replaced.as_bytes());
    }
}

// EVIDENCE: C-TOK-006
#[test]
fn c_tok_006_buffer_sizes_and_concurrent_encodes() {
    let pre = serde_json::json!({"type": "ByteLevel", "add_prefix_space": false});
    let merges = vec![(b"h".to_vec(), b"e".to_vec()), (b"l".to_vec(), b"l".to_vec()), (b"he".to_vec(), b"ll".to_vec())];
    let (json, _) = byte_level_json(&merges, pre);
    let tok = Tokenizer::from_json(json.as_bytes()).unwrap();
    let text = b"hello hello world";
    let want = tok.encode(text, 0).unwrap();
    // a short buffer: BUFFER_TOO_SMALL, the count needed, the first cap ids written
    let mut ids = vec![0i32; 3];
    let mut n = 0usize;
    // SAFETY: buffers valid for their lengths.
    let st = unsafe { ferrite::sys::fer_tokenizer_encode(tok.as_ptr(), text.as_ptr() as *const _, text.len(), 0, ids.as_mut_ptr(), 3, &mut n) };
    assert_eq!(st, status::BUFFER_TOO_SMALL);
    assert_eq!(n, want.len());
    assert_eq!(&ids[..], &want[..3]);
    // decode the same way
    let mut out = vec![0u8; 4];
    let mut len = 0usize;
    // SAFETY: buffers valid for their lengths.
    let st = unsafe { ferrite::sys::fer_tokenizer_decode(tok.as_ptr(), want.as_ptr(), want.len(), 0, out.as_mut_ptr() as *mut _, 4, &mut len) };
    assert_eq!(st, status::BUFFER_TOO_SMALL);
    assert_eq!(len, text.len());
    // four threads at once on one tokenizer give the single-thread ids
    let texts: Vec<Vec<u8>> = (0..4).map(|t| format!("thread {} says hello {}", t, "hello ".repeat(500 * (t + 1))).into_bytes()).collect();
    let serial: Vec<Vec<i32>> = texts.iter().map(|t| tok.encode(t, 0).unwrap()).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = texts.iter().map(|t| s.spawn(|| (0..20).map(|_| tok.encode(t, 0).unwrap()).collect::<Vec<_>>())).collect();
        for (h, want) in handles.into_iter().zip(&serial) {
            for got in h.join().unwrap() {
                assert_eq!(&got, want);
            }
        }
    });
}

/// A Llama-2-style tokenizer.json: Prepend/Replace normalizers, byte fallback, and the decoder chain
/// Replace("▁" -> " "), ByteFallback, Fuse, Strip(" ", 1, 0). Returns the json and the vocabulary.
fn sentencepiece_json() -> (serde_json::Value, Vec<String>) {
    let mut words: Vec<String> = vec!["<unk>".into()];
    words.extend((0..=255u32).map(|b| format!("<0x{:02X}>", b)));
    words.extend(["▁", "h", "i", "▁h", "▁hi", "!", "日", "▁▁"].iter().map(|s| s.to_string()));
    let vocab: serde_json::Map<String, serde_json::Value> = words.iter().enumerate().map(|(i, w)| (w.clone(), (i as u32).into())).collect();
    let json = serde_json::json!({
        "added_tokens": [{"id": 0, "content": "<unk>", "special": true, "normalized": false}],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "pre_tokenizer": null,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>", "vocab": vocab,
                  "merges": ["▁ h", "▁h i"]}
    });
    (json, words)
}

/// The decoder chain by its definition, one step at a time over the list of token strings.
fn sentencepiece_decode_oracle(words: &[String], ids: &[i32], skip_special: bool) -> Vec<u8> {
    let toks: Vec<&String> = ids.iter().filter(|&&i| !(skip_special && i == 0)).map(|&i| &words[i as usize]).collect();
    // Replace
    let replaced: Vec<Vec<u8>> = toks.iter().map(|t| t.replace('▁', " ").into_bytes()).collect();
    // ByteFallback: runs of <0xAB> become their bytes if UTF-8, else one U+FFFD per byte
    let byte_of = |t: &[u8]| -> Option<u8> {
        let s = std::str::from_utf8(t).ok()?;
        if s.len() == 6 && s.starts_with("<0x") && s.ends_with('>') { u8::from_str_radix(&s[3..5], 16).ok() } else { None }
    };
    let mut out: Vec<u8> = Vec::new();
    let mut run: Vec<u8> = Vec::new();
    let flush = |run: &mut Vec<u8>, out: &mut Vec<u8>| {
        if std::str::from_utf8(run).is_ok() {
            out.extend_from_slice(run);
        } else {
            for _ in 0..run.len() {
                out.extend_from_slice("\u{FFFD}".as_bytes());
            }
        }
        run.clear();
    };
    for t in &replaced {
        match byte_of(t) {
            Some(b) => run.push(b),
            None => {
                flush(&mut run, &mut out);
                out.extend_from_slice(t);
            }
        }
    }
    flush(&mut run, &mut out);
    // Fuse, then Strip one leading space
    if out.first() == Some(&b' ') {
        out.remove(0);
    }
    out
}

// EVIDENCE: C-TOK-007
#[test]
fn c_tok_007_sentencepiece_decoding_equals_the_chain_oracle_and_streams_the_same() {
    let (json, words) = sentencepiece_json();
    let fast = Tokenizer::from_json(json.to_string().as_bytes()).unwrap();
    // the same chain plus a step that changes nothing ("@@" never occurs): the step-by-step decoder
    let mut slow_json = json.clone();
    slow_json["decoder"]["decoders"].as_array_mut().unwrap().push(serde_json::json!({"type": "Replace", "pattern": {"String": "@@"}, "content": "@@"}));
    let slow = Tokenizer::from_json(slow_json.to_string().as_bytes()).unwrap();
    // ids biased towards byte tokens of multi-byte characters, so runs are valid and invalid
    let strategy = prop::collection::vec(
        prop_oneof![0i32..words.len() as i32, prop::sample::select(vec![1 + 0xC3, 1 + 0xA9, 1 + 0xE6, 1 + 0x97, 1 + 0xA5, 1 + 0x20, 257, 260])],
        0..24,
    );
    common::run_prop(common::config(400, file!()), strategy, |ids| {
        for (skip, tok) in [(false, &fast), (true, &fast), (false, &slow), (true, &slow)] {
            let flags = if skip { decode_flag::SKIP_SPECIAL } else { 0 };
            let want = sentencepiece_decode_oracle(&words, &ids, skip);
            let got = tok.decode(&ids, flags).unwrap();
            prop_assert_eq!(&got, &want, "ids {:?} skip {}", ids, skip);
            let mut d = tok.detokenizer(flags).unwrap();
            let mut streamed = Vec::new();
            for &i in &ids {
                d.push(i, &mut streamed).unwrap();
            }
            d.flush(&mut streamed).unwrap();
            prop_assert_eq!(&streamed, &want, "streamed, ids {:?} skip {}", ids, skip);
        }
        Ok(())
    });
}

// EVIDENCE: C-TOK-007
#[test]
fn c_tok_007_decoder_chain_of_a_sentencepiece_style_bpe() {
    let (json, _) = sentencepiece_json();
    let tok = Tokenizer::from_json(json.to_string().as_bytes()).unwrap();
    let id = |s: &str| tok.token_to_id(s.as_bytes()).unwrap();
    // "hi é!" -> ▁hi ▁ <0xC3> <0xA9> !
    let ids = tok.encode("hi é!".as_bytes(), 0).unwrap();
    assert_eq!(ids, vec![id("▁hi"), id("▁"), id("<0xC3>"), id("<0xA9>"), id("!")]);
    assert_eq!(tok.decode(&ids, 0).unwrap(), "hi é!".as_bytes());
    // a lone continuation byte decodes to U+FFFD (one per byte), as the reference's ByteFallback
    let bad = vec![id("<0xA9>"), id("!")];
    assert_eq!(tok.decode(&bad, 0).unwrap(), "\u{FFFD}!".as_bytes());
    // streaming the same ids gives the same text
    let mut d = tok.detokenizer(0).unwrap();
    let mut out = Vec::new();
    for &i in &ids {
        d.push(i, &mut out).unwrap();
    }
    d.flush(&mut out).unwrap();
    assert_eq!(out, "hi é!".as_bytes());
    // skip-special leaves out <unk>
    assert_eq!(tok.decode(&[0, id("▁hi")], decode_flag::SKIP_SPECIAL).unwrap(), b"hi");
}

// EVIDENCE: C-TOK-009
#[test]
fn c_tok_009_streaming_holds_back_partial_characters() {
    // Byte-level: every byte its own token, so multi-byte characters span several pushes.
    let pre = serde_json::json!({"type": "ByteLevel", "add_prefix_space": false, "use_regex": false});
    let (json, _) = byte_level_json(&[], pre);
    let tok = Tokenizer::from_json(json.as_bytes()).unwrap();
    let text = "a日😀b".as_bytes();
    let ids = tok.encode(text, 0).unwrap();
    assert_eq!(ids.len(), text.len());
    let mut d = tok.detokenizer(0).unwrap();
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    for &i in &ids {
        let mut out = Vec::new();
        d.push(i, &mut out).unwrap();
        pieces.push(out);
    }
    let expect: Vec<&[u8]> = vec![b"a", b"", b"", "日".as_bytes(), b"", b"", b"", "😀".as_bytes(), b"b"];
    assert_eq!(pieces.iter().map(|p| p.as_slice()).collect::<Vec<_>>(), expect);
    // an incomplete character at the end: exact bytes, or U+FFFD with the replace flag
    for (flags, tail) in [(0u32, vec![0xE6u8, 0x97]), (decode_flag::REPLACE_INVALID_UTF8, "\u{FFFD}".as_bytes().to_vec())] {
        let mut d = tok.detokenizer(flags).unwrap();
        let mut out = Vec::new();
        for &i in &ids[1..3] {
            d.push(i, &mut out).unwrap();
        }
        assert!(out.is_empty());
        d.flush(&mut out).unwrap();
        assert_eq!(out, tail);
    }
    // a short buffer leaves the state unchanged: push the same id again with room
    let mut d = tok.detokenizer(0).unwrap();
    let mut out = Vec::new();
    for &i in &ids[1..3] {
        d.push(i, &mut out).unwrap();
    }
    let mut len = 0usize;
    // SAFETY: a NULL buffer with cap 0 is allowed (asks for the size).
    let st = unsafe { ferrite::sys::fer_detokenizer_push(d.as_ptr(), ids[3], std::ptr::null_mut(), 0, &mut len) };
    assert_eq!(st, status::BUFFER_TOO_SMALL);
    assert_eq!(len, 3);
    d.push(ids[3], &mut out).unwrap();
    assert_eq!(out, "日".as_bytes());
    // the tokenizer cannot be freed while a detokenizer lives
    // SAFETY: the call must refuse (BUSY) and free nothing; the Rust owner frees it later.
    assert_eq!(unsafe { ferrite::sys::fer_tokenizer_free(tok.as_ptr() as *mut _) }, status::BUSY);
}

// EVIDENCE: C-TOK-008
#[test]
fn c_tok_008_bad_tokenizer_files_get_a_status_and_a_message() {
    let ok_model = r#""model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}"#;
    let cases: Vec<(String, i32, &str)> = vec![
        ("".into(), status::BAD_FORMAT, "JSON"),
        ("{".into(), status::BAD_FORMAT, "JSON"),
        ("[1, 2]".into(), status::BAD_FORMAT, "JSON object"),
        ("{}".into(), status::BAD_FORMAT, "no model"),
        (r#"{"model": {"type": "Unigram", "vocab": []}}"#.into(), status::UNSUPPORTED, "Unigram"),
        (r#"{"model": {"type": "BPE", "dropout": 0.1, "vocab": {}, "merges": []}}"#.into(), status::UNSUPPORTED, "dropout"),
        (r#"{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}}"#.into(), status::CORRUPT, "result"),
        (r#"{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a c"]}}"#.into(), status::CORRUPT, "second part"),
        (r#"{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["ab"]}}"#.into(), status::CORRUPT, "two parts"),
        (r#"{"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}}"#.into(), status::CORRUPT, "twice"),
        (r#"{"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}}"#.into(), status::CORRUPT, "integer"),
        (r#"{"model": {"type": "BPE", "vocab": {"a": 1.5}, "merges": []}}"#.into(), status::CORRUPT, "integer"),
        (r#"{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "unk_token": "zz"}}"#.into(), status::CORRUPT, "unk_token"),
        (format!(r#"{{"pre_tokenizer": {{"type": "Split", "pattern": {{"Regex": "(unclosed"}}, "behavior": "Isolated"}}, {}}}"#, ok_model), status::UNSUPPORTED, "compile"),
        (format!(r#"{{"pre_tokenizer": {{"type": "Split", "pattern": {{"Regex": "a"}}, "behavior": "Sideways"}}, {}}}"#, ok_model), status::BAD_FORMAT, "behavior"),
        (format!(r#"{{"pre_tokenizer": {{"type": "Metaspace"}}, {}}}"#, ok_model), status::UNSUPPORTED, "Metaspace"),
        (format!(r#"{{"normalizer": {{"type": "BertNormalizer"}}, {}}}"#, ok_model), status::UNSUPPORTED, "BertNormalizer"),
        (format!(r#"{{"decoder": {{"type": "WordPiece"}}, {}}}"#, ok_model), status::UNSUPPORTED, "WordPiece"),
        (format!(r#"{{"added_tokens": [{{"id": 0, "content": "zz"}}], {}}}"#, ok_model), status::CORRUPT, "reuses id"),
        (format!(r#"{{"added_tokens": [{{"id": 9, "content": ""}}], {}}}"#, ok_model), status::CORRUPT, "added token"),
        (format!(r#"{{"post_processor": {{"type": "TemplateProcessing", "single": [{{"SpecialToken": {{"id": "<s>"}}}}]}}, {}}}"#, ok_model), status::CORRUPT, "no ids"),
    ];
    for (json, want, word) in cases {
        match Tokenizer::from_json(json.as_bytes()) {
            Ok(_) => panic!("accepted: {}", json),
            Err(e) => {
                assert_eq!(e.code, want, "{}: {}", json, e.message);
                assert!(e.message.contains(word), "{}: message {:?} lacks {:?}", json, e.message, word);
            }
        }
    }
    // NULL arguments
    let mut out = std::ptr::null_mut();
    // SAFETY: NULL json must be refused without reading.
    assert_eq!(unsafe { ferrite::sys::fer_tokenizer_from_json(std::ptr::null(), 5, &mut out) }, status::NULL_ARG);
    assert!(out.is_null());
    let mut n = 0usize;
    // SAFETY: NULL tokenizer must be refused.
    assert_eq!(unsafe { ferrite::sys::fer_tokenizer_encode(std::ptr::null(), std::ptr::null(), 0, 0, std::ptr::null_mut(), 0, &mut n) }, status::NULL_ARG);
    // truncations of a valid file at every 7th byte: a status, never a crash
    let (json, _) = byte_level_json(&[(b"a".to_vec(), b"b".to_vec())], serde_json::json!({"type": "ByteLevel"}));
    for cut in (0..json.len()).step_by(7) {
        assert!(Tokenizer::from_json(&json.as_bytes()[..cut]).is_err(), "cut at {}", cut);
    }
    // an unknown id decodes to INVALID_ARG naming its position
    let tok = Tokenizer::from_json(json.as_bytes()).unwrap();
    let e = tok.decode(&[1, 2, 99999], 0).unwrap_err();
    assert_eq!(e.code, status::INVALID_ARG);
    assert!(e.message.contains("position 2"), "{}", e.message);
    assert_eq!(tok.encode(b"x", 0x80).unwrap_err().code, status::INVALID_ARG);
}

// EVIDENCE: C-SAMP-015
/// DRY's breakers from strings on the SmolLM2 vocabulary equal koboldcpp's construction written
/// here with the tokenizer's own decode and encode: per token, the set of breakers (a token whose
/// text contains a string alone; a token ending with a start of a string plus the rest encoded).
/// Also the counts-only call, a short buffer, and NULLs.
#[test]
fn c_samp_015_dry_breakers_from_strings_match_the_construction() {
    let Some(path) = real_file("smollm2-135m-instruct-q4_1.gguf") else { return };
    let tok = Tokenizer::from_gguf_file(&path).unwrap();
    let strings = ["\n", ":", "\"", "*", "### Response", "", "é!"];
    let got = tok.dry_breakers(&strings).unwrap();
    let mut got_sets: HashMap<i32, Vec<Vec<i32>>> = HashMap::new();
    let mut at = 0usize;
    for &len in &got.lengths {
        let seq = &got.tokens[at..at + len as usize];
        got_sets.entry(seq[0]).or_default().push(seq[1..].to_vec());
        at += len as usize;
    }
    assert_eq!(at, got.tokens.len());
    let mut want: HashMap<i32, Vec<Vec<i32>>> = HashMap::new();
    let vocab = tok.info().vocab_size as i32;
    for id in 0..vocab {
        let word = tok.decode(&[id], 0).unwrap();
        for s in strings.iter().map(|s| s.as_bytes()).filter(|s| !s.is_empty()) {
            let mut add = |tail: Vec<i32>| {
                let e = want.entry(id).or_default();
                if !e.contains(&tail) {
                    e.push(tail);
                }
            };
            if word.windows(s.len()).any(|w| w == s) {
                add(Vec::new());
                continue;
            }
            for pos in 0..word.len() {
                let n = (word.len() - pos).min(s.len());
                if n < s.len() && word[pos..pos + n] == s[..n] {
                    let mut tail = tok.encode(&s[n..], encode_flag::NO_SPECIAL_SPLIT | encode_flag::REPLACE_INVALID_UTF8).unwrap();
                    tail.truncate(19);
                    add(tail);
                }
            }
        }
    }
    for v in got_sets.values_mut().chain(want.values_mut()) {
        v.sort();
    }
    assert_eq!(got_sets.len(), want.len());
    assert_eq!(got_sets, want);
    // the default breakers make hundreds of single-token breakers on this vocabulary, and the
    // multi-token string heads tails
    assert!(got_sets.values().filter(|v| v.contains(&Vec::new())).count() > 300);
    assert!(got_sets.values().flatten().any(|t| t.len() >= 2));

    use ferrite::sys;
    let c: Vec<std::ffi::CString> = ["\n"].iter().map(|s| std::ffi::CString::new(*s).unwrap()).collect();
    let ptrs: Vec<*const std::os::raw::c_char> = c.iter().map(|s| s.as_ptr()).collect();
    let (mut nb, mut nt) = (7usize, 7usize);
    let mut lengths = [0u32; 2];
    let mut tokens = [0i32; 2];
    // SAFETY: live tokenizer and strings; the arrays hold the caps given.
    unsafe {
        let st = sys::fer_tokenizer_dry_breakers(tok.as_ptr(), ptrs.as_ptr(), 1, lengths.as_mut_ptr(), 2, tokens.as_mut_ptr(), 2, &mut nb, &mut nt);
        assert_eq!(st, status::BUFFER_TOO_SMALL);
        assert!(nb > 2 && nt >= nb, "{nb} {nt}");
        assert_eq!(lengths, [0, 0], "a short buffer is left alone");
        let st = sys::fer_tokenizer_dry_breakers(tok.as_ptr(), std::ptr::null(), 1, std::ptr::null_mut(), 0, std::ptr::null_mut(), 0, &mut nb, &mut nt);
        assert_eq!(st, status::NULL_ARG);
        assert_eq!((nb, nt), (0, 0));
        let nul: [*const std::os::raw::c_char; 1] = [std::ptr::null()];
        let st = sys::fer_tokenizer_dry_breakers(tok.as_ptr(), nul.as_ptr(), 1, std::ptr::null_mut(), 0, std::ptr::null_mut(), 0, &mut nb, &mut nt);
        assert_eq!(st, status::NULL_ARG);
    }
}
