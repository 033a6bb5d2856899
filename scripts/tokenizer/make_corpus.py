#!/usr/bin/env python3
"""Generates testdata/tokenizer/corpus.txt, the tokenizer test corpus (about 1.2 MB of UTF-8).

Documents are separated by the single byte 0x1E (ASCII record separator), which appears in no
document; there is no separator after the last one. Every document is valid UTF-8, non-empty and at
most 8192 bytes. Also writes testdata/tokenizer/corpus.index.tsv (one line per document: index,
category, bytes, source) and prints a per-category summary.

Deterministic: seeded RNGs (one per category), text embedded here or read from two pinned sdists
(checked by sha256), fetched with `pip download` into ${FERRITE_PEERS_DIR:-~/.cache/ferrite-peers}/dl:
  docutils==0.23            English prose (docs/, PEPs) and Python code; public domain
  llama-cpp-python==0.3.36  C code and Markdown of its vendored llama.cpp, and llama.cpp's own
                            tokenizer test inputs (models/ggml-vocab-*.inp); MIT (the licence text
                            is itself one of the documents)
Unicode normalisation is applied only to characters whose NFC/NFD forms are fixed by Unicode's
stability policy, so the output does not depend on the Python version (3.8+).

Usage: python3 scripts/tokenizer/make_corpus.py [--out testdata/tokenizer] [--check]
  --check  generate in memory and compare with the committed files instead of writing them
"""
import argparse
import hashlib
import io
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import unicodedata
import zlib

RS = "\x1e"
MAX_DOC = 8192
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SDISTS = {
    "docutils": ("docutils==0.23", "docutils-0.23.tar.gz",
                 "746f5060322511280a1e50eb76846ed6bf2342984b2ac04dc42caa1a8d78799e"),
    "llama-cpp-python": ("llama-cpp-python==0.3.36", "llama_cpp_python-0.3.36.tar.gz",
                         "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"),
}


def peers_dir():
    return os.environ.get("FERRITE_PEERS_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "ferrite-peers")


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def fetch_sdist(key):
    """Returns the path of the pinned sdist, downloading it with pip if needed."""
    req, fname, sha = SDISTS[key]
    dl = os.path.join(peers_dir(), "dl")
    path = os.path.join(dl, fname)
    if os.path.exists(path) and sha256_file(path) == sha:
        return path
    os.makedirs(dl, exist_ok=True)
    pkg = req.split("==")[0]
    with tempfile.TemporaryDirectory(dir=dl) as tmp:
        rq = os.path.join(tmp, "req.txt")
        with open(rq, "w") as f:
            f.write(f"{req} --hash=sha256:{sha}\n")
        print(f"make_corpus: pip download {req} (sdist)", file=sys.stderr)
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-cache-dir", "--no-deps",
                            "--no-binary", pkg, "--require-hashes", "-r", rq, "-d", tmp],
                           capture_output=True, text=True)
        got = os.path.join(tmp, fname)
        if r.returncode != 0 or not os.path.exists(got):
            sys.exit(f"make_corpus: pip download of {req} failed:\n{r.stdout}{r.stderr}")
        os.replace(got, path)
    if sha256_file(path) != sha:
        sys.exit(f"make_corpus: {path} does not have sha256 {sha}")
    return path


class Sdist:
    def __init__(self, key):
        self.tar = tarfile.open(fetch_sdist(key))
        self.members = {m.name: m for m in self.tar.getmembers() if m.isfile()}
        self.names = sorted(self.members)

    def text(self, name):
        return self.tar.extractfile(self.members[name]).read().decode("utf-8")


# ---------------------------------------------------------------------------------------------
# helpers

def utf8len(s):
    return len(s.encode("utf-8"))


def clip(s, limit=MAX_DOC):
    """Longest prefix of s whose UTF-8 is at most limit bytes (never splits a code point)."""
    b = s.encode("utf-8")
    if len(b) <= limit:
        return s
    b = b[:limit]
    while b and (b[-1] & 0xC0) == 0x80:
        b = b[:-1]
    if b and b[-1] >= 0xC0:
        b = b[:-1]
    return b.decode("utf-8")


def pack(pieces, rng, lo, hi, sep=""):
    """Concatenates pieces (joined by sep) into documents of random target size in [lo, hi] bytes;
    a piece longer than MAX_DOC is cut at code point boundaries."""
    docs, cur = [], ""
    target = rng.randint(lo, hi)
    for p in pieces:
        while utf8len(p) > MAX_DOC:
            head = clip(p, rng.randint(lo, min(hi, MAX_DOC)))
            if cur:
                docs.append(cur)
                cur = ""
            docs.append(head)
            p = p[len(head):]
        add = (sep if cur else "") + p
        if cur and utf8len(cur) + utf8len(add) > target:
            docs.append(cur)
            cur, target = p, rng.randint(lo, hi)
        else:
            cur += add
    if cur:
        docs.append(cur)
    return [d for d in docs if d]


def take_budget(docs, budget):
    out, n = [], 0
    for d in docs:
        if n >= budget:
            break
        out.append(d)
        n += utf8len(d)
    return out


def lines_chunks(text, rng, lo, hi):
    """Cuts source code into documents at line boundaries."""
    lines = text.splitlines(keepends=True)
    return pack(lines, rng, lo, hi)


# ---------------------------------------------------------------------------------------------
# embedded natural-language text (written for this corpus)

