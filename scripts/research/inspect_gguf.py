import sys, collections
from gguf import GGUFReader, GGUFValueType
r = GGUFReader(sys.argv[1])
for k, f in r.fields.items():
    if k.startswith('tokenizer.ggml.') and k in ('tokenizer.ggml.tokens','tokenizer.ggml.merges','tokenizer.ggml.token_type','tokenizer.ggml.scores'):
        print(k, '[array len', len(f.data), ']'); continue
    try:
        t = f.types[0] if f.types else None
        if t == GGUFValueType.STRING:
            v = bytes(f.parts[f.data[0]]).decode('utf-8', 'replace')
            v = v if len(v) < 200 else v[:200] + '...'
        elif t == GGUFValueType.ARRAY:
            v = f'[array len {len(f.data)}]'
        else:
            v = f.parts[f.data[0]].tolist()
    except Exception as e:
        v = f'? {e}'
    print(k, '=', v)
c = collections.Counter(t.tensor_type.name for t in r.tensors)
print('n_tensors', len(r.tensors), dict(c))
for t in r.tensors[:12]:
    print(' ', t.name, t.tensor_type.name, list(t.shape))
