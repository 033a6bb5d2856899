#!/usr/bin/env bash
# setup-openai.sh: the official OpenAI Python client (openai 2.54.0, the last release on httpx;
# 3.x moved to httpx2), in a venv outside the repository, for serve/tests/openai_client.py, the
# real-client check of ferrite-serve. Every wheel is pinned and sha256-checked (cp311, manylinux
# x86_64: the machines' python3 is 3.11). Prints the venv's python:
#   py=$(scripts/serve/setup-openai.sh)
#   $py serve/tests/openai_client.py --base-url http://127.0.0.1:8080/v1 [--fake]
# CI does not need it: the Rust tests speak raw HTTP.
set -euo pipefail
venv=${FERRITE_OPENAI_VENV:-$HOME/.cache/ferrite-peers/openai-venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import openai; assert openai.__version__ == "2.54.0"' 2>/dev/null; then
  python3 -m venv "$venv" >&2
  reqs=$(mktemp)
  trap 'rm -f "$reqs"' EXIT
  cat > "$reqs" <<'REQS'
annotated-types==0.8.0 --hash=sha256:f072f4d804ea359e4eaf198b1af7a8b0943881a87f31bb764f8bf219bb9419e0
anyio==4.16.0 --hash=sha256:c66ae634e0b8228396b801741beb3294326d4b6102f7bba4041c0dfb58c29026
certifi==2026.10.19.post1 --hash=sha256:1324c476b4811eff41a8bc2122cd0bbd4d9c7234c725446d99ab1612b3a7fdd2
distro==1.9.0 --hash=sha256:7bffd925d65168f85027d8da9af6bddab658135b840670a223589bc0c8ef02b2
h11==0.16.0 --hash=sha256:63cf8bbe7522de3bf65932fda1d9c2772064ffb3dae62d55932da54b31cb6c86
httpcore==1.0.9 --hash=sha256:2d400746a40668fc9dec9810239072b40b4484b640a8c38fd654a024c7a1bf55
httpx==0.29.0 --hash=sha256:6734dcf742ced6e8018e45d3f9f7728975b6b3e1085a24f3e2c056069d858bd1
idna==3.20 --hash=sha256:ab7ae7122974553370f0bdb919e1a960b2cd1bc1ef0276416d896db81c14582c
jiter==0.19.0 --hash=sha256:cc4a2b70ecd4f102583344c1f8cc5dc11618665b1889286bb3b4279c19b337dd
openai==2.54.0 --hash=sha256:89089789197ccdb87f173a03145ed1598d00795220c93e96cf712b1cbf5e5f2b
pydantic==2.14.4 --hash=sha256:653a2ad9f6d8858529c77c72717d0ea991d6c6837fe683246b2f4b2bbfc3fadc
pydantic-core==2.50.5 --hash=sha256:488319076ec92908b91fc6265ce761f1d78748f69f85518564fd16bf333e1b70
sniffio==1.3.1 --hash=sha256:2f6da418d1f1e0fddd844478f41680e794e6051915791a034ff65e5f100525a2
tqdm==4.70.1 --hash=sha256:c293e525e6fef9c20e8728fd4612df02a0aa31bb5fe91ecd93e123b1b7bffa73
typing-extensions==4.16.0 --hash=sha256:481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8
typing-inspection==0.4.5 --hash=sha256:bc210535442b39e1bf2805e0c7a17dfd6a4ace760c84c7f7d16245d23a6b1c39
REQS
  "$venv/bin/pip" install -q --require-hashes --only-binary :all: -r "$reqs" >&2
fi
"$venv/bin/python" -c 'import openai; assert openai.__version__ == "2.54.0", openai.__version__' >&2
echo "$venv/bin/python"