ZH = [
    "今天的天气非常好，我们一起去公园散步吧。",
    "这个程序把文本切分成词元，然后查表得到编号。",
    "北京是中国的首都，也是一座有三千多年历史的城市。",
    "我想在苹果公司工作一千三百一十四天。",
    "请问附近有没有地铁站？我迷路了。",
    "机器学习模型需要大量的数据和计算资源。",
    "他一边喝茶，一边读着昨天的报纸。",
    "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。",
    "這是一段繁體中文的句子，用來測試不同的字形。",
    "電腦、網絡與軟體在臺灣和香港常用繁體字書寫。",
    "价格是￥128.50，打八折以后是多少钱？",
    "《红楼梦》是中国古典小说的巅峰之作。",
    "“你好！”她笑着说，“好久不见。”",
    "第一章：引言；第二章：方法；第三章：结果。",
    "数据压缩率达到了百分之九十七点五。",
]
JA = [
    "今日はとても良い天気ですね。散歩に行きましょう。",
    "このプログラムは文章をトークンに分割します。",
    "東京タワーの高さは三百三十三メートルです。",
    "わたしはコーヒーよりお茶のほうが好きです。",
    "すみません、駅はどこにありますか？",
    "カタカナで書くと「コンピューター」になります。",
    "古池や蛙飛び込む水の音。",
    "吾輩は猫である。名前はまだ無い。",
    "ひらがな、カタカナ、漢字を混ぜて書くのが日本語の特徴です。",
    "明日の会議は午後３時から始まります。",
    "ｶﾀｶﾅの半角文字もときどき使われます。",
    "「ありがとうございました」と彼女は言った。",
    "ラーメン、すし、てんぷらが大好きです！",
    "平成から令和へ、元号が変わりました。",
]
KO = [
    "오늘은 날씨가 정말 좋네요. 같이 산책하러 갈까요?",
    "이 프로그램은 문장을 토큰으로 나눕니다.",
    "서울은 대한민국의 수도입니다.",
    "한글은 세종대왕이 만든 문자입니다.",
    "저는 커피보다 차를 더 좋아해요.",
    "실례합니다, 지하철역이 어디에 있나요?",
    "컴퓨터 과학을 공부하는 것은 재미있습니다.",
    "가나다라마바사아자차카타파하",
    "안녕하세요! 만나서 반갑습니다.",
    "내일 오후 세 시에 회의가 있습니다.",
    "김치찌개와 불고기를 먹었어요.",
    "대한민국 헌법 제1조 ① 대한민국은 민주공화국이다.",
]
VI = [
    "Tiếng Việt có sáu thanh điệu: ngang, huyền, sắc, hỏi, ngã, nặng.",
    "Hôm nay trời đẹp quá, chúng ta đi dạo nhé.",
    "Cửa Việt là một cửa biển ở tỉnh Quảng Trị.",
    "Tôi muốn học lập trình máy tính.",
    "Người Việt Nam rất hiếu khách và thân thiện.",
    "Phở bò Hà Nội nổi tiếng khắp thế giới.",
    "Đường đi khó, không khó vì ngăn sông cách núi.",
]
HI = [
    "नमस्ते, आप कैसे हैं?",
    "भारत एक विशाल और विविधतापूर्ण देश है।",
    "यह प्रोग्राम पाठ को टोकन में विभाजित करता है।",
    "हिन्दी देवनागरी लिपि में लिखी जाती है।",
    "मुझे चाय बहुत पसंद है।",
    "संस्कृत भाषा में क्षत्रिय, ज्ञान और श्री जैसे संयुक्ताक्षर हैं।",
    "कल सुबह दस बजे बैठक होगी।",
]
AR = [
    "مرحبا بالعالم، كيف حالك اليوم؟",
    "اللغة العربية تكتب من اليمين إلى اليسار.",
    "هذا البرنامج يقسم النص إلى رموز.",
    "بِسْمِ اللَّهِ الرَّحْمَٰنِ الرَّحِيمِ",
    "القاهرة هي عاصمة مصر.",
    "الأرقام العربية: ٠١٢٣٤٥٦٧٨٩ والفارسية: ۰۱۲۳۴۵۶۷۸۹",
    "كَتَبَ الطَّالِبُ الدَّرْسَ بِعِنَايَةٍ.",
]
HE = [
    "שלום עולם, מה שלומך?",
    "העברית נכתבת מימין לשמאל.",
    "בְּרֵאשִׁית בָּרָא אֱלֹהִים אֵת הַשָּׁמַיִם וְאֵת הָאָרֶץ.",
    "ירושלים היא עיר עתיקה.",
    "התוכנית מחלקת את הטקסט לאסימונים.",
]
OTHER = [
    "Привет, мир! Как у тебя дела? Съешь же ещё этих мягких французских булок.",
    "Ελληνικά: Καλημέρα κόσμε, τι κάνεις; Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ สวัสดีครับ",
    "ქართული ენა ძალიან ლამაზია.",
    "Հայերենը հնդեվրոպական լեզու է։",
    "አማርኛ በኢትዮጵያ የሚነገር ቋንቋ ነው።",
    "தமிழ் ஒரு பழமையான மொழி.",
    "বাংলা ভাষা খুব মিষ্টি।",
    "ᠮᠣᠩᠭᠣᠯ ᠬᠡᠯᠡ",
    "ᐃᓄᒃᑎᑐᑦ",
    "Żółć gęślą jaźń. Zażółć gęślą jaźń.",
    "Größenwahn über Äpfel, Öl und Übermut; Straße.",
    "Ça déçoit: l'élève a oublié où était la forêt, naïve Noël.",
    "Ærøskøbing, Ålborg, smørrebrød.",
    "Čeština: Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Türkçe: Pijamalı hasta yağız şoföre çabucak güvendi. İstanbul, ığdır.",
    "Español: ¿Dónde está la biblioteca? ¡Olé, señor Muñoz!",
    "Português: Não há coração que aguente; ação, informação.",
    "Română: Științele și țările; în Brașov.",
    "Íslenska: Þórður og Ævar fóru í ferð.",
]

EN_SENT = [
    "The quick brown fox jumps over the lazy dog.",
    "A tokenizer turns text into a sequence of integers.",
    "She sells sea shells by the sea shore.",
    "Byte pair encoding merges the most frequent pair of symbols, again and again.",
    "In 1969, two people walked on the Moon for the first time.",
    "Please read the instructions carefully before you begin.",
    "It was the best of times, it was the worst of times.",
    "The model predicts the next token given all the previous ones.",
    "Colorless green ideas sleep furiously.",
    "Every rule has an exception, and every exception has a rule.",
]

