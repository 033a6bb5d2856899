"""Golden ids for the tokenizer.json components the real vocabularies do not use, as edits of the
Qwen2.5 tokenizer.json (rust_tests/tests/tokenizer.rs applies the same edits to the same file):
- variant "normalizers": normalizer Sequence[NFKC, Lowercase], pre-tokenizer Sequence[Digits
  (individual_digits=false), Whitespace, ByteLevel(add_prefix_space, no regex)];
- variant "added": added-token flags (<|im_start|> lstrip, <|im_end|> rstrip, a normalized
  non-special token "The quick", a single_word token "fox") and a TemplateProcessing post-processor
  (<|im_start|> $A <|im_end|>), encoded with add_special_tokens=True.

usage: python3 make_variant_golden.py normalizers|added QWEN_TOKENIZER_JSON CORPUS OUT.golden.gz
Needs tokenizers==0.23.3 on the path (scripts/setup.sh installs it into ~/.cache/ferrite/py).
Output format as make_goldens.py: one line per document, "<round-trips 0/1>\t<ids>"."""
import gzip
import json
import sys

from tokenizers import Tokenizer

variant, src, corpus, out = sys.argv[1:5]
j = json.load(open(src, encoding="utf-8"))
add_special = False
if variant == "normalizers":
    j["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": False},
        {"type": "Whitespace"},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": False}]}
elif variant == "added":
    for t in j["added_tokens"]:
        if t["content"] == "<|im_start|>":
            t["lstrip"] = True
        if t["content"] == "<|im_end|>":
            t["rstrip"] = True
    top = max(t["id"] for t in j["added_tokens"])
    j["added_tokens"].append({"id": top + 1, "content": "The quick", "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": True, "special": False})
    j["added_tokens"].append({"id": top + 2, "content": "fox", "single_word": True, "lstrip": False,
                              "rstrip": False, "normalized": False, "special": False})
    j["post_processor"] = {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "<|im_end|>", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {
                               "<|im_start|>": {"id": "<|im_start|>", "ids": [151644], "tokens": ["<|im_start|>"]},
                               "<|im_end|>": {"id": "<|im_end|>", "ids": [151645], "tokens": ["<|im_end|>"]}}}
    add_special = True
else:
    sys.exit(f"unknown variant {variant}")
tok = Tokenizer.from_str(json.dumps(j))
docs = open(corpus, "rb").read().split(b"\x1e")
lines = []
for d in docs:
    text = d.decode("utf-8")
    ids = tok.encode(text, add_special_tokens=add_special).ids
    rt = tok.decode(ids, skip_special_tokens=False) == text
    lines.append(f"{int(rt)}\t{' '.join(map(str, ids))}\n")
with open(out, "wb") as f:
    with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as g:
        g.write("".join(lines).encode())
print(f"{len(docs)} documents, {sum(len(l.split()) - 1 for l in lines)} ids -> {out}")
