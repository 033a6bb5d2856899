#!/usr/bin/env bash
# Builds the llama.cpp peer that every comparison with llama.cpp runs against (scripts/model/*.sh,
# scripts/tokenizer/make_goldens.py, the serving benchmark): libllama (CPU backend, shared), its
# llama-bench and llama-server from the llama.cpp vendored in
# the pinned llama-cpp-python 0.3.36 sdist (PyPI, sha256-checked), into
#   ${FERRITE_PEERS_DIR:-~/.cache/ferrite-peers}/llama.cpp/{src,build}
# and prints that directory on stdout (the only thing it prints there; progress goes to stderr).
#
# Instruction sets: users build llama.cpp natively (GGML_NATIVE=ON, -march=native), and so does
# this script on a CPU without AMX. Where the CPU has AMX, a native build selects llama.cpp's AMX
# path, which crashes on these VMs (SIGSEGV in ggml_backend_amx_mul_mat): there the peer is built
# with GGML_NATIVE=OFF and every x86 instruction-set option of ggml turned on or off explicitly
# from the CPU's flags in /proc/cpuinfo (never assumed), AMX off, so that it still runs AVX-512
# (and VNNI, VBMI, BF16 where present) instead of the AVX2 level that GGML_NATIVE=OFF alone gives.
# Either way the ISAs the CPU has must show in llama.cpp's own system_info, or the build fails.
#
# What was used is recorded in llama.cpp/build-flags.txt: the CPU, its flags, the cmake options, the
# -m flags ggml-cpu.c was really compiled with (compile_commands.json) and llama.cpp's own
# llama_print_system_info() line from the built library (`AVX512 = 1` ...). The bench scripts print
# its `isa:` line beside each number. The build is redone when the sdist, the options (another CPU)
# or this script's recipe change; otherwise this returns at once.
#
# --quantize builds, instead of the peer, llama.cpp's quantizer from the same sdist into
#   ${FERRITE_PEERS_DIR:-~/.cache/ferrite-peers}/llama.cpp-quantize/{src,build}
# and prints that directory (the tool is build/bin/requantize: scripts/model/requantize.cpp, which
# calls libllama's llama_model_quantize() as llama-quantize does without an importance matrix;
# llama-quantize itself links llama.cpp's `common` library, two thirds of the compile time, which
# plays no part in quantization). Its outputs are sha256-checked files
# (scripts/model/make-quant-files.sh), which must come out the same on every x86-64 machine of this
# project (AMD Zen, Intel Xeon): so its flags are fixed, never the CPU's: GGML_NATIVE=OFF, every
# ggml ISA option OFF (baseline x86-64, SSE2), -ffp-contract=off (no fused multiply-add even where a
# compiler could use one), static libraries (no other libllama can be picked up). The quantizers run
# in ggml-base (scalar C, built at -O2); the C++ around them (reading and writing the file, the
# threads) is built at -O0, the IEEE arithmetic being the same at any level without -ffast-math and
# the build three times faster. The peer build is not touched by this.
#
# usage: scripts/peers/build-llamacpp.sh [--flags | --quantize]
#        (--flags: print the peer's cmake options and exit)
# env:   FERRITE_PEERS_DIR, FERRITE_PEER_JOBS (parallel compile jobs, default 2: shared 2-core machines)
set -euo pipefail

SDIST_REQ="llama-cpp-python==0.3.36"
SDIST_FILE="llama_cpp_python-0.3.36.tar.gz"
SDIST_SHA=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
PREFIX="llama_cpp_python-0.3.36/vendor/llama.cpp"
RECIPE=4  # bump when the build below changes in a way the options do not show

peers="${FERRITE_PEERS_DIR:-$HOME/.cache/ferrite-peers}"
root="$peers/llama.cpp"
die() { echo "build-llamacpp: error: $*" >&2; exit 1; }
log() { echo "build-llamacpp: $*" >&2; }

