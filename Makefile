# ferrite: the two commands of README.md, and the jobs behind them.
#   make run    the main job: set up, build, print `ferrite info` with a quick kernel table, then
#               `ferrite generate --chat` on the real model (SmolLM2-135M-Instruct), then two
#               questions at once to `ferrite-serve` on it through the OpenAI API
#   make test   set up, fresh-machine dependency check, Bazel tests, Cargo tests (over Bazel's release
#               archive), benchmark smoke, plain cargo's own build (the C compiled by cc, the CUDA
#               stub), sanitizer run (Bazel's ASan archive linked into the Rust tests too), claims
#               check, header drift check
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:/usr/local/cuda/bin:$(PATH)

BAZEL ?= bazel
CARGO ?= cargo
# Bazel's output directory, where //:libferrite_static puts the archive cargo links (FERRITE_LIB_DIR)
LIB_DIR = $$($(BAZEL) info bazel-bin 2>/dev/null)

.PHONY: run serve test setup check-fresh-deps build bazel-test cargo-test cargo-fallback bench-smoke bench-compare test-sanitize check-claims check-header bench bench-quick skipped

setup:
	./scripts/setup.sh

# Every crate Cargo.lock pins comes from a package setup's list pulls in through Depends alone, and
# every pip call in setup's scripts is pinned and hashed: what passes here passes on a new machine.
check-fresh-deps: setup
	./scripts/check-fresh-deps.sh

build: setup
	$(BAZEL) build //...

DATA_DIR := $(or $(FERRITE_DATA_DIR),$(HOME)/.cache/ferrite)
# The file as fetched: the real-model tests' (serve/tests/real_model.rs)
MODEL ?= $(DATA_DIR)/smollm2-135m-instruct-q4_1.gguf
# make run's and make serve's: the Q8_0 file setup makes, the closest to the original weights
# (docs/BENCHMARKS.md, faithfulness: the Q4_1 file's rounding leaves the demo question a near-tie)
RUN_MODEL ?= $(DATA_DIR)/smollm2-135m-instruct-q8_0.gguf

run: build
	./bazel-bin/c/tools/ferrite info
	@if [ -f "$(RUN_MODEL)" ]; then \
	  echo; echo "ferrite generate --chat on $(RUN_MODEL):"; \
	  ./bazel-bin/c/tools/ferrite generate --model "$(RUN_MODEL)" --chat --system "You are a helpful assistant." \
	    --prompt "What is the capital of France?" --max-tokens 64 && \
	  echo && FERRITE_LIB_DIR=$(LIB_DIR) $(CARGO) build --release -q -p ferrite-serve && \
	  ./scripts/serve/demo.sh ./target/release/ferrite-serve "$(RUN_MODEL)"; \
	else \
	  echo; echo "make run: no model at $(RUN_MODEL) (scripts/setup.sh makes it);"; \
	  echo "falling back to the seeded tiny model, whose random weights make noise, not text:"; \
	  ./bazel-bin/c/tools/ferrite generate --tiny --prompt "the " --max-tokens 16; \
	fi

# ferrite-serve (serve/) over the Bazel-built library, in release, on the real model.
SERVE_ARGS ?= --parallel 8
serve: setup
	$(BAZEL) build //:libferrite_static
	FERRITE_LIB_DIR=$(LIB_DIR) $(CARGO) build --release -p ferrite-serve
	./target/release/ferrite-serve --model "$(RUN_MODEL)" $(SERVE_ARGS)

test: setup check-fresh-deps bazel-test cargo-test bench-smoke cargo-fallback test-sanitize check-claims check-header
	@echo "make test: all passed"

bazel-test:
	$(BAZEL) test //...
	@$(MAKE) --no-print-directory skipped

# A test that cannot run here prints SKIPPED (Bazel 4.2 has no skip status); list them so a skip
# is never mistaken for a pass.
skipped:
	@grep -rh "^SKIPPED" bazel-testlogs/ --include=test.log 2>/dev/null | sed 's/^/bazel: /' || true

