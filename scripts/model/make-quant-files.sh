#!/usr/bin/env bash
# Requantizes the real SmolLM2-135M-Instruct file (Q4_1, scripts/fetch-test-data.sh) with
# llama.cpp's own quantizer (llama_model_quantize() with allow_requantize, as llama-quantize
# --allow-requantize calls it: scripts/model/requantize.cpp) into the types people download:
#   ${FERRITE_DATA_DIR:-~/.cache/ferrite}/smollm2-135m-instruct-<type>.gguf
#   type: q4_k_m q5_k_m q6_k q8_0 q2_k iq4_xs
# and checks each output's sha256 against the value recorded below. A file already there with the
# right sha256 is kept (nothing is built or run then); a wrong one is made again.
#
# The quantizer is built by scripts/peers/build-llamacpp.sh --quantize from the pinned
# llama-cpp-python 0.3.36 sdist with fixed flags (baseline x86-64, -ffp-contract=off, static), so
# the outputs are the same bytes on every x86-64 machine of this project, whatever its ISA; the
# sha256s below were recorded on AMD EPYC Zen 5 with llama-quantize itself (Release build), checked
# with a -march=native build of the same quantizer (testdata/quant/files.md says how), and again
# with requantize over libllama at C -O2 / C++ -O0 on AMD EPYC Zen 3 (2026-12-07): the same bytes. It runs on 2 threads (the result does not
# depend on the count: ggml quantizes whole rows per chunk).
#
# usage: scripts/model/make-quant-files.sh [--record]
#   --record  make every file again and print its sha256 instead of checking it (to update the
#             table after a deliberate change of the quantizer)
# env: FERRITE_DATA_DIR, FERRITE_PEERS_DIR, FERRITE_PEER_JOBS (see build-llamacpp.sh)
# EVIDENCE: C-Q-304
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
data="${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}"
SRC="smollm2-135m-instruct-q4_1.gguf"
SRC_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

# type as llama-quantize names it -> sha256 of the output
TYPES=(Q4_K_M Q5_K_M Q6_K Q8_0 Q2_K IQ4_XS)
declare -A SHA=(
  [Q4_K_M]=dc0f3a02e821146247a0af6895adf9872124f368682cb110cb9ed09ff2a9f9f1  # 105454144 bytes
  [Q5_K_M]=8170c7ef444692b3b2fe63459c326def0358807ef9be6e3cb020efb86a71015e  # 112103488 bytes
  [Q6_K]=a969ae2086dd4945a7c61594bf72b2bcc3b7df8571c92aed8f213918673a7f80  # 138382912 bytes
  [Q8_0]=7b46609d11703c058397e5cfe4cc6e4b2508cb1eb4c80ddc472a5d421fbdb508  # 144811072 bytes
  [Q2_K]=1733ab14bc423774519aa464e0d74e190617e877c9d0aa07a698b500d1788895  # 88201792 bytes
  [IQ4_XS]=5a4caecc8f966f75ff79b8f1522f76aedd2381d0722df17254e212f01526c7ba  # 91312192 bytes
)

die() { echo "make-quant-files: error: $*" >&2; exit 1; }
log() { echo "make-quant-files: $*" >&2; }
record=0
case "${1:-}" in
  "") ;;
  --record) record=1 ;;
  *) echo "usage: scripts/model/make-quant-files.sh [--record]" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "usage: scripts/model/make-quant-files.sh [--record]" >&2; exit 2; }

out_of() { echo "$data/smollm2-135m-instruct-$(tr 'A-Z' 'a-z' <<<"$1").gguf"; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

todo=()
for t in "${TYPES[@]}"; do
  f=$(out_of "$t")
  if [ "$record" = 0 ] && [ -f "$f" ] && [ "$(sha_of "$f")" = "${SHA[$t]}" ]; then
    continue
  fi
  todo+=("$t")
done
if [ ${#todo[@]} -eq 0 ]; then
  log "all ${#TYPES[@]} requantized files present and verified"
  exit 0
fi

src="$data/$SRC"
[ -f "$src" ] || "$root/scripts/fetch-test-data.sh" >&2
[ "$(sha_of "$src")" = "$SRC_SHA" ] || die "$src does not have sha256 $SRC_SHA (run scripts/fetch-test-data.sh)"
qroot=$("$root/scripts/peers/build-llamacpp.sh" --quantize)
quantize="$qroot/build/bin/requantize"
[ -x "$quantize" ] || die "no $quantize"

failed=0
for t in "${todo[@]}"; do
  f=$(out_of "$t")
  tmp="$f.tmp.$$"
  trap 'rm -f "$tmp"' EXIT
  start=$(date +%s)
  "$quantize" "$src" "$tmp" "$t" 2 > "$tmp.log" 2>&1 \
    || { tail -20 "$tmp.log" >&2; rm -f "$tmp" "$tmp.log"; die "llama-quantize $t failed"; }
  rm -f "$tmp.log"
  got=$(sha_of "$tmp")
  secs=$(( $(date +%s) - start ))
  if [ "$record" = 1 ]; then
    mv -f "$tmp" "$f"
    echo "  [$t]=$got  # $(stat -c %s "$f") bytes, ${secs} s"
  elif [ "$got" = "${SHA[$t]}" ]; then
    mv -f "$tmp" "$f"
    log "$t: $f ($(stat -c %s "$f") bytes, ${secs} s), sha256 verified"
  else
    mv -f "$tmp" "$f.bad"
    log "$t: sha256 $got, expected ${SHA[$t]}: kept as $f.bad"
    failed=1
  fi
done
[ "$failed" = 0 ] || die "some requantized files differ from the recorded sha256 (see above)"
