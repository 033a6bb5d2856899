#!/usr/bin/env python3
"""Golden token masks of llguidance for regular expressions, along token paths it samples itself
(issue 20). For each expression, two paths of up to 24 steps from a seeded generator: at each step
llguidance's mask (fill_next_token_bitmask), whether llguidance was in a forced state there
(compute_ff_bytes() non-empty: its mask then follows the forced-token rule of LLGUIDANCE.md
section 3.2), and the token taken (a random allowed one, end of sequence only when nothing else is
allowed). The C test (c/grammar/grammar_golden_test.c) walks the same paths and compares masks by
an FNV-1a 64 hash of the mask's 32-bit words (little-endian) and their popcount.

usage: make_regex_goldens.py TOKENIZER_JSON OUT     (needs llguidance==1.9.1 and numpy:
       scripts/grammar/setup-llguidance.sh prints a python that has them)
output lines:  rx <json string>  |  step <forced 0/1> <popcount> <hash hex> <token taken or -1>"""
import json, random, sys

import llguidance as llg

from golden_mask import mask_step, open_tokenizer

REGEXES = [
    r"\d+", r"[a-z]+", r"\d{3}-\d{4}", r"(yes|no|maybe)", r"[A-Z][a-z]*( [A-Z][a-z]*)*",
    r"-?(0|[1-9][0-9]*)(\.[0-9]+)?", r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,4}", r"\w+", r"\s*\w+\s*",
    r"(ab|cd)*", r".{1,20}", r"[^\n]+\n", r"\"[^\"\\\\]*\"", r"(0x)?[0-9a-fA-F]{1,8}", r"[a-z]+(_[a-z]+)*",
    r"(\+|-)?\d+(,\d{3})*", r"[\u4e00-\u9fff]+", r"(true|false|null)", r"https?://[a-z.]+(/[a-z]*)*",
    r"\d{4}-\d{2}-\d{2}", r"[.!?]+", r"(é|è|ê)+x", r"[a-c]{2,5}", r"\p{L}?x?",
]
REGEXES = [r for r in REGEXES if "\\p" not in r]  # \p{...} is refused by ferrite's parser (UNSUPPORTED)

def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr); sys.exit(2)
    tok, eos, header = open_tokenizer(sys.argv[1])
    rnd = random.Random(20)
    out = [header]
    for rx in REGEXES:
        for path in range(2):
            m = llg.LLMatcher(tok, llg.LLMatcher.grammar_from_regex(rx), log_level=0)
            assert not m.is_error(), m.get_error()
            out.append("rx " + json.dumps(rx))
            for _ in range(24):
                forced, ids, h = mask_step(m, tok)
                choice = [int(i) for i in ids if i != eos]
                take = rnd.choice(choice) if choice else (eos if eos in ids else -1)
                out.append(f"step {forced} {len(ids)} {h:016x} {take}")
                if take < 0 or m.is_stopped():
                    break
                assert m.consume_token(take), (rx, take)
                if take == eos or m.is_stopped():
                    break
    open(sys.argv[2], "w").write("\n".join(out) + "\n")

main()
