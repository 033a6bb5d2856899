/* chat_template_test.c: the public chat template (fer_chat_template_*) on small templates written
 * for each rule: how messages are prepared (null members dropped, reasoning aliased, text parts
 * joined), the system-role merge and the probe that decides it, chat_template_kwargs, the
 * tool_use variant, errors (the request's, the template's own message, syntax), the clock; then
 * the engine's template: a file without one refused with a message naming the override, the
 * override file, FERRITE_TEMPLATE_NOW, and the real SmolLM2 file when it is present.
 * Also testdata/template/gemma-turns.jinja (given to the Gemma 3 base file) against llama.cpp's
 * gemma format. usage: chat_template_test [GEMMA_TURNS.jinja]
 * EVIDENCE: C-CHAT-001, C-CHAT-002, C-CHAT-003, C-CHAT-007, C-ENG-010, C-GEM-006 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chat/chat_template.h"
#include "ferrite.h"
#include "testing/check.h"

static int last_error_has(const char *needle) {
  char msg[1024];
  size_t len;
  fer_last_error_message(msg, sizeof msg, &len);
  if (!strstr(msg, needle)) fprintf(stderr, "  message '%s' lacks '%s'\n", msg, needle);
  return strstr(msg, needle) != NULL;
}

static fer_chat_template *make(const char *src, const char *tool_use) {
  fer_chat_template_options o;
  CHECK_STATUS(fer_chat_template_options_init(&o), FER_STATUS_OK);
  o.bos_token = "<s>", o.eos_token = "</s>", o.now_unix = 1768435200; /* 2026-01-15 */
  o.tool_use_source = tool_use, o.tool_use_source_bytes = tool_use ? strlen(tool_use) : 0;
  fer_chat_template *t = NULL;
  CHECK_STATUS(fer_chat_template_create(src, strlen(src), &o, &t), FER_STATUS_OK);
  return t;
}

/* Renders request with flags and compares with want (NULL: expects status st instead). */
static void renders(const fer_chat_template *t, const char *request, uint32_t flags, const char *want) {
  char *out = NULL;
  uint64_t n = 0;
  CHECK_STATUS(fer_chat_template_apply(t, request, strlen(request), flags, &out, &n), FER_STATUS_OK);
  const int same = out && n == strlen(want) && memcmp(out, want, n) == 0 && out[n] == '\0';
  CHECK(same);
  if (!same) fprintf(stderr, "  request %s\n  got  [%s]\n  want [%s]\n", request, out ? out : "(null)", want);
  fer_buffer_free(out);
}

/* A refused render: status st, message containing needle, both outputs cleared. */
static void refuses(const fer_chat_template *t, const char *request, uint32_t flags, fer_status st, const char *needle) {
  char *out = (char *)"stale";
  uint64_t n = 99;
  CHECK_STATUS(fer_chat_template_apply(t, request, request ? strlen(request) : 0, flags, &out, &n), st);
  CHECK(out == NULL && n == 0);
  CHECK(last_error_has(needle));
}

