#!/usr/bin/env python3
"""llguidance's per-step mask time along a JSON instance's canonical tokens (the probe beside
mask_time.c): the first mask of a fresh matcher apart, then each state's mask once.
usage: mask_time_llg.py TOKENIZER_JSON SCHEMA_JSON_TEXT INSTANCE_TEXT [REPEATS] [--no-slices]"""
import sys, time
import llguidance as llg, numpy as np
from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask

def main():
    args = [a for a in sys.argv[1:] if a != "--no-slices"]
    if len(args) < 3:
        print(__doc__, file=sys.stderr); sys.exit(2)
    reps = int(args[3]) if len(args) > 3 else 5
    kw = {"slices": []} if "--no-slices" in sys.argv else {}
    tok = llg.LLTokenizer(args[0], **kw)
    grammar = llg.LLMatcher.grammar_from_json_schema(args[1])
    ids = tok.tokenize_str(args[2])
    bm = allocate_token_bitmask(1, tok.vocab_size)
    times, first = [], None
    t0 = time.perf_counter_ns()
    m = llg.LLMatcher(tok, grammar, log_level=0)
    compile_us = (time.perf_counter_ns() - t0) / 1e3
    for r in range(reps):
        m = llg.LLMatcher(tok, grammar, log_level=0)
        for i in range(len(ids) + 1):
            t0 = time.perf_counter_ns()
            fill_next_token_bitmask(m, bm)
            dt = (time.perf_counter_ns() - t0) / 1e3
            if r == 0 and i == 0: first = dt
            else: times.append(dt)
            if i < len(ids): assert m.consume_token(ids[i])
    times.sort()
    print(f"llguidance{' (no slices)' if kw else ''}: matcher {compile_us:.1f} us, {len(ids)} tokens x {reps}: first mask {first:.1f} us, "
          f"then mean {sum(times)/len(times):.1f} us, median {times[len(times)//2]:.1f} us, "
          f"p99 {times[int(len(times)*0.99)]:.1f} us, max {times[-1]:.1f} us")

main()
