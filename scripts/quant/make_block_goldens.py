#!/usr/bin/env python3
"""Golden blocks: real quantized blocks from real GGUF files, with the values the `gguf` Python
package (gguf==0.19.0, the one ggml's project ships) dequantizes them to.

Writes testdata/quant/<type>.golden.gz, one per block type found (gzip, mtime 0), each:
  8 bytes  magic b"FERQGLD1"
  u32 ×4   ggml type id, block bytes, block elements, number of blocks n   (little-endian)
  n ×      u16 file index, u16 tensor index, u32 block index in the tensor,
           the block's raw bytes, then its block-elements values as f32 (little-endian bits)
and testdata/quant/goldens.json: per type the files and tensors ([file index, name]; the indices above), the counts,
and how the blocks were chosen. The Rust tests (rust_tests/tests/quant_golden.rs) read them; CI
needs no Python.

Which blocks: per type, from every tensor of that type in the files below, the 12 blocks with the
largest |d| (the block's f16 scale), the 12 with the largest |dmin| (types with a min), the 6 with
the smallest nonzero |d|, every block whose d or dmin is an f16 subnormal (up to 6), then random
blocks (seeded) spread over the tensors, to `--blocks` in all (fewer for blocks of 256).

Files (${FERRITE_DATA_DIR:-~/.cache/ferrite}):
  smollm2-135m-instruct-{q4_1,q4_k_m,q5_k_m,q6_k,q8_0,q2_k,iq4_xs}.gguf
      (scripts/fetch-test-data.sh, scripts/model/make-quant-files.sh)
  gemma3-270m-q4_k_m.gguf   when present (Q8_0, Q5_0, Q4_K, Q6_K)
  and, for types none of those hold, SmolLM2 requantized here by the same llama-quantize
  (scripts/peers/build-llamacpp.sh --quantize) into a temporary directory: --pure Q2_K (Q2_K: the
  Q2_K file holds Q3_K and Q4_0 only).

--check-ggml also compiles a small C program against that build's libggml-base.a and checks that
ggml's own dequantize_row_* (its to_float) gives the same f32 bits as the gguf package for every
golden block (ggml's C is the definition; a difference is reported and fails).

EVIDENCE: C-Q-301
Usage: python3 scripts/quant/make_block_goldens.py [--check] [--check-ggml] [--blocks N]
  --check   regenerate in memory and compare with the committed files (content)
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(REPO, "testdata", "quant")
VENV_PKGS = ["gguf==0.19.0", "numpy==2.4.6", "pyyaml==6.0.4"]
MAGIC = b"FERQGLD1"
SMOL = ["q4_1", "q4_k_m", "q5_k_m", "q6_k", "q8_0", "q2_k", "iq4_xs"]
# requantized here: SmolLM2's Q2_K mix holds no Q2_K tensor (ffn_down is Q3_K, every 576-column
# matrix falls back to Q4_0), so Q2_K's blocks come from --pure Q2_K (ffn_down, 1536 columns)
EXTRA = [("Q2_K", ["--pure"])]
SEED = 19


def log(msg):
    print(f"make_block_goldens: {msg}", file=sys.stderr, flush=True)


def data_dir():
    return os.environ.get("FERRITE_DATA_DIR") or os.path.expanduser("~/.cache/ferrite")


def peers_dir():
    return os.environ.get("FERRITE_PEERS_DIR") or os.path.expanduser("~/.cache/ferrite-peers")


def ensure_python_deps():
    """Re-executes under $PEERS/venv (the one scripts/tokenizer/make_goldens.py makes) unless the
    pinned gguf imports here."""
    try:
        import gguf  # noqa: F401
        import numpy  # noqa: F401
        from importlib.metadata import version
        if version("gguf") == "0.19.0":
            return
    except Exception:
        pass
    if os.environ.get("FERRITE_GOLDENS_IN_VENV"):
        sys.exit(f"make_block_goldens: the venv at {peers_dir()}/venv lacks {' '.join(VENV_PKGS)}")
    venv = os.path.join(peers_dir(), "venv")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        log(f"creating {venv}")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    ok = subprocess.run([py, "-c", "from importlib.metadata import version; import gguf; assert version('gguf') == '0.19.0'"],
                        capture_output=True).returncode == 0
    if not ok:
        log(f"pip install --no-deps {' '.join(VENV_PKGS)} into {venv}")
        subprocess.run([py, "-m", "pip", "install", "--quiet", "--no-deps", *VENV_PKGS], check=True)
    env = dict(os.environ, FERRITE_GOLDENS_IN_VENV="1")
    os.execve(py, [py, os.path.abspath(__file__), *sys.argv[1:]], env)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


# byte offsets of the f16 scale d and min (None: no min) in each block type's layout
def scale_fields(name):
    return {
        "Q4_0": (0, None), "Q4_1": (0, 2), "Q5_0": (0, None), "Q5_1": (0, 2), "Q8_0": (0, None),
        "Q2_K": (80, 82), "Q3_K": (108, None), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208, None),
        "IQ4_NL": (0, None), "IQ4_XS": (0, None),
    }.get(name)


def quantizer():
    r = subprocess.run([os.path.join(REPO, "scripts", "peers", "build-llamacpp.sh"), "--quantize"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"make_block_goldens: build-llamacpp.sh --quantize failed\n{r.stderr[-3000:]}")
    return r.stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--check-ggml", action="store_true")
    ap.add_argument("--blocks", type=int, default=256, help="blocks per type of 32 (half that for 256)")
    args = ap.parse_args()
    ensure_python_deps()
    import numpy as np
    import gguf
    from gguf import GGUFReader
    from gguf.constants import GGML_QUANT_SIZES

    files = []  # (label, path, sha256)
    for t in SMOL:
        p = os.path.join(data_dir(), f"smollm2-135m-instruct-{t}.gguf")
        if not os.path.exists(p):
            sys.exit(f"make_block_goldens: {p} missing: run scripts/fetch-test-data.sh and scripts/model/make-quant-files.sh")
        files.append((os.path.basename(p), p))
    g = os.path.join(data_dir(), "gemma3-270m-q4_k_m.gguf")
    if os.path.exists(g):
        files.append((os.path.basename(g), g))
    else:
        log(f"{g} not present: goldens without Gemma 3's blocks")
    tmpdir = tempfile.mkdtemp(prefix="ferrite-goldens-")
    try:
        q = quantizer()
        src = os.path.join(data_dir(), "smollm2-135m-instruct-q4_1.gguf")
        for t, opts in EXTRA:
            p = os.path.join(tmpdir, f"smollm2-135m-instruct-{t.lower()}-pure.gguf")
            log(f"requantizing {src} to {' '.join(opts)} {t} (temporary)")
            r = subprocess.run([os.path.join(q, "build", "bin", "llama-quantize"), "--allow-requantize", *opts, src, p, t, "2"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"make_block_goldens: llama-quantize {t} failed\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
            files.append((f"smollm2-135m-instruct-{t.lower()}-pure.gguf (llama-quantize --allow-requantize "
                          f"{' '.join(opts)} {t} of the q4_1 file, not kept)", p))
        run(args, np, gguf, GGUFReader, GGML_QUANT_SIZES, files, q)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def run(args, np, gguf, GGUFReader, GGML_QUANT_SIZES, files, qroot):
    by_type = {}  # name -> list of (file index, tensor name, blocks array)
    meta_files = []
    for fi, (label, path) in enumerate(files):
        meta_files.append({"file": label, "sha256": sha256_file(path)})
        r = GGUFReader(path)
        for t in r.tensors:
            name = t.tensor_type.name
            if scale_fields(name) is None:
                continue
            be, bb = GGML_QUANT_SIZES[t.tensor_type]
            raw = np.asarray(t.data).reshape(-1).view(np.uint8)
            assert raw.size % bb == 0
            by_type.setdefault(name, []).append((fi, t.name, raw.reshape(-1, bb), int(t.tensor_type), be, bb))
    rng = np.random.default_rng(SEED)
    meta = {"generator": "scripts/quant/make_block_goldens.py", "reference": "gguf==0.19.0 gguf.quants.dequantize",
            "files": meta_files, "types": {}}
    outputs = {}
    all_blocks = {}
    for name in sorted(by_type):
        entries = by_type[name]
        be, bb, tid = entries[0][4], entries[0][5], entries[0][3]
        want = args.blocks if be == 32 else args.blocks // 2
        dfield, mfield = scale_fields(name)
        # every block of the type, as (entry, index) pairs, with its d and dmin
        cat = np.concatenate([e[2] for e in entries])
        owner = np.concatenate([np.full(len(e[2]), i, dtype=np.int64) for i, e in enumerate(entries)])
        local = np.concatenate([np.arange(len(e[2]), dtype=np.int64) for e in entries])
        d = cat[:, dfield:dfield + 2].copy().view(np.float16).reshape(-1).astype(np.float32)
        m = cat[:, mfield:mfield + 2].copy().view(np.float16).reshape(-1).astype(np.float32) if mfield is not None else None
        chosen, why = [], {}

        def take(idx, reason, limit):
            n = 0
            for i in idx:
                i = int(i)
                if n >= limit:
                    break
                if i in why:
                    continue
                chosen.append(i)
                why[i] = reason
                n += 1

        take(np.argsort(-np.abs(d), kind="stable"), "largest |d|", 12)
        if m is not None:
            take(np.argsort(-np.abs(m), kind="stable"), "largest |dmin|", 12)
        nz = np.nonzero(d != 0)[0]
        take(nz[np.argsort(np.abs(d[nz]), kind="stable")], "smallest nonzero |d|", 6)
        sub = (np.abs(d) < 2.0 ** -14) & (d != 0)
        if m is not None:
            sub |= (np.abs(m) < 2.0 ** -14) & (m != 0)
        take(np.nonzero(sub)[0], "f16 subnormal scale", 6)
        guard = 0
        while len(chosen) < min(want, len(cat)) and guard < 100 * want:
            guard += 1
            e = int(rng.integers(len(entries)))  # a tensor, then a block in it: spread over tensors
            base = int(np.nonzero(owner == e)[0][0])
            i = base + int(rng.integers(len(entries[e][2])))
            if i not in why:
                chosen.append(i)
                why[i] = "random"
        blocks = cat[chosen]
        vals = gguf.quants.dequantize(blocks.reshape(-1), gguf.GGMLQuantizationType(tid)).astype(np.float32).reshape(len(chosen), be)
        assert np.all(np.isfinite(vals)), f"{name}: non-finite golden values"
        tensors = sorted({(entries[owner[i]][0], entries[owner[i]][1]) for i in chosen})
        tindex = {t: k for k, t in enumerate(tensors)}
        buf = io.BytesIO()
        buf.write(MAGIC)
        buf.write(struct.pack("<4I", tid, bb, be, len(chosen)))
        for k, i in enumerate(chosen):
            fi, tn = entries[owner[i]][0], entries[owner[i]][1]
            buf.write(struct.pack("<HHI", fi, tindex[(fi, tn)], int(local[i])))
            buf.write(blocks[k].tobytes())
            buf.write(vals[k].astype("<f4").tobytes())
        outputs[name] = buf.getvalue()
        all_blocks[name] = (tid, be, bb, blocks, vals)
        reasons = {}
        for i in chosen:
            reasons[why[i]] = reasons.get(why[i], 0) + 1
        meta["types"][name.lower()] = {
            "ggml_type": tid, "block_bytes": bb, "block_elems": be, "blocks": len(chosen),
            "blocks_of_this_type_in_the_files": int(len(cat)), "chosen": reasons,
            "max_abs_d": float(np.abs(d).max()), "max_abs_dmin": float(np.abs(m).max()) if m is not None else None,
            "tensors": [[fi, tn] for fi, tn in tensors],
        }
        log(f"{name}: {len(chosen)} blocks of {len(cat)} from {len(tensors)} tensors ({reasons})")
    if args.check_ggml:
        check_ggml(np, qroot, all_blocks)
    meta_json = json.dumps(meta, sort_keys=True, separators=(",", ":")) + "\n"
    if args.check:
        bad = 0
        for name, data in outputs.items():
            p = os.path.join(OUT, f"{name.lower()}.golden.gz")
            if not os.path.exists(p) or gzip.open(p).read() != data:
                log(f"{p} differs from a fresh run")
                bad = 1
        if open(os.path.join(OUT, "goldens.json")).read() != meta_json:
            log("goldens.json differs from a fresh run")
            bad = 1
        sys.exit(bad)
    os.makedirs(OUT, exist_ok=True)
    for name, data in outputs.items():
        p = os.path.join(OUT, f"{name.lower()}.golden.gz")
        with open(p, "wb") as f:
            with gzip.GzipFile(fileobj=f, mode="wb", compresslevel=9, mtime=0, filename="") as z:
                z.write(data)
        log(f"wrote {p} ({os.path.getsize(p)} bytes)")
    with open(os.path.join(OUT, "goldens.json"), "w") as f:
        f.write(meta_json)


CHECK_C = r"""
// Dequantizes blocks with ggml's own to_float (ggml-base, the quantizer's build): stdin has
// u32 type, u32 block bytes, u32 block elements, u32 n, then the blocks; stdout the f32 values.
#include "ggml.h"
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
int main(void) {
    uint32_t h[4];
    if (fread(h, 4, 4, stdin) != 4) return 2;
    size_t nb = (size_t)h[1] * h[3], ne = (size_t)h[2] * h[3];
    unsigned char *in = malloc(nb); float *out = malloc(ne * sizeof(float));
    if (!in || !out || fread(in, 1, nb, stdin) != nb) return 3;
    const struct ggml_type_traits *t = ggml_get_type_traits((enum ggml_type)h[0]);
    if (!t || !t->to_float) return 4;
    t->to_float(in, out, (int64_t)ne);
    fwrite(out, sizeof(float), ne, stdout);
    return 0;
}
"""


def check_ggml(np, qroot, all_blocks):
    tmp = tempfile.mkdtemp(prefix="ferrite-ggml-check-")
    try:
        src = os.path.join(tmp, "check.c")
        exe = os.path.join(tmp, "check")
        open(src, "w").write(CHECK_C)
        lib = os.path.join(qroot, "build", "ggml", "src", "libggml-base.a")
        obj = os.path.join(tmp, "check.o")
        r = subprocess.run(["cc", "-O1", "-ffp-contract=off", "-c", src, "-I", os.path.join(qroot, "src", "ggml", "include"),
                            "-o", obj], capture_output=True, text=True)
        if r.returncode == 0:  # libggml-base.a holds C++ objects: link as C++
            r = subprocess.run(["c++", obj, lib, "-lm", "-lpthread", "-o", exe], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"make_block_goldens: cannot build the ggml check\n{r.stderr[-3000:]}")
        for name, (tid, be, bb, blocks, vals) in all_blocks.items():
            inp = struct.pack("<4I", tid, bb, be, len(blocks)) + blocks.tobytes()
            r = subprocess.run([exe], input=inp, capture_output=True)
            if r.returncode != 0:
                sys.exit(f"make_block_goldens: the ggml check failed on {name} ({r.returncode})")
            got = np.frombuffer(r.stdout, dtype="<u4").reshape(vals.shape)
            want = vals.astype("<f4").view("<u4")
            diff = int(np.count_nonzero(got != want))
            if diff:
                sys.exit(f"make_block_goldens: {name}: ggml's dequantize differs from gguf's in {diff} values")
            log(f"{name}: ggml's to_float == gguf.quants.dequantize bit for bit ({vals.size} values)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
