#!/usr/bin/env python3
"""Synthetic Llama files for speed runs (not tests, not part of `make test`): real shapes, seeded
random blocks, so that weights are bound by memory as in the models people run.

  --shape 8b (default)  Llama-3-8B: 32 layers, d_model 4096, 32 query / 8 kv heads of 128, ffn
                        14336, vocab 128256 (Llama 3's BPE vocabulary from
                        ${FERRITE_DATA_DIR}/llama3-tokenizer.json, scripts/fetch-test-data.sh)
  --shape 3b            28 layers, d_model 3072, 24 / 8 heads of 128, ffn 8192, SmolLM2's 49152
                        vocabulary (copied from smollm2-135m-instruct-q4_1.gguf)
  --type q4_k_m (default for 8b) | q4_0 | q8_0
    q4_k_m: llama.cpp's Q4_K_M layout (llama-quant.cpp at the pinned 0c1e57098): Q4_K everywhere,
            Q6_K for output.weight and for attn_v / ffn_down of the layers use_more_bits picks
            (i < n/8, i >= 7n/8, (i - n/8) % 3 == 2: 11 of 32 layers for 8B); F32 norms.
    q4_0 / q8_0: every matrix in that type (output too), F32 norms.

Blocks are valid and sane: f16 scales small and finite (|w| below about 0.025, centred), codes
uniformly random, so activations through the layers stay finite; norms are 1. The bytes depend
only on --seed, the shape and the type (numpy's PCG64), so the sha256 printed is reproducible.

Writes ${FERRITE_DATA_DIR:-~/.cache/ferrite}/synthetic-llama-<shape>-<type>.gguf (or --out), prints
its sha256 and tensor types with byte shares. Uses the gguf==0.19.0 venv of
scripts/tokenizer/make_goldens.py (created on first use).

usage: scripts/model/make-llama8b-q4km.py [--shape 8b|3b] [--type q4_k_m|q4_0|q8_0] [--seed N] [--out FILE]
EVIDENCE: C-Q-305
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys

VENV_PKGS = ["gguf==0.19.0", "numpy==2.4.6", "pyyaml==6.0.4"]

SHAPES = {
    "8b": dict(n_layer=32, d=4096, n_head=32, n_kv=8, head=128, ffn=14336, vocab=128256, ctx=8192, rope=500000.0,
               tok="llama3"),
    "3b": dict(n_layer=28, d=3072, n_head=24, n_kv=8, head=128, ffn=8192, vocab=49152, ctx=8192, rope=100000.0,
               tok="smollm2"),
}
FILE_TYPE = {"q4_k_m": 15, "q4_0": 2, "q8_0": 7}  # llama_ftype


def log(msg):
    print(f"make-llama8b-q4km: {msg}", file=sys.stderr, flush=True)


def data_dir():
    return os.environ.get("FERRITE_DATA_DIR") or os.path.expanduser("~/.cache/ferrite")


def ensure_python_deps():
    try:
        from importlib.metadata import version
        import gguf  # noqa: F401
        import numpy  # noqa: F401
        if version("gguf") == "0.19.0":
            return
    except Exception:
        pass
    if os.environ.get("FERRITE_GOLDENS_IN_VENV"):
        sys.exit("make-llama8b-q4km: the venv lacks " + " ".join(VENV_PKGS))
    peers = os.environ.get("FERRITE_PEERS_DIR") or os.path.expanduser("~/.cache/ferrite-peers")
    venv = os.path.join(peers, "venv")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    if subprocess.run([py, "-c", "from importlib.metadata import version; import gguf; assert version('gguf') == '0.19.0'"],
                      capture_output=True).returncode != 0:
        subprocess.run([py, "-m", "pip", "install", "--quiet", "--no-deps", *VENV_PKGS], check=True)
    os.execve(py, [py, os.path.abspath(__file__), *sys.argv[1:]], dict(os.environ, FERRITE_GOLDENS_IN_VENV="1"))


def use_more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def blocks(np, rng, qtype, n_blocks):
    """n_blocks random, valid blocks of qtype as a uint8 array [n_blocks, block_bytes]."""
    f16 = lambda v: v.astype(np.float16).view(np.uint8).reshape(-1, 2)  # noqa: E731
    if qtype == "Q4_K":
        # value = d sc q - dmin m with dmin = d, sc in 4..8, m = round(7.5 sc): |w| <= 60 d, centred
        d = f16((rng.random(n_blocks, dtype=np.float32) * 0.5 + 0.5) * np.float32(4e-4))
        sc = rng.integers(4, 9, size=(n_blocks, 8), dtype=np.uint8)
        m = np.rint(sc.astype(np.float32) * 7.5).astype(np.uint8)
        s = np.empty((n_blocks, 12), dtype=np.uint8)
        s[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
        s[:, 4:8] = m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)
        s[:, 8:12] = (sc[:, 4:8] & 0xF) | ((m[:, 4:8] & 0xF) << 4)
        qs = rng.integers(0, 256, size=(n_blocks, 128), dtype=np.uint8)
        return np.concatenate([d, d, s, qs], axis=1)
    if qtype == "Q6_K":
        # value = d sc (q - 32), sc in 4..8: |w| <= 256 d
        ql = rng.integers(0, 256, size=(n_blocks, 128), dtype=np.uint8)
        qh = rng.integers(0, 256, size=(n_blocks, 64), dtype=np.uint8)
        sc = rng.integers(4, 9, size=(n_blocks, 16), dtype=np.int8).view(np.uint8)
        d = f16((rng.random(n_blocks, dtype=np.float32) * 0.5 + 0.5) * np.float32(1e-4))
        return np.concatenate([ql, qh, sc, d], axis=1)
    if qtype == "Q4_0":
        d = f16((rng.random(n_blocks, dtype=np.float32) * 0.5 + 0.5) * np.float32(3e-3))
        return np.concatenate([d, rng.integers(0, 256, size=(n_blocks, 16), dtype=np.uint8)], axis=1)
    if qtype == "Q8_0":
        d = f16((rng.random(n_blocks, dtype=np.float32) * 0.5 + 0.5) * np.float32(2e-4))
        q = rng.integers(-127, 128, size=(n_blocks, 32), dtype=np.int8).view(np.uint8)
        return np.concatenate([d, q], axis=1)
    raise ValueError(qtype)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=sorted(SHAPES), default="8b")
    ap.add_argument("--type", choices=sorted(FILE_TYPE), default="q4_k_m")
    ap.add_argument("--seed", type=int, default=8)
    ap.add_argument("--out")
    args = ap.parse_args()
    ensure_python_deps()
    import numpy as np
    import gguf
    from gguf.constants import GGML_QUANT_SIZES

    S = SHAPES[args.shape]
    out = args.out or os.path.join(data_dir(), f"synthetic-llama-{args.shape}-{args.type.replace('_', '')}.gguf")
    rng = np.random.default_rng(args.seed)
    w = gguf.GGUFWriter(out, "llama")
    w.add_name(f"ferrite synthetic llama {args.shape} {args.type} (seeded random weights, speed only)")
    w.add_block_count(S["n_layer"])
    w.add_context_length(S["ctx"])
    w.add_embedding_length(S["d"])
    w.add_feed_forward_length(S["ffn"])
    w.add_head_count(S["n_head"])
    w.add_head_count_kv(S["n_kv"])
    w.add_rope_freq_base(S["rope"])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(S["head"])
    w.add_vocab_size(S["vocab"])
    w.add_file_type(FILE_TYPE[args.type])
    w.add_quantization_version(2)
    add_vocab(w, np, gguf, S)

    d, hd, nkv, ffn, nl, V = S["d"], S["head"], S["n_kv"], S["ffn"], S["n_layer"], S["vocab"]
    base = {"q4_k_m": "Q4_K", "q4_0": "Q4_0", "q8_0": "Q8_0"}[args.type]
    more = "Q6_K" if args.type == "q4_k_m" else base
    plan = [("token_embd.weight", V, d, base), ("output_norm.weight", 1, d, "F32"), ("output.weight", V, d, more)]
    for i in range(nl):
        p = f"blk.{i}."
        mb = use_more_bits(i, nl)
        plan += [(p + "attn_norm.weight", 1, d, "F32"), (p + "attn_q.weight", S["n_head"] * hd, d, base),
                 (p + "attn_k.weight", nkv * hd, d, base), (p + "attn_v.weight", nkv * hd, d, more if mb else base),
                 (p + "attn_output.weight", d, S["n_head"] * hd, base), (p + "ffn_norm.weight", 1, d, "F32"),
                 (p + "ffn_gate.weight", ffn, d, base), (p + "ffn_up.weight", ffn, d, base),
                 (p + "ffn_down.weight", d, ffn, more if mb else base)]
    sizes = {}
    for name, rows, cols, t in plan:
        if t == "F32":
            w.add_tensor_info(name, [cols], np.dtype(np.float32), cols * 4)
            nbytes = cols * 4
        else:
            qt = gguf.GGMLQuantizationType[t]
            be, bb = GGML_QUANT_SIZES[qt]
            nbytes = rows * cols // be * bb
            w.add_tensor_info(name, [rows, cols * bb // be], np.dtype(np.uint8), nbytes, raw_dtype=qt)
        sizes[t] = sizes.get(t, 0) + nbytes
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for k, (name, rows, cols, t) in enumerate(plan):
        if t == "F32":
            w.write_tensor_data(np.ones(cols, dtype=np.float32))
            continue
        be, bb = GGML_QUANT_SIZES[gguf.GGMLQuantizationType[t]]
        per_row = cols // be
        chunk = max(1, (64 << 20) // (per_row * bb))  # rows per 64 MiB
        parts = [blocks(np, rng, t, min(chunk, rows - r) * per_row) for r in range(0, rows, chunk)]
        w.write_tensor_data(np.concatenate(parts).reshape(rows, per_row * bb))
        if k % 45 == 0:
            log(f"{name} ({k + 1}/{len(plan)})")
    w.close()
    h = hashlib.sha256()
    with open(out, "rb") as f:
        for b in iter(lambda: f.read(1 << 24), b""):
            h.update(b)
    total = sum(sizes.values())
    print(json.dumps({"file": out, "bytes": os.path.getsize(out), "sha256": h.hexdigest(),
                      "types": {t: {"bytes": n, "share": round(n / total, 4)} for t, n in sorted(sizes.items())}}, indent=1))


def add_vocab(w, np, gguf, S):
    if S["tok"] == "llama3":
        # Llama 3's own BPE vocabulary: 128000 tokens, 280147 merges, 256 special tokens
        p = os.path.join(data_dir(), "llama3-tokenizer.json")
        if not os.path.exists(p):
            sys.exit(f"make-llama8b-q4km: {p} missing: run scripts/fetch-test-data.sh")
        j = json.load(open(p, encoding="utf-8"))
        vocab = j["model"]["vocab"]
        tokens = [None] * S["vocab"]
        types = [1] * S["vocab"]
        for t, i in vocab.items():
            tokens[i] = t
        for a in j["added_tokens"]:
            tokens[a["id"]] = a["content"]
            types[a["id"]] = 3 if a.get("special") else 4
        assert all(t is not None for t in tokens), "llama3 vocabulary has holes"
        merges = j["model"]["merges"]
        merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("llama-bpe")
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)
        w.add_bos_token_id(128000)
        w.add_eos_token_id(128009)
        w.add_add_bos_token(True)
        return
    src = os.path.join(data_dir(), "smollm2-135m-instruct-q4_1.gguf")
    r = gguf.GGUFReader(src)
    for k, f in r.fields.items():
        if not k.startswith("tokenizer."):
            continue
        if k == "tokenizer.chat_template":
            continue
        v = f.contents()
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            w.add_key_value(k, v, vt, sub_type=f.types[1])
        else:
            w.add_key_value(k, v, vt)
    assert len(r.fields["tokenizer.ggml.tokens"].data) == S["vocab"]


if __name__ == "__main__":
    main()