/* C-CHAT-001: messages reach the template as transformers prepares them. */
static void test_preparation(void) {
  fer_chat_template *t = make("{{ messages | tojson }}", NULL);
  /* null members dropped; the first of reasoning_content, thinking, reasoning becomes both thinking
   * (first) and reasoning_content (last) */
  renders(t, "{\"messages\": [{\"role\": \"assistant\", \"content\": null, \"reasoning\": \"r\", \"name\": \"x\"}]}", 0,
          "[{\"thinking\": \"r\", \"role\": \"assistant\", \"reasoning\": \"r\", \"name\": \"x\", \"reasoning_content\": \"r\"}]");
  renders(t, "{\"messages\": [{\"role\": \"user\", \"content\": \"a\", \"thinking\": \"t\", \"reasoning_content\": \"rc\"}]}", 0,
          "[{\"thinking\": \"t\", \"role\": \"user\", \"content\": \"a\", \"reasoning_content\": \"rc\"}]"); /* **message wins */
  /* text parts joined with newlines; verbatim keeps the list; numbers keep their spelling */
  const char *parts = "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"one\"}, "
                      "{\"type\": \"text\", \"text\": \"two\"}], \"n\": 1.0}]}";
  renders(t, parts, 0, "[{\"role\": \"user\", \"content\": \"one\\ntwo\", \"n\": 1.0}]");
  renders(t, parts, FER_CHAT_VERBATIM,
          "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"one\"}, {\"type\": \"text\", \"text\": \"two\"}], "
          "\"n\": 1.0}]");
  refuses(t, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", \"image_url\": {}}]}]}", 0,
          FER_STATUS_INVALID_ARG, "messages[0].content[0] is a part of type 'image_url'");
  refuses(t, "{\"messages\": [{\"role\": \"user\", \"content\": [\"bare\"]}]}", 0, FER_STATUS_INVALID_ARG,
          "messages[0].content[0] is not a {\"type\": \"text\"");
  fer_chat_template_free(t);

  /* the other variables, and chat_template_kwargs after them (they win over bos_token) */
  t = make("{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools }}|{{ documents }}|{{ enable_thinking "
           "}}|{{ strftime_now('%Y-%m-%d') }}",
           NULL);
  renders(t, "{\"messages\": []}", FER_CHAT_ADD_GENERATION_PROMPT, "<s>|</s>|True|None|None||2026-01-15");
  renders(t, "{\"messages\": [], \"tools\": [], \"documents\": [{\"t\": 1}], \"chat_template_kwargs\": {\"enable_thinking\": false}}",
          0, "<s>|</s>|False|[]|[{'t': 1}]|False|2026-01-15");
  renders(t, "{\"messages\": [], \"chat_template_kwargs\": {\"bos_token\": \"B\"}, \"model\": \"ignored\"}", 0,
          "B|</s>|False|None|None||2026-01-15");
  refuses(t, "{\"messages\": [], \"chat_template_kwargs\": {\"messages\": []}}", 0, FER_STATUS_INVALID_ARG,
          "chat_template_kwargs.messages: set by the request itself");
  fer_chat_template_free(t);
}

/* C-CHAT-002: a template without a system role gets the system text in the next user turn, as
 * llama.cpp's polyfill puts it; one that has a system role is left alone. */
static void test_system_merge(void) {
  static const char DROPS[] = "{% for m in messages %}{% if m.role == 'user' %}U:{{ m.content }}|{% elif m.role == 'assistant' "
                              "%}A:{{ m.content }}|{% endif %}{% endfor %}";
  static const char RAISES[] = "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not "
                               "supported') }}{% endif %}{{ m.role[0] }}:{{ m.content }}|{% endfor %}";
  static const char KEEPS[] = "{% for m in messages %}{{ m.role[0] }}:{{ m.content }}|{% endfor %}";
  fer_chat_template *drops = make(DROPS, NULL), *raises = make(RAISES, NULL), *keeps = make(KEEPS, NULL);
  CHECK(drops && raises && keeps);
  if (!drops || !raises || !keeps) return;
  const char *convo = "{\"messages\": [{\"role\": \"system\", \"content\": \"S1\"}, {\"role\": \"system\", \"content\": \"S2\"}, "
                      "{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\"}, "
                      "{\"role\": \"system\", \"content\": \"S3\"}, {\"role\": \"assistant\", \"content\": \"more\"}, "
                      "{\"role\": \"system\", \"content\": \"S4\"}]}";
  renders(drops, convo, 0, "U:S1\nS2\nhi|A:yo|U:S3|A:more|U:S4|");
  renders(raises, convo, 0, "u:S1\nS2\nhi|a:yo|u:S3|a:more|u:S4|");
  renders(keeps, convo, 0, "s:S1|s:S2|u:hi|a:yo|s:S3|a:more|s:S4|");
  renders(drops, convo, FER_CHAT_VERBATIM, "U:hi|A:yo|A:more|");
  /* verbatim: the template's own refusal, its message exactly */
  refuses(raises, convo, FER_CHAT_VERBATIM, FER_STATUS_TEMPLATE_ERROR, "System role not supported");
  char msg[256];
  size_t len;
  fer_last_error_message(msg, sizeof msg, &len);
  CHECK(strcmp(msg, "System role not supported") == 0);
  /* an empty user turn takes the system text alone */
  renders(drops, "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"\"}]}", 0, "U:S|");
  fer_chat_template_free(drops);
  fer_chat_template_free(raises);
  fer_chat_template_free(keeps);
}

