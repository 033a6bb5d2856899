#!/usr/bin/env bash
# setup-llguidance.sh: the peer of issue 20, llguidance 1.9.1 from PyPI (its wheel has no
# dependencies; numpy for the bitmask helpers; jsonschema to validate generated JSON), in a venv
# outside the repository. Prints the venv's
# python, to run the golden-making scripts with:
#   py=$(scripts/grammar/setup-llguidance.sh)
#   $py scripts/grammar/make_regex_goldens.py ~/.cache/ferrite/qwen2.5-tokenizer.json testdata/grammar/regex-qwen2.5.txt
#   $py scripts/grammar/make_json_goldens.py ~/.cache/ferrite/qwen2.5-tokenizer.json testdata/grammar/json-qwen2.5.txt
# CI does not need it: the tests compare against the committed goldens.
set -euo pipefail
venv=${FERRITE_LLG_VENV:-$HOME/.cache/ferrite-peers/llguidance-venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import llguidance, numpy, jsonschema' 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q "llguidance==1.9.1" numpy "jsonschema==4.23.0" >&2
fi
"$venv/bin/python" -c 'import llguidance; v = llguidance.get_version(); assert "1.9.1" in v, v' >&2
echo "$venv/bin/python"
