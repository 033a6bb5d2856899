"""Peer for benches/benches/tokenizer.rs: times Hugging Face tokenizers (one thread) on the same
tokenizer.json and texts as ferrite, and prints the seconds one pass takes.

usage: hf_tokenizers.py TOKENIZER_JSON TEXTS_FILE encode|decode ITERS
TEXTS_FILE holds documents separated by the byte 0x1E. Prints one line: the total seconds of ITERS
passes over all documents (after one untimed warm-up pass), measured with perf_counter."""
import os
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Tokenizer  # noqa: E402

path, texts_file, mode, iters = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
tok = Tokenizer.from_file(path)
docs = [d.decode("utf-8") for d in open(texts_file, "rb").read().split(b"\x1e")]
ids = [tok.encode(d, add_special_tokens=False).ids for d in docs]
if mode == "encode":
    def one_pass():
        for d in docs:
            tok.encode(d, add_special_tokens=False)
else:
    def one_pass():
        for i in ids:
            tok.decode(i, skip_special_tokens=False)
one_pass()
start = time.perf_counter()
for _ in range(iters):
    one_pass()
print(time.perf_counter() - start)
