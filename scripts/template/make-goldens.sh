#!/usr/bin/env bash
# make-goldens.sh: renders the real chat templates (scripts/template/fetch-templates.sh) over the
# message cases of testdata/template/cases.json with Jinja2, exactly as Hugging Face transformers'
# apply_chat_template does, into testdata/template/goldens.jsonl and contexts.json
# (scripts/template/make_goldens.py; its arguments pass through, e.g. --check).
#
# Jinja2 3.1.6 and MarkupSafe 3.0.4 (the newest releases; transformers 5.25.0 asks for
# jinja2>=3.1.6) come from PyPI as pinned, sha256-checked wheels (--require-hashes; MarkupSafe for
# CPython 3.11-3.13 on manylinux x86-64) in a venv outside the repository:
#   ${FERRITE_JINJA_VENV:-${FERRITE_PEERS_DIR:-~/.cache/ferrite-peers}/jinja-venv}
# transformers itself is not needed. CI does not run this: the tests read the committed goldens.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${FERRITE_JINJA_VENV:-${FERRITE_PEERS_DIR:-$HOME/.cache/ferrite-peers}/jinja-venv}"
check='import importlib.metadata as m
v = (m.version("Jinja2"), m.version("MarkupSafe"))
assert v == ("3.1.6", "3.0.4"), v'
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "make-goldens: installing Jinja2 3.1.6 and MarkupSafe 3.0.4 into $venv" >&2
  python3 -m venv --clear "$venv" >&2
  reqs=$(mktemp)
  trap 'rm -f "$reqs"' EXIT
  cat > "$reqs" <<'REQS'
Jinja2==3.1.6 --hash=sha256:85ece4451f492d0c13c5dd7c13a64681a86afae63a5f347908daf103ce6d2f67
MarkupSafe==3.0.4 \
  --hash=sha256:6da83a088f8ef93b2d483a8232a4dbf4d69d3d8496b568a03c56becac43e1808 \
  --hash=sha256:8e124f974786f831d6043728e38296969d3579db8896fe004682f5758e613581 \
  --hash=sha256:434139499bb20b502ed3baa1f169e618f924a97e7a777fea1a49446d80106cf6
REQS
  "$venv/bin/pip" install -q --no-cache-dir --disable-pip-version-check --require-hashes --only-binary :all: \
    -r "$reqs" >&2
  rm -f "$reqs"
fi
"$venv/bin/python" -c "$check" >&2
templates=$("$here/fetch-templates.sh")
exec "$venv/bin/python" "$here/make_goldens.py" --templates "$templates" "$@"
