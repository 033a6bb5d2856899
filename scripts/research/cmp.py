import sys, json
from tokenizers import Tokenizer, models, pre_tokenizers, decoders
M = 'lcp/llama_cpp_python-0.3.36/vendor/llama.cpp/models/'
def load_cases(name):
    inp = open(M+f'ggml-vocab-{name}.gguf.inp', encoding='utf-8').read().split('\n__ggml_vocab_test__\n')
    out = open(M+f'ggml-vocab-{name}.gguf.out').read().split('\n')
    return inp, out
def check(tok, name):
    inp, out = load_cases(name)
    ok = bad = 0
    for i, s in enumerate(inp):
        if i >= len(out): break
        exp = [int(x) for x in out[i].split()]
        got = tok.encode(s, add_special_tokens=False).ids
        if got == exp: ok += 1
        else:
            bad += 1
            if bad <= 3: print('  MISMATCH', repr(s[:40]), exp[:10], got[:10])
    print(f'{name}: {ok} passed, {bad} failed (of {len(inp)} inputs, {len(out)} out lines)')
gpt2 = Tokenizer(models.BPE.from_file('tok/gpt2/encoder.json', 'tok/gpt2/vocab.bpe'))
gpt2.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
gpt2.decoder = decoders.ByteLevel()
check(gpt2, 'gpt-2')
check(Tokenizer.from_file('tok/llama3/tokenizer.json'), 'llama-bpe')
check(Tokenizer.from_file('tok/qwen25/tokenizer.json'), 'qwen2')