/* C-CHAT-003: bad input is the caller's, with a message naming what is wrong; nothing is
 * returned from a refused call. */
static void test_errors(void) {
  fer_chat_template *t = make("{% for m in messages %}{{ m.content }}{% endfor %}", "TOOLS:{{ tools | length }}");
  renders(t, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": []}", 0, "x");
  renders(t, "{\"messages\": [], \"tools\": [{\"type\": \"function\"}]}", 0, "TOOLS:1");
  refuses(t, "{\"messages\": [", 0, FER_STATUS_INVALID_ARG, "request: ");
  refuses(t, "[1]", 0, FER_STATUS_INVALID_ARG, "request: the request is not a JSON object");
  refuses(t, "{\"tools\": []}", 0, FER_STATUS_INVALID_ARG, "\"messages\" is missing or not a list");
  refuses(t, "{\"messages\": [3]}", 0, FER_STATUS_INVALID_ARG, "messages[0] is not an object");
  refuses(t, "{\"messages\": [{\"content\": \"x\"}]}", 0, FER_STATUS_INVALID_ARG, "messages[0].role is missing");
  refuses(t, "{\"messages\": [], \"tools\": {}}", 0, FER_STATUS_INVALID_ARG, "\"tools\" is not a list");
  refuses(t, "{\"messages\": [], \"documents\": 1}", 0, FER_STATUS_INVALID_ARG, "\"documents\" is not a list");
  refuses(t, "{\"messages\": [], \"chat_template_kwargs\": []}", 0, FER_STATUS_INVALID_ARG, "\"chat_template_kwargs\" is not an object");
  refuses(t, "{\"messages\": []}", 0x10, FER_STATUS_INVALID_ARG, "unknown flags 0x10");
  refuses(t, "", 0, FER_STATUS_INVALID_ARG, "the request is empty");
  refuses(NULL, "{}", 0, FER_STATUS_NULL_ARG, "NULL");
  refuses(t, NULL, 0, FER_STATUS_INVALID_ARG, "the request is empty");
  char *out = (char *)"stale";
  CHECK_STATUS(fer_chat_template_apply(t, "{}", 2, 0, &out, NULL), FER_STATUS_NULL_ARG);
  CHECK(out == NULL);
  uint64_t n = 7;
  CHECK_STATUS(fer_chat_template_apply(t, NULL, 3, 0, &out, &n), FER_STATUS_NULL_ARG);
  CHECK(n == 0);
  fer_chat_template_free(t);

  /* the template's failures on a conversation are TEMPLATE_ERROR with its message */
  t = make("{{ messages[0].content + 1 }}", NULL);
  refuses(t, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}", 0, FER_STATUS_TEMPLATE_ERROR, "can only concatenate str");
  fer_chat_template_free(t);

  /* creation: syntax errors with the line, bad options, outputs cleared */
  fer_chat_template *bad = (fer_chat_template *)&n;
  CHECK_STATUS(fer_chat_template_create("x\n{% if %}", 10, NULL, &bad), FER_STATUS_INVALID_ARG);
  CHECK(bad == NULL && last_error_has("chat template: line 2"));
  fer_chat_template_options o;
  fer_chat_template_options_init(&o);
  o.tool_use_source = "{% for %}", o.tool_use_source_bytes = 9;
  CHECK_STATUS(fer_chat_template_create("ok", 2, &o, &bad), FER_STATUS_INVALID_ARG);
  CHECK(bad == NULL && last_error_has("chat template (tool_use): line 1"));
  o.struct_size = 8;
  CHECK_STATUS(fer_chat_template_create("ok", 2, &o, &bad), FER_STATUS_INVALID_ARG);
  CHECK(last_error_has("struct_size"));
  fer_chat_template_options_init(&o);
  o.now_unix = -1;
  CHECK_STATUS(fer_chat_template_create("ok", 2, &o, &bad), FER_STATUS_INVALID_ARG);
  o.now_unix = 0, o.tool_use_source_bytes = 3;
  CHECK_STATUS(fer_chat_template_create("ok", 2, &o, &bad), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_chat_template_create(NULL, 1, NULL, &bad), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_chat_template_create("ok", 2, NULL, NULL), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_chat_template_free(NULL), FER_STATUS_OK);
  CHECK_STATUS(fer_chat_template_options_init(NULL), FER_STATUS_NULL_ARG);
  /* the defaults: no special tokens, the clock (a year this century) */
  CHECK_STATUS(fer_chat_template_create("[{{ bos_token }}]{{ strftime_now('%Y')[:2] }}", 45, NULL, &bad), FER_STATUS_OK);
  renders(bad, "{\"messages\": []}", 0, "[]20");
  fer_chat_template_free(bad);
}

