#!/usr/bin/env python3
"""Constrained generation over the JSON schema suite with the real model (issue 20): for each schema of
make_json_goldens.py's SUITE, `ferrite generate --chat --json-schema` on SmolLM2-135M-Instruct (seeded sampling)
asked for a value of that schema; each output is parsed with json and validated with the `jsonschema`
package (Draft 2020-12; `format` asserted too, and reported apart). A 135M model under a grammar
sometimes loops (a tree nested for ever, a string repeating) until the token budget ends: such a run
is retried with the next seed, and after eight seeds with an example value in the prompt; the prompt
and seed that ended are recorded. Writes the outputs as goldens for c/tools/json_suite_test.c, which regenerates
them in CI (no Python there) and compares.

usage: smollm2_json_suite.py FERRITE_BIN MODEL_GGUF OUT     (a python with llguidance, numpy and
       jsonschema: scripts/grammar/setup-llguidance.sh prints one)
output lines:  # header  |  case <json string: schema text>  |  prompt <json string>  |  seed S  |  output <json string>"""
import ast, importlib.metadata, json, os, subprocess, sys, tempfile

import jsonschema


def load_suite():
    """make_json_goldens.py's SUITE, read as a literal (importing that script would run it)."""
    src = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "make_json_goldens.py")).read()
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "SUITE" for t in node.targets):
            return ast.literal_eval(node.value)
    sys.exit("make_json_goldens.py has no SUITE")


SUITE = load_suite()

MAX_TOKENS = 256
# Sampled, not greedy: a 135M model decoding greedily under a grammar falls into loops (a tree nested
# for ever, a string repeating) that no token budget ends; the seeded draw is deterministic.
SAMPLING = ["--temperature", "0.7", "--top-p", "0.9", "--kv-dtype", "f32"]  # f32 K/V: the recorded goldens' setting
SEEDS = range(1, 9)


def prompt_for(schema_text):
    return "Reply with only a JSON value that is valid under this JSON Schema: " + schema_text


def generate(binary, model, path, prompt, seed):
    r = subprocess.run([binary, "generate", "--model", model, "--chat", "--prompt", prompt, "--json-schema", path,
                        "--max-tokens", str(MAX_TOKENS), "--seed", str(seed)] + SAMPLING, capture_output=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"ferrite generate failed ({r.returncode}): {r.stderr.decode()[-400:]}")
    output = r.stdout.decode()
    assert output.endswith("\n"), output
    return output[:-1], b"incomplete" not in r.stderr


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr); sys.exit(2)
    binary, model, out_path = sys.argv[1:]
    lines, n_valid, n_format, incomplete = [], 0, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for k, (schema, _instance) in enumerate(SUITE):
            text = json.dumps(schema)
            path = os.path.join(tmp, "schema.json")
            open(path, "w").write(text)
            complete = False
            for prompt in (prompt_for(text), prompt_for(text) + " For example: " + _instance):
                for seed in SEEDS:  # the first seed whose value ends within the budget
                    output, complete = generate(binary, model, path, prompt, seed)
                    if complete:
                        break
                    incomplete += 1
                if complete:  # else once more with an example in the prompt: a small model copies its length
                    break
            verdict = "valid"
            try:
                value = json.loads(output)
                jsonschema.validate(value, schema, cls=jsonschema.Draft202012Validator)
                n_valid += 1
                try:  # format as an assertion too (2020-12 makes it an annotation by default)
                    jsonschema.validate(value, schema, cls=jsonschema.Draft202012Validator,
                                        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
                    n_format += 1
                except jsonschema.ValidationError as e:
                    verdict = f"valid; format assertion: {e.message}"
            except (json.JSONDecodeError, jsonschema.ValidationError) as e:
                verdict = f"INVALID: {str(e).splitlines()[0]}"
            print(f"{k:3d} seed {seed} {verdict}: {output[:100]!r}", file=sys.stderr)
            lines += ["case " + json.dumps(text), "prompt " + json.dumps(prompt), f"seed {seed}", "output " + json.dumps(output)]
    header = (f"# ferrite generate --chat --json-schema {' '.join(SAMPLING)} --seed S --max-tokens {MAX_TOKENS}; model "
              f"{os.path.basename(model)}; jsonschema {importlib.metadata.version('jsonschema')}: {n_valid} of {len(SUITE)} "
              f"valid ({n_format} with format asserted); {incomplete} runs out of budget retried with the next seed")
    open(out_path, "w").write("\n".join([header] + lines) + "\n")
    print(header, file=sys.stderr)
    sys.exit(0 if n_valid == len(SUITE) else 1)


main()
