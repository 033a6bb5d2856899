/* template_fuzz.c: libFuzzer harnesses of the template engine, one per build mode
 * (scripts/fuzz-template.sh builds each):
 *   FERI_FUZZ_SOURCE   arbitrary bytes as a template, rendered against a fixed context (messages
 *                      with tool calls, tools, the usual flags);
 *   FERI_FUZZ_CONTEXT  arbitrary bytes as the context JSON of a fixed real-world template (the
 *                      input's first byte picks one of a few).
 * A render must either succeed with a NUL-terminated output of the reported length or fail with
 * a status and a message, never crash, leak or run past the limits set here. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "template/template.h"

static const feri_tmpl_options OPT = {
    .struct_size = sizeof(feri_tmpl_options),
    .max_depth = 64,
    .now_unix = 1768435200,
    .max_steps = 200000,
    .max_output = 1 << 20,
    .max_memory = 64 << 20,
};

static void check_render(const feri_tmpl *t, const char *ctx, size_t len) {
  char *out = NULL;
  size_t out_len = 0;
  const fer_status st = feri_tmpl_render(t, ctx, len, &OPT, &out, &out_len);
  if (st == FER_STATUS_OK) {
    if (!out || out[out_len] != 0 || out_len > OPT.max_output) abort();
    free(out);
  } else if (out || out_len) {
    abort();
  }
}

#if defined(FERI_FUZZ_CONTEXT)
static const char *const TEMPLATES[] = {
    /* Qwen2.5-style: tools, tool calls, tool responses */
    "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}"
    "{%- else %}{{- 'You are Qwen.' }}{%- endif %}{{- '\\n\\n# Tools\\n<tools>' }}{%- for tool in tools %}{{- '\\n' }}"
    "{{- tool | tojson }}{%- endfor %}{{- '\\n</tools><|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- elif message.role == 'assistant' %}{{- '<|im_start|>' + message.role }}{%- if message.content %}"
    "{{- '\\n' + message.content }}{%- endif %}{%- for tool_call in message.tool_calls %}{%- if tool_call.function is defined %}"
    "{%- set tool_call = tool_call.function %}{%- endif %}{{- '\\n<tool_call>\\n{\"name\": \"' }}{{- tool_call.name }}"
    "{{- '\", \"arguments\": ' }}{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != 'tool') %}"
    "{{- '<|im_start|>user' }}{%- endif %}{{- '\\n<tool_response>\\n' }}{{- message.content }}{{- '\\n</tool_response>' }}"
    "{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
    /* Llama-3-style: namespace, strftime_now, raise_exception, trim */
    "{{- bos_token }}{%- if not date_string is defined %}{%- set date_string = strftime_now('%d %b %Y') %}{%- endif %}"
    "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content']|trim %}"
    "{%- set messages = messages[1:] %}{%- else %}{%- set system_message = '' %}{%- endif %}"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}{{- 'Today Date: ' + date_string + '\\n\\n' }}"
    "{{- system_message }}{{- '<|eot_id|>' }}{%- set ns = namespace(n=0) %}{%- for message in messages %}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{- raise_exception('roles must alternate') }}{%- endif %}"
    "{%- set ns.n = ns.n + 1 %}{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}",
    /* filters and methods over whatever the context holds */
    "{% for k, v in (x if x is mapping else {}).items() %}{{ k }}={{ v|string|upper }};{% endfor %}{{ x|tojson(indent=2) }}"
    "{{ (x|list if x is iterable else [x])|map('string')|join(',') }}{{ x is sequence }}{{ x|length if x is sequence }}"
    "{% if x is string %}{{ x.split()|reverse|list }}{{ x.strip('ab') }}{{ x[::-1] }}{{ x.replace('a', 'bb') }}{% endif %}"
    "{{ x|default('d') }}{{ (x|dictsort) if x is mapping }}",
};
#else
static const char CONTEXT[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi \\u00e9\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\","
    " \"arguments\": {\"a\": 1, \"b\": [1.5, null, true]}}}]}, {\"role\": \"tool\", \"content\": \"{\\\"r\\\": 2}\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"n\": 3, \"x\": 0.5}";
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
#if defined(FERI_FUZZ_CONTEXT)
  static feri_tmpl *t[sizeof TEMPLATES / sizeof TEMPLATES[0]];
  if (size == 0) return 0;
  const size_t k = data[0] % (sizeof TEMPLATES / sizeof TEMPLATES[0]);
  if (!t[k] && feri_tmpl_parse(TEMPLATES[k], strlen(TEMPLATES[k]), &t[k]) != FER_STATUS_OK) abort();
  check_render(t[k], (const char *)data + 1, size - 1);
#else
  feri_tmpl *t = NULL;
  if (feri_tmpl_parse((const char *)data, size, &t) != FER_STATUS_OK) {
    if (t) abort();
    return 0;
  }
  check_render(t, CONTEXT, sizeof CONTEXT - 1);
  feri_tmpl_free(t);
#endif
  return 0;
}