# --- the CPU's instruction sets -> ggml's options (names as in the sdist's ggml/CMakeLists.txt) ---
[ -r /proc/cpuinfo ] || die "no /proc/cpuinfo: cannot detect the CPU's instruction sets"
[ "$(uname -m)" = x86_64 ] || die "only x86_64 is handled (this is $(uname -m))"
cpuflags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2-) "
[ "$cpuflags" != "  " ] || die "/proc/cpuinfo has no flags line"
has() { local f; for f in "$@"; do [[ "$cpuflags" == *" $f "* ]] || return 1; done; }
opts=(-DGGML_NATIVE=OFF)
isa=()
onoff() { # OPTION NAME CPUINFO_FLAG...: ON when the CPU has every flag
  if has "${@:3}"; then opts+=("-D$1=ON"); isa+=("$2"); else opts+=("-D$1=OFF"); fi
}
onoff GGML_SSE42 SSE42 sse4_2
onoff GGML_AVX AVX avx
onoff GGML_AVX2 AVX2 avx2
onoff GGML_FMA FMA fma
onoff GGML_F16C F16C f16c
onoff GGML_BMI2 BMI2 bmi2
onoff GGML_AVX_VNNI AVX_VNNI avx_vnni
# GGML_AVX512 compiles with -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw: all five needed
onoff GGML_AVX512 AVX512 avx512f avx512cd avx512vl avx512dq avx512bw
if has avx512f avx512cd avx512vl avx512dq avx512bw; then # the extensions only on top of the base
  onoff GGML_AVX512_VBMI AVX512_VBMI avx512vbmi
  onoff GGML_AVX512_VNNI AVX512_VNNI avx512_vnni
  onoff GGML_AVX512_BF16 AVX512_BF16 avx512_bf16
else
  opts+=(-DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF)
fi
opts+=(-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF) # crashes on these VMs (see above)
if has amx_tile; then
  mode="GGML_NATIVE=OFF"; amx=" (the CPU has AMX: off on purpose)"
else # no AMX to crash: the native build users make
  opts=(-DGGML_NATIVE=ON); mode="GGML_NATIVE=ON"; amx=""
fi
what=peer
case "${1:-}" in
  "") ;;
  --flags) echo "${opts[*]}"; exit 0 ;;
  --quantize) what=quantize ;;
  *) echo "usage: scripts/peers/build-llamacpp.sh [--flags | --quantize]" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "usage: scripts/peers/build-llamacpp.sh [--flags | --quantize]" >&2; exit 2; }

cmake_args=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON
  -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON=ON -DLLAMA_OPENSSL=OFF "${opts[@]}")
want=$(printf '%s\n' "$SDIST_SHA" "recipe $RECIPE" "${cmake_args[@]}" | sha256sum | cut -d' ' -f1)

# the quantizer: fixed flags, whatever this CPU has (see the header)
QUANT_RECIPE=2  # 2: libllama alone at C -O2 / C++ -O0 and scripts/model/requantize.cpp (1: llama-quantize, Release)
qroot="$peers/llama.cpp-quantize"
quant_driver="$(cd "$(dirname "$0")/../model" && pwd)/requantize.cpp"
quant_args=(-DCMAKE_BUILD_TYPE=None -DBUILD_SHARED_LIBS=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
  "-DCMAKE_C_FLAGS=-O2 -ffp-contract=off" "-DCMAKE_CXX_FLAGS=-O0 -ffp-contract=off"
  -DGGML_NATIVE=OFF -DGGML_SSE42=OFF -DGGML_AVX=OFF -DGGML_AVX_VNNI=OFF -DGGML_AVX2=OFF -DGGML_BMI2=OFF
  -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF
  -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_OPENMP=OFF
  -DGGML_LLAMAFILE=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF
  -DLLAMA_SUBPROCESS=OFF)
qwant=$( { printf '%s\n' "$SDIST_SHA" "quantize recipe $QUANT_RECIPE" "${quant_args[@]}"; cat "$quant_driver"; } \
  | sha256sum | cut -d' ' -f1)

mkdir -p "$peers"
exec 9>"$peers/llama.cpp.lock" # one build at a time per peers directory
flock 9
if [ "$what" = quantize ] && [ -f "$qroot/stamp" ] && [ "$(cat "$qroot/stamp")" = "$qwant" ] \
  && [ -x "$qroot/build/bin/requantize" ]; then
  echo "$qroot"
  exit 0
fi
if [ "$what" = peer ] && [ -f "$root/lib.stamp" ] && [ "$(cat "$root/lib.stamp")" = "$want" ] && [ -f "$root/build/bin/libllama.so" ] \
  && [ -f "$root/build-flags.txt" ]; then
  echo "$root"
  exit 0
