#!/usr/bin/env python3
"""Golden token masks of llguidance for JSON schemas (issue 20), as make_regex_goldens.py makes them
for expressions: for each schema two token paths, the canonical tokens of a valid instance (every
one must be allowed) and 20 tokens sampled from llguidance's own masks by a seeded generator; at
each step the mask's popcount and FNV-1a 64 hash, whether llguidance was forced there, and the
token taken. llguidance's defaults (grammar_from_json_schema with no options: flexible
whitespace, "," and ":" separators, additionalProperties true).

usage: make_json_goldens.py TOKENIZER_JSON OUT     (needs llguidance==1.9.1 and numpy:
       scripts/grammar/setup-llguidance.sh prints a python that has them)
output lines:  schema <json string of the schema text>  |  step <forced> <popcount> <hash> <token or -1>"""
import json, random, sys

import llguidance as llg

from golden_mask import mask_step

SUITE = [  # (schema, a valid instance as text)
    ({"type": "string"}, '"hello"'),
    ({"type": "integer"}, "-42"),
    ({"type": "number"}, "3.14e-2"),
    ({"type": "boolean"}, "true"),
    ({"type": "null"}, "null"),
    ({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
      "required": ["name", "age"], "additionalProperties": False}, '{"name": "Bob", "age": 30}'),
    ({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
      "required": ["name", "age"]}, '{"name":"Al","age":1,"extra":[1,2]}'),
    ({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"}}, "required": ["b"]},
     '{"a": "x", "b": 2.5}'),
    ({"type": "array", "items": {"type": "integer"}}, "[1, 2, 3]"),
    ({"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3}, '["a","bb"]'),
    ({"enum": ["red", "green", "blue"]}, '"green"'),
    ({"const": "hello world"}, '"hello world"'),
    ({"type": ["string", "null"]}, "null"),
    ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, "17"),
    ({"type": "string", "minLength": 2, "maxLength": 5}, '"abc"'),
    ({"type": "object", "properties": {"user": {"type": "object", "properties": {
        "id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["id"]}},
      "required": ["user"]}, '{"user": {"id": 7, "tags": ["x", "y"]}}'),
    ({"$defs": {"node": {"type": "object", "properties": {"value": {"type": "integer"}, "children": {
        "type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["value"], "additionalProperties": False}},
      "$ref": "#/$defs/node"}, '{"value": 1, "children": [{"value": 2, "children": []}]}'),
    ({}, '{"a": [1, {"b": null}], "c": "d"}'),
    ({"type": "object", "additionalProperties": {"type": "integer"}}, '{"x": 1, "y": 2}'),
    ({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False}, '["s", 5]'),
    ({"enum": [1, 2.5, "x", True, None]}, "2.5"),
    ({"type": "object", "properties": {"q": {"const": "a\"b\\c\n"}}, "required": ["q"]}, '{"q": "a\\"b\\\\c\\n"}'),
    ({"x-guidance": {"whitespace_flexible": False}, "type": "object", "properties": {"a": {"type": "integer"}},
      "required": ["a"]}, '{"a":5}'),
    ({"type": "object", "properties": {"k\u00e9y": {"type": "boolean"}, "tab\tkey": {"type": "null"}}},
     '{"k\u00e9y": false, "tab\\tkey": null}'),
    ({"type": "object", "properties": {"title": {"type": "string", "description": "a title"},
                                       "done": {"type": "boolean", "default": False}},
      "required": ["title", "done"], "title": "Todo"}, '{"title": "Write tests", "done": true}'),
    ({"type": "array", "items": {"anyOf": [{"type": "number"}, {"type": "null"}]}, "maxItems": 4}, "[1.5, null, -2]"),
    ({"type": "integer", "minimum": 0}, "4096"),
    ({"type": "integer", "minimum": -5, "maximum": 123}, "-3"),
    ({"type": "integer", "exclusiveMinimum": 0, "maximum": 1000}, "999"),
    ({"type": "integer", "maximum": -3}, "-17"),
    ({"type": "integer", "minimum": 1.5, "exclusiveMaximum": 20}, "19"),
    ({"type": "object", "properties": {"age": {"type": "integer", "minimum": 0, "maximum": 150},
                                       "year": {"type": "integer", "minimum": 1900, "maximum": 2100}},
      "required": ["age", "year"]}, '{"age": 42, "year": 1983}'),
]

def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr); sys.exit(2)
    tok = llg.LLTokenizer(sys.argv[1], slices=[])
    eos = tok.eos_token
    rnd = random.Random(30)
    out = [f"# llguidance {llg.get_version()}; vocab {tok.vocab_size}; eos {eos}; "
           f"tokenizer {sys.argv[1].split('/')[-1]}"]
    for schema, instance in SUITE:
        text = json.dumps(schema)
        grammar = llg.LLMatcher.grammar_from_json_schema(text)
        for path in range(2):
            m = llg.LLMatcher(tok, grammar, log_level=0)
            assert not m.is_error(), (schema, m.get_error())
            out.append("schema " + json.dumps(text))
            plan = tok.tokenize_str(instance) + [eos] if path == 0 else None
            for k in range(len(plan) if plan else 20):
                forced, ids, h = mask_step(m, tok)
                if plan:
                    take = plan[k]
                    assert take in set(ids.tolist()) or forced, (schema, instance, k, tok.decode_bytes([take]))
                else:
                    choice = [int(i) for i in ids if i != eos]
                    take = rnd.choice(choice) if choice else (eos if eos in ids else -1)
                out.append(f"step {forced} {len(ids)} {h:016x} {take}")
                if take < 0 or not m.consume_token(take) or take == eos or m.is_stopped():
                    break
    open(sys.argv[2], "w").write("\n".join(out) + "\n")

main()