RUST_SNIPPETS = [
    '''use std::collections::HashMap;
use std::fmt;

/// A byte-level BPE merge table.
#[derive(Debug, Clone, Default)]
pub struct Merges {
    ranks: HashMap<(u32, u32), u32>,
}

impl Merges {
    pub fn new() -> Self {
        Self { ranks: HashMap::new() }
    }

    pub fn insert(&mut self, a: u32, b: u32, rank: u32) -> Option<u32> {
        self.ranks.insert((a, b), rank)
    }

    /// Returns the rank of the pair, if it can be merged.
    #[inline]
    pub fn rank(&self, a: u32, b: u32) -> Option<u32> {
        self.ranks.get(&(a, b)).copied()
    }
}

impl fmt::Display for Merges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Merges({} pairs)", self.ranks.len())
    }
}
''',
    '''fn encode_word(word: &[u8], merges: &Merges, out: &mut Vec<u32>) {
    let mut parts: Vec<u32> = word.iter().map(|&b| b as u32).collect();
    loop {
        let mut best: Option<(usize, u32)> = None;
        for i in 0..parts.len().saturating_sub(1) {
            if let Some(r) = merges.rank(parts[i], parts[i + 1]) {
                match best {
                    Some((_, br)) if br <= r => {}
                    _ => best = Some((i, r)),
                }
            }
        }
        let Some((i, r)) = best else { break };
        parts[i] = 256 + r;
        parts.remove(i + 1);
    }
    out.extend_from_slice(&parts);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_word_gives_no_tokens() {
        let mut out = Vec::new();
        encode_word(b"", &Merges::new(), &mut out);
        assert!(out.is_empty(), "expected no tokens, got {:?}", out);
    }
}
''',
    '''pub enum Token<'a> {
    Word(&'a str),
    Number { value: i64, radix: u8 },
    Special(u32),
    Eof,
}

pub fn classify(s: &str) -> Token<'_> {
    match s {
        "" => Token::Eof,
        "<|endoftext|>" => Token::Special(151_643),
        _ if s.starts_with("0x") => match i64::from_str_radix(&s[2..], 16) {
            Ok(v) => Token::Number { value: v, radix: 16 },
            Err(_) => Token::Word(s),
        },
        _ => s.parse::<i64>().map_or(Token::Word(s), |v| Token::Number { value: v, radix: 10 }),
    }
}

unsafe extern "C" fn ferrite_free(ptr: *mut core::ffi::c_void) {
    if !ptr.is_null() {
        libc::free(ptr);
    }
}

const TABLE: [u8; 16] = *b"0123456789abcdef";
static GREETING: &str = "héllo, wörld — 世界 🌍";
''',
    '''#![allow(dead_code)]
use std::io::{self, BufRead, Write};
use std::sync::{Arc, Mutex};
use std::thread;

fn main() -> io::Result<()> {
    let counts = Arc::new(Mutex::new(vec![0usize; 256]));
    let stdin = io::stdin();
    let lines: Vec<String> = stdin.lock().lines().collect::<Result<_, _>>()?;
    let handles: Vec<_> = lines
        .chunks(64)
        .map(|chunk| {
            let chunk = chunk.to_vec();
            let counts = Arc::clone(&counts);
            thread::spawn(move || {
                let mut local = [0usize; 256];
                for line in &chunk {
                    for &b in line.as_bytes() {
                        local[b as usize] += 1;
                    }
                }
                let mut c = counts.lock().unwrap();
                for (i, n) in local.iter().enumerate() {
                    c[i] += n;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("worker panicked");
    }
    let mut out = io::stdout().lock();
    for (b, n) in counts.lock().unwrap().iter().enumerate().filter(|(_, &n)| n > 0) {
        writeln!(out, "{:#04x}\\t{}", b, n)?;
    }
    Ok(())
}
''',
    '''macro_rules! check {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err(format!($($arg)+));
        }
    };
}

trait Decoder {
    type Output;
    fn decode(&self, ids: &[u32]) -> Result<Self::Output, String>;
}

struct ByteDecoder<'v> {
    vocab: &'v [Vec<u8>],
}

impl<'v> Decoder for ByteDecoder<'v> {
    type Output = Vec<u8>;

    fn decode(&self, ids: &[u32]) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            check!((id as usize) < self.vocab.len(), "id {} out of range ({})", id, self.vocab.len());
            out.extend_from_slice(&self.vocab[id as usize]);
        }
        Ok(out)
    }
}

#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct TokenId(pub u32);
''',
]

# ---------------------------------------------------------------------------------------------
# categories; each returns a list of documents


def cat_prose_en(rng, docu, llama):
    files = [n for n in docu.names if n.endswith(".rst") and ("/docs/" in n or n.count("/") == 1)]
    rng.shuffle(files)
    paras = []
    for n in files:
        paras += [p for p in docu.text(n).split("\n\n") if p.strip()]
    docs = take_budget(pack(paras, rng, 400, 8000, sep="\n\n"), 300_000)
    return docs


def cat_licences(rng, docu, llama):
    # the MIT licence of llama.cpp (whose code and docs are excerpted here) and docutils' COPYING
    return [llama.text("llama_cpp_python-0.3.36/vendor/llama.cpp/LICENSE"),
            llama.text("llama_cpp_python-0.3.36/LICENSE.md")] + \
        pack(docu.text("docutils-0.23/COPYING.rst").split("\n\n"), rng, 2000, 8000, sep="\n\n")


def cat_prose_crlf(rng, docu, llama):
    files = [n for n in docu.names if n.endswith(".rst") and "/docs/user/" in n]
    rng.shuffle(files)
    paras = []
    for n in files[:4]:
        paras += [p for p in docu.text(n).split("\n\n") if p.strip()]
    docs = take_budget(pack(paras, rng, 300, 4000, sep="\n\n"), 30_000)
    return [d.replace("\n", "\r\n") for d in docs]


def cat_markdown(rng, docu, llama):
    files = [n for n in llama.names if "/vendor/llama.cpp/docs/" in n and n.endswith(".md")]
    rng.shuffle(files)
    paras = []
    for n in files[:12]:
        paras += [p for p in llama.text(n).split("\n\n") if p.strip()]
    return take_budget(pack(paras, rng, 500, 8000, sep="\n\n"), 60_000)


def cat_code_python(rng, docu, llama):
    files = []
    for n in docu.names:
        if n.endswith(".py") and n.startswith("docutils-0.23/docutils/"):
            t = docu.text(n)
            if "public domain" in t[:1500]:
                files.append(n)
    rng.shuffle(files)
    docs = []
    for n in files:
        docs += lines_chunks(docu.text(n), rng, 1000, 8000)
        if sum(map(utf8len, docs)) > 110_000:
            break
    return take_budget(docs, 110_000)