fi
for tool in cmake c++ python3 flock; do
  command -v "$tool" >/dev/null || die "'$tool' not found (Debian: apt-get install cmake g++ python3 util-linux)"
done

# --- the sdist (pip checks the hash; a file already here is checked again) ---
dl="$peers/dl"
sdist="$dl/$SDIST_FILE"
if [ ! -f "$sdist" ] || [ "$(sha256sum "$sdist" | cut -d' ' -f1)" != "$SDIST_SHA" ]; then
  mkdir -p "$dl"
  tmp=$(mktemp -d "$dl/.pip.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "$SDIST_REQ --hash=sha256:$SDIST_SHA" > "$tmp/req.txt"
  log "pip download $SDIST_REQ (sdist, 77 MB, sha256 $SDIST_SHA)"
  python3 -m pip download --quiet --no-cache-dir --no-deps --no-binary llama-cpp-python --require-hashes \
    -r "$tmp/req.txt" -d "$tmp" >&2 || die "pip download of $SDIST_REQ failed"
  [ "$(sha256sum "$tmp/$SDIST_FILE" | cut -d' ' -f1)" = "$SDIST_SHA" ] || die "$SDIST_FILE: wrong sha256"
  mv -f "$tmp/$SDIST_FILE" "$sdist"
fi

jobs=${FERRITE_PEER_JOBS:-2}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "FERRITE_PEER_JOBS must be a positive integer, not '$jobs'"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)

if [ "$what" = quantize ]; then
  rm -rf "$qroot"
  mkdir -p "$qroot/src"
  log "extracting llama.cpp into $qroot/src"
  tar -xzf "$sdist" -C "$qroot/src" --strip-components=3 "$PREFIX"
  log "building libllama and requantize (static, baseline x86-64, -ffp-contract=off) in $qroot/build, -j$jobs"
  cmake -S "$qroot/src" -B "$qroot/build" "${gen[@]}" "${quant_args[@]}" > "$qroot/cmake.log" 2>&1 \
    || { tail -40 "$qroot/cmake.log" >&2; die "cmake configure failed (log: $qroot/cmake.log)"; }
  cmake --build "$qroot/build" --target llama -j "$jobs" >> "$qroot/cmake.log" 2>&1 \
    || { tail -40 "$qroot/cmake.log" >&2; die "build failed (log: $qroot/cmake.log)"; }
  mkdir -p "$qroot/build/bin"
  c++ -std=c++17 -O1 -ffp-contract=off -I "$qroot/src/include" -I "$qroot/src/ggml/include" "$quant_driver" \
    "$qroot/build/src/libllama.a" "$qroot/build/ggml/src/libggml.a" "$qroot/build/ggml/src/libggml-cpu.a" \
    "$qroot/build/ggml/src/libggml-base.a" -pthread -o "$qroot/build/bin/requantize" >> "$qroot/cmake.log" 2>&1 \
    || { tail -40 "$qroot/cmake.log" >&2; die "linking requantize failed (log: $qroot/cmake.log)"; }
  # no -m flag may reach the quantizers (ggml-quants.c) or the tool: the build must not depend on this CPU
  python3 - "$qroot/build/compile_commands.json" <<'PY' || die "the quantizer build has ISA flags"
import json, shlex, sys
bad = []
for e in json.load(open(sys.argv[1])):
    args = e.get("arguments") or shlex.split(e["command"])
    m = [a for a in args if a.startswith("-march") or a.startswith("-mavx") or a.startswith("-mfma")
         or a.startswith("-mf16c") or a.startswith("-mbmi") or a.startswith("-msse")]
    if m or "-ffp-contract=off" not in args:
        bad.append(f"{e['file']}: {m or 'no -ffp-contract=off'}")
if bad:
    sys.exit("\n".join(bad[:10]))
PY
  { echo "quantizer: llama.cpp from $SDIST_REQ (sdist sha256 $SDIST_SHA), recipe $QUANT_RECIPE"
    echo "cmake: ${quant_args[*]}"
    echo "built: $(date -u +%Y-%m-%dT%H:%MZ) with $(c++ --version | head -1) on $(nproc) CPUs"
  } > "$qroot/build-flags.txt"
  echo "$qwant" > "$qroot/stamp"
  log "built $qroot/build/bin/requantize"
  echo "$qroot"
  exit 0
fi

