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

from golden_mask import mask_step, open_tokenizer

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
    # patterns (a search: unanchored sides take any characters), formats, lengths combined (&)
    ({"type": "string", "pattern": "^[a-z]+$"}, '"hello"'),
    ({"type": "string", "pattern": "[0-9]{3}"}, '"ab123cd"'),
    ({"type": "string", "pattern": "^\\d{3}-\\d{4}$"}, '"555-1234"'),
    ({"type": "string", "pattern": "^[A-Z][a-z]+$", "minLength": 3, "maxLength": 6}, '"Alice"'),
    ({"type": "string", "pattern": "^(foo|bar)$|baz"}, '"xbazx"'),
    ({"type": "string", "pattern": "^\\w+@\\w+\\.com$"}, '"me@example.com"'),
    ({"type": "string", "format": "date"}, '"2024-02-29"'),
    ({"type": "string", "format": "time"}, '"12:34:56.789Z"'),
    ({"type": "string", "format": "date-time"}, '"2024-01-15T08:30:00+02:00"'),
    ({"type": "string", "format": "uuid"}, '"123e4567-e89b-12d3-a456-426614174000"'),
    ({"type": "string", "format": "email"}, '"john.doe@example.org"'),
    ({"type": "string", "format": "hostname"}, '"api.example.com"'),
    ({"type": "string", "format": "ipv4"}, '"192.168.0.1"'),
    ({"type": "string", "format": "email", "maxLength": 20}, '"a@b.co"'),
    ({"type": "string", "pattern": "^[^\\n]*$", "minLength": 1}, '"line with \\t tab"'),
    ({"type": "string", "pattern": "a\"b"}, '"xa\\"b"'),
    # number ranges, multipleOf, const numbers
    ({"type": "number", "minimum": -1.5, "maximum": 10.25}, "3.75"),
    ({"type": "number", "exclusiveMinimum": 0}, "0.5"),
    ({"type": "number", "minimum": 0, "maximum": 1}, "0.125"),
    ({"type": "number", "maximum": 100}, "-7.5"),
    ({"type": "number", "exclusiveMaximum": 0}, "-0.25"),
    ({"type": "number", "minimum": 2.5}, "12.5"),
    ({"type": "integer", "multipleOf": 3}, "-27"),
    ({"type": "number", "multipleOf": 0.25, "minimum": 0, "maximum": 10}, "2.75"),
    ({"type": "number", "multipleOf": 0.5}, "1.5"),
    ({"type": "integer", "multipleOf": 5, "minimum": 10, "maximum": 100}, "45"),
    ({"const": 2.5}, "2.5"),
    # oneOf (disjoint options: as anyOf), allOf (merged), patternProperties, min/maxProperties, compound consts
    ({"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}, '"x"'),
    ({"oneOf": [{"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}},
                 "required": ["kind", "r"]},
                {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "number"}},
                 "required": ["kind", "side"]}]}, '{"kind": "square", "side": 2}'),
    ({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]}]}, '{"a": 1, "b": "x"}'),
    ({"allOf": [{"type": "string", "minLength": 2}, {"maxLength": 4, "pattern": "^[a-z]+$"}]}, '"abc"'),
    ({"allOf": [{"type": "number", "minimum": 0}, {"maximum": 10, "multipleOf": 0.5}]}, "7.5"),
    ({"type": "object", "patternProperties": {"^x-": {"type": "string"}}, "properties": {"id": {"type": "integer"}},
      "required": ["id"]}, '{"id": 1, "x-trace": "abc", "other": true}'),
    ({"type": "object", "patternProperties": {"^[a-z]+$": {"type": "integer"}}, "additionalProperties": False},
     '{"alpha": 1, "beta": 2}'),
    ({"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 1, "maxProperties": 3},
     '{"k": "v", "l": "w"}'),
    ({"type": "object", "properties": {"email": {"type": "string"}, "phone": {"type": "string"}},
      "additionalProperties": False, "minProperties": 1}, '{"phone": "555"}'),
    ({"const": {"a": [1, 2], "b": None}}, '{"a": [1, 2], "b": null}'),
    ({"enum": [[1, "x"], {"k": True}, "plain"]}, '{"k": true}'),
    # realistic API-style schemas
    ({"title": "Person", "type": "object", "properties": {
        "firstName": {"type": "string", "minLength": 1, "maxLength": 50},
        "lastName": {"type": "string", "minLength": 1, "maxLength": 50},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "email": {"type": "string", "format": "email"},
        "birthDate": {"type": "string", "format": "date"}},
      "required": ["firstName", "lastName", "email"], "additionalProperties": False},
     '{"firstName": "Ada", "lastName": "Lovelace", "age": 36, "email": "ada@math.org", "birthDate": "1815-12-10"}'),
    ({"title": "Order", "type": "object", "properties": {
        "orderId": {"type": "string", "format": "uuid"},
        "status": {"enum": ["pending", "shipped", "delivered"]},
        "items": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {
            "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
            "quantity": {"type": "integer", "minimum": 1},
            "price": {"type": "number", "exclusiveMinimum": 0}},
            "required": ["sku", "quantity", "price"], "additionalProperties": False}},
        "createdAt": {"type": "string", "format": "date-time"}},
      "required": ["orderId", "status", "items"], "additionalProperties": False},
     '{"orderId": "9b2f0c1e-3a4d-4e5f-8a9b-0c1d2e3f4a5b", "status": "shipped", "items": '
     '[{"sku": "ABC-1234", "quantity": 2, "price": 9.99}], "createdAt": "2024-05-01T12:00:00Z"}'),
    ({"title": "ToolCall", "type": "object", "properties": {
        "name": {"const": "get_weather"},
        "arguments": {"type": "object", "properties": {
            "city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 14}},
            "required": ["city"], "additionalProperties": False}},
      "required": ["name", "arguments"], "additionalProperties": False},
     '{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius", "days": 3}}'),
    ({"title": "Issue", "type": "object", "properties": {
        "number": {"type": "integer", "minimum": 1},
        "title": {"type": "string", "maxLength": 256},
        "state": {"enum": ["open", "closed"]},
        "labels": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "color": {"type": "string", "pattern": "^[0-9a-f]{6}$"}},
            "required": ["name", "color"]}},
        "assignee": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {
            "login": {"type": "string"}, "id": {"type": "integer"}}, "required": ["login"]}]},
        "milestone": {"type": ["object", "null"], "properties": {"title": {"type": "string"}}}},
      "required": ["number", "title", "state"]},
     '{"number": 20, "title": "Structured output", "state": "open", "labels": [{"name": "grammar", '
     '"color": "a2eeef"}], "assignee": null}'),
    ({"$defs": {"tree": {"type": "object", "properties": {"name": {"type": "string"},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}, "maxItems": 3}},
        "required": ["name"], "additionalProperties": False}}, "$ref": "#/$defs/tree"},
     '{"name": "root", "kids": [{"name": "a"}, {"name": "b", "kids": []}]}'),
    ({"title": "Address", "type": "object", "properties": {
        "street": {"type": "string"}, "city": {"type": "string"},
        "zip": {"type": "string", "pattern": "^\\d{5}(-\\d{4})?$"},
        "country": {"type": "string", "minLength": 2, "maxLength": 2}},
      "required": ["street", "city", "zip", "country"]},
     '{"street": "1 Main St", "city": "Springfield", "zip": "12345", "country": "US"}'),
    ({"title": "Event", "type": "object", "properties": {
        "id": {"type": "string", "format": "uuid"}, "at": {"type": "string", "format": "date-time"},
        "level": {"enum": ["debug", "info", "warn", "error"]},
        "host": {"type": "string", "format": "hostname"}, "ip": {"type": "string", "format": "ipv4"},
        "latency_ms": {"type": "number", "minimum": 0, "maximum": 60000}},
      "required": ["id", "at", "level"], "additionalProperties": False},
     '{"id": "00000000-0000-0000-0000-000000000000", "at": "2024-01-01T00:00:00.5Z", "level": "warn", '
     '"host": "db1.internal", "ip": "10.0.0.7", "latency_ms": 12.5}'),
    ({"title": "Rating", "type": "object", "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 5, "multipleOf": 0.5},
        "comment": {"type": ["string", "null"], "maxLength": 140},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^#[a-z]+$"}, "maxItems": 5}},
      "required": ["score"]}, '{"score": 4.5, "comment": null, "tags": ["#good"]}'),
    ({"title": "Config", "type": "object", "properties": {
        "version": {"const": 2}, "retries": {"type": "integer", "minimum": 0, "maximum": 10},
        "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 300},
        "mode": {"oneOf": [{"const": "fast"}, {"const": "safe"}]}},
      "required": ["version", "mode"], "additionalProperties": False},
     '{"version": 2, "retries": 3, "timeout": 2.5, "mode": "safe"}'),
]

def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr); sys.exit(2)
    tok, eos, header = open_tokenizer(sys.argv[1])
    rnd = random.Random(30)
    out = [header]
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