def tabify(code, width=4):
    out = []
    for line in code.splitlines(keepends=True):
        stripped = line.lstrip(" ")
        n = len(line) - len(stripped)
        out.append("\t" * (n // width) + " " * (n % width) + stripped)
    return "".join(out)


def cat_code_c(rng, docu, llama):
    base = "llama_cpp_python-0.3.36/vendor/llama.cpp/ggml/"
    files = [base + p for p in ("src/ggml.c", "src/ggml-quants.c", "src/ggml-alloc.c", "include/ggml.h",
                                "include/gguf.h", "src/ggml-cpu/quants.c")]
    docs = []
    for n in files:
        chunks = lines_chunks(llama.text(n), rng, 1500, 8000)
        start = rng.randrange(max(1, len(chunks) - 4))
        docs += chunks[start:start + 4]
    docs = take_budget(docs, 120_000)
    # every other document re-indented with tabs (4 spaces -> 1 tab), like kernel-style C
    return [tabify(d) if i % 2 else d for i, d in enumerate(docs)]


def cat_code_rust(rng, docu, llama):
    docs = []
    idents = ["merges", "ranks", "parts", "vocab", "counts", "local", "chunk", "handles", "best"]
    while sum(map(utf8len, docs)) < 40_000:
        s = rng.choice(RUST_SNIPPETS)
        # rename a few identifiers so the documents are not all identical
        for w in rng.sample(idents, 3):
            s = s.replace(w, w + "_" + rng.choice(["x", "tmp", "v2", "inner", "ß", "名"]))
        if rng.random() < 0.4:
            s = tabify(s)
        if rng.random() < 0.3:
            s = s + "\n" + clip(rng.choice(RUST_SNIPPETS), 8192 - utf8len(s) - 1)
        docs.append(clip(s))
    return docs


def rand_json_value(rng, depth):
    r = rng.random()
    if depth > 3 or r < 0.35:
        k = rng.randrange(8)
        if k == 0:
            return rng.randint(-10**12, 10**12)
        if k == 1:
            return round(rng.uniform(-1e6, 1e6), rng.randrange(0, 9))
        if k == 2:
            return rng.choice([True, False, None])
        if k == 3:
            return rng.choice(ZH + JA + KO + OTHER + EN_SENT)
        if k == 4:
            return "line1\nline2\t\"quoted\" \\ back\\slash \u00e9\u20ac\U0001F600"
        if k == 5:
            return rng.random() * 10 ** rng.randint(-30, 30)
        if k == 6:
            return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_0123456789") for _ in range(rng.randint(1, 20)))
        return rng.choice(EN_SENT)
    if r < 0.7:
        return {rng.choice(["id", "name", "text", "tokens", "ids", "score", "meta", "vocab", "merges", "type",
                            "special", "normalizer", "content", "lstrip", "rstrip", "名前", "ключ", "clé"]) + str(i):
                rand_json_value(rng, depth + 1) for i in range(rng.randint(1, 6))}
    return [rand_json_value(rng, depth + 1) for _ in range(rng.randint(0, 8))]


def cat_code_json(rng, docu, llama):
    docs = []
    while sum(map(utf8len, docs)) < 50_000:
        v = {"version": "1.0", "data": [rand_json_value(rng, 1) for _ in range(rng.randint(1, 4))]}
        style = rng.randrange(4)
        ea = rng.random() < 0.3
        if style == 0:
            s = json.dumps(v, indent=2, ensure_ascii=ea)
        elif style == 1:
            s = json.dumps(v, indent=4, ensure_ascii=ea)
        elif style == 2:
            s = json.dumps(v, indent="\t", ensure_ascii=ea)
        else:
            s = json.dumps(v, separators=(",", ":"), ensure_ascii=ea)
        docs.append(clip(s))
    return docs


def rand_chars(rng, ranges, n):
    out = []
    for _ in range(n):
        lo, hi = rng.choice(ranges)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


CJK_RANGES = [(0x4E00, 0x9FA5), (0x3400, 0x4DB5), (0x3041, 0x3096), (0x30A1, 0x30FA), (0xAC00, 0xD7A3),
              (0x20000, 0x2A6D6), (0xFF66, 0xFF9D), (0x3001, 0x3003), (0x300C, 0x3011)]


def cat_cjk(rng, docu, llama):
    docs = []
    while sum(map(utf8len, docs)) < 150_000:
        kind = rng.randrange(5)
        parts = []
        target = rng.randint(200, 8000)
        while utf8len("".join(parts)) < target:
            if kind == 0:
                parts.append(rng.choice(ZH))
            elif kind == 1:
                parts.append(rng.choice(JA))
            elif kind == 2:
                parts.append(rng.choice(KO) + " ")
            elif kind == 3:  # mixed with English, numbers and newlines
                parts.append(rng.choice(ZH + JA + KO + EN_SENT) + rng.choice(["", " ", "\n", "\n\n", " 2024年", "abc"]))
            else:  # random characters from the CJK, kana and Hangul blocks, in short runs
                parts.append(rand_chars(rng, CJK_RANGES, rng.randint(1, 30)) + rng.choice(["", " ", "。", "，", "\n", "、"]))
        docs.append(clip("".join(parts), min(target + 100, MAX_DOC)))
    return docs


EMOJI = ["😀", "😂", "🥲", "😶\u200d🌫️", "🦙", "🚀", "✅", "❤", "❤️", "♥️", "☺", "☺️", "✈️", "🌍", "🔥", "💯", "🙏",
         "👍", "👍🏻", "👍🏼", "👍🏽", "👍🏾", "👍🏿", "👋🏾", "🧑🏽\u200d🚀", "👩\u200d💻", "👨\u200d👩\u200d👧\u200d👦",
         "👩\u200d❤️\u200d💋\u200d👨", "🏳️\u200d🌈", "🏳️\u200d⚧️", "🏴\u200d☠️", "👁️\u200d🗨️", "🧔🏻\u200d♂️",
         "🇺🇸", "🇯🇵", "🇩🇪", "🇫🇷", "🇨🇳", "🇰🇷", "🇧🇷", "🇮🇳", "🇺🇦", "🇪🇺", "🇺🇳",
         "🏴\U000E0067\U000E0062\U000E0065\U000E006E\U000E0067\U000E007F",
         "🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F",
         "1️⃣", "#️⃣", "*️⃣", "0\u20e3", "🔟", "©️", "®", "™️", "🅰️", "🆗", "🈶", "㊗️",
         "🫠", "🫶🏼", "🪿", "🥹", "🧌", "🦩", "🫨", "\U0001FAE8", "\U0001F9D1\u200d\U0001F9D1\u200d\U0001F9D2"]


def cat_emoji(rng, docu, llama):
    docs = []
    while sum(map(utf8len, docs)) < 60_000:
        parts = []
        target = rng.randint(50, 4000)
        style = rng.randrange(4)
        while utf8len("".join(parts)) < target:
            e = rng.choice(EMOJI)
            if style == 0:
                parts.append(e)  # emoji packed together
            elif style == 1:
                parts.append(e + " ")
            elif style == 2:
                parts.append(rng.choice(EN_SENT + ZH + JA) + " " + e * rng.randint(1, 3) + rng.choice([" ", "\n", ""]))
            else:
                parts.append(rng.choice(["hi", " ok", "(", ")", ".", "!!", "?", ":", "x"]) + e)
        docs.append(clip("".join(parts)))
    return docs


def zalgo(rng, s):
    marks = [chr(c) for c in range(0x0300, 0x036F + 1)]
    return "".join(ch + "".join(rng.choice(marks) for _ in range(rng.randint(0, 6))) if ch.isalpha() else ch for ch in s)


def nfd(s):
    return unicodedata.normalize("NFD", s)


def nfc(s):
    return unicodedata.normalize("NFC", s)


def cat_combining(rng, docu, llama):
    docs = []
    decomposed_e = "caf" + "e\u0301" + " r" + "e\u0301" + "sum" + "e\u0301" + ", na" + "i\u0308" + "ve, " + "E\u0301" + "cole, " + "n\u0303" + "u, " + "a\u030a"
    pools = [VI, HI, AR, HE, OTHER]
    while sum(map(utf8len, docs)) < 90_000:
        kind = rng.randrange(6)
        target = rng.randint(100, 6000)
        parts = []
        while utf8len("".join(parts)) < target:
            if kind == 0:
                parts.append(decomposed_e + rng.choice([" ", "\n", ". "]))
            elif kind == 1:
                parts.append(rng.choice(VI) + " ")
            elif kind == 2:
                parts.append(nfd(rng.choice(VI)) + " ")  # Vietnamese, decomposed (stacked marks)
            elif kind == 3:
                parts.append(rng.choice(rng.choice(pools)) + rng.choice([" ", "\n", " - "]))
            elif kind == 4:
                parts.append(zalgo(rng, rng.choice(EN_SENT)) + " ")
            else:  # stray combining marks: at start, after space, after digits, after punctuation
                parts.append(rng.choice(["\u0301", " \u0301", "1\u0308", ".\u0327", "\u200d\u0301", "a\u0301\u0301\u0301",
                                         "\u094d", "\u0651\u064e", "\u05b0", "\u20dd", "x\u0489"]) + rng.choice([" ", "", "z"]))
        docs.append(clip("".join(parts)))
    return docs


NFD_TEXT = VI + OTHER[10:] + KO[:6] + [
    "Ångström, crème brûlée, jalapeño, façade, Zürich, São Paulo, Kraków, Reykjavík.",
    "Ǆ ǅ ǆ, ǰ, ḕ, ṩ, ẫ, ự, ǖ, ǘ, ǚ, ǜ, Ṝ, Ḹ.",
    "한국어 음절은 NFD에서 자모로 분해됩니다: 가 각 힣.",
    "が ぎ ぐ げ ご ぱ ぴ ぷ ぺ ぽ ガ ギ グ ゲ ゴ ヴ",
]


def cat_nfc_nfd(rng, docu, llama):
    """Pairs of documents with the same text, one in NFC and one in NFD (adjacent in the index)."""
    docs = []
    while sum(map(utf8len, docs)) < 50_000:
        parts = [rng.choice(NFD_TEXT) for _ in range(rng.randint(1, 12))]
        s = nfc(rng.choice(["\n", " ", "\n\n"]).join(parts))
        docs.append(s)
        docs.append(nfd(s))
    return docs


NFKC_PIECES = ["ﬁ", "ﬂ", "ﬀ", "ﬃ", "ﬄ", "ﬅ", "ﬆ", "ﬁnance", "ﬂower", "oﬃce", "①", "②", "⑳", "⑴", "⒜", "Ⓐ",
               "ⓩ", "¹", "²", "³", "⁴", "₀", "₉", "½", "¼", "⅞", "Ⅻ", "ⅷ", "㎏", "㎞", "℃", "℉", "™", "℡", "㈱",
               "㍿", "ｶ", "ｷﾞ", "ﾊﾟ", "ｱｲｳｴｵ", "Ｈｅｌｌｏ", "ＡＢＣ", "１２３", "！", "？", "（）", "＠", "～", "　",
               "ㄱ", "ㅏ", "ㅢ", "\u212b", "\u2126", "\u212a", "ǅ", "ſ", "µ", "𝐀𝐁𝐂", "𝓗𝓮𝓵𝓵𝓸", "𝟘𝟙𝟚", "ℌ", "ℕ", "ℤ",
               "…", "‥", "⁉", "‼", "ﹰ", "ﷺ", "ﷲ", "ﬡ", "ﭐ", "\u00a0", "\u2002", "\u3000", "ǈ", "ĳ", "Ĳ", "ŉ", "ʼn",
               "ᴬ", "ᵃ", "ª", "º", "°", "Å", "Ω", "K", "ℓ", "№", "℅", "⅓", "¾", "ⅰⅱⅲ", "⒈", "⒉", "㉑", "㊿"]


def cat_nfkc(rng, docu, llama):
    docs = []
    while sum(map(utf8len, docs)) < 40_000:
        target = rng.randint(50, 3000)
        parts = []
        while utf8len("".join(parts)) < target:
            p = rng.choice(NFKC_PIECES)
            parts.append(p + rng.choice(["", " ", " ", "\n", ", "]) if rng.random() < 0.7 else rng.choice(EN_SENT) + " " + p + " ")
        docs.append(clip("".join(parts)))
    return docs


def cat_whitespace(rng, docu, llama):
    docs = []
    # every run length of spaces 1..200 appears, between words and at the start/end of documents
    lengths = list(range(1, 201))
    rng.shuffle(lengths)
    for i in range(0, 200, 20):
        parts = []
        for n in lengths[i:i + 20]:
            parts.append(rng.choice(["word", "x", "Hello", "1", "(", "🦙", "中"]) + " " * n)
        s = "".join(parts)
        docs.append(s)
        docs.append(" " * rng.randint(1, 200) + s.rstrip(" ") + " " * rng.randint(1, 200))
    for n in (1, 2, 3, 7, 16, 64, 200):
        docs.append(" " * n)
        docs.append("\t" * n)
        docs.append("\n" * n)
        docs.append("\r\n" * n)
    ws = [" ", "  ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", "\r", " \n", "\n ", " \t ", "\t\n", "\n\t",
          " \r\n", "\r\n ", "\n\n\n\n", " " * 40, "\t" * 9, "\v", "\f", "\u00a0", "\u1680", "\u2000", "\u2003",
          "\u2009", "\u200a", "\u200b", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u0085", "\ufeff",
          "\u180e", " \u00a0 ", "\u3000\u3000", "\n\u3000"]
    words = ["Hello", "world", "the", "a", "12", "3.5", "中文", "日本語", "🚀", "don't", "<|im_end|>", "x", ".", "!!", "}",
             "def", "if", "return", "Ünïcödé", "\u0301"]
    while sum(map(utf8len, docs)) < 80_000:
        target = rng.randint(20, 4000)
        parts = []
        while utf8len("".join(parts)) < target:
            if rng.random() < 0.1:
                parts.append(" " * rng.randint(1, 200))
            elif rng.random() < 0.1:
                parts.append(rng.choice(["\n", "\r\n", "\t"]) * rng.randint(1, 30))
            else:
                parts.append(rng.choice(ws))
            if rng.random() < 0.6:
                parts.append(rng.choice(words))
        docs.append(clip("".join(parts)))
    return docs


def rand_digits(rng, n):
    return str(rng.randint(1, 9)) + "".join(rng.choice("0123456789") for _ in range(n - 1))


def cat_digits(rng, docu, llama):
    docs = []
    gens = [
        lambda: rand_digits(rng, rng.randint(1, 300)),
        lambda: f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 12)}f}",
        lambda: f"{rng.randint(1000, 2099):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 31):02d}",
        lambda: f"{rng.randint(1, 31):02d}/{rng.randint(1, 12):02d}/{rng.randint(1900, 2099)}",
        lambda: f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z",
        lambda: f"{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}",
        lambda: f"+1 ({rng.randint(200, 999)}) {rng.randint(200, 999)}-{rng.randint(0, 9999):04d}",
        lambda: f"0x{rng.getrandbits(rng.choice([8, 16, 32, 64])):X}",
        lambda: f"v{rng.randint(0, 20)}.{rng.randint(0, 99)}.{rng.randint(0, 999)}",
        lambda: f"{rng.randint(1, 999)},{rng.randint(0, 999):03d},{rng.randint(0, 999):03d}",
        lambda: f"{rng.uniform(0, 10):.3e}",
        lambda: f"-{rand_digits(rng, rng.randint(1, 20))}",
        lambda: f"{rand_digits(rng, 3)}abc{rand_digits(rng, 4)}def{rand_digits(rng, 2)}",
        lambda: f"${rng.randint(0, 10**6):,}.{rng.randint(0, 99):02d}",
        lambda: f"{rng.randint(0, 100)}%",
        lambda: "".join(chr(0x0660 + int(d)) for d in rand_digits(rng, rng.randint(1, 12))),  # Arabic-Indic
        lambda: "".join(chr(0x0966 + int(d)) for d in rand_digits(rng, rng.randint(1, 12))),  # Devanagari
        lambda: "".join(chr(0xFF10 + int(d)) for d in rand_digits(rng, rng.randint(1, 12))),  # full-width
        lambda: "".join(chr(0x1D7CE + int(d)) for d in rand_digits(rng, rng.randint(1, 6))),  # math bold
        lambda: rng.choice(["½", "²", "³", "Ⅳ", "①", "〇", "一二三", "٣.١٤", "3..3", "3...3", "1e-10", "1E+308"]),
        lambda: "3" * rng.randint(1, 40),
    ]
    while sum(map(utf8len, docs)) < 50_000:
        target = rng.randint(20, 3000)
        parts = []
        while utf8len("".join(parts)) < target:
            parts.append(rng.choice(gens)())
            parts.append(rng.choice([" ", " ", ", ", "\n", "", " and ", "x", ";", " = ", "\t"]))
        docs.append(clip("".join(parts)))
    return docs


