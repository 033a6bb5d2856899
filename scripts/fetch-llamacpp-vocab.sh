#!/usr/bin/env bash
# Fetches llama.cpp's own tokenizer test vocabularies (models/ggml-vocab-*.gguf with their .inp
# texts and .out expected ids, the files llama.cpp's test-tokenizer-0 reads) out of the pinned
# llama-cpp-python 0.3.36 source distribution, into
#   ${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}/llamacpp-vocab/
# Each file's sha256 is checked against the list below; the sdist (77 MB) is deleted afterwards.
# Idempotent: nothing is fetched when every file is present and verified.
set -euo pipefail

DIR="${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}/llamacpp-vocab"
PYTHON="${PYTHON:-python3}"
SDIST="llama_cpp_python==0.3.36"
SDIST_SHA=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e

# file sha256
MANIFEST="
ggml-vocab-gpt-2.gguf cedc56ca6e2e89f63e781696d1fd76b4b1d49e6720dee86463e915f6e90016ac
ggml-vocab-gpt-2.gguf.inp be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0
ggml-vocab-gpt-2.gguf.out 48e8c4cb3ad5c37915b225f872222567c1c4dd4d66951aa53460c8d152ff6d60
ggml-vocab-llama-bpe.gguf 97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e
ggml-vocab-llama-bpe.gguf.inp be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0
ggml-vocab-llama-bpe.gguf.out 118abf2034a197fc5c9dec5204dfdeee7004c7c70952ae577f66b99e212fab9b
ggml-vocab-qwen2.gguf 44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c
ggml-vocab-qwen2.gguf.inp be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0
ggml-vocab-qwen2.gguf.out de785bb305cc6fa9d43908ed5da337f853c0b79e971348fcfb9f0915a39c5363
ggml-vocab-starcoder.gguf fedb892b4e1bd3c1f2fcdae356440b14fb458f4264d586e5c987ed93df4e174d
ggml-vocab-starcoder.gguf.inp be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0
ggml-vocab-starcoder.gguf.out 3ef12183c57ad076f9defd8e5eb454f509f5f0865cad35646abb4c4b2d2c5764
ggml-vocab-refact.gguf ac3ceda902fed91ccf74312b305d9b86c37e4f8e35fa9cc6ef3ce34fca7d4678
ggml-vocab-refact.gguf.inp be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0
ggml-vocab-refact.gguf.out c7e5c1c5dc1dfd3e0d56576bf699d2aca0b760b80779523ea9d323aad6cd1b88
ggml-vocab-command-r.gguf a2f8cfea952ef7c391a6d92a1c309d0bd32e36384d9b9230569a7425732f27d9
ggml-vocab-command-r.gguf.inp be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0
ggml-vocab-command-r.gguf.out d2a601336e422b60a264858c01b14c5d37575fe1f9adfcafc2f3b3707903903f
ggml-vocab-mpt.gguf 59dc382612866d1fc6c11ea531318d327598f3412d9c8f8600607cdf3030898f
ggml-vocab-mpt.gguf.inp be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0
ggml-vocab-mpt.gguf.out 9d0982a7e7950b81bc2e325fb61bb7e295d2238934ab889737494de2dc4d906b
ggml-vocab-falcon.gguf 9f0bf8b0733680398b72e652e90f260f43782f326e75545fc0e49611a5ba35ad
ggml-vocab-falcon.gguf.inp be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0
ggml-vocab-falcon.gguf.out f8c80a0483582ef195c2129b69bb2e4e421b0f31ed7b35d84b63511d7ebae7cd
ggml-vocab-llama-spm.gguf 16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69
ggml-vocab-llama-spm.gguf.inp be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0
ggml-vocab-llama-spm.gguf.out ad6905c925c49c022974fe67e030382e8a4f56eb4489a0b9481dcedb1ec73b29
ggml-vocab-phi-3.gguf 967d7190d11c4842eab697079d98d56c2116e10eb617be355a2733bfc132e326
ggml-vocab-phi-3.gguf.inp be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0
ggml-vocab-phi-3.gguf.out ad6905c925c49c022974fe67e030382e8a4f56eb4489a0b9481dcedb1ec73b29
"

die() { echo "fetch-llamacpp-vocab: error: $*" >&2; exit 1; }
ok_all() {
  while read -r name sha; do
    [ -n "$name" ] || continue
    [ -f "$DIR/$name" ] && [ "$(sha256sum "$DIR/$name" | cut -d' ' -f1)" = "$sha" ] || return 1
  done <<<"$MANIFEST"
}

if ok_all; then
  echo "fetch-llamacpp-vocab: all files present and verified in $DIR"
  exit 0
fi
mkdir -p "$DIR"
WORK="$(mktemp -d "$DIR/.fetch.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
# pip would try to build the sdist's metadata (which needs its build backend): take the file's
# link from PyPI's simple index instead, and check its sha256.
"$PYTHON" - "$WORK/sdist.tar.gz" "$SDIST_SHA" <<'PY' || die "download of $SDIST failed"
import hashlib, re, sys, urllib.request
out, want = sys.argv[1], sys.argv[2]
index = urllib.request.urlopen("https://pypi.org/simple/llama-cpp-python/", timeout=120).read().decode()
url = next(u for u in re.findall(r'href="([^"]+)"', index) if "/llama_cpp_python-0.3.36.tar.gz" in u).split("#")[0]
data = urllib.request.urlopen(url, timeout=600).read()
got = hashlib.sha256(data).hexdigest()
if got != want:
    sys.exit(f"sdist sha256 {got}, expected {want}")
open(out, "wb").write(data)
PY
tarball="$WORK/sdist.tar.gz"
names=$(awk 'NF {print "*/vendor/llama.cpp/models/" $1}' <<<"$MANIFEST")
# shellcheck disable=SC2086
tar -xzf "$tarball" -C "$WORK" --wildcards $names
while read -r name sha; do
  [ -n "$name" ] || continue
  src=$(find "$WORK" -path "*/models/$name" | head -1)
  [ -f "$src" ] || die "$name is not in $SDIST"
  [ "$(sha256sum "$src" | cut -d' ' -f1)" = "$sha" ] || die "$name has the wrong sha256"
  mv -f "$src" "$DIR/$name"
done <<<"$MANIFEST"
echo "fetch-llamacpp-vocab: $(wc -w <<<"$MANIFEST" | awk '{print $1/2}') files verified in $DIR"