/* C-CHAT-007: tool turns for templates that cannot show them (llama.cpp's polyfills, the generic
 * form's instructions), string arguments as objects, the capabilities and the format. */
static void test_tools(void) {
  static const char REQ[] =
      "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather?\"}, {\"role\": \"assistant\", \"content\": null, "
      "\"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": "
      "\"{\\\"city\\\": \\\"Paris\\\"}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"name\": \"get_weather\", \"content\": "
      "\"18C\"}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": "
      "\"object\"}}}]}";
  /* plain drops tool messages and shows neither tools nor calls; aware shows all three */
  fer_chat_template *plain = make("{% for m in messages %}{% if m.role != 'tool' %}{{ m.role[0] }}:{{ m.content }}|{% endif %}{% endfor %}", NULL);
  fer_chat_template *aware = make("{% for m in messages %}{{ m.role }}{% for c in m.tool_calls or [] %}<tool_call>{{ c.function | "
                                  "tojson }}</tool_call>{% endfor %}:{{ m.content }}|{% endfor %}{% if tools %}T{{ tools | length "
                                  "}}{% for t in tools %}:{{ t.function.name }}{% endfor %}{% endif %}",
                                  NULL);
  if (!plain || !aware) return;
  fer_chat_template_info info = {.struct_size = sizeof info};
  CHECK_STATUS(fer_chat_template_get_info(plain, &info), FER_STATUS_OK);
  CHECK(info.caps == FER_CHAT_CAP_SYSTEM && info.tool_format == FER_CHAT_TOOLS_GENERIC && info.struct_size == sizeof info);
  info.struct_size = sizeof info;
  CHECK_STATUS(fer_chat_template_get_info(aware, &info), FER_STATUS_OK);
  CHECK(info.caps == (FER_CHAT_CAP_SYSTEM | FER_CHAT_CAP_TOOLS | FER_CHAT_CAP_TOOL_CALLS | FER_CHAT_CAP_TOOL_RESPONSES) &&
        info.tool_format == FER_CHAT_TOOLS_HERMES);
  renders(plain, REQ, 0,
          "s:You can call any of the following tools to satisfy the user's requests: [\n  {\n    \"type\": \"function\",\n    "
          "\"function\": {\n      \"name\": \"get_weather\",\n      \"parameters\": {\n        \"type\": \"object\"\n      }\n    "
          "}\n  }\n]\n\nRespond in JSON format, either with `tool_call` (a request to call tools) or with `response` reply to "
          "the user's request|u:Weather?|a:{\n  \"tool_calls\": [\n    {\n      \"name\": \"get_weather\",\n      \"arguments\": "
          "{\n        \"city\": \"Paris\"\n      },\n      \"id\": \"c1\"\n    }\n  ]\n}|u:{\n  \"tool_response\": {\n    \"tool\": "
          "\"get_weather\",\n    \"content\": \"18C\",\n    \"tool_call_id\": \"c1\"\n  }\n}|");
  renders(plain, REQ, FER_CHAT_VERBATIM, "u:Weather?|a:|");
  renders(aware, REQ, 0,
          "user:Weather?|assistant<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>:|tool:18C|T1:get_weather");
  renders(aware, REQ, FER_CHAT_VERBATIM,
          "user:Weather?|assistant<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}</tool_call>:|"
          "tool:18C|T1:get_weather");
  /* a first system message takes the tools after its own text; arguments that are not an object stay */
  renders(plain,
          "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"assistant\", \"tool_calls\": [{\"function\": "
          "{\"name\": \"f\", \"arguments\": \"not json\"}}]}], \"tools\": [{\"type\": \"function\"}]}",
          0,
          "s:Be brief.\n\nYou can call any of the following tools to satisfy the user's requests: [\n  {\n    \"type\": \"function\"\n  "
          "}\n]\n\nRespond in JSON format, either with `tool_call` (a request to call tools) or with `response` reply to the user's "
          "request|a:{\n  \"tool_calls\": [\n    {\n      \"name\": \"f\",\n      \"arguments\": \"not json\"\n    }\n  ]\n}|");
  /* get_info's refusals: the struct zeroed */
  info = (fer_chat_template_info){.struct_size = 4, .caps = 7};
  CHECK_STATUS(fer_chat_template_get_info(aware, &info), FER_STATUS_INVALID_ARG);
  CHECK(info.caps == 0 && info.struct_size == 0 && last_error_has("struct_size"));
  info = (fer_chat_template_info){.struct_size = sizeof info, .caps = 7};
  CHECK_STATUS(fer_chat_template_get_info(NULL, &info), FER_STATUS_NULL_ARG);
  CHECK(info.caps == 0);
  CHECK_STATUS(fer_chat_template_get_info(aware, NULL), FER_STATUS_NULL_ARG);
  fer_chat_template_free(plain);
  fer_chat_template_free(aware);
}

