//! Gemma 3: ferrite's tokenizer on Gemma 3's GGUF vocabulary (262,144 SentencePiece pieces with
//! byte fallback, user-defined pieces such as "\n\n" and HTML tags, no space prefix) gives
//! llama.cpp's ids for every document of the committed corpus (golden made by
//! scripts/tokenizer/make_gemma3_golden.py), decodes them back, and adds BOS as the file asks.
//! SKIPPED when the real file is absent (scripts/fetch-test-data.sh fetches it).

use ferrite::tokenizer::{data_dir, encode_flag};
use ferrite::Tokenizer;
use std::io::Read;
use std::path::{Path, PathBuf};

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/tokenizer").join(name)
}

fn golden(name: &str) -> Vec<(bool, Vec<i32>)> {
    let f = std::fs::File::open(testdata(name)).expect("golden file");
    let mut text = String::new();
    flate2::read::GzDecoder::new(f).read_to_string(&mut text).expect("gzip golden");
    text.lines()
        .map(|line| {
            let (rt, ids) = line.split_once('\t').expect("rt<TAB>ids");
            (rt == "1", ids.split_whitespace().map(|t| t.parse().expect("id")).collect())
        })
        .collect()
}

// EVIDENCE: C-GEM-005
#[test]
fn c_gem_005_gemma3_gguf_vocabulary_matches_llama_cpp_on_the_corpus() {
    let path = data_dir().join("gemma3-270m-q4_k_m.gguf");
    if !path.is_file() {
        println!("SKIPPED: {} is absent (scripts/fetch-test-data.sh fetches it)", path.display());
        return;
    }
    let tok = Tokenizer::from_gguf_file(&path).unwrap();
    let info = tok.info();
    assert_eq!((info.vocab_size, info.bos_id, info.eos_id, info.byte_level), (262144, 2, 1, 0));
    let bytes = std::fs::read(testdata("corpus.txt")).expect("testdata/tokenizer/corpus.txt");
    let docs: Vec<&[u8]> = bytes.split(|&b| b == 0x1e).collect();
    let gold = golden("gemma3-gguf.golden.gz");
    assert_eq!(docs.len(), gold.len());
    let (mut differ, mut ids, mut round_trips) = (Vec::new(), 0usize, 0usize);
    for (i, (doc, (rt, want))) in docs.iter().zip(&gold).enumerate() {
        let got = tok.encode(doc, 0).unwrap();
        ids += got.len();
        if &got != want {
            let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
            differ.push(format!("doc {} (first difference at id {}: got {:?}, want {:?})", i, at, got.get(at), want.get(at)));
            continue;
        }
        if *rt {
            assert_eq!(tok.decode(&got, 0).unwrap(), *doc, "doc {} does not round-trip", i);
            round_trips += 1;
        }
    }
    assert!(differ.is_empty(), "{} of {} documents differ:\n{}", differ.len(), docs.len(), differ.join("\n"));
    println!("gemma3-gguf: {} documents, {} ids identical; {} round-trips", docs.len(), ids, round_trips);
    // the file's add_bos_token: BOS first with ADD_SPECIAL; the chat markers are single ids
    assert_eq!(tok.encode(b"Hi", encode_flag::ADD_SPECIAL).unwrap()[0], 2);
    assert_eq!(tok.encode(b"<start_of_turn>user\n", 0).unwrap(), vec![105, 2364, 107]);
}
