#!/usr/bin/env python3
"""llguidance's per-step mask time along every token path of a golden file (the peer beside
mask_suite.c): the tokenizer made once (its default slices, as users run it), each path a new
LLMatcher (its grammar compiled from the text, which is llguidance's compile), each step's mask once
with fill_next_token_bitmask, then the path's token consumed.
usage: mask_suite_llg.py GOLDEN [PASSES [--seconds]]   (a python with llguidance: setup-llguidance.sh
       prints one; --seconds prints only the masks' total time in seconds, for benches/benches/grammar.rs)"""
import json, os, sys, time

import llguidance as llg
from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr); sys.exit(2)
    passes = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    lines = open(sys.argv[1]).read().splitlines()
    head = lines[0]
    name = head.split("tokenizer ")[1].split()[0]
    eos = int(head.split("eos ")[1].split(";")[0])
    data = os.environ.get("FERRITE_DATA_DIR") or os.path.expanduser("~/.cache/ferrite")
    t0 = time.perf_counter_ns()
    tok = llg.LLTokenizer(os.path.join(data, name), eos_token=eos)
    t_vocab = (time.perf_counter_ns() - t0) / 1e6
    bm = allocate_token_bitmask(1, tok.vocab_size)
    times, compiles = [], []
    for _ in range(passes):
        m = None
        for line in lines[1:]:
            kind, _, rest = line.partition(" ")
            if kind in ("rx", "schema", "gbnf"):
                text = json.loads(rest)
                grammar = (llg.LLMatcher.grammar_from_regex(text) if kind == "rx" else
                           llg.LLMatcher.grammar_from_json_schema(text) if kind == "schema" else llg.grammar_from("gbnf", text))
                t0 = time.perf_counter_ns()
                m = llg.LLMatcher(tok, grammar, log_level=0)
                compiles.append((time.perf_counter_ns() - t0) / 1e3)
                continue
            if kind != "step" or m is None:
                continue
            take = int(rest.split()[3])
            t0 = time.perf_counter_ns()
            fill_next_token_bitmask(m, bm)
            times.append((time.perf_counter_ns() - t0) / 1e3)
            if take >= 0 and not m.consume_token(take):
                m = None
    if "--seconds" in sys.argv:
        print(sum(times) / 1e6)
        return
    times.sort()
    n = len(times)
    print(f"llguidance  {os.path.basename(sys.argv[1]):22s} vocab {t_vocab:7.1f} ms, compile {sum(compiles) / len(compiles):7.1f} us, "
          f"{n:5d} masks: mean {sum(times) / n:6.1f} us, median {times[n // 2]:6.1f} us, p99 {times[int(n * 0.99)]:7.1f} us, "
          f"max {times[-1]:7.1f} us")


main()