def cat_contractions(rng, docu, llama):
    base = ["it's", "don't", "they're", "we've", "I'm", "you'll", "she'd", "can't", "won't", "shouldn't've",
            "y'all", "o'clock", "rock'n'roll", "'tis", "'twas", "ma'am", "James'", "the 1990's", "'s", "'t",
            "'re", "'ve", "'m", "'ll", "'d", "''", "'''", "'", "' s", "'x", "x'", "'hello'", "\"quoted\"",
            "it’s", "don’t", "I’m", "we’ll", "l'homme", "aujourd'hui", "Ma'a", "'S", "'T", "'RE", "'VE", "'M",
            "'LL", "'D", "'Re", "'rE", "'Ve", "'vE", "'Ll", "'lL", "IT'S", "DON'T", "THEY'RE", "WE'VE", "I'M",
            "YOU'LL", "SHE'D", "We'Ve", "a'lL", "'D you", "'M not", "he's'", "1's", "'s's", "''s", "'ss", "'sa",
            "'lla", "'dd", "'mm", "'vee", "'ree", "'t'", " 's", "  'll", "\n're", "中's", "🚀'd", "é's", "Ş's"]
    docs = []
    while sum(map(utf8len, docs)) < 40_000:
        target = rng.randint(50, 3000)
        parts = []
        while utf8len("".join(parts)) < target:
            parts.append(rng.choice(base))
            parts.append(rng.choice([" ", " ", "", ", ", ". ", "\n", "!", "?", " — "]))
            if rng.random() < 0.1:
                parts.append(rng.choice(EN_SENT) + " ")
        docs.append(clip("".join(parts)))
    return docs


SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
OTHER_SPECIALS = ["<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|file_sep|>", "<|begin_of_text|>",
                  "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<file_sep>",
                  "<repo_name>", "<filename>", "<jupyter_code>", "<issue_start>", "<|reserved_special_token_0|>",
                  "<s>", "</s>", "<unk>", "<pad>", "[INST]", "<think>", "</think>", "<tool_call>"]
NEAR_MISSES = ["<|im_start", "im_start|>", "<|im_end|", "< |im_end| >", "<|IM_END|>", "<||>", "<|>", "<|",
               "|>", "<<|endoftext|>>", "<|endoftext|>|>", "<|<|im_start|>", "＜|im_end|＞", "<|im_sta rt|>",
               "<|endoftext|\u200b>", "<\\|im_end\\|>", "&lt;|im_end|&gt;"]


def cat_special_tokens(rng, docu, llama):
    docs = [s for s in SPECIALS] + [" " + s for s in SPECIALS] + [s + " " for s in SPECIALS] + \
           [" " + s + " " for s in SPECIALS] + ["".join(SPECIALS), " ".join(SPECIALS), "\n".join(SPECIALS)]
    roles = ["system", "user", "assistant", "tool"]
    while sum(map(utf8len, docs)) < 50_000:
        kind = rng.randrange(4)
        target = rng.randint(30, 4000)
        parts = []
        if kind == 0:  # chat transcripts in ChatML
            while utf8len("".join(parts)) < target:
                parts.append(f"<|im_start|>{rng.choice(roles)}\n{rng.choice(EN_SENT + ZH + JA + KO + OTHER)}<|im_end|>\n")
            if rng.random() < 0.5:
                parts.append("<|im_start|>assistant\n")
        else:
            while utf8len("".join(parts)) < target:
                w = rng.choice(EN_SENT + ZH + ["foo", "bar", "x", "123", "🚀", "don't", "\n", "  ", "\t"])
                pool = SPECIALS if kind == 1 else SPECIALS + OTHER_SPECIALS + NEAR_MISSES
                sp = rng.choice(pool)
                glue = rng.choice(["", " ", "  ", "\n", "\n\n", "\t", " \n"])
                glue2 = rng.choice(["", " ", "\n", "."])
                parts.append(w + glue + sp + glue2)
                if rng.random() < 0.15:
                    parts.append(sp * rng.randint(2, 4))
        docs.append(clip("".join(parts)))
    return docs


