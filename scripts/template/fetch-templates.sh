#!/usr/bin/env bash
# fetch-templates.sh: the real chat templates that the template engine's goldens are rendered from:
# llama.cpp's models/templates/*.jinja (70 files, as the model authors publish them on the Hub),
# taken from the llama.cpp vendored in the pinned llama-cpp-python 0.3.36 sdist (PyPI,
# sha256-checked: the same file as scripts/peers/build-llamacpp.sh, shared through
# ${FERRITE_PEERS_DIR:-~/.cache/ferrite-peers}/dl/ and downloaded the same way when absent), into
#   ${FERRITE_DATA_DIR:-~/.cache/ferrite}/templates/
# Each file must match its sha256 in testdata/template/templates.sha256, the list the committed
# goldens (testdata/template/goldens.jsonl) were made from. Beside them it writes
# llamacpp-chat-template-cases.json: llama.cpp's own chat-template test cases
# (tests/test-chat-template.cpp of the same sdist, through extract_llamacpp_cases.py), checked
# against its sha256 in testdata/template/llamacpp-cases.sha256. Prints that directory on stdout (the
# only thing it prints there; progress goes to stderr). Idempotent: when the files are there and
# match, it returns at once (the 70 files' sha256 are checked, a few milliseconds).
set -euo pipefail

# the pinned sdist: these values are scripts/peers/build-llamacpp.sh's (keep them the same)
SDIST_REQ="llama-cpp-python==0.3.36"
SDIST_FILE="llama_cpp_python-0.3.36.tar.gz"
SDIST_SHA=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
PREFIX="llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates"

here="$(cd "$(dirname "$0")" && pwd)"
manifest="$here/../../testdata/template/templates.sha256"
cases_manifest="$here/../../testdata/template/llamacpp-cases.sha256"
CASES_FILE="llamacpp-chat-template-cases.json"
CASES_SRC="llama_cpp_python-0.3.36/vendor/llama.cpp/tests/test-chat-template.cpp"
data="${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}"
out="$data/templates"
peers="${FERRITE_PEERS_DIR:-$HOME/.cache/ferrite-peers}"
die() { echo "fetch-templates: error: $*" >&2; exit 1; }
log() { echo "fetch-templates: $*" >&2; }

[ -f "$manifest" ] || die "no $manifest"
want=$(wc -l < "$manifest")
[ -f "$cases_manifest" ] || die "no $cases_manifest"
cases_ok() { [ -f "$out/$CASES_FILE" ] && (cd "$out" && sha256sum --check --quiet --strict "$cases_manifest" >/dev/null 2>&1); }
# already there: every listed file present with its sha256, no other .jinja beside them, the cases
if [ -d "$out" ] && [ "$(find "$out" -maxdepth 1 -name '*.jinja' | wc -l)" -eq "$want" ] \
  && (cd "$out" && sha256sum --check --quiet --strict "$manifest" >/dev/null 2>&1) && cases_ok; then
  echo "$out"
  exit 0
fi

# --- the sdist (pip checks the hash; a file already here is checked again) ---
dl="$peers/dl"
sdist="$dl/$SDIST_FILE"
mkdir -p "$dl" "$data"
tmp=$(mktemp -d "$dl/.templates.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [ ! -f "$sdist" ] || [ "$(sha256sum "$sdist" | cut -d' ' -f1)" != "$SDIST_SHA" ]; then
  echo "$SDIST_REQ --hash=sha256:$SDIST_SHA" > "$tmp/req.txt"
  log "pip download $SDIST_REQ (sdist, 77 MB, sha256 $SDIST_SHA)"
  python3 -m pip download --quiet --no-cache-dir --no-deps --no-binary llama-cpp-python --require-hashes \
    -r "$tmp/req.txt" -d "$tmp" >&2 || die "pip download of $SDIST_REQ failed"
  [ "$(sha256sum "$tmp/$SDIST_FILE" | cut -d' ' -f1)" = "$SDIST_SHA" ] || die "$SDIST_FILE: wrong sha256"
  mv -f "$tmp/$SDIST_FILE" "$sdist"
fi

# --- llama.cpp's chat-template test cases, extracted from its test source ---
make_cases() { # into directory $1
  tar -xzOf "$sdist" "$CASES_SRC" > "$tmp/test-chat-template.cpp" || die "no $CASES_SRC in the sdist"
  python3 "$here/extract_llamacpp_cases.py" "$tmp/test-chat-template.cpp" "$1/$CASES_FILE" >&2
  (cd "$1" && sha256sum --check --quiet --strict "$cases_manifest" >&2) \
    || die "the extracted cases do not match $cases_manifest"
}
# the templates are fine and only the cases are missing: make them in place
if [ -d "$out" ] && [ "$(find "$out" -maxdepth 1 -name '*.jinja' | wc -l)" -eq "$want" ] \
  && (cd "$out" && sha256sum --check --quiet --strict "$manifest" >/dev/null 2>&1); then
  make_cases "$out"
  echo "$out"
  exit 0
fi

# --- extract the .jinja files, check them against the manifest, then put them in place ---
log "extracting $PREFIX/*.jinja into $out"
mkdir -p "$tmp/x"
tar -xzf "$sdist" -C "$tmp/x" --strip-components=5 --wildcards "$PREFIX/*.jinja"
got=$(find "$tmp/x" -maxdepth 1 -name '*.jinja' | wc -l)
[ "$got" -eq "$want" ] || die "the sdist has $got templates, $manifest lists $want"
(cd "$tmp/x" && sha256sum --check --quiet --strict "$manifest" >&2) \
  || die "the extracted templates do not match $manifest"
make_cases "$tmp/x"
rm -rf "$out.new"
mv "$tmp/x" "$out.new"
rm -rf "$out"
mv "$out.new" "$out"
log "$got templates in $out"
echo "$out"
