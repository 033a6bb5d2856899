#!/usr/bin/env bash
# llama.cpp's perplexity of the real model on 2,000 tokens of English prose, with every position's
# negative log-likelihood: the reference c/model/llama_test.c checks ferrite's perplexity against
# (within 1%). The text is the tokenizer corpus's English prose documents (docutils' documentation,
# public domain) joined by blank lines, so it is generated from committed data. The peer comes from
# scripts/peers/build-llamacpp.sh.
# With TYPE (q4_k_m, q5_k_m, q6_k, q8_0, q2_k, iq4_xs: the files of scripts/model/make-quant-files.sh)
# the same reference for smollm2-135m-instruct-TYPE.gguf, into testdata/model/smollm2-TYPE-perplexity.txt;
# without it the Q4_1 file as fetched, into testdata/model/smollm2-perplexity.txt.
# usage: scripts/model/make_perplexity_golden.sh [TYPE]
set -euo pipefail
type=${1:-q4_1}
# llama.cpp's threads (2 as before; its output is the same with 1, which a loaded machine runs
# far faster: 2 spinning threads on 2 busy cores)
threads=${FERRITE_PEER_THREADS:-2}
[[ "$threads" =~ ^[1-9][0-9]?$ ]] || { echo "FERRITE_PEER_THREADS must be 1..99" >&2; exit 2; }
[[ "$type" =~ ^[a-z0-9_]+$ ]] && [ $# -le 1 ] || { echo "usage: scripts/model/make_perplexity_golden.sh [TYPE]" >&2; exit 2; }
golden=smollm2-perplexity.txt
[ "$type" = q4_1 ] || golden=smollm2-$type-perplexity.txt
root=$(cd "$(dirname "$0")/../.." && pwd)
peer=$("$root/scripts/peers/build-llamacpp.sh") # builds the peer on first use (with this CPU's ISAs)
model="${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}/smollm2-135m-instruct-$type.gguf"
[ -f "$model" ] || { echo "make_perplexity_golden.sh: no $model (scripts/model/make-quant-files.sh makes the requantized ones)" >&2; exit 1; }
c++ -O2 -std=c++17 "$root/scripts/model/llamacpp_perplexity.cpp" -I "$peer/src/include" -I "$peer/src/ggml/include" \
  -L "$peer/build/bin" -lllama -Wl,-rpath,"$peer/build/bin" -o "$peer/llamacpp-perplexity"
python3 - "$root" <<'PY'
import sys
root = sys.argv[1]
docs = open(f"{root}/testdata/tokenizer/corpus.txt", encoding="utf-8").read().split("\x1e")
index = [line.split("\t") for line in open(f"{root}/testdata/tokenizer/corpus.index.tsv").read().splitlines()[1:]]
prose = [docs[int(i)] for i, category, _ in index if category == "prose_en"]
text = ""
for d in prose:  # about 12 KB: comfortably more than 2,000 tokens
    text += d.strip() + "\n\n"
    if len(text) > 12000:
        break
open(f"{root}/testdata/model/perplexity-text.txt", "w", encoding="utf-8").write(text)
PY
"$peer/llamacpp-perplexity" "$model" "$root/testdata/model/perplexity-text.txt" 2000 "$threads" 2>/dev/null \
  > "$root/testdata/model/$golden"
"$root/scripts/peers/record-peer.sh" "$peer" "$golden"
tail -1 "$root/testdata/model/$golden"