static void test_dates(void) {
  int64_t s = -1;
  CHECK(feri_chat_parse_date("2026-01-15", &s) && s == 1768435200);
  CHECK(feri_chat_parse_date("1970-01-01", &s) && s == 0);
  CHECK(feri_chat_parse_date("2024-02-29", &s) && s == 1709164800);
  s = 5;
  CHECK(!feri_chat_parse_date("2023-02-29", &s) && s == 5);
  CHECK(!feri_chat_parse_date("2026-13-01", &s) && !feri_chat_parse_date("2026-1-15", &s));
  CHECK(!feri_chat_parse_date("2026-01-15x", &s) && !feri_chat_parse_date("2026/01/15", &s) && !feri_chat_parse_date(NULL, &s));
  CHECK(!feri_chat_parse_date("2026-04-31", &s) && !feri_chat_parse_date("2026-00-10", &s));
}

static bool write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  const bool ok = fwrite(text, 1, strlen(text), f) == strlen(text);
  return fclose(f) == 0 && ok;
}

/* The engine's template: the tiny model has none (refused, naming the override); an override
 * file; FERRITE_TEMPLATE_NOW; a directory or a bad template refused at creation. */
static void test_engine_override(void) {
  void *img = NULL;
  size_t bytes = 0;
  CHECK_STATUS(fer_tiny_model_image("llama", 1, &img, &bytes), FER_STATUS_OK);
  fer_engine_config c;
  fer_engine_config_init(&c);
  c.model_image = img, c.model_image_bytes = bytes, c.n_threads = 1;
  fer_engine *e = NULL;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_OK);
  const fer_chat_template *ct = (const fer_chat_template *)&c;
  CHECK_STATUS(fer_engine_chat_template(e, &ct), FER_STATUS_UNSUPPORTED);
  CHECK(ct == NULL && last_error_has("no chat template") && last_error_has("--chat-template FILE.jinja"));
  char *out = NULL;
  uint64_t n = 0;
  CHECK_STATUS(fer_engine_chat_apply(e, "{\"messages\": []}", 16, 0, &out, &n), FER_STATUS_UNSUPPORTED);
  CHECK(out == NULL && last_error_has("--chat-template"));
  char text[64];
  size_t len = 0;
  const fer_chat_message m[2] = {{"system", "Be \"brief\"."}, {"user", "hi\n"}};
  CHECK_STATUS(fer_engine_chat_render(e, m, 2, 0, text, sizeof text, &len), FER_STATUS_UNSUPPORTED);
  fer_engine_free(e);

  char dir[] = "/tmp/ferrite-chat-test-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[128], bad[128];
  snprintf(path, sizeof path, "%s/t.jinja", dir);
  snprintf(bad, sizeof bad, "%s/bad.jinja", dir);
  CHECK(write_file(path, "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{{ eos_token }}"
                         "{% if add_generation_prompt %}@{{ strftime_now('%d %b %Y') }}{% endif %}"));
  CHECK(write_file(bad, "{% if x %}"));
  c.chat_template_path = path;
  static const char *const env[] = {"FERRITE_TEMPLATE_NOW=2025-03-04", NULL};
  c.environment = env;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_chat_template(e, &ct), FER_STATUS_OK);
  CHECK(ct != NULL);
  /* the tiny vocabulary names no BOS and <|endoftext|> as EOS; JSON escapes survive the trip */
  CHECK_STATUS(fer_engine_chat_render(e, m, 2, FER_CHAT_ADD_GENERATION_PROMPT, text, sizeof text, &len), FER_STATUS_OK);
  static const char WANT[] = "<system>Be \"brief\".<user>hi\n<|endoftext|>@04 Mar 2025";
  CHECK(len == strlen(WANT) && strcmp(text, WANT) == 0);
  char small[8];
  memset(small, 'x', sizeof small);
  CHECK_STATUS(fer_engine_chat_render(e, m, 2, FER_CHAT_ADD_GENERATION_PROMPT, small, sizeof small, &len), FER_STATUS_BUFFER_TOO_SMALL);
  CHECK(len == strlen(WANT) && small[0] == 'x');
  static const char PARTS[] = "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}]}]}";
  CHECK_STATUS(fer_engine_chat_apply(e, PARTS, sizeof PARTS - 1, 0, &out, &n), FER_STATUS_OK);
  CHECK(out && strcmp(out, "<user>a<|endoftext|>") == 0 && n == 20);
  fer_buffer_free(out);
  const fer_chat_message null_content = {"user", NULL};
  CHECK_STATUS(fer_engine_chat_render(e, &null_content, 1, 0, text, sizeof text, &len), FER_STATUS_NULL_ARG);
  fer_engine_config got;
  CHECK_STATUS(fer_engine_get_config(e, &got), FER_STATUS_OK);
  CHECK(got.chat_template_path && strcmp(got.chat_template_path, path) == 0 && got.chat_template_now_unix == 1741046400);
  fer_engine_free(e);

  /* refused at creation, the engine not made: a directory, a template that does not compile, a
   * bad date, an empty path */
  e = (fer_engine *)&c;
  c.environment = NULL;
  c.chat_template_path = dir;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_INVALID_ARG);
  CHECK(e == NULL && last_error_has(dir));
  c.chat_template_path = bad;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_INVALID_ARG);
  CHECK(e == NULL && last_error_has("chat template: line 1"));
  c.chat_template_path = "";
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_INVALID_ARG);
  CHECK(last_error_has("chat_template_path is empty"));
  c.chat_template_path = path;
  static const char *const bad_env[] = {"FERRITE_TEMPLATE_NOW=yesterday", NULL};
  c.environment = bad_env;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_INVALID_ARG);
  CHECK(e == NULL && last_error_has("FERRITE_TEMPLATE_NOW"));
  unlink(path);
  unlink(bad);
  rmdir(dir);
  fer_buffer_free(img);
}