# The Rust tests over Bazel's release archive (FERRITE_LIB_DIR: the library make run links, its real
# CUDA entries and cudart_static), which `bazel test //...` has just built: the C is compiled once
# for the release tests, not again by cc. cargo-fallback checks the cc build a plain `cargo test`
# uses; the sanitizer stage runs the Rust tests again over Bazel's ASan archive.
cargo-test:
	$(BAZEL) build //:libferrite_static
	FERRITE_LIB_DIR=$(LIB_DIR) $(CARGO) test --workspace
	@# Rust has no skip status: show what the GPU test printed, so a skip is visible.
	@FERRITE_LIB_DIR=$(LIB_DIR) $(CARGO) test -q -p ferrite-spec --test cuda --test mem -- --nocapture 2>&1 | grep -ho "SKIPPED.*" | sed 's/^/cargo: /' || true
	@# serve/tests/real_model.rs skips without the model or the openai venv (setup makes both)
	@[ -f "$(MODEL)" ] && [ -x "$${FERRITE_OPENAI_VENV:-$$HOME/.cache/ferrite-peers/openai-venv}/bin/python" ] \
	  || echo "cargo: SKIPPED serve real_model (no model at $(MODEL) or no openai venv)"

# Plain `cargo test` as a Rust user runs it without Bazel: ferrite-sys compiles every C source with
# cc (every core, cc's "parallel"; the CUDA stub), here at -O0 (FERRITE_CC_OPT_LEVEL: -O2 is the
# default, minutes of compile on two cores for the same code cargo-test ran); on that build the ABI
# table test calls every entry point (refusals included), and the ferrite-serve binary links it all
# and answers (binary.rs).
cargo-fallback:
	env -u FERRITE_LIB_DIR FERRITE_CC_OPT_LEVEL=0 $(CARGO) test -p ferrite-spec --test abi_table
	env -u FERRITE_LIB_DIR FERRITE_CC_OPT_LEVEL=0 $(CARGO) test -p ferrite-serve --test binary

# --workspace, not -p ferrite-benches: the dependencies' features are then resolved as cargo-test
# resolved them, so serde_json, rand, criterion and proptest are not compiled again (25 s fresh)
bench-smoke:
	FERRITE_LIB_DIR=$(LIB_DIR) $(CARGO) test --workspace --bench kernels --bench sampling --bench kv --bench matmul --bench attention --bench mem --bench tokenizer --bench engine --bench grammar

# C tests and Rust tests against a library built with -fsanitize=address,undefined (gcc's runtimes).
# ferrite-sys links the runtimes (FERRITE_SANITIZER_LIBS) into the test binaries, which the runner
# starts with them preloaded (ASan must come first in the library order); build scripts are not
# run through the runner. In cargo's own target directory: only ferrite-sys and its dependents are
# built again (RUSTFLAGS in a directory of its own rebuilt every crate: minutes on a fresh machine).
# Property tests draw 64 cases each here (PROPTEST_CASES; 256 in cargo-test): the sanitizers look
# for memory errors along the same paths, the normal run covers the properties.
ASAN_RT := $(shell gcc -print-file-name=libasan.so):$(shell gcc -print-file-name=libubsan.so)
test-sanitize:
	$(BAZEL) test --config=asan //...
	$(BAZEL) build --config=asan //:libferrite_static
	FERRITE_LIB_DIR=$$($(BAZEL) info --config=asan bazel-bin 2>/dev/null) FERRITE_SANITIZER_LIBS="asan ubsan" \
	  CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="env LD_PRELOAD=$(ASAN_RT)" \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  PROPTEST_CASES=64 $(CARGO) test --workspace --exclude ferrite-benches --lib --bins --tests

check-claims:
	python3 scripts/check-claims.py

check-header:
	./scripts/gen-bindings.sh --check

# Full criterion run (several minutes), then the table recorded in docs/BENCHMARKS.md.
bench: build
	$(BAZEL) build //:libferrite_static
	FERRITE_LIB_DIR=$(LIB_DIR) $(CARGO) bench -p ferrite-benches --bench kernels --bench sampling --bench kv --bench matmul --bench attention --bench mem --bench tokenizer --bench engine -- --noplot
	$(CARGO) run -q -p ferrite-benches --bin bench-table -- target/criterion

bench-quick: build
	$(BAZEL) build //:libferrite_static
	FERRITE_LIB_DIR=$(LIB_DIR) $(CARGO) bench -p ferrite-benches --bench kernels --bench sampling --bench kv --bench matmul --bench attention --bench mem --bench tokenizer --bench engine -- --noplot --warm-up-time 1 --measurement-time 1 --sample-size 10
	$(CARGO) run -q -p ferrite-benches --bin bench-table -- target/criterion

# The base (merge-base with main) against the working tree, interleaved, with measured noise and
# instruction counts: see docs/BENCHMARKS.md. Pass options with ARGS="...".
bench-compare: setup
	./scripts/bench-compare $(ARGS)