SCRIPT_RANGES = [
    (0x0021, 0x007E), (0x00A1, 0x00FF), (0x0100, 0x017F), (0x0180, 0x024F), (0x0250, 0x02AF), (0x0370, 0x03FF),
    (0x0400, 0x04FF), (0x0531, 0x0556), (0x0561, 0x0587), (0x05D0, 0x05EA), (0x0620, 0x064A), (0x0660, 0x0669),
    (0x0710, 0x072F), (0x0780, 0x07A5), (0x0905, 0x0939), (0x0966, 0x096F), (0x0985, 0x09B9), (0x0B85, 0x0BB9),
    (0x0C05, 0x0C39), (0x0D05, 0x0D39), (0x0E01, 0x0E2E), (0x0E81, 0x0EAE), (0x0F40, 0x0F69), (0x10A0, 0x10C5),
    (0x10D0, 0x10FA), (0x1200, 0x1248), (0x13A0, 0x13F4), (0x1401, 0x166C), (0x16A0, 0x16EA), (0x1780, 0x17B3),
    (0x1820, 0x1877), (0x1E00, 0x1EFF), (0x1F00, 0x1F15), (0x2010, 0x2027), (0x2030, 0x205E), (0x20A0, 0x20B5),
    (0x2100, 0x214F), (0x2190, 0x21FF), (0x2200, 0x22FF), (0x2300, 0x23E7), (0x2460, 0x24FF), (0x2500, 0x257F),
    (0x25A0, 0x25FF), (0x2600, 0x26FF), (0x2700, 0x27BF), (0x2800, 0x28FF), (0x2E80, 0x2E99), (0x3041, 0x3096),
    (0x30A1, 0x30FA), (0x3105, 0x312C), (0x3131, 0x318E), (0x4E00, 0x9FA5), (0xA000, 0xA48C), (0xAC00, 0xD7A3),
    (0xE000, 0xF8FF), (0xF900, 0xFA2D), (0xFB00, 0xFB4F), (0xFE30, 0xFE4F), (0xFF01, 0xFFEE),
    (0x10330, 0x1034A), (0x10400, 0x1044F), (0x10000, 0x1000B), (0x1D400, 0x1D7FF), (0x1F300, 0x1F5FF),
    (0x1F600, 0x1F64F), (0x20000, 0x2A6D6), (0x13000, 0x1342E), (0x1F900, 0x1F9FF),
    # newer or unassigned in older Unicode versions, private use planes, noncharacters
    (0x1FA70, 0x1FAFF), (0x2B740, 0x2B81D), (0x31350, 0x323AF), (0x0870, 0x089F), (0x11F00, 0x11F59),
    (0xF0000, 0xF00FF), (0x10FF00, 0x10FFFD), (0xFDD0, 0xFDEF), (0xFFFE, 0xFFFF), (0x1FFFE, 0x1FFFF),
    (0x10FFFE, 0x10FFFF), (0xE0000, 0xE007F), (0xFFF0, 0xFFFD), (0x0378, 0x0379), (0x2FE0, 0x2FEF),
]


def cat_random_unicode(rng, docu, llama):
    docs = []
    while sum(map(utf8len, docs)) < 100_000:
        target = rng.randint(20, 6000)
        parts = []
        nr = rng.randint(1, 6)
        ranges = rng.sample(SCRIPT_RANGES, nr) if rng.random() < 0.5 else SCRIPT_RANGES
        while utf8len("".join(parts)) < target:
            parts.append(rand_chars(rng, ranges, rng.randint(1, 12)))
            parts.append(rng.choice([" ", " ", "", "\n", ". ", ", ", "-", "  ", "\t", "'s ", "1"]))
        s = clip("".join(parts))
        assert RS not in s
        docs.append(s)
    return docs


def cat_controls(rng, docu, llama):
    ctrl = [chr(c) for c in range(0x00, 0x20) if c != 0x1E] + ["\x7f"] + [chr(c) for c in range(0x80, 0xA0)] + \
           ["\u00ad", "\u200c", "\u200d", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
            "\u2066", "\u2067", "\u2068", "\u2069", "\u2060", "\u2061", "\ufeff", "\ufff9", "\ufffa", "\ufffb",
            "\ufffc", "\ufffd", "\U000e0001", "\U000e0020", "\u034f", "\u061c", "\u115f", "\u3164"]
    docs = ["\x00", "a\x00b", "\x00" * 10, "\ufeffHello", "\ufffd", "\x1b[31mred\x1b[0m", "tab\x0bvt\x0cff"]
    while sum(map(utf8len, docs)) < 15_000:
        target = rng.randint(10, 1500)
        parts = []
        while utf8len("".join(parts)) < target:
            parts.append(rng.choice(ctrl) * rng.randint(1, 3))
            if rng.random() < 0.5:
                parts.append(rng.choice(EN_SENT + ZH + ["x", " ", "word", "12"]))
        docs.append(clip("".join(parts)))
    return docs


def cat_tiny(rng, docu, llama):
    return ["a", "A", " ", "  ", "\t", "\n", "\r", "\r\n", "\n\n", " a", "a ", ".", "!", "é", "e\u0301", "中", "한",
            "ｶ", "ﬁ", "①", "👍", "👍🏽", "👨\u200d👩\u200d👧\u200d👦", "🇯🇵", "1", "12", "123", "1234", "12345",
            "3.14", "'s", "'S", "I'm", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<", "|", "<|", "\u0301",
            "\u00a0", "\u3000", "\U0010FFFF", "\uFFFD", "\u200d", "Hello", " Hello", "hello world", "ĠHello",
            "Ġ", "Ċ", "âĢĻ", "\\n", "\\u00e9", "\x7f", "\x1f", "\x1d"]


