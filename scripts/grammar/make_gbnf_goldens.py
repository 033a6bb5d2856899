#!/usr/bin/env python3
"""Golden token masks of llguidance for GBNF grammars (issue 20), as make_json_goldens.py makes them
for JSON schemas: each grammar is converted by llguidance's own converter
(llguidance.grammar_from("gbnf", text), scripts/grammar/LLGUIDANCE.md section 7) and walked along
token paths: the canonical tokens of each valid instance listed (every one must be allowed), then
two paths of up to 24 tokens sampled from llguidance's own masks by a seeded generator. At each
step the mask's popcount and FNV-1a 64 hash, whether llguidance was forced there, and the token
taken.

The grammars are written for this suite (none copied), from simple to realistic. Left out on
purpose, because llguidance's converter refuses or misreads what llama.cpp (and ferrite) accept:
\\u and \\U escapes with leading zeros, \\[ and \\] in literals, counts {0} and {m,0}, stacked
repetition, colliding rule names, a rule named start, and &&, --, ~~ inside classes (c/grammar/gbnf.h).

usage: make_gbnf_goldens.py TOKENIZER_JSON OUT     (needs llguidance==1.9.1 and numpy:
       scripts/grammar/setup-llguidance.sh prints a python that has them)
output lines:  gbnf <json string of the grammar text>  |  step <forced> <popcount> <hash> <token or -1>"""
import json, random, sys

import llguidance as llg

from golden_mask import mask_step, open_tokenizer