/* An engine on a real file of the data directory (one thread), with the template at
 * template_path or the file's own; NULL (and SKIPPED printed) without the file. */
static fer_engine *engine_on_file(const char *name, const char *template_path) {
  char path[4096];
  if (!feri_test_data_path(name, path, sizeof path)) {
    printf("SKIPPED: chat_template_test: %s is not here\n", name);
    return NULL;
  }
  fer_engine_config c;
  fer_engine_config_init(&c);
  c.model_path = path;
  c.chat_template_path = template_path;
  c.n_threads = 1;
  fer_engine *e = NULL;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_OK);
  return e;
}

/* C-ENG-010: the real SmolLM2 file's own template, through the engine. */
static void test_smollm2(void) {
  static const char WANT[] = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                             "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
  fer_engine *e = engine_on_file("smollm2-135m-instruct-q4_1.gguf", NULL);
  if (!e) return;
  const fer_chat_message user = {"user", "What is the capital of France?"};
  char out[1024];
  size_t len = 0;
  CHECK_STATUS(fer_engine_chat_render(e, &user, 1, FER_CHAT_ADD_GENERATION_PROMPT, out, sizeof out, &len), FER_STATUS_OK);
  CHECK(len == strlen(WANT) && strcmp(out, WANT) == 0);
  char *text = NULL;
  uint64_t n = 0;
  static const char REQ[] = "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}]}";
  CHECK_STATUS(fer_engine_chat_apply(e, REQ, sizeof REQ - 1, 0, &text, &n), FER_STATUS_OK);
  CHECK(text && strcmp(text, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n") == 0);
  fer_buffer_free(text);
  fer_model_info info;
  fer_engine_model_info(e, &info);
  CHECK(info.eot_id == 2 && info.eos_id == 2 && strcmp(info.architecture, "llama") == 0);
  fer_engine_free(e);
}

/* The Gemma 3 file's tokenizer adds BOS: the engine's prompt drops the template's own <bos>, the
 * template itself keeps it; a base file without a template is refused with the override's name. */
static void test_gemma3_bos(void) {
  fer_engine *e = engine_on_file("gemma3-270m-q4_k_m.gguf", NULL);
  if (!e) return;
  char text[64];
  size_t len = 0;
  const fer_chat_message m = {"user", "Hi"};
  CHECK_STATUS(fer_engine_chat_render(e, &m, 1, 0, text, sizeof text, &len), FER_STATUS_UNSUPPORTED);
  CHECK(last_error_has("--chat-template FILE.jinja"));
  fer_engine_free(e);
  char dir[] = "/tmp/ferrite-chat-test-XXXXXX", tpath[128];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(tpath, sizeof tpath, "%s/b.jinja", dir);
  CHECK(write_file(tpath, "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"));
  e = engine_on_file("gemma3-270m-q4_k_m.gguf", tpath);
  CHECK_STATUS(fer_engine_chat_render(e, &m, 1, 0, text, sizeof text, &len), FER_STATUS_OK);
  CHECK(strcmp(text, "Hi<eos>") == 0);
  const fer_chat_template *t = NULL;
  CHECK_STATUS(fer_engine_chat_template(e, &t), FER_STATUS_OK);
  char *raw = NULL;
  uint64_t n = 0;
  CHECK_STATUS(fer_chat_template_apply(t, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}", 49, 0, &raw, &n), FER_STATUS_OK);
  CHECK(raw && strcmp(raw, "<bos>Hi<eos>") == 0);
  fer_buffer_free(raw);
  fer_engine_free(e);
  unlink(tpath);
  rmdir(dir);
}

/* C-GEM-006: ferrite's gemma-turns.jinja writes llama.cpp's "gemma" format: assistant as model,
 * contents trimmed, system texts joined before the next user turn with a blank line, a blank
 * system text dropped, <start_of_turn>model as the generation prompt. */
static void test_gemma_turns(const char *path) {
  FILE *f = path ? fopen(path, "rb") : NULL;
  char src[4096];
  const size_t n = f ? fread(src, 1, sizeof src - 1, f) : 0;
  if (f) fclose(f);
  CHECK(n > 0);
  src[n] = '\0';
  fer_chat_template *t = make(src, NULL);
  if (!t) return;
  renders(t, "{\"messages\": [{\"role\": \"user\", \"content\": \"What is the capital of France?\"}]}", FER_CHAT_ADD_GENERATION_PROMPT,
          "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n");
  renders(t,
          "{\"messages\": [{\"role\": \"system\", \"content\": \"  Be brief. \"}, {\"role\": \"user\", \"content\": \"\\nHi\\t\"}, "
          "{\"role\": \"assistant\", \"content\": \"Hello.\"}, {\"role\": \"system\", \"content\": \"Answer in French.\"}, "
          "{\"role\": \"user\", \"content\": \"Capital?\"}]}",
          FER_CHAT_ADD_GENERATION_PROMPT,
          "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
          "<start_of_turn>user\nAnswer in French.\n\nCapital?<end_of_turn>\n<start_of_turn>model\n");
  renders(t, "{\"messages\": [{\"role\": \"system\", \"content\": \" \\n\"}, {\"role\": \"user\", \"content\": \"Hi\"}]}", 0,
          "<start_of_turn>user\nHi<end_of_turn>\n");
  fer_chat_template_free(t);
}

int main(int argc, char **argv) {
  test_preparation();
  test_system_merge();
  test_errors();
  test_tools();
  test_dates();
  test_engine_override();
  test_smollm2();
  test_gemma3_bos();
  test_gemma_turns(argc > 1 ? argv[1] : NULL);
  return feri_test_finish("chat_template_test");
}
