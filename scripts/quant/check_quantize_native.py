#!/usr/bin/env python3
"""Checks that the requantized SmolLM2 files do not depend on the quantizer's instruction set:
compiles ggml's quantizers (ggml-quants.c of the quantizer's sources, scripts/peers/build-llamacpp.sh
--quantize) with -march=native and the compiler's default -ffp-contract=fast (FMA contraction
allowed: the build most unlike the fixed one), quantizes every quantized tensor of every file of
scripts/model/make-quant-files.sh again from the Q4_1 source's values (dequantized by the gguf
package, which equals ggml's to_float bit for bit: make_block_goldens.py --check-ggml), with the
type the file gave it, and compares the bytes with the file's. Prints one line per file; exit 1
on any difference.

usage: scripts/quant/check_quantize_native.py [CFLAGS...]   (default: -O3 -march=native)
EVIDENCE: C-Q-304
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_block_goldens as mbg  # noqa: E402  (its venv re-exec and paths)

HARNESS = r"""
#include "ggml.h"
#include "ggml-quants.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef size_t (*qfn)(const float *, void *, int64_t, int64_t, const float *);
int main(int argc, char **argv) {
    if (argc != 4) return 2;
    const char *t = argv[1]; int64_t rows = atoll(argv[2]), cols = atoll(argv[3]);
    static const struct { const char *n; qfn f; } tab[] = {
        {"Q4_0", quantize_q4_0}, {"Q4_1", quantize_q4_1}, {"Q5_0", quantize_q5_0}, {"Q5_1", quantize_q5_1},
        {"Q8_0", quantize_q8_0}, {"Q2_K", quantize_q2_K}, {"Q3_K", quantize_q3_K}, {"Q4_K", quantize_q4_K},
        {"Q5_K", quantize_q5_K}, {"Q6_K", quantize_q6_K}, {"IQ4_NL", quantize_iq4_nl}, {"IQ4_XS", quantize_iq4_xs}};
    qfn f = NULL;
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) if (!strcmp(tab[i].n, t)) f = tab[i].f;
    if (!f) return 3;
    float *x = malloc((size_t)(rows * cols) * sizeof(float));
    void *y = malloc((size_t)(rows * cols) * 2);
    if (!x || !y || fread(x, sizeof(float), (size_t)(rows * cols), stdin) != (size_t)(rows * cols)) return 4;
    size_t n = f(x, y, rows, cols, NULL);
    fwrite(y, 1, n, stdout);
    return 0;
}
"""


def ensure_python_deps():
    """As make_block_goldens.py's, but re-executes this script under the venv."""
    try:
        from importlib.metadata import version
        import gguf  # noqa: F401
        if version("gguf") == "0.19.0":
            return
    except Exception:
        pass
    if os.environ.get("FERRITE_GOLDENS_IN_VENV"):
        sys.exit("check_quantize_native: the venv lacks gguf==0.19.0 (run scripts/quant/make_block_goldens.py once)")
    py = os.path.join(mbg.peers_dir(), "venv", "bin", "python")
    if not os.path.exists(py):
        sys.exit("check_quantize_native: no venv: run scripts/quant/make_block_goldens.py once")
    os.execve(py, [py, os.path.abspath(__file__), *sys.argv[1:]], dict(os.environ, FERRITE_GOLDENS_IN_VENV="1"))


def main():
    ensure_python_deps()
    import numpy as np
    import gguf
    from gguf import GGUFReader
    cflags = sys.argv[1:] or ["-O3", "-march=native"]
    q = mbg.quantizer()
    src = os.path.join(q, "src", "ggml")
    tmp = tempfile.mkdtemp(prefix="ferrite-qnative-")
    exe = os.path.join(tmp, "qn")
    open(os.path.join(tmp, "h.c"), "w").write(HARNESS)
    inc = ["-I", os.path.join(src, "include"), "-I", os.path.join(src, "src")]
    objs = []
    for name, path in [("q", os.path.join(src, "src", "ggml-quants.c")), ("h", os.path.join(tmp, "h.c"))]:
        o = os.path.join(tmp, name + ".o")
        cmd = ["cc", "-std=gnu11", "-DNDEBUG", "-D_GNU_SOURCE", *cflags, *inc, "-c", path, "-o", o]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"check_quantize_native: {shlex.join(cmd)}\n{r.stderr[-3000:]}")
        objs.append(o)
    lib = os.path.join(q, "build", "ggml", "src", "libggml-base.a")
    r = subprocess.run(["c++", *objs, lib, "-lm", "-lpthread", "-o", exe], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"check_quantize_native: link failed\n{r.stderr[-3000:]}")
    data = mbg.data_dir()
    source = GGUFReader(os.path.join(data, "smollm2-135m-instruct-q4_1.gguf"))
    values = {}
    for t in source.tensors:
        if t.tensor_type.name in ("F32", "F16"):
            continue
        values[t.name] = t
    bad = 0
    for kind in mbg.SMOL[1:]:
        path = os.path.join(data, f"smollm2-135m-instruct-{kind}.gguf")
        n, same = 0, 0
        for t in GGUFReader(path).tensors:
            name = t.tensor_type.name
            if name in ("F32", "F16"):
                continue
            s = values[t.name]
            x = gguf.quants.dequantize(np.asarray(s.data), s.tensor_type).astype(np.float32)
            cols = int(s.shape[0])
            rows = x.size // cols
            r = subprocess.run([exe, name, str(rows), str(cols)], input=x.tobytes(), capture_output=True)
            if r.returncode != 0:
                sys.exit(f"check_quantize_native: the harness failed on {t.name} ({name}): {r.returncode}")
            n += 1
            if r.stdout == np.asarray(t.data).tobytes():
                same += 1
            else:
                print(f"{kind}: {t.name} ({name}) differs", file=sys.stderr)
        print(f"{kind}: {same} of {n} quantized tensors byte-identical with cc {' '.join(cflags)}")
        bad |= same != n
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
