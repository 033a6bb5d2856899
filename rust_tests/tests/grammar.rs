//! Structured output through the safe layer (issue 20): for random regular expressions over a
//! small alphabet and every string of up to five characters, the string is in the expression's
//! language exactly when every one of its tokenizations is allowed step by step and ends where the
//! end of sequence is allowed; at every step the mask allows a token exactly when accept takes it.
//! The oracle is a direct recursive matcher over the expression's tree. Masks here are built with
//! FER_GRAMMAR_NO_FORCING (every viable token): with forcing, a forced state allows the canonical
//! token alone, which the golden tests against llguidance cover.
// EVIDENCE: C-GRM-009

use ferrite::grammar::{flag, kind, mask_has, GrammarVocab};
use ferrite::{status, Tokenizer};
use proptest::prelude::*;

/// The test vocabulary: single characters, pairs and triples over {a, b, c}, so a string has many
/// tokenizations; the end of sequence is the added special token </s>.
const TOKENS: &[&str] = &["a", "b", "c", "ab", "bc", "ca", "aa", "cb", "abc", "bca", "aab", "ccc"];

fn tokenizer() -> (Tokenizer, i32) {
    let vocab: serde_json::Map<String, serde_json::Value> =
        TOKENS.iter().enumerate().map(|(i, t)| (t.to_string(), serde_json::json!(i))).collect();
    let eos = TOKENS.len() as i32;
    let json = serde_json::json!({
        "added_tokens": [{"id": eos, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false,
                          "normalized": false, "special": true}],
        "pre_tokenizer": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "a"}
    });
    (Tokenizer::from_json(json.to_string().as_bytes()).expect("test tokenizer"), eos)
}

#[derive(Clone, Debug)]
enum Rx {
    Lit(u8),
    Class(Vec<u8>),
    Cat(Box<Rx>, Box<Rx>),
    Alt(Box<Rx>, Box<Rx>),
    Star(Box<Rx>),
    Plus(Box<Rx>),
    Opt(Box<Rx>),
    Rep(Box<Rx>, u32, u32),
}

impl Rx {
    fn text(&self) -> String {
        match self {
            Rx::Lit(c) => (*c as char).to_string(),
            Rx::Class(cs) => format!("[{}]", cs.iter().map(|&c| c as char).collect::<String>()),
            Rx::Cat(a, b) => format!("{}{}", a.text(), b.text()),
            Rx::Alt(a, b) => format!("({}|{})", a.text(), b.text()),
            Rx::Star(a) => format!("({})*", a.text()),
            Rx::Plus(a) => format!("({})+", a.text()),
            Rx::Opt(a) => format!("({})?", a.text()),
            Rx::Rep(a, m, n) => format!("({}){{{m},{n}}}", a.text()),
        }
    }

    /// The positions where a match of self starting at i can end in s.
    fn ends(&self, s: &[u8], i: usize) -> Vec<usize> {
        let mut out: Vec<usize> = match self {
            Rx::Lit(c) => (i < s.len() && s[i] == *c).then_some(i + 1).into_iter().collect(),
            Rx::Class(cs) => (i < s.len() && cs.contains(&s[i])).then_some(i + 1).into_iter().collect(),
            Rx::Cat(a, b) => a.ends(s, i).into_iter().flat_map(|j| b.ends(s, j)).collect(),
            Rx::Alt(a, b) => a.ends(s, i).into_iter().chain(b.ends(s, i)).collect(),
            Rx::Opt(a) => std::iter::once(i).chain(a.ends(s, i)).collect(),
            Rx::Star(a) => Rx::Rep(a.clone(), 0, u32::MAX).ends(s, i),
            Rx::Plus(a) => Rx::Rep(a.clone(), 1, u32::MAX).ends(s, i),
            Rx::Rep(a, m, n) => {
                // breadth by count; a repetition that makes no progress adds nothing new
                let mut all = Vec::new();
                let mut front = vec![i];
                let mut k = 0u32;
                while !front.is_empty() {
                    if k >= *m {
                        all.extend_from_slice(&front);
                    }
                    if k == *n || k > s.len() as u32 + *m {
                        break;
                    }
                    let mut next: Vec<usize> = front.iter().flat_map(|&j| a.ends(s, j)).collect();
                    next.sort_unstable();
                    next.dedup();
                    if k >= *m {
                        next.retain(|j| !all.contains(j));
                    }
                    front = next;
                    k += 1;
                }
                all
            }
        };
        out.sort_unstable();
        out.dedup();
        out
    }

    fn matches(&self, s: &[u8]) -> bool {
        self.ends(s, 0).contains(&s.len())
    }
}

fn rx_strategy() -> impl Strategy<Value = Rx> {
    let leaf = prop_oneof![
        prop::sample::select(vec![b'a', b'b', b'c']).prop_map(Rx::Lit),
        prop::sample::subsequence(vec![b'a', b'b', b'c'], 1..=2).prop_map(Rx::Class),
    ];
    leaf.prop_recursive(4, 16, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Rx::Cat(Box::new(a), Box::new(b))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Rx::Alt(Box::new(a), Box::new(b))),
            inner.clone().prop_map(|a| Rx::Star(Box::new(a))),
            inner.clone().prop_map(|a| Rx::Plus(Box::new(a))),
            inner.clone().prop_map(|a| Rx::Opt(Box::new(a))),
            (inner, 0u32..3, 0u32..3).prop_map(|(a, m, d)| Rx::Rep(Box::new(a), m, m + d)),
        ]
    })
}

