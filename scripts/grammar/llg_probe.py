import llguidance as llg, numpy as np, json, sys
from llguidance import LLTokenizer, LLMatcher
from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask
QWEN="/root/.cache/ferrite/qwen2.5-tokenizer.json"
LLAMA="/root/.cache/ferrite/llama3-tokenizer.json"
_toks={}
def tok(path=QWEN, **kw):
    k=(path,tuple(sorted(kw.items())))
    if k not in _toks: _toks[k]=LLTokenizer(path, **kw)
    return _toks[k]
def mask_ids(m, t):
    bm = allocate_token_bitmask(1, t.vocab_size)
    fill_next_token_bitmask(m, bm)
    bits = np.unpackbits(bm.view(np.uint8), bitorder='little')[:t.vocab_size]
    return np.nonzero(bits)[0].tolist()
def show(m,t,limit=40):
    ids=mask_ids(m,t)
    s=[ (i, t.decode_bytes([i])) for i in ids]
    return len(ids), s[:limit]
def matcher(g, t=None, **kw):
    t=t or tok()
    m=LLMatcher(t, g, **kw)
    if m.is_error(): print("ERR", m.get_error()[:500])
    return m
def feed(m,t,text):
    ids=t.tokenize_str(text)
    ok = m.consume_tokens(ids)
    return ok, ids
def accepts_bytes(g, s, t=None):
    """check if string s (bytes) can be consumed token-by-token via single-byte? use greedy tokens"""
    t=t or tok()
    m=LLMatcher(t,g,log_level=0)
    ids=t.tokenize_bytes(s.encode() if isinstance(s,str) else s)
    n=m.try_consume_tokens(ids)
    return n==len(ids), m.is_accepting(), m

_bytemap={}
def byte_tokens(t):
    k=id(t)
    if k not in _bytemap:
        mp={}
        for i in range(t.vocab_size):
            b=t.decode_bytes([i])
            if len(b)==1 and b[0] not in mp and not t.is_special_token(i): mp[b[0]]=i
        _bytemap[k]=mp
    return _bytemap[k]
def check(g, s, t=None):
    """feed s byte by byte; return (n_bytes_consumed_ok, accepting_at_end, error)"""
    t=t or tok()
    if isinstance(s,str): s=s.encode()
    mp=byte_tokens(t)
    m=LLMatcher(t,g,log_level=0)
    if m.is_error(): return ("GRAMMAR_ERR", m.get_error()[:300])
    for i,b in enumerate(s):
        if not m.consume_token(mp[b]):
            return (i, False, m.get_error().split("\n")[0][:200])
    return (len(s), m.is_accepting(), m.is_stopped())
def J(schema, **opts):
    if opts: return LLMatcher.grammar_from_json_schema(schema, overrides=opts)
    return LLMatcher.grammar_from_json_schema(schema)
def L(lark): return LLMatcher.grammar_from_lark(lark)
def R(rx): return LLMatcher.grammar_from_regex(rx)
def full(g, s): 
    r=check(g,s)
    return r[0]==len(s.encode() if isinstance(s,str) else s) and r[1] is True