# --- extract and build ---
rm -rf "$root"
mkdir -p "$root/src"
log "extracting llama.cpp into $root/src"
tar -xzf "$sdist" -C "$root/src" --strip-components=3 "$PREFIX"
commit=$(tar -xzOf "$sdist" "llama_cpp_python-0.3.36/CHANGELOG.md" \
  | sed -n '/^## \[0.3.36\]/,/^## \[/p' | grep -o 'ggml-org/llama.cpp@[0-9a-f]*' | head -1 | cut -d@ -f2)
log "cmake ${opts[*]}"
log "building libllama (CPU) in $root/build, -j$jobs: a few minutes"
cmake -S "$root/src" -B "$root/build" "${gen[@]}" "${cmake_args[@]}" > "$root/cmake.log" 2>&1 \
  || { tail -40 "$root/cmake.log" >&2; die "cmake configure failed (log: $root/cmake.log)"; }
cmake --build "$root/build" --target llama llama-bench llama-server -j "$jobs" >> "$root/cmake.log" 2>&1 \
  || { tail -40 "$root/cmake.log" >&2; die "build failed (log: $root/cmake.log)"; }

# --- what the build really uses: ggml-cpu.c's -m flags and llama.cpp's own feature report ---
compiled=$(python3 - "$root/build/compile_commands.json" <<'PY'
import json, shlex, sys
for e in json.load(open(sys.argv[1])):
    if e["file"].endswith("/ggml-cpu/ggml-cpu.c"):
        args = e.get("arguments") or shlex.split(e["command"])
        print(" ".join(a for a in args if a.startswith("-m")))
        break
else:
    sys.exit("ggml-cpu.c not in compile_commands.json")
PY
) || die "cannot read ggml-cpu.c's flags from $root/build/compile_commands.json"
cat > "$root/system-info.cpp" <<'CPP'
// Prints llama.cpp's llama_print_system_info() (the CPU backend's compiled-in features).
#include "llama.h"
#include <cstdio>
int main() { llama_backend_init(); std::puts(llama_print_system_info()); llama_backend_free(); return 0; }
CPP
c++ -O1 -std=c++17 "$root/system-info.cpp" -I "$root/src/include" -I "$root/src/ggml/include" \
  -L "$root/build/bin" -lllama -Wl,-rpath,"$root/build/bin" -o "$root/llamacpp-system-info" \
  || die "cannot build the system-info probe"
sysinfo=$("$root/llamacpp-system-info" 2>/dev/null) || die "the system-info probe failed"
sysinfo=$(tr -s ' \n' ' ' <<<"$sysinfo" | sed 's/ *$//')
# every ISA asked for must be reported as compiled in (a silently ignored option would show here)
for i in "${isa[@]}"; do
  case $i in SSE42) key="SSE3" ;; *) key=$i ;; esac # system_info has no SSE4.2 entry
  [[ "$sysinfo" == *" $key = 1 |"* ]] || die "asked for $i but llama_print_system_info says: $sysinfo"
done
[[ "$sysinfo" != *"AMX_INT8 = 1"* ]] || die "AMX is compiled in: $sysinfo"

cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
cpu="$cpu ($(awk -F': *' '/^cpu family/{f=$2} /^model\t/{m=$2} /^stepping/{s=$2; exit} END{printf "family %s model %s stepping %s", f, m, s}' /proc/cpuinfo))"
{
  echo "peer: llama.cpp ${commit:-?} (vendored in $SDIST_REQ, sdist sha256 $SDIST_SHA)"
  echo "cpu: ${cpu:-unknown}, $(nproc) CPUs"
  echo "cpu_flags:$(for f in sse4_2 avx avx2 fma f16c bmi2 avx_vnni avx512f avx512cd avx512vl avx512dq avx512bw \
    avx512vbmi avx512_vnni avx512_bf16 amx_tile amx_int8 amx_bf16; do has "$f" && printf ' %s' "$f"; done)"
  echo "isa: $mode, ${isa[*]:-none}; AMX off$amx"
  echo "cmake: ${opts[*]}"
  echo "compiled (ggml-cpu.c): $compiled"
  echo "system_info: $sysinfo"
  echo "built: $(date -u +%Y-%m-%dT%H:%MZ) with $(c++ --version | head -1)"
} > "$root/build-flags.txt"
echo "$want" > "$root/lib.stamp"
log "built; $(grep '^isa:' "$root/build-flags.txt")"
echo "$root"
