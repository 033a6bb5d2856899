"""What the golden scripts share (make_regex_goldens.py, make_json_goldens.py, make_gbnf_goldens.py):
the tokenizer and the header line naming it, and the step record: whether llguidance is in a forced
state, its mask's token ids, and the FNV-1a 64 hash of the mask's 32-bit words (little-endian) that
c/grammar/grammar_golden_test.c computes too."""
import llguidance as llg
import numpy as np
from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask


def fnv(words):
    h = 0xcbf29ce484222325
    for b in words.astype("<u4").tobytes():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def mask_step(m, tok):
    """(forced 0/1, allowed ids, hash) of matcher m's next mask."""
    forced = 1 if m.compute_ff_bytes() else 0
    bm = allocate_token_bitmask(1, tok.vocab_size)
    fill_next_token_bitmask(m, bm)
    words = bm[0].view(np.uint32)
    ids = np.nonzero(np.unpackbits(words.view(np.uint8), bitorder="little")[:tok.vocab_size])[0]
    return forced, ids, fnv(words)


def open_tokenizer(path):
    """(tokenizer without slices, its end token, the golden file's header line)."""
    tok = llg.LLTokenizer(path, slices=[])
    eos = tok.eos_token
    header = (f"# llguidance {llg.get_version()}; vocab {tok.vocab_size}; eos {eos}; "
              f"tokenizer {path.split('/')[-1]}")
    return tok, eos, header
