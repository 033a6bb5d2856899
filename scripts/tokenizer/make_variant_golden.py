"""Golden ids for the normalizer and pre-tokenizer components the real vocabularies do not use:
the Qwen2.5 vocabulary with its normalizer replaced by Sequence[NFKC, Lowercase] and its
pre-tokenizer by Sequence[Digits(individual_digits=false), Whitespace, ByteLevel(add_prefix_space,
no regex)]. rust_tests/tests/tokenizer.rs applies the same edit (variant_json) to the same file.

usage: python3 make_variant_golden.py QWEN_TOKENIZER_JSON CORPUS OUT.golden.gz
Needs tokenizers==0.23.3 on the path (scripts/setup.sh installs it into ~/.cache/ferrite/py).
Output format as make_goldens.py: one line per document, "<round-trips 0/1>\t<ids>"."""
import gzip
import json
import sys

from tokenizers import Tokenizer

src, corpus, out = sys.argv[1:4]
j = json.load(open(src, encoding="utf-8"))
j["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}
j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Digits", "individual_digits": False},
    {"type": "Whitespace"},
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": False}]}
tok = Tokenizer.from_str(json.dumps(j))
docs = open(corpus, "rb").read().split(b"\x1e")
lines = []
for d in docs:
    text = d.decode("utf-8")
    ids = tok.encode(text, add_special_tokens=False).ids
    rt = tok.decode(ids, skip_special_tokens=False) == text
    lines.append(f"{int(rt)}\t{' '.join(map(str, ids))}\n")
with open(out, "wb") as f:
    with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as g:
        g.write("".join(lines).encode())
print(f"{len(docs)} documents, {sum(len(l.split()) - 1 for l in lines)} ids -> {out}")