/// Every string over {a, b, c} of up to n characters.
fn strings(n: usize) -> Vec<Vec<u8>> {
    let mut all = vec![Vec::new()];
    let mut layer = vec![Vec::new()];
    for _ in 0..n {
        layer = layer.iter().flat_map(|s: &Vec<u8>| b"abc".iter().map(move |&c| [s.clone(), vec![c]].concat())).collect();
        all.extend(layer.iter().cloned());
    }
    all
}

/// Walks every tokenization of s[i..] from the matcher's state; returns (some tokenization ended
/// accepted, some step refused). Checks at each step that the mask allows exactly what accept takes.
fn walk(m: &mut ferrite::Matcher, s: &[u8], i: usize, words: usize, eos: i32, checked: &mut Vec<String>) -> (bool, bool) {
    let mut mask = vec![0u32; words];
    m.fill_mask(&mut mask).unwrap();
    for t in 0..=eos {
        let allowed = mask_has(&mask, t);
        let took = m.accept(t);
        if took.is_ok() {
            m.rollback(1).unwrap();
        }
        if allowed != took.is_ok() {
            checked.push(format!("at byte {i} of {:?}: token {t} mask {allowed} accept {:?}", String::from_utf8_lossy(s), took));
        }
    }
    if i == s.len() {
        let end = mask_has(&mask, eos);
        assert_eq!(end, m.state().accepting == 1);
        return (end, !end);
    }
    let (mut ok, mut refused) = (false, false);
    for (t, tok) in TOKENS.iter().enumerate() {
        if !s[i..].starts_with(tok.as_bytes()) {
            continue;
        }
        if !mask_has(&mask, t as i32) {
            refused = true;
            continue;
        }
        m.accept(t as i32).unwrap();
        let (o, r) = walk(m, s, i + tok.len(), words, eos, checked);
        m.rollback(1).unwrap();
        ok |= o;
        refused |= r;
    }
    (ok, refused)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    // EVIDENCE: C-GRM-009
    #[test]
    fn c_grm_009_in_the_language_iff_every_tokenization_is_allowed(rx in rx_strategy()) {
        let (tok, eos) = tokenizer();
        let vocab = GrammarVocab::new(&tok, 0, eos).unwrap();
        let words = vocab.info().mask_words as usize;
        let text = rx.text();
        let g = vocab.compile(kind::REGEX, text.as_bytes(), flag::NO_FORCING).unwrap();
        let mut m = g.matcher().unwrap();
        let mut mismatches = Vec::new();
        for s in strings(5) {
            let in_l = rx.matches(&s);
            let (ok, refused) = walk(&mut m, &s, 0, words, eos, &mut mismatches);
            prop_assert_eq!(m.state().n_tokens, 0);
            if in_l {
                prop_assert!(ok && !refused, "{:?} is in /{}/ but a tokenization was refused", String::from_utf8_lossy(&s), text);
            } else {
                prop_assert!(!ok, "{:?} is not in /{}/ but a tokenization ended accepted", String::from_utf8_lossy(&s), text);
            }
        }
        prop_assert!(mismatches.is_empty(), "/{}/: {}", text, mismatches.join("; "));
    }
}

/// The safe layer's refusals: bad source, unknown kinds and flags, a rejected token changes nothing.
#[test]
fn grammar_refusals_through_the_safe_layer() {
    let (tok, eos) = tokenizer();
    let vocab = GrammarVocab::new(&tok, 0, eos).unwrap();
    assert_eq!(vocab.compile(kind::REGEX, b"(ab", 0).err().unwrap().code, status::BAD_FORMAT);
    assert_eq!(vocab.compile(kind::REGEX, b"[a-c]+", flag::JSON_COMPACT).err().unwrap().code, status::INVALID_ARG);
    assert_eq!(vocab.compile(99, b"a", 0).err().unwrap().code, status::INVALID_ARG);
    assert_eq!(vocab.compile(kind::JSON_SCHEMA, b"{\"type\": ", 0).err().unwrap().code, status::BAD_FORMAT);
    assert_eq!(GrammarVocab::new(&tok, 3, -1).err().unwrap().code, status::INVALID_ARG);
    let g = vocab.compile(kind::REGEX, b"bca", 0).unwrap();
    let mut m = g.matcher().unwrap();
    // forced: "bca" is the only way, and its canonical tokenization is the one token bca
    assert_eq!(m.forced_tokens(8).unwrap(), vec![9]);
    assert_eq!(m.state().n_tokens, 0);
    let err = m.accept(0).unwrap_err(); // "a" cannot start
    assert_eq!(err.code, status::INVALID_ARG);
    assert!(err.message.contains("token 0"), "{}", err.message);
    assert_eq!(m.state().n_tokens, 0);
    m.accept(9).unwrap();
    assert_eq!(m.state().accepting, 1);
    assert_eq!(m.rollback(2).unwrap_err().code, status::INVALID_ARG);
    m.accept(eos).unwrap();
    let st = m.state();
    assert_eq!((st.n_tokens, st.ended), (2, 1));
    let mut mask = vec![0u32; 1];
    m.fill_mask(&mut mask).unwrap();
    assert_eq!(mask[0], 1 << eos);
}
