/* template_test.c: the template engine against Jinja2 (issue: chat templates).
 *
 * - Every construct the chat templates use, each rendered and compared byte for byte with what
 *   Jinja2 3.1.6 printed in transformers' environment (ImmutableSandboxedEnvironment,
 *   trim_blocks, lstrip_blocks, loopcontrols, transformers' tojson; strftime_now frozen at
 *   2026-01-15): whitespace control, literals and Python's str()/repr(), attribute and item
 *   access, slices, operators, if/for/loop/set/namespace/macro/call/filter blocks, filters,
 *   tests, str/dict/list methods, globals. The expected strings were taken from Jinja2 once and
 *   written here, so the test needs no Python.
 * - Runtime errors carry Jinja2's message; raise_exception fails with its text exactly and
 *   feri_tmpl_last_raised; syntax errors give line and column.
 * - Limits: steps, output size, recursion depth, nesting; malformed context JSON; the JSON round
 *   trip of the context through tojson.
 * EVIDENCE: C-TMPL-002 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/template.h"
#include "testing/check.h"

static const int64_t NOW = 1768435200; /* 2026-01-15T00:00:00Z */

static const struct {
  const char *name, *src, *context, *want;
} RENDERS[] = {
    {"text", "plain text",
     "{}",
     "plain text"},
    {"comment", "a{# c #}b",
     "{}",
     "ab"},
    {"trailing_newline", "a\n",
     "{}",
     "a"},
    {"crlf", "a\015\nb\015c",
     "{}",
     "a\nb\nc"},
    {"trim_blocks", "{% if true %}\nx\n{% endif %}\ny",
     "{}",
     "x\ny"},
    {"lstrip_blocks", "  {% if true %}\n  x\n  {% endif %}\n",
     "{}",
     "  x\n"},
    {"lstrip_not_var", "  {{ 1 }}\n",
     "{}",
     "  1"},
    {"lstrip_plus", "  {%+ if true %}x{% endif %}",
     "{}",
     "  x"},
    {"strip_minus", "a  \n {%- if true -%}  \n b {{- ' c ' -}} \n d {%- endif %}",
     "{}",
     "ab c d"},
    {"comment_trim", "  {# c #}\nx",
     "{}",
     "x"},
    {"comment_minus", "a {#- c -#} b",
     "{}",
     "ab"},
    {"plus_end", "{% if true +%}\nx{% endif %}",
     "{}",
     "\nx"},
    {"text_mid_line", "a {% if true %}x{% endif %} b",
     "{}",
     "a x b"},
    {"literals", "{{ 'a\\'b' }}|{{ \"q\\\"\" }}|{{ 'tab\\there' }}|{{ '\\u00e9\\x41' }}|{{ 'a' 'b' }}",
     "{}",
     "a'b|q\"|tab\011here|\303\251A|ab"},
    {"numbers", "{{ 1 }} {{ 1_000 }} {{ 1.5 }} {{ 1e3 }} {{ 2.0 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e-5 }} {{ 123456789012345678.0 }}",
     "{}",
     "1 1000 1.5 1000.0 2.0 0.30000000000000004 1e+16 1e-05 1.2345678901234568e+17"},
    {"consts", "{{ true }} {{ True }} {{ false }} {{ none }} {{ None }}",
     "{}",
     "True True False None None"},
    {"repr_list", "{{ [1, 'a', \"it's\", none, true, 2.5, [], {}] }}",
     "{}",
     "[1, 'a', \"it's\", None, True, 2.5, [], {}]"},
    {"repr_dict", "{{ {'k': 'v', 'n': [1, (2, 3)]} }}|{{ (1,) }}|{{ () }}",
     "{}",
     "{'k': 'v', 'n': [1, (2, 3)]}|(1,)|()"},
    {"repr_escapes", "{{ ['a\\nb', 'c\\\\d', '\303\251'] }}",
     "{}",
     "['a\\nb', 'c\\\\d', '\303\251']"},
    {"print_tuple", "{{ 1, 2 }}",
     "{}",
     "(1, 2)"},
    {"print_ctx", "{{ d }}|{{ d.a }}|{{ f }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "{'b': 1, 'a': [1, 2.5, 'x'], 'items': 'key'}|[1, 2.5, 'x']|0.1"},
    {"attr_item", "{{ msgs[0].role }} {{ msgs[1]['content'] }} {{ msgs[-1].n }} {{ d.a.1 }} {{ d['a'][2] }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "user yo 2 2.5 x"},
    {"missing", "[{{ msgs[0].nope }}][{{ d.zz }}][{{ msgs[9] }}][{{ nothing }}]",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "[][][][]"},
    {"method_first", "{{ d.items is callable }} {{ d['items'] }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "True key"},
    {"slices", "{{ [1,2,3,4,5][1:3] }} {{ [1,2,3,4,5][::-1] }} {{ 'h\303\251llo'[1:] }} {{ 'abcdef'[::2] }} {{ [1,2,3][-2:] }} {{ 'abc'[:-1] }} {{ [1,2,3][5:] }} {{ 'abcdef'[4:1:-1] }}",
     "{}",
     "[2, 3] [5, 4, 3, 2, 1] \303\251llo ace [2, 3] ab [] edc"},
    {"str_index", "{{ 'h\303\251llo'[1] }}{{ 'abc'[-1] }}",
     "{}",
     "\303\251c"},
    {"arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1 + 2.5 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ true + 1 }}",
     "{}",
     "3 -4 2 -2 3.5 2.0 1024 0.5 3.5 3.0 0.5 2"},
    {"unary", "{{ -n }} {{ +n }} {{ -f }} {{ - 2 ** 2 }} {{ -3|abs }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "-7 7 -0.1 4 3"},
    {"strings_ops", "{{ 'a' + 'b' }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ 2 * 'x' }} {{ [1] + [2] }} {{ 'x' ~ 1 ~ none ~ nothing }}",
     "{}",
     "ab ababab [1, 1] xx [1, 2] x1None"},
    {"concat_shared_prefix", "{% set s = 'ab' %}{% set a = s + 'x' %}{% set b = s + 'y' %}{{ a }}{{ b }}{{ s }}{% set ns = namespace(t='') %}{% for i in range(50) %}{% set ns.t = ns.t + i|string %}{% set c = ns.t + '!' %}{{ c|length }},{% endfor %}{{ ns.t }}",
     "{}",
     "abxabyab2,3,4,5,6,7,8,9,10,11,13,15,17,19,21,23,25,27,29,31,33,35,37,39,41,43,45,47,49,51,53,55,57,59,61,63,65,67,69,71,73,75,77,79,81,83,85,87,89,91,012345678910111213141516171819202122232425262728293031323334353637383940414243444546474849"},
    {"compare", "{{ 1 < 2 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ [1, 2] < [1, 3] }} {{ 'a' != 'a' }} {{ none == none }} {{ 1 == '1' }}",
     "{}",
     "True True True True False True False True False"},
    {"in", "{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'a' in {'a': 1} }} {{ 'z' not in 'abc' }} {{ 'x' in nothing }}",
     "{}",
     "True True True True False"},
    {"logic", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' and 1 }} {{ none or [] }} {{ not 0 }} {{ not 'a' }} {{ e or 'empty' }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "x y  [] True False empty"},
    {"condexpr", "{{ 'a' if t else 'b' }}{{ 'c' if not t else 'd' }}[{{ 'x' if false }}]{{ 1 if false else 2 if false else 3 }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "ad[]3"},
    {"short_circuit", "{{ false and nothing.x }}{{ true or nothing.x }}",
     "{}",
     "FalseTrue"},
    {"if_elif", "{% for i in range(4) %}{% if i == 0 %}zero{% elif i == 1 %}one{% elif i == 2 %}two{% else %}many{% endif %},{% endfor %}",
     "{}",
     "zero,one,two,many,"},
    {"for_loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
     "{}",
     "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;"},
    {"for_prev_next", "{% for x in [1, 2, 3] %}[{{ loop.previtem }}|{{ loop.nextitem }}|{{ loop.previtem is defined }}]{% endfor %}",
     "{}",
     "[|2|False][1|3|True][2||True]"},
    {"for_cycle", "{% for x in range(5) %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %}",
     "{}",
     "abcab"},
    {"for_else", "{% for x in e %}{{ x }}{% else %}none{% endfor %}|{% for x in [1] %}{{ x }}{% else %}none{% endfor %}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "none|1"},
    {"for_filter", "{% for x in range(10) if x is odd %}{{ x }}{{ '/' if not loop.last }}{% endfor %} {% for m in msgs if m.role == 'assistant' %}{{ loop.index }}{{ loop.length }}{% endfor %}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "1/3/5/7/9 11"},
    {"for_unpack", "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %}",
     "{}",
     "a=1;b=2;37"},
    {"for_dict", "{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}",
     "{}",
     "xy"},
    {"for_nested_loop", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ b }}{% endfor %}{{ loop.index }};{% endfor %}",
     "{}",
     "1x2y1;1x2y2;"},
    {"break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}",
     "{}",
     "0134"},
    {"for_scope", "{% set c = 0 %}{% for i in [1, 2, 3] %}{% set c = c + i %}{{ c }}{% endfor %}|{{ c }}",
     "{}",
     "123|0"},
    {"if_scope", "{% if true %}{% set x = 5 %}{% endif %}{{ x }}",
     "{}",
     "5"},
    {"set", "{% set a = 1 %}{% set b, c = 2, 3 %}{% set l = [a, b, c] %}{{ l }}",
     "{}",
     "[1, 2, 3]"},
    {"namespace", "{% set ns = namespace(total=0, found=false) %}{% for i in range(4) %}{% set ns.total = ns.total + i %}{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.total }} {{ ns.found }}",
     "{}",
     "6 True"},
    {"set_block", "{% set x %}a{{ 1 + 1 }}b{% endset %}[{{ x }}]{% set y | upper %} hi {% endset %}[{{ y }}]",
     "{}",
     "[a2b][ HI ]"},
    {"set_override", "{% set bos_token = 'B' %}{{ bos_token }}",
     "{\"bos_token\": \"<s>\"}",
     "B"},
    {"macro", "{% macro m(a, b=2, c='z') %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ m(1) }} {{ m(1, 3) }} {{ m(1, c='q') }} {{ m(a=5, b=6) }}",
     "{}",
     "1-2-z 1-3-z 1-2-q 5-6-z"},
    {"macro_missing_arg", "{% macro m(a, b) %}[{{ b }}]{{ b is defined }}{% endmacro %}{{ m(1) }}",
     "{}",
     "[]False"},
    {"macro_sees_globals", "{% set g = 'G' %}{% macro m() %}{{ g }}{{ bos }}{% endmacro %}{% set g = 'H' %}{{ m() }}",
     "{\"bos\": \"<s>\"}",
     "H<s>"},
    {"macro_recursive", "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(4) }}",
     "{}",
     "4321"},
    {"call_block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ 1 + 1 }}{% endcall %}",
     "{}",
     "<b>bold 2</b>"},
    {"call_block_args", "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(v) each([1, 2]) %}[{{ v }}]{% endcall %}",
     "{}",
     "[1][2]"},
    {"filter_block", "{% filter upper %}abc {{ 'd' }}{% endfilter %}|{% filter trim %}  x  {% endfilter %}",
     "{}",
     "ABC D|x"},
    {"raw", "a\n  {% raw %}{{ x }} {% if %}{% endraw %}\nb",
     "{}",
     "a\n{{ x }} {% if %}b"},
    {"block_scopes", "{% set x = 1 %}{% set y %}{% set x = 2 %}{{ x }}{% endset %}{% filter upper %}{% set x = 3 %}{{ x }}{% endfilter %}{% generation %}{% set x = 4 %}{{ x }}{% endgeneration %}{{ y }}{{ x }}",
     "{}",
     "3421"},
    {"generation", "{% generation %}gen {{ 1 }}{% endgeneration %}!",
     "{}",
     "gen 1!"},
    {"f_length", "{{ msgs|length }} {{ 'h\303\251llo'|length }} {{ d|count }} {{ nothing|length }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "2 5 3 0"},
    {"f_trim", "[{{ s|trim }}][{{ 'xxaxx'|trim('x') }}][{{ '\302\240 a\343\200\200'|trim }}]",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "[Hello, World][a][a]"},
    {"f_case", "{{ 'hello world-foo(bar'|title }} {{ 'aBC dEF'|capitalize }} {{ 'Ab'|upper }}{{ 'Ab'|lower }}",
     "{}",
     "Hello World-Foo(Bar Abc def ABab"},
    {"f_join", "{{ [1, 'a', none]|join(', ') }} {{ msgs|join('|', attribute='role') }} {{ 'abc'|join('-') }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "1, a, None user|assistant a-b-c"},
    {"f_map_select", "{{ msgs|map(attribute='role')|list }} {{ [1, 2]|map('string')|join }} {{ [0, 1, 2, '', 'x']|select|list }} {{ [1, 2, 3, 4]|reject('even')|list }} {{ [1, 2, 3, 4]|select('divisibleby', 3)|list }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "['user', 'assistant'] 12 [1, 2, 'x'] [1, 3] [3]"},
    {"f_selectattr", "{{ msgs|selectattr('role', 'equalto', 'user')|list|length }} {{ msgs|rejectattr('n')|map(attribute='content')|join }} {{ msgs|selectattr('n', 'defined')|list|length }} {{ (msgs|selectattr('role', '==', 'assistant')|first).attr_missing is undefined }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "1 hi 1 True"},
    {"f_first_last", "{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ 'abc'|first }} [{{ []|first }}]",
     "{}",
     "1 3 a []"},
    {"f_default", "{{ nothing|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ none|default('d') }} {{ nothing|d }}|",
     "{}",
     "d  d None |"},
    {"f_string_int_float", "{{ 1|string }}{{ none|string }}{{ [1]|string }} {{ '42'|int + 1 }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(5) }} {{ 3.9|int }} {{ '2.5'|float }} {{ 3|float }} {{ 'x'|float }}",
     "{}",
     "1None[1] 43 4 0 5 3 2.5 3.0 0.0"},
    {"f_list", "{{ 'ab'|list }} {{ {'a': 1}|list }} {{ (1, 2)|list }}",
     "{}",
     "['a', 'b'] ['a'] [1, 2]"},
    {"f_tojson", "{{ d|tojson }} {{ '\303\251\"\\n'|tojson }} {{ [1.0, 1e16, 1e-7, none, true]|tojson }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "{\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"} \"\303\251\\\"\\n\" [1.0, 1e+16, 1e-07, null, true]"},
    {"f_tojson_opts", "{{ d|tojson(indent=2) }}|{{ {'b': 1, 'a': {}}|tojson(sort_keys=true) }}|{{ [1, [2]]|tojson(separators=(',', ':')) }}|{{ '\303\251\360\237\230\200'|tojson(ensure_ascii=true) }}|{{ []|tojson(indent=2) }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2.5,\n    \"x\"\n  ],\n  \"items\": \"key\"\n}|{\"a\": {}, \"b\": 1}|[1,[2]]|\"\\u00e9\\ud83d\\ude00\"|[]"},
    {"f_items_dictsort", "{% for k, v in d|items %}{{ k }};{% endfor %} {{ {'b': 1, 'A': 2, 'c': 0}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value') }} {{ {'b': 1, 'a': 2}|dictsort(reverse=true) }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "b;a;items; [('A', 2), ('b', 1), ('c', 0)] [('b', 1), ('a', 2)] [('b', 1), ('a', 2)]"},
    {"f_replace", "{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'ab'|replace('', '-') }}",
     "{}",
     "bbb bba -a-b-"},
    {"f_indent", "[{{ 'a\nb\n\nc'|indent }}][{{ 'a\nb'|indent(2, true) }}][{{ 'a\n\nb'|indent(2, blank=true) }}][{{ 'x\n'|indent(1) }}]",
     "{}",
     "[a\n    b\n\n    c][  a\n  b][a\n  \n  b][x\n]"},
    {"f_unique_sort_reverse", "{{ [3, 1, 'A', 'a', 3]|unique|list }} {{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ msgs|sort(attribute='role')|map(attribute='role')|list }} {{ 'abc'|reverse }} {{ [1, 2]|reverse|list }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "[3, 1, 'A'] [1, 2, 3] ['A', 'b', 'c'] [3, 2, 1] ['assistant', 'user'] cba [2, 1]"},
    {"f_abs_round", "{{ -3|abs }} {{ -2.5|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 3|round }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }}",
     "{}",
     "3 2.5 2.0 4.0 2.67 3 3.0 2.0"},
    {"f_escape", "{{ '<a href=\"x\">&\\'</a>'|e }} {{ '<b>'|escape }}",
     "{}",
     "&lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt; &lt;b&gt;"},
    {"f_safe_markup", "{{ '<'|safe + '<' }} {{ '&' + '<'|safe }} {{ ('<'|safe + 1|string) }}",
     "{}",
     "<&lt; &amp;< <1"},
    {"f_min_max_wordcount", "{{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ 'one two, three'|wordcount }}",
     "{}",
     "1 3 3"},
    {"f_sum", "{{ [1, 2, 3]|sum }} {{ [0.5, 1]|sum }} {{ msgs|sum(attribute='n', start=10) if false else [{'n': 1}, {'n': 2}]|sum(attribute='n', start=10) }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "6 1.5 13"},
    {"unicode_case", "{{ '\303\274n\303\257 \303\247\303\240 \303\277 \304\263 \316\261\316\262\316\263 \317\202 \320\266\321\221 \346\235\261\344\272\254'|upper }}|{{ '\303\234N\303\217 \316\221\316\222\316\223 \320\226\320\201'|lower }}|{{ '\303\251lan vital'|title }}|{{ '\303\251LAN'|capitalize }}|{{ '\303\274n\303\257-\317\211'.title() }}",
     "{}",
     "\303\234N\303\217 \303\207\303\200 \305\270 \304\262 \316\221\316\222\316\223 \316\243 \320\226\320\201 \346\235\261\344\272\254|\303\274n\303\257 \316\261\316\262\316\263 \320\266\321\221|\303\211lan Vital|\303\211lan|\303\234n\303\257-\316\251"},
    {"generator_once", "{% set g = [1, 2]|select %}{% for x in g %}a{% endfor %}{% for x in g %}b{% endfor %}{% if g %}T{% endif %}",
     "{}",
     "aaT"},
    {"tests_types", "{{ nothing is defined }}{{ nothing is undefined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}{{ true is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is boolean }}{{ d is mapping }}{{ msgs is sequence }}{{ 'a' is sequence }}{{ d is sequence }}{{ 1 is iterable }}{{ nothing is iterable }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "FalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalseTrue"},
    {"tests_values", "{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 1 is equalto 1 }}{{ 2 is eq 2 }}{{ 'a' is in 'abc' }}{{ 2 is in [1] }}{{ 1 is not none }}{{ 'A' is upper }}{{ 'a' is lower }}{{ 3 is gt 2 }}{{ 3 is lt 2 }}{{ range is callable }}",
     "{}",
     "TrueFalseTrueTrueTrueTrueFalseTrueTrueTrueFalseTrueTrueTrueTrueFalseTrue"},
    {"str_strip", "[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ 'xyhixy'.strip('xy') }}][{{ '..a..'.lstrip('.') }}][{{ '..a..'.rstrip('.') }}]",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "[Hello, World][Hello, World  ][  Hello, World][hi][a..][..a]"},
    {"str_split", "{{ ' a  b c '.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ ' a b c '.split(none, 1) }} {{ 'a b c'.rsplit(none, 1) }} {{ ''.split() }} {{ ''.split(',') }}",
     "{}",
     "['a', 'b', 'c'] ['a', 'b', '', 'c'] ['a', 'b,c'] ['a,b', 'c'] ['a', 'b c '] ['a b', 'c'] [] ['']"},
    {"str_affix", "{{ 'hello'.startswith('he') }} {{ 'hello'.endswith('lo') }} {{ 'hello'.startswith(('x', 'h')) }} {{ 'hello'.endswith(('x', 'y')) }}",
     "{}",
     "True True True False"},
    {"str_misc", "{{ 'a-b-c'.replace('-', '+') }} {{ 'a-b-c'.replace('-', '+', 1) }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'AbC'.upper() }}{{ 'AbC'.lower() }} {{ 'h\303\251llo'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'banana'.count('a') }} {{ '-'.join(['a', 'b']) }} {{ '12'.isdigit() }} {{ 'a1'.isalpha() }}",
     "{}",
     "a+b+c a+b-c Hello World Hello ABCabc 2 3 -1 3 a-b True False"},
    {"str_percent", "{{ '%s=%d' % ('a', 3) }}|{{ '%5s|%-4d|%.2f|%x|%%|%r' % ('ab', 7, 3.14159, 255, 'q') }}|{{ '%(a)s-%(b)05d' % {'a': 1, 'b': 42} }}|{{ '%s' % [1] }}|{{ '%s' % (1,) }}",
     "{}",
     "a=3|   ab|7   |3.14|ff|%|'q'|1-00042|[1]|1"},
    {"str_format", "{{ '{}-{}'.format(1, 'a') }} {{ '{1}{0}'.format('a', 'b') }} {{ '{x}!'.format(x=3) }} {{ '{{}}{}'.format(0) }}",
     "{}",
     "1-a ba 3! {}0"},
    {"dict_methods", "{{ d.get('b') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} {{ d.keys()|list }} {{ d.values()|list|length }} {{ d.items()|list|first }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}",
     "1 None dflt ['b', 'a', 'items'] 3 ('b', 1)"},
    {"list_methods", "{{ [1, 2, 1].count(1) }} {{ [1, 2, 3].index(2) }}",
     "{}",
     "2 1"},
    {"range_dict", "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b='x') }}",
     "{}",
     "[0, 1, 2] [1, 3, 5] [5, 3, 1] {'a': 1, 'b': 'x'}"},
    {"strftime", "{{ strftime_now('%Y-%m-%d %H:%M') }} {{ strftime_now('%d %b %Y') }}",
     "{}",
     "2026-01-15 00:00 15 Jan 2026"},
    {"chat_loop", "{{ bos_token }}{% for m in messages %}{{ '<|' + m.role + '|>' + m.content | trim + '\\n' }}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}",
     "{\"bos_token\": \"<s>\", \"add_generation_prompt\": true, \"messages\": [{\"role\": \"user\", \"content\": \" hi \"}, {\"role\": \"assistant\", \"content\": \"yo\"}]}",
     "<s><|user|>hi\n<|assistant|>yo\n<|assistant|>"},
    {"tool_json", "{% for t in tools %}{{ t | tojson(indent=4) }}\n{% endfor %}",
     "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"number\"}}}}}]}",
     "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"f\",\n        \"parameters\": {\n            \"type\": \"object\",\n            \"properties\": {\n                \"x\": {\n                    \"type\": \"number\"\n                }\n            }\n        }\n    }\n}\n"},
};

/* Jinja2's message for each; raised: the template called raise_exception. */
static const struct {
  const char *name, *src, *context, *message;
  int raised;
} ERRORS[] = {
    {"undefined_attr", "{{ nothing.x }}", "{}", "'nothing' is undefined", 0},
    {"undefined_attr2", "{{ msgs[0].foo.bar }}", "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}", "'dict object' has no attribute 'foo'", 0},
    {"undefined_element", "{{ msgs[5].x }}", "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}", "list object has no element 5", 0},
    {"undefined_plus", "{{ nothing + 1 }}", "{}", "'nothing' is undefined", 0},
    {"undefined_call", "{{ nothing() }}", "{}", "'nothing' is undefined", 0},
    {"type_concat", "{{ 'a' + 1 }}", "{}", "can only concatenate str (not \"int\") to str", 0},
    {"type_compare", "{{ 'a' < 1 }}", "{}", "'<' not supported between instances of 'str' and 'int'", 0},
    {"none_iter", "{% for x in none %}{% endfor %}", "{}", "'NoneType' object is not iterable", 0},
    {"unsafe_append", "{% set l = [] %}{{ l.append(1) }}", "{}", "access to attribute 'append' of 'list' object is unsafe.", 0},
    {"range_too_big", "{{ range(1000000)|length }}", "{}", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).", 0},
    {"tojson_undefined", "{{ nothing|tojson }}", "{}", "Object of type Undefined is not JSON serializable", 0},
    {"tojson_generator", "{{ [1]|map('string')|tojson }}", "{}", "Object of type generator is not JSON serializable", 0},
    {"items_not_mapping", "{{ 'abc'|items|list }}", "{}", "Can only get item pairs from a mapping.", 0},
    {"macro_too_many", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "{}", "macro 'm' takes not more than 1 argument(s)", 0},
    {"not_namespace", "{% set x = 1 %}{% set x.y = 2 %}", "{}", "cannot assign attribute on non-namespace object", 0},
    {"unknown_filter_runtime", "{% if true %}{{ 1|nope }}{% endif %}", "{}", "No filter named 'nope' found.", 0},
    {"no_previtem", "{% for m in msgs %}{{ loop.previtem.role }}{% endfor %}", "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"n\": 2}], \"d\": {\"b\": 1, \"a\": [1, 2.5, \"x\"], \"items\": \"key\"}, \"s\": \"  Hello, World  \", \"n\": 7, \"f\": 0.1, \"e\": [], \"t\": true, \"none\": null}", "there is no previous item", 0},
    {"div_zero", "{{ 1 / 0 }}", "{}", "division by zero", 0},
    {"raise", "{{ raise_exception('Bad role: ' ~ 'x') }}", "{}", "Bad role: x", 1},
};

static fer_status render(const char *src, const char *ctx, const feri_tmpl_options *opt, char **out, size_t *len) {
  feri_tmpl *t = NULL;
  const fer_status st = feri_tmpl_parse(src, strlen(src), &t);
  if (st != FER_STATUS_OK) return st;
  const fer_status r = feri_tmpl_render(t, ctx, strlen(ctx), opt, out, len);
  feri_tmpl_free(t);
  return r;
}

static const char *last_message(void) {
  static char msg[600];
  size_t n;
  fer_last_error_message(msg, sizeof msg, &n);
  return msg;
}

static void test_renders(void) {
  const feri_tmpl_options opt = {.struct_size = sizeof opt, .now_unix = NOW};
  for (size_t i = 0; i < sizeof RENDERS / sizeof RENDERS[0]; i++) {
    char *out = NULL;
    size_t len = 0;
    const fer_status st = render(RENDERS[i].src, RENDERS[i].context, &opt, &out, &len);
    if (st != FER_STATUS_OK) {
      printf("  %s: status %d: %s\n", RENDERS[i].name, (int)st, last_message());
      CHECK(!"renders");
      continue;
    }
    if (len != strlen(RENDERS[i].want) || memcmp(out, RENDERS[i].want, len) != 0) {
      printf("  %s:\n    got  [%s]\n    want [%s]\n", RENDERS[i].name, out, RENDERS[i].want);
      CHECK(!"the output is Jinja2's");
    }
    CHECK(out[len] == 0);
    free(out);
  }
}

static void test_errors(void) {
  for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++) {
    char *out = (char *)1;
    size_t len = 99;
    const fer_status st = render(ERRORS[i].src, ERRORS[i].context, NULL, &out, &len);
    CHECK(out == NULL && len == 0);
    if (st == FER_STATUS_OK || strcmp(last_message(), ERRORS[i].message) != 0 || feri_tmpl_last_raised() != (bool)ERRORS[i].raised ||
        (ERRORS[i].raised && st != FER_STATUS_INVALID_ARG)) {
      printf("  %s: status %d raised %d message [%s], want [%s]\n", ERRORS[i].name, (int)st, (int)feri_tmpl_last_raised(), last_message(),
             ERRORS[i].message);
      CHECK(!"fails with Jinja2's message");
    }
  }
}

static void test_syntax_errors(void) {
  static const struct {
    const char *src, *where; /* the message's start */
  } cases[] = {
      {"{% if x %}a", "line 1, column 12: Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or "
                      "'endif'. The innermost block that needs to be closed is 'if'."},
      {"{% for x in y %}{% set z %}", "line 1, column 28: Unexpected end of template. Jinja was looking for the following tags: "
                                      "'endset'. The innermost block that needs to be closed is 'set'."},
      {"ab\n  {{ 1 + }}", "line 2, column 10: unexpected 'end of print statement'"},
      {"{{ x y }}", "line 1, column 6: expected end of print statement"},
      {"{% for in x %}{% endfor %}", "line 1, column 8: "},
      {"{% frobnicate %}", "line 1, column 4: Encountered unknown tag 'frobnicate'."},
      {"{% endif %}", "line 1, column 4: Encountered unknown tag 'endif'."},
      {"{{ 'abc }}", "line 1, column 4: unexpected end of string"},
      {"x\n{# never closed", "line 2, column 1: missing end of comment tag"},
      {"{{ x|nope }}", "line 1, column 6: No filter named 'nope'."},
      {"{% for x in y %}{{ x is nope }}{% endfor %}", "line 1, column 22: No test named 'nope'."},
      {"{{ (1 }}", "line 1, column 8: unexpected closing bracket"},
      {"{{ 1 ]] }}", "line 1, column 6: unexpected closing bracket"},
      {"{% set 1 = 2 %}", "line 1, column 8: can't assign"},
      {"{% macro m(a=1, b) %}{% endmacro %}", "line 1, column 18: non-default argument follows default argument"},
      {"{% for x in y recursive %}{% endfor %}", "line 1, column 15: recursive loops are not supported"},
      {"{% if x %}{% break %}{% endif %}", "line 1, column 14: 'break' outside loop"},
      {"{% for x in y %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}", "line 1, column 35: 'continue' outside loop"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    feri_tmpl *t = (feri_tmpl *)1;
    const fer_status st = feri_tmpl_parse(cases[i].src, strlen(cases[i].src), &t);
    const char *msg = last_message();
    if (st != FER_STATUS_INVALID_ARG || t != NULL || strncmp(msg, cases[i].where, strlen(cases[i].where)) != 0) {
      printf("  parse [%s]: status %d, message [%s], want [%s...]\n", cases[i].src, (int)st, msg, cases[i].where);
      CHECK(!"a syntax error with its line and column");
    }
  }
  /* an unknown filter inside an if block fails only when it runs */
  feri_tmpl *t = NULL;
  CHECK_STATUS(feri_tmpl_parse("{% if x %}{{ 1|nope }}{% endif %}ok", 35, &t), FER_STATUS_OK);
  char *out = NULL;
  size_t len = 0;
  CHECK_STATUS(feri_tmpl_render(t, "{}", 2, NULL, &out, &len), FER_STATUS_OK);
  CHECK(out && !strcmp(out, "ok"));
  free(out);
  feri_tmpl_free(t);
  /* nesting deeper than the parser allows is refused, not a stack overflow: parentheses, and the
   * left-deep chains of operators, filters and attributes the evaluator recurses into */
  static char deep[40000];
  strcpy(deep, "{{ ");
  for (int k = 0; k < 1000; k++) strcat(deep, "(");
  CHECK_STATUS(feri_tmpl_parse(deep, strlen(deep), &t), FER_STATUS_INVALID_ARG);
  static const char *const LINKS[] = {" + 1", "|string", ".a", " or x", "[0]"};
  for (size_t i = 0; i < sizeof LINKS / sizeof LINKS[0]; i++) {
    strcpy(deep, "{{ x");
    for (int k = 0; k < 5000; k++) strcat(deep, LINKS[i]);
    strcat(deep, " }}");
    CHECK_STATUS(feri_tmpl_parse(deep, strlen(deep), &t), FER_STATUS_INVALID_ARG);
  }
  strcpy(deep, "{{ 0");
  for (int k = 0; k < 400; k++) strcat(deep, " + 1");
  strcat(deep, " }}");
  CHECK_STATUS(feri_tmpl_parse(deep, strlen(deep), &t), FER_STATUS_OK);
  CHECK_STATUS(feri_tmpl_render(t, "{}", 2, NULL, &out, &len), FER_STATUS_OK);
  CHECK(out && !strcmp(out, "400"));
  free(out);
  feri_tmpl_free(t);
}

static void test_limits(void) {
  char *out = NULL;
  size_t len = 0;
  feri_tmpl_options opt = {.struct_size = sizeof opt, .max_steps = 10000};
  CHECK_STATUS(render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "{}", &opt, &out, &len),
               FER_STATUS_BUDGET_EXCEEDED);
  CHECK(out == NULL && len == 0);
  opt = (feri_tmpl_options){.struct_size = sizeof opt, .max_output = 1000};
  CHECK_STATUS(render("{{ 'x' * 1001 }}", "{}", &opt, &out, &len), FER_STATUS_BUDGET_EXCEEDED);
  CHECK_STATUS(render("{% for i in range(2000) %}x{% endfor %}", "{}", &opt, &out, &len), FER_STATUS_BUDGET_EXCEEDED);
  CHECK_STATUS(render("{{ 'x' * 1000 }}", "{}", &opt, &out, &len), FER_STATUS_OK);
  CHECK(len == 1000);
  free(out);
  CHECK_STATUS(render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "{}", NULL, &out, &len), FER_STATUS_BUDGET_EXCEEDED);
  opt = (feri_tmpl_options){.struct_size = sizeof opt, .max_memory = 1 << 20};
  CHECK_STATUS(render("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", "{}", &opt, &out, &len),
               FER_STATUS_BUDGET_EXCEEDED);
  CHECK_STATUS(render("{{ 2 ** 64 }}", "{}", NULL, &out, &len), FER_STATUS_UNSUPPORTED);
  /* a namespace holding itself prints to a bounded depth */
  CHECK_STATUS(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", "{}", NULL, &out, &len), FER_STATUS_BAD_FORMAT);
}

static void test_json(void) {
  static const char *const ROUND_TRIP[] = {
      "{\"a\": 1, \"b\": [1.5, -2, 1e+16, 1e-05, 0.1, true, false, null], \"c\": {\"z\": \"\\u0001\\n\\\"\\\\/\", \"y\": \"\xc3\xa9\xe6\x9d\xb1\xf0\x9f\xa6\x80\"}}",
      "[]", "{}", "\"\"", "-0.0", "123456789012345678", "[[[]], {}]",
  };
  for (size_t i = 0; i < sizeof ROUND_TRIP / sizeof ROUND_TRIP[0]; i++) {
    char ctx[512], *out = NULL;
    size_t len = 0;
    snprintf(ctx, sizeof ctx, "{\"x\": %s}", ROUND_TRIP[i]);
    CHECK_STATUS(render("{{ x|tojson }}", ctx, NULL, &out, &len), FER_STATUS_OK);
    if (!out || strcmp(out, ROUND_TRIP[i]) != 0) printf("  round trip: got [%s], want [%s]\n", out ? out : "", ROUND_TRIP[i]);
    CHECK(out && !strcmp(out, ROUND_TRIP[i]));
    free(out);
  }
  /* escapes and surrogate pairs decode to UTF-8; floats keep their type */
  char *out = NULL;
  size_t len = 0;
  CHECK_STATUS(render("{{ s }}|{{ f }}|{{ i }}|{{ f is float }}", "{\"s\": \"\\u00e9\\ud83e\\udd80\\t\", \"f\": 2.0, \"i\": 2}", NULL, &out, &len),
               FER_STATUS_OK);
  CHECK(out && !strcmp(out, "\xc3\xa9\xf0\x9f\xa6\x80\t|2.0|2|True"));
  free(out);
  static const char *const BAD[] = {"", "[]", "{", "{\"a\": }", "{\"a\": 01}", "{\"a\": \"\\x\"}", "{\"a\": 1,}", "{\"a\": tru}",
                                    "{} x", "{\"a\": \"\n\"}", "{\"a\": 1.}", "{'a': 1}"};
  feri_tmpl *t = NULL;
  CHECK_STATUS(feri_tmpl_parse("x", 1, &t), FER_STATUS_OK);
  for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
    const fer_status st = feri_tmpl_render(t, BAD[i], strlen(BAD[i]), NULL, &out, &len);
    if (st != FER_STATUS_BAD_FORMAT && !(i == 0 && st == FER_STATUS_OK)) printf("  context [%s]: status %d\n", BAD[i], (int)st);
    CHECK(i == 0 ? st == FER_STATUS_OK : st == FER_STATUS_BAD_FORMAT);
    if (st == FER_STATUS_OK) free(out);
  }
  feri_tmpl_free(t);
}

static void test_api(void) {
  feri_tmpl_free(NULL);
  feri_tmpl *t = NULL;
  CHECK_STATUS(feri_tmpl_parse("x", 1, NULL), FER_STATUS_NULL_ARG);
  CHECK_STATUS(feri_tmpl_parse(NULL, 0, &t), FER_STATUS_OK);
  char *out = NULL;
  size_t len = 0;
  CHECK_STATUS(feri_tmpl_render(t, NULL, 0, NULL, &out, &len), FER_STATUS_OK);
  CHECK(out && len == 0 && out[0] == 0);
  free(out);
  CHECK_STATUS(feri_tmpl_render(NULL, "{}", 2, NULL, &out, &len), FER_STATUS_NULL_ARG);
  CHECK_STATUS(feri_tmpl_render(t, "{}", 2, NULL, NULL, &len), FER_STATUS_NULL_ARG);
  feri_tmpl_free(t);
  /* a template renders again with other variables; the context need not be NUL-terminated */
  CHECK_STATUS(feri_tmpl_parse("{{ a }}!", 8, &t), FER_STATUS_OK);
  CHECK_STATUS(feri_tmpl_render(t, "{\"a\": 1}xx", 8, NULL, &out, &len), FER_STATUS_OK);
  CHECK(out && !strcmp(out, "1!"));
  free(out);
  CHECK_STATUS(feri_tmpl_render(t, "{\"a\": [1]}", 10, NULL, &out, &len), FER_STATUS_OK);
  CHECK(out && !strcmp(out, "[1]!"));
  free(out);
  feri_tmpl_free(t);
}

int main(void) {
  test_renders();
  test_errors();
  test_syntax_errors();
  test_limits();
  test_json();
  test_api();
  return feri_test_finish("template_test");
}
