#!/usr/bin/env python3
"""Writes an F32 copy of the Gemma 3 270M Q4_K_M file, for developing and testing the gemma3
architecture before ferrite decodes the K-quants: every Q4_K, Q6_K and Q5_0 tensor is replaced by
its dequantized values (the gguf package's dequantizers, llama.cpp's arithmetic in f32), F32 and
Q8_0 tensors (the token embedding) are copied as they are, and every metadata key is kept. So the
copy computes what the original computes, and llama.cpp runs both.

usage: scripts/model/make_gemma3_f32.py [SRC [DST]]
  SRC default ${FERRITE_DATA_DIR:-~/.cache/ferrite}/gemma3-270m-q4_k_m.gguf
  DST default ${FERRITE_DATA_DIR:-~/.cache/ferrite}/gemma3-270m-f32.gguf (outside the repository)
Needs the gguf package (gguf==0.19 or the peer venv's: ~/.cache/ferrite-peers/venv/bin/python).
Prints the output's sha256 (deterministic: the same input gives the same bytes)."""
import hashlib
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import dequantize

data = os.environ.get("FERRITE_DATA_DIR", os.path.expanduser("~/.cache/ferrite"))
src = sys.argv[1] if len(sys.argv) > 1 else f"{data}/gemma3-270m-q4_k_m.gguf"
dst = sys.argv[2] if len(sys.argv) > 2 else f"{data}/gemma3-270m-f32.gguf"

r = GGUFReader(src)
arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
w = GGUFWriter(dst + ".part", arch)
w.add_architecture = lambda *a, **k: None  # already written by the constructor

for name, f in r.fields.items():
    if name.startswith("GGUF.") or name == "general.architecture":
        continue
    t = f.types[0]
    if t == GGUFValueType.STRING:
        w.add_string(name, bytes(f.parts[f.data[0]]).decode("utf-8"))
    elif t == GGUFValueType.ARRAY:
        sub = f.types[1]
        if sub == GGUFValueType.STRING:
            vals = [bytes(f.parts[i]).decode("utf-8", "surrogateescape") for i in f.data]
            w.add_array(name, vals)
        else:
            vals = [f.parts[i].tolist()[0] for i in f.data]
            w.add_key_value(name, vals, GGUFValueType.ARRAY, sub_type=sub)
    else:
        w.add_key_value(name, f.parts[f.data[0]].tolist()[0], t)

KEEP = (Q.F32, Q.Q8_0)
for t in r.tensors:
    shape = [int(x) for x in t.shape]  # gguf order: [cols, rows]
    if t.tensor_type in KEEP:
        raw = np.array(t.data)
        w.add_tensor(t.name, raw, raw_shape=raw.shape, raw_dtype=t.tensor_type)
    else:
        vals = dequantize(np.array(t.data), t.tensor_type).astype(np.float32)
        vals = vals.reshape(list(reversed(shape)))
        w.add_tensor(t.name, vals, raw_dtype=Q.F32)

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
os.replace(dst + ".part", dst)
h = hashlib.sha256()
with open(dst, "rb") as fh:
    for b in iter(lambda: fh.read(1 << 20), b""):
        h.update(b)
print(dst, os.path.getsize(dst), h.hexdigest())