def cat_llamacpp_inp(rng, docu, llama):
    seen, docs = set(), []
    for n in llama.names:
        if n.startswith("llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-") and n.endswith(".inp"):
            for s in llama.text(n).split("\n__ggml_vocab_test__\n"):
                if s and s not in seen and RS not in s:
                    seen.add(s)
                    docs.append(s)
    return docs


CATEGORIES = [
    ("prose_en", cat_prose_en, "docutils-0.23 docs/*.rst (public domain)"),
    ("licences", cat_licences, "llama.cpp LICENSE, llama-cpp-python LICENSE.md, docutils COPYING.rst"),
    ("prose_crlf", cat_prose_crlf, "docutils-0.23 docs/user/*.rst with CRLF line ends"),
    ("markdown", cat_markdown, "llama-cpp-python-0.3.36 vendor/llama.cpp/docs/*.md (MIT)"),
    ("code_python", cat_code_python, "docutils-0.23 docutils/**/*.py (public domain files)"),
    ("code_c", cat_code_c, "llama-cpp-python-0.3.36 vendor/llama.cpp/ggml C sources (MIT); every other doc tab-indented"),
    ("code_rust", cat_code_rust, "embedded snippets, identifiers renamed, some tab-indented"),
    ("code_json", cat_code_json, "generated (json.dumps, indent 2/4/tab/compact)"),
    ("cjk", cat_cjk, "embedded Chinese/Japanese/Korean sentences + random CJK/kana/Hangul"),
    ("emoji", cat_emoji, "embedded emoji: ZWJ, skin tones, flags, keycaps, VS16"),
    ("combining", cat_combining, "decomposed Latin, Vietnamese (NFC+NFD), Devanagari, Arabic, Hebrew, zalgo"),
    ("nfc_nfd", cat_nfc_nfd, "pairs: same text as NFC then NFD"),
    ("nfkc", cat_nfkc, "compatibility characters: full/half width, ligatures, circled, super/subscripts"),
    ("whitespace", cat_whitespace, "space runs 1..200, tabs, CR/LF runs, Unicode spaces"),
    ("digits", cat_digits, "long numbers, decimals, dates, times, hex, non-ASCII digits"),
    ("contractions", cat_contractions, "'s 't 're 've 'm 'll 'd in all cases, curly apostrophes"),
    ("special_tokens", cat_special_tokens, "<|endoftext|> <|im_start|> <|im_end|> in text, other specials, near misses"),
    ("random_unicode", cat_random_unicode, "random code points from ~80 ranges incl. astral, PUA, noncharacters"),
    ("controls", cat_controls, "C0/C1 controls (not 0x1E), NUL, bidi and format characters"),
    ("tiny", cat_tiny, "one- to few-character documents"),
    ("llamacpp_inp", cat_llamacpp_inp, "llama.cpp models/ggml-vocab-*.gguf.inp test strings (MIT)"),
]


def build():
    docu = Sdist("docutils")
    llama = Sdist("llama-cpp-python")
    all_docs = []
    for name, fn, src in CATEGORIES:
        rng = random.Random(zlib.crc32(name.encode()) ^ 0xFE77173)
        docs = fn(rng, docu, llama)
        for d in docs:
            if not d:
                raise SystemExit(f"make_corpus: empty document in {name}")
            if RS in d:
                raise SystemExit(f"make_corpus: 0x1E in a document of {name}")
            if utf8len(d) > MAX_DOC:
                raise SystemExit(f"make_corpus: document of {utf8len(d)} bytes in {name}")
            d.encode("utf-8")  # no lone surrogates
            all_docs.append((name, d))
    # interleave the categories so any prefix of the corpus is a mix
    order = list(range(len(all_docs)))
    random.Random(20261130).shuffle(order)
    # ...but keep each NFC/NFD pair adjacent: the NFD document follows its NFC twin
    pair_of = {}
    nfc_idx = [i for i, (c, _) in enumerate(all_docs) if c == "nfc_nfd"]
    for a, b in zip(nfc_idx[0::2], nfc_idx[1::2]):
        pair_of[a] = b
    seconds = set(pair_of.values())
    final = []
    for i in order:
        if i in seconds:
            continue
        final.append(i)
        if i in pair_of:
            final.append(pair_of[i])
    docs = [all_docs[i] for i in final]
    return docs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "testdata", "tokenizer"))
    ap.add_argument("--check", action="store_true", help="compare with the files in --out instead of writing")
    a = ap.parse_args()
    docs = build()
    corpus = RS.join(d for _, d in docs).encode("utf-8")
    index = "index\tcategory\tbytes\n" + "".join(f"{i}\t{c}\t{utf8len(d)}\n" for i, (c, d) in enumerate(docs))
    srcs = {name: src for name, _, src in CATEGORIES}
    summary = {}
    for c, d in docs:
        n, b = summary.get(c, (0, 0))
        summary[c] = (n + 1, b + utf8len(d))
    print(f"{'category':16} {'docs':>6} {'bytes':>9}  source")
    for name, _, _ in CATEGORIES:
        n, b = summary.get(name, (0, 0))
        print(f"{name:16} {n:6d} {b:9d}  {srcs[name]}")
    print(f"{'total':16} {len(docs):6d} {len(corpus):9d}  (incl. {len(docs) - 1} separators)  sha256 {hashlib.sha256(corpus).hexdigest()}")
    if len(corpus) < 1_050_000:
        raise SystemExit("make_corpus: corpus smaller than 1.05 MB")
    cpath, ipath = os.path.join(a.out, "corpus.txt"), os.path.join(a.out, "corpus.index.tsv")
    if a.check:
        ok = True
        for p, want in ((cpath, corpus), (ipath, index.encode())):
            have = open(p, "rb").read() if os.path.exists(p) else None
            if have != want:
                print(f"make_corpus: {p} differs from a fresh generation", file=sys.stderr)
                ok = False
        print("make_corpus: check " + ("passed" if ok else "FAILED"))
        sys.exit(0 if ok else 1)
    os.makedirs(a.out, exist_ok=True)
    with open(cpath, "wb") as f:
        f.write(corpus)
    with open(ipath, "w", encoding="utf-8", newline="\n") as f:
        f.write(index)
    print(f"make_corpus: wrote {cpath} and {ipath}")


if __name__ == "__main__":
    main()