SUITE = [  # (GBNF text, valid instances)
    ('root ::= "yes" | "no"\n', ["yes", "no"]),

    ('root ::= "(" [0-9]{3} ") " [0-9]{3} "-" [0-9]{4}\n', ["(555) 123-4567"]),

    ('# an ISO date, one terminal\n'
     'root ::= date\n'
     'date ::= year "-" month "-" day\n'
     'year ::= [12] [0-9]{3}\n'
     'month ::= "0" [1-9] | "1" [0-2]\n'
     'day ::= "0" [1-9] | [12] [0-9] | "3" [01]\n', ["2024-02-29", "1999-12-31"]),

    ('root ::= ident ("," ws ident)*\n'
     'ident ::= [A-Za-z_] [A-Za-z0-9_]*\n'
     'ws ::= [ ]?\n', ["foo, bar_1,_baz", "x"]),

    ('# arithmetic, left recursive\n'
     'root ::= expr\n'
     'expr ::= expr ws ("+" | "-") ws term | term\n'
     'term ::= term ws ("*" | "/") ws factor | factor\n'
     'factor ::= number | "(" ws expr ws ")" | "-" factor\n'
     'number ::= [0-9]+ ("." [0-9]+)?\n'
     'ws ::= [ ]*\n', ["3 * (4 + 5.25) - -2", "1+2*3/4"]),

    ('# JSON, in the manner of llama.cpp\'s grammars/json.gbnf\n'
     'root ::= value\n'
     'value ::= object | array | string | number | ("true" | "false" | "null") ws\n'
     '\n'
     'object ::=\n'
     '  "{" ws (\n'
     '    member\n'
     '    ("," ws member)*\n'
     '  )? "}" ws\n'
     'member ::= string ":" ws value\n'
     '\n'
     'array ::= "[" ws ( value ("," ws value)* )? "]" ws\n'
     '\n'
     'string ::=\n'
     '  "\\"" (\n'
     '    [^"\\\\\\x7F\\x00-\\x1F] |\n'
     '    "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4}) # escapes\n'
     '  )* "\\"" ws\n'
     '\n'
     'number ::= "-"? ([0-9] | [1-9] [0-9]{1,15}) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws\n'
     '\n'
     '# at most one newline and some indentation\n'
     'ws ::= | " " | "\\n" [ \\t]{0,20}\n',
     ['{"name": "Ada", "tags": ["x", "y\\n"], "n": -1.5e3, "ok": true}', '[1, {"a": null}]']),

    ('root ::= item+\n'
     'item ::= "- " [^\\n]+ "\\n"\n', ["- milk\n- eggs and ham\n"]),

    ('# chess moves in algebraic notation\n'
     'root ::= move (" " move)*\n'
     'move ::= castle | piece-move | pawn-move\n'
     'castle ::= "O-O" "-O"?\n'
     'piece-move ::= [KQRBN] [a-h]? [1-8]? "x"? [a-h] [1-8] check?\n'
     'pawn-move ::= ([a-h] "x")? [a-h] [1-8] ("=" [QRBN])? check?\n'
     'check ::= [+#]\n', ["e4 e5 Nf3 Nc6 Bb5 a6 O-O", "exd8=Q+ Rxe1#"]),

    ('root ::= header row*\n'
     'header ::= fields "\\n"\n'
     'row ::= fields "\\n"\n'
     'fields ::= field ("," field)*\n'
     'field ::= [^,\\n"]* | "\\"" ([^"] | "\\"\\"")* "\\""\n', ['name,age\nBob,42\n"Smith, J",7\n']),

    ('root ::= local "@" domain\n'
     'local ::= [a-z0-9._]+\n'
     'domain ::= [a-z0-9-]+ ("." [a-z0-9-]+)+\n', ["jane.doe@example.co.uk"]),

    ('# s-expressions: recursion through a group\n'
     'root ::= sexp\n'
     'sexp ::= atom | "(" ws (sexp (ws1 sexp)*)? ws ")"\n'
     'atom ::= [a-z0-9+*/-]+\n'
     'ws ::= [ \\n]*\n'
     'ws1 ::= [ \\n]+\n', ["(define (sq x) (* x x))", "(a (b c) ())"]),

    ('root ::= line*\n'
     'line ::= (pair | comment | "") "\\n"\n'
     'pair ::= key ws "=" ws value\n'
     'key ::= [a-zA-Z_] [a-zA-Z0-9_.]*\n'
     'value ::= [^\\n#]+\n'
     'comment ::= "#" [^\\n]*\n'
     'ws ::= [ \\t]*\n', ["# settings\nname = ferrite\n\nthreads=4\n"]),

    ('root ::= greeting " " name "!"\n'
     'greeting ::= "h\u00e9llo" | "\u4f60\u597d" | "hi"\n'
     'name ::= [A-Z\u00c0-\u00dd\\u4e00-\\u9fff] [a-z\u00e0-\u00ff\\u4e00-\\u9fff]*\n',
     ["h\u00e9llo Zo\u00eb!", "\u4f60\u597d \u674e\u96f7!"]),

    ('root ::= "<call>" ws name ws "(" ws args? ws ")" ws "</call>"\n'
     'args ::= arg (ws "," ws arg)*\n'
     'arg ::= name ws "=" ws val\n'
     'val ::= number | string | "true" | "false"\n'
     'name ::= [a-z_] [a-z_0-9]*\n'
     'number ::= "-"? [0-9]+\n'
     'string ::= "\\"" [^"]* "\\""\n'
     'ws ::= [ ]*\n', ['<call> get_weather(city = "Paris", days=3) </call>']),

    ('root ::= pair*\n'
     'pair ::= "(" root ")" | "[" root "]"\n', ["([])[()()]", "(((())))"]),

    ('root ::= "Q: " line "\\nA: " line\n'
     'line ::= .+\n', ["Q: what is 2+2?\nA: 4, of course."]),

    ('root ::= ("ab" | "c"){2,5} "."\n', ["abcab.", "cc."]),

    ('root ::= ws ("x" ws)*\n'
     'ws ::= [ \\t]*\n', ["  x x\tx ", ""]),

    ('# keywords and identifiers: two lexemes that match "if" at once\n'
     'root ::= (keyword | ident) (" " (keyword | ident))*\n'
     'keyword ::= "if" | "then" | "else"\n'
     'ident ::= [a-z]+\n', ["if x then y else zz", "iffy"]),

    ('# a small imperative language, mutual recursion\n'
     'root ::= stmt+\n'
     'stmt ::= ident " = " expr ";\\n" | "while " expr " {\\n" stmt* "}\\n" | "print " expr ";\\n"\n'
     'expr ::= operand (" " op " " operand)*\n'
     'operand ::= ident | num | "(" expr ")"\n'
     'op ::= "+" | "-" | "<" | "=="\n'
     'ident ::= [a-z] [a-z0-9]*\n'
     'num ::= [0-9]+\n', ["i = 0;\nwhile i < 10 {\nprint (i + 1);\ni = i + 1;\n}\n"]),
]


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr); sys.exit(2)
    tok, eos, header = open_tokenizer(sys.argv[1])
    rnd = random.Random(40)
    out = [header]
    for text, instances in SUITE:
        grammar = llg.grammar_from("gbnf", text)
        plans = [tok.tokenize_str(inst) + [eos] for inst in instances] + [None, None]
        for plan in plans:
            m = llg.LLMatcher(tok, grammar, log_level=0)
            assert not m.is_error(), (text, m.get_error())
            out.append("gbnf " + json.dumps(text, ensure_ascii=False))
            for k in range(len(plan) if plan else 24):
                forced, ids, h = mask_step(m, tok)
                if plan:
                    take = plan[k]
                    assert take in set(ids.tolist()) or forced, (text, k, tok.decode_bytes([take]))
                else:
                    choice = [int(i) for i in ids if i != eos]
                    take = rnd.choice(choice) if choice else (eos if eos in ids else -1)
                out.append(f"step {forced} {len(ids)} {h:016x} {take}")
                if take < 0 or not m.consume_token(take) or take == eos or m.is_stopped():
                    break
    open(sys.argv[2], "w", encoding="utf-8").write("\n".join(out) + "\n")

main()
