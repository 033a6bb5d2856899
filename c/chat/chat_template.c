/* chat_template.c: see chat_template.h. The request is parsed into the render's own arena
 * (template/json.h keeps Python's int/float distinction and key order, so a tool schema's 1.0
 * stays 1.0 through tojson), prepared there, and handed to the template as its variables. */
#include "chat/chat_template.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "template/json.h"
#include "template/template.h"

/* What a template takes, found by probes when it is made (FERI_CHAT_CAP_* bits). */
typedef struct caps {
  uint32_t bits;
  bool merge_system; /* no system role, and merging would help (lacks_system_role) */
} caps;

struct feri_chat_template {
  feri_tmpl *main, *tool_use; /* tool_use: NULL when the file has no such variant */
  char *bos, *eos;
  caps main_caps, tool_caps; /* tool_caps: the template requests with tools render through */
  uint32_t tool_format;      /* FER_CHAT_TOOLS_*, from the source of that template */
};

/* What the variables are made from, and what became of it. */
typedef struct apply_arg {
  const feri_chat_template *t;
  const char *request;
  size_t len;
  uint32_t flags;
  const feri_tmpl *probe; /* a probe renders this template with the request as it is */
  bool merge_system; /* decided while building: the chosen template's flag */
  bool built;        /* the variables were made: a failure after this is the template's */
} apply_arg;

/* The probes' messages (JSON arrays): a render shows whether the template takes a message shape,
 * by whether the needle appears in the text. */
#define PROBE_CALL                                                                                                 \
  "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"a1b2c3d4e\", \"type\": \"function\", " \
  "\"function\": {\"name\": \"ferrite_probe_call_7b2\", \"arguments\": {\"x\": 1}}}]}"
static const char PROBE_TOOL_LIST[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"ferrite_probe_tool_9a1\", \"description\": \"A probe.\", "
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"integer\"}}}}}]";
static const char PROBE_SYSTEM_USER[] =
    "[{\"role\": \"system\", \"content\": \"ferrite-system-role-probe-5f1c\"}, {\"role\": \"user\", \"content\": \"Hello.\"}]";
static const char PROBE_USER[] = "[{\"role\": \"user\", \"content\": \"Hello.\"}]";
static const char PROBE_TOOL_CALLS[] = "[{\"role\": \"user\", \"content\": \"Hello.\"}, " PROBE_CALL "]";
static const char PROBE_TOOL_RESPONSES[] =
    "[{\"role\": \"user\", \"content\": \"Hello.\"}, " PROBE_CALL ", {\"role\": \"tool\", \"tool_call_id\": \"a1b2c3d4e\", "
    "\"name\": \"ferrite_probe_call_7b2\", \"content\": \"ferrite-probe-result-3c4\"}]";

/* The generic tool form's instructions (llama.cpp's generic format): for a template that does not
 * show a tools list, the tools go into the system message with how to call them. */
static const char TOOLS_INTRO[] = "You can call any of the following tools to satisfy the user's requests: ";
static const char TOOLS_HOWTO[] =
    "\n\nRespond in JSON format, either with `tool_call` (a request to call tools) or with `response` reply to the "
    "user's request";

static feri_tmpl_value key(const char *s) { return feri_tmpl_cstr(s); }

static bool is_str(const feri_tmpl_value *v, const char *s) {
  return v && v->kind == FERI_TMPL_STR && v->u.s.n == strlen(s) && memcmp(v->u.s.p, s, v->u.s.n) == 0;
}

/* transformers' _normalize_chat_messages (None-valued keys dropped) and _alias_reasoning_fields
 * ({"thinking": r, **message, "reasoning_content": r}); then, unless verbatim, text parts joined. */
static feri_tmpl_value prepare_message(feri_tmpl_rt *rt, feri_tmpl_value m, size_t i, bool verbatim) {
  if (m.kind != FERI_TMPL_DICT) feri_tmpl_throw(rt, FER_STATUS_INVALID_ARG, "messages[%zu] is not an object", i);
  const feri_tmpl_dict *d = m.u.dict;
  feri_tmpl_value kept = feri_tmpl_dict_new(rt, FERI_TMPL_DICT);
  for (size_t k = 0; k < d->n; k++)
    if (d->vals[k].kind != FERI_TMPL_NONE) feri_tmpl_dict_set(rt, kept.u.dict, d->keys[k], d->vals[k]);
  const feri_tmpl_value *role = feri_tmpl_dict_find_str(kept.u.dict, "role");
  if (!role || role->kind != FERI_TMPL_STR)
    feri_tmpl_throw(rt, FER_STATUS_INVALID_ARG, "messages[%zu].role is missing or not a string", i);
  static const char *const reasoning[] = {"reasoning_content", "thinking", "reasoning"};
  const feri_tmpl_value *r = NULL;
  for (int k = 0; k < 3 && !r; k++) r = feri_tmpl_dict_find_str(kept.u.dict, reasoning[k]);
  feri_tmpl_value out = kept;
  if (r) {
    out = feri_tmpl_dict_new(rt, FERI_TMPL_DICT);
    feri_tmpl_dict_set(rt, out.u.dict, key("thinking"), *r);
    for (size_t k = 0; k < kept.u.dict->n; k++) feri_tmpl_dict_set(rt, out.u.dict, kept.u.dict->keys[k], kept.u.dict->vals[k]);
    feri_tmpl_dict_set(rt, out.u.dict, key("reasoning_content"), *r);
  }
  feri_tmpl_value *content = feri_tmpl_dict_find_str(out.u.dict, "content");
  if (verbatim || !content || content->kind != FERI_TMPL_LIST) return out;
  const feri_tmpl_list *parts = content->u.list;
  feri_tmpl_buf text = {0};
  feri_tmpl_buf_put(rt, &text, "", 0);
  for (size_t p = 0; p < parts->n; p++) {
    const feri_tmpl_value part = parts->items[p];
    const feri_tmpl_value *type = part.kind == FERI_TMPL_DICT ? feri_tmpl_dict_find_str(part.u.dict, "type") : NULL;
    const feri_tmpl_value *t = part.kind == FERI_TMPL_DICT ? feri_tmpl_dict_find_str(part.u.dict, "text") : NULL;
    if (!is_str(type, "text") || !t || t->kind != FERI_TMPL_STR) {
      if (type && type->kind == FERI_TMPL_STR && !is_str(type, "text"))
        feri_tmpl_throw(rt, FER_STATUS_INVALID_ARG, "messages[%zu].content[%zu] is a part of type '%.*s': this engine takes text only", i,
                        p, (int)(type->u.s.n < 64 ? type->u.s.n : 64), type->u.s.p);
      feri_tmpl_throw(rt, FER_STATUS_INVALID_ARG, "messages[%zu].content[%zu] is not a {\"type\": \"text\", \"text\": ...} part", i, p);
    }
    if (p) feri_tmpl_buf_put(rt, &text, "\n", 1);
    feri_tmpl_buf_put(rt, &text, t->u.s.p, t->u.s.n);
  }
  *content = feri_tmpl_buf_value(&text);
  return out;
}

static feri_tmpl_value with_content(feri_tmpl_rt *rt, feri_tmpl_value m, feri_tmpl_value content) {
  feri_tmpl_value copy = feri_tmpl_dict_new(rt, FERI_TMPL_DICT);
  for (size_t k = 0; k < m.u.dict->n; k++) feri_tmpl_dict_set(rt, copy.u.dict, m.u.dict->keys[k], m.u.dict->vals[k]);
  feri_tmpl_dict_set(rt, copy.u.dict, key("content"), content);
  return copy;
}

/* llama.cpp's polyfill for a template without a system role (chat_template.h). */
static feri_tmpl_value merge_system(feri_tmpl_rt *rt, const feri_tmpl_list *in) {
  feri_tmpl_value out = feri_tmpl_list_new(rt, in->n + 1);
  feri_tmpl_buf pending = {0};
  bool have = false;
  for (size_t i = 0; i < in->n; i++) {
    const feri_tmpl_value m = in->items[i];
    const feri_tmpl_value *role = feri_tmpl_dict_find_str(m.u.dict, "role");
    const feri_tmpl_value *content = feri_tmpl_dict_find_str(m.u.dict, "content");
    const bool text = content && content->kind == FERI_TMPL_STR;
    if (is_str(role, "system") && (text || !content)) {
      if (have) feri_tmpl_buf_put(rt, &pending, "\n", 1);
      if (text) feri_tmpl_buf_put(rt, &pending, content->u.s.p, content->u.s.n);
      else feri_tmpl_buf_put(rt, &pending, "", 0);
      have = true;
      continue;
    }
    if (have && is_str(role, "user") && (text || !content)) {
      if (text && content->u.s.n) {
        feri_tmpl_buf_put(rt, &pending, "\n", 1);
        feri_tmpl_buf_put(rt, &pending, content->u.s.p, content->u.s.n);
      }
      feri_tmpl_list_push(rt, out.u.list, with_content(rt, m, feri_tmpl_buf_value(&pending)));
      pending = (feri_tmpl_buf){0}, have = false;
      continue;
    }
    if (have) { /* before an assistant or tool turn: the system text as a user turn of its own */
      feri_tmpl_value u = feri_tmpl_dict_new(rt, FERI_TMPL_DICT);
      feri_tmpl_dict_set(rt, u.u.dict, key("role"), key("user"));
      feri_tmpl_dict_set(rt, u.u.dict, key("content"), feri_tmpl_buf_value(&pending));
      feri_tmpl_list_push(rt, out.u.list, u);
      pending = (feri_tmpl_buf){0}, have = false;
    }
    feri_tmpl_list_push(rt, out.u.list, m);
  }
  if (have) {
    feri_tmpl_value u = feri_tmpl_dict_new(rt, FERI_TMPL_DICT);
    feri_tmpl_dict_set(rt, u.u.dict, key("role"), key("user"));
    feri_tmpl_dict_set(rt, u.u.dict, key("content"), feri_tmpl_buf_value(&pending));
    feri_tmpl_list_push(rt, out.u.list, u);
  }
  return out;
}

static bool non_empty_list(const feri_tmpl_value *v) { return v && v->kind == FERI_TMPL_LIST && v->u.list->n > 0; }

/* JSON text as a value; *ok false (and None) when it does not parse: the parser's throw is caught
 * here (the arena keeps what it allocated until the render ends). */
static feri_tmpl_value try_json(feri_tmpl_rt *rt, const char *p, size_t n, bool *ok) {
  jmp_buf here;
  jmp_buf *outer = rt->fail;
  const fer_status status = rt->status;
  feri_tmpl_value v = feri_tmpl_none();
  rt->fail = &here;
  if (setjmp(here) == 0) {
    v = feri_tmpl_json_parse(rt, p, n);
    *ok = true;
  } else {
    *ok = false;
  }
  rt->fail = outer;
  rt->status = status;
  rt->message[0] = '\0';
  return *ok ? v : feri_tmpl_none();
}

static feri_tmpl_value json_text(feri_tmpl_rt *rt, feri_tmpl_value v) {
  feri_tmpl_buf b = {0};
  const feri_tmpl_json_style style = {.indent = 2};
  feri_tmpl_json_write(rt, &b, v, &style);
  return feri_tmpl_buf_value(&b);
}

static feri_tmpl_value copy_dict(feri_tmpl_rt *rt, const feri_tmpl_dict *d) {
  feri_tmpl_value c = feri_tmpl_dict_new(rt, FERI_TMPL_DICT);
  for (size_t k = 0; k < d->n; k++) feri_tmpl_dict_set(rt, c.u.dict, d->keys[k], d->vals[k]);
  return c;
}

/* OpenAI clients send a tool call's arguments as a JSON string; templates (and transformers'
 * documentation) take an object: a string that parses as an object becomes it, as llama.cpp does. */
static void arguments_as_objects(feri_tmpl_rt *rt, feri_tmpl_value m) {
  feri_tmpl_value *calls = feri_tmpl_dict_find_str(m.u.dict, "tool_calls");
  if (!calls || calls->kind != FERI_TMPL_LIST) return;
  feri_tmpl_value list = feri_tmpl_list_new(rt, calls->u.list->n);
  for (size_t c = 0; c < calls->u.list->n; c++) {
    feri_tmpl_value call = calls->u.list->items[c];
    const feri_tmpl_value *fn = call.kind == FERI_TMPL_DICT ? feri_tmpl_dict_find_str(call.u.dict, "function") : NULL;
    const feri_tmpl_value *args = fn && fn->kind == FERI_TMPL_DICT ? feri_tmpl_dict_find_str(fn->u.dict, "arguments") : NULL;
    bool ok = false;
    const feri_tmpl_value parsed = args && args->kind == FERI_TMPL_STR ? try_json(rt, args->u.s.p, args->u.s.n, &ok) : feri_tmpl_none();
    if (ok && parsed.kind == FERI_TMPL_DICT) {
      feri_tmpl_value f = copy_dict(rt, fn->u.dict);
      feri_tmpl_dict_set(rt, f.u.dict, key("arguments"), parsed);
      call = copy_dict(rt, call.u.dict);
      feri_tmpl_dict_set(rt, call.u.dict, key("function"), f);
    }
    feri_tmpl_list_push(rt, list.u.list, call);
  }
  *calls = list;
}

/* For a template that does not show them (llama.cpp's polyfills, which its generic tool format
 * relies on): an assistant's tool calls become its content, {"tool_calls": [{"name", "arguments",
 * "id"}]} (with "content" when it had text); a tool message becomes a user message,
 * {"tool_response": {"tool", "content", "tool_call_id"}}; both JSON with an indent of 2. */
static feri_tmpl_value polyfill_tool_turn(feri_tmpl_rt *rt, feri_tmpl_value m, uint32_t caps_bits) {
  const feri_tmpl_dict *d = m.u.dict;
  const feri_tmpl_value *role = feri_tmpl_dict_find_str(d, "role");
  const feri_tmpl_value *content = feri_tmpl_dict_find_str(d, "content");
  const feri_tmpl_value *calls = feri_tmpl_dict_find_str(d, "tool_calls");
  if (is_str(role, "assistant") && non_empty_list(calls) && !(caps_bits & FER_CHAT_CAP_TOOL_CALLS)) {
    feri_tmpl_value list = feri_tmpl_list_new(rt, calls->u.list->n);
    for (size_t c = 0; c < calls->u.list->n; c++) {
      const feri_tmpl_value call = calls->u.list->items[c];
      const feri_tmpl_value *fn = call.kind == FERI_TMPL_DICT ? feri_tmpl_dict_find_str(call.u.dict, "function") : NULL;
      const feri_tmpl_value *id = call.kind == FERI_TMPL_DICT ? feri_tmpl_dict_find_str(call.u.dict, "id") : NULL;
      feri_tmpl_value o = feri_tmpl_dict_new(rt, FERI_TMPL_DICT);
      const feri_tmpl_value *name = fn && fn->kind == FERI_TMPL_DICT ? feri_tmpl_dict_find_str(fn->u.dict, "name") : NULL;
      const feri_tmpl_value *args = fn && fn->kind == FERI_TMPL_DICT ? feri_tmpl_dict_find_str(fn->u.dict, "arguments") : NULL;
      feri_tmpl_dict_set(rt, o.u.dict, key("name"), name ? *name : feri_tmpl_none());
      feri_tmpl_dict_set(rt, o.u.dict, key("arguments"), args ? *args : feri_tmpl_dict_new(rt, FERI_TMPL_DICT));
      if (id) feri_tmpl_dict_set(rt, o.u.dict, key("id"), *id);
      feri_tmpl_list_push(rt, list.u.list, o);
    }
    feri_tmpl_value body = feri_tmpl_dict_new(rt, FERI_TMPL_DICT);
    feri_tmpl_dict_set(rt, body.u.dict, key("tool_calls"), list);
    if (content && content->kind == FERI_TMPL_STR && content->u.s.n) feri_tmpl_dict_set(rt, body.u.dict, key("content"), *content);
    feri_tmpl_value out = feri_tmpl_dict_new(rt, FERI_TMPL_DICT);
    feri_tmpl_dict_set(rt, out.u.dict, key("role"), key("assistant"));
    feri_tmpl_dict_set(rt, out.u.dict, key("content"), json_text(rt, body));
    return out;
  }
  if (is_str(role, "tool") && !(caps_bits & FER_CHAT_CAP_TOOL_RESPONSES)) {
    feri_tmpl_value r = feri_tmpl_dict_new(rt, FERI_TMPL_DICT);
    const feri_tmpl_value *name = feri_tmpl_dict_find_str(d, "name"), *id = feri_tmpl_dict_find_str(d, "tool_call_id");
    if (name) feri_tmpl_dict_set(rt, r.u.dict, key("tool"), *name);
    feri_tmpl_dict_set(rt, r.u.dict, key("content"), content ? *content : feri_tmpl_cstr(""));
    if (id) feri_tmpl_dict_set(rt, r.u.dict, key("tool_call_id"), *id);
    feri_tmpl_value body = feri_tmpl_dict_new(rt, FERI_TMPL_DICT);
    feri_tmpl_dict_set(rt, body.u.dict, key("tool_response"), r);
    feri_tmpl_value out = feri_tmpl_dict_new(rt, FERI_TMPL_DICT);
    feri_tmpl_dict_set(rt, out.u.dict, key("role"), key("user"));
    feri_tmpl_dict_set(rt, out.u.dict, key("content"), json_text(rt, body));
    return out;
  }
  return m;
}

/* The tools and how to call them, added to the first system message (or a new one first). */
static feri_tmpl_value tools_in_system(feri_tmpl_rt *rt, const feri_tmpl_list *in, feri_tmpl_value tools) {
  feri_tmpl_buf text = {0};
  const feri_tmpl_value *first = in->n ? feri_tmpl_dict_find_str(in->items[0].u.dict, "role") : NULL;
  const feri_tmpl_value *had = is_str(first, "system") ? feri_tmpl_dict_find_str(in->items[0].u.dict, "content") : NULL;
  const bool merge = had && had->kind == FERI_TMPL_STR;
  if (merge) {
    feri_tmpl_buf_put(rt, &text, had->u.s.p, had->u.s.n);
    feri_tmpl_buf_puts(rt, &text, "\n\n");
  }
  feri_tmpl_buf_puts(rt, &text, TOOLS_INTRO);
  const feri_tmpl_value tools_text = json_text(rt, tools);
  feri_tmpl_buf_put(rt, &text, tools_text.u.s.p, tools_text.u.s.n);
  feri_tmpl_buf_puts(rt, &text, TOOLS_HOWTO);
  feri_tmpl_value out = feri_tmpl_list_new(rt, in->n + 1);
  if (merge) {
    feri_tmpl_list_push(rt, out.u.list, with_content(rt, in->items[0], feri_tmpl_buf_value(&text)));
  } else {
    feri_tmpl_value sys = feri_tmpl_dict_new(rt, FERI_TMPL_DICT);
    feri_tmpl_dict_set(rt, sys.u.dict, key("role"), key("system"));
    feri_tmpl_dict_set(rt, sys.u.dict, key("content"), feri_tmpl_buf_value(&text));
    feri_tmpl_list_push(rt, out.u.list, sys);
  }
  for (size_t i = merge; i < in->n; i++) feri_tmpl_list_push(rt, out.u.list, in->items[i]);
  return out;
}

static const feri_tmpl *build_vars(feri_tmpl_rt *rt, feri_tmpl_dict *vars, void *varg) {
  apply_arg *a = varg;
  const feri_chat_template *t = a->t;
  /* the parser's errors (BAD_FORMAT with the offset) are the request's */
  const feri_tmpl_value req = feri_tmpl_json_parse(rt, a->request, a->len);
  if (req.kind != FERI_TMPL_DICT) feri_tmpl_throw(rt, FER_STATUS_INVALID_ARG, "the request is not a JSON object");
  const feri_tmpl_dict *r = req.u.dict;
  const feri_tmpl_value *given = feri_tmpl_dict_find_str(r, "messages");
  if (!given || given->kind != FERI_TMPL_LIST)
    feri_tmpl_throw(rt, FER_STATUS_INVALID_ARG, "the request's \"messages\" is missing or not a list");
  const feri_tmpl_value *tools = feri_tmpl_dict_find_str(r, "tools");
  const feri_tmpl_value *documents = feri_tmpl_dict_find_str(r, "documents");
  const feri_tmpl_value *kwargs = feri_tmpl_dict_find_str(r, "chat_template_kwargs");
  if (tools && tools->kind != FERI_TMPL_LIST && tools->kind != FERI_TMPL_NONE)
    feri_tmpl_throw(rt, FER_STATUS_INVALID_ARG, "the request's \"tools\" is not a list");
  if (documents && documents->kind != FERI_TMPL_LIST && documents->kind != FERI_TMPL_NONE)
    feri_tmpl_throw(rt, FER_STATUS_INVALID_ARG, "the request's \"documents\" is not a list");
  if (kwargs && kwargs->kind != FERI_TMPL_DICT && kwargs->kind != FERI_TMPL_NONE)
    feri_tmpl_throw(rt, FER_STATUS_INVALID_ARG, "the request's \"chat_template_kwargs\" is not an object");
  const bool tool_variant = t->tool_use && non_empty_list(tools);
  const caps *c = tool_variant ? &t->tool_caps : &t->main_caps;
  const bool adjust = !a->probe && !(a->flags & FER_CHAT_VERBATIM);
  feri_tmpl_value messages = feri_tmpl_list_new(rt, given->u.list->n);
  for (size_t i = 0; i < given->u.list->n; i++) {
    feri_tmpl_value m = prepare_message(rt, given->u.list->items[i], i, !adjust);
    if (adjust) {
      arguments_as_objects(rt, m);
      m = polyfill_tool_turn(rt, m, c->bits);
    }
    feri_tmpl_list_push(rt, messages.u.list, m);
  }
  if (adjust && non_empty_list(tools) && !(c->bits & FER_CHAT_CAP_TOOLS)) messages = tools_in_system(rt, messages.u.list, *tools);
  a->merge_system = adjust && c->merge_system;
  if (a->merge_system) messages = merge_system(rt, messages.u.list);
  feri_tmpl_dict_set(rt, vars, key("messages"), messages);
  feri_tmpl_dict_set(rt, vars, key("tools"), tools ? *tools : feri_tmpl_none());
  feri_tmpl_dict_set(rt, vars, key("documents"), documents ? *documents : feri_tmpl_none());
  feri_tmpl_dict_set(rt, vars, key("add_generation_prompt"), feri_tmpl_bool(a->flags & FER_CHAT_ADD_GENERATION_PROMPT));
  feri_tmpl_dict_set(rt, vars, key("bos_token"), key(t->bos));
  feri_tmpl_dict_set(rt, vars, key("eos_token"), key(t->eos));
  if (kwargs && kwargs->kind == FERI_TMPL_DICT) {
    static const char *const own[] = {"messages", "tools", "documents", "add_generation_prompt"};
    for (size_t k = 0; k < kwargs->u.dict->n; k++) {
      for (int o = 0; o < 4; o++)
        if (is_str(&kwargs->u.dict->keys[k], own[o]))
          feri_tmpl_throw(rt, FER_STATUS_INVALID_ARG, "chat_template_kwargs.%s: set by the request itself, not a template argument", own[o]);
      feri_tmpl_dict_set(rt, vars, kwargs->u.dict->keys[k], kwargs->u.dict->vals[k]);
    }
  }
  a->built = true;
  return a->probe ? a->probe : tool_variant ? t->tool_use : t->main;
}

static fer_status render(const feri_tmpl *tmpl, apply_arg *a, int64_t now_unix, char **out, size_t *out_len) {
  const feri_tmpl_options o = {.struct_size = sizeof o, .now_unix = now_unix};
  return feri_tmpl_render_vars(tmpl, build_vars, a, &o, out, out_len);
}

/* Renders tmpl on the probe messages (with the probe tools list when tools): 1 when the text holds
 * needle, 0 when it does not, -1 when the render failed. */
static int probe(const feri_chat_template *t, const feri_tmpl *tmpl, const char *messages, bool tools, const char *needle) {
  char request[2048];
  snprintf(request, sizeof request, "{\"messages\": %s%s%s}", messages, tools ? ", \"tools\": " : "", tools ? PROBE_TOOL_LIST : "");
  apply_arg a = {.t = t, .request = request, .len = strlen(request), .flags = FER_CHAT_ADD_GENERATION_PROMPT, .probe = tmpl};
  char *text = NULL;
  size_t n = 0;
  const fer_status st = render(tmpl, &a, 0, &text, &n);
  const int found = st != FER_STATUS_OK ? -1 : strstr(text, needle) != NULL;
  free(text);
  return found;
}

/* What tmpl takes (FER_CHAT_CAP_*), probed with the tools list when it renders requests with
 * tools. No system role: a system + user probe renders without the system text, or fails where
 * the user alone renders (minja's test, except that a template that cannot render the user alone
 * either, such as a tool_use variant without tools, is not taken to lack one: merging would not
 * help it). */
static caps probe_caps(const feri_chat_template *t, const feri_tmpl *tmpl, bool with_tools) {
  caps c = {0};
  const int system = probe(t, tmpl, PROBE_SYSTEM_USER, with_tools, "ferrite-system-role-probe-5f1c");
  if (system == 1) c.bits |= FER_CHAT_CAP_SYSTEM;
  else c.merge_system = system == 0 || probe(t, tmpl, PROBE_USER, with_tools, "Hello.") == 1;
  if (probe(t, tmpl, PROBE_USER, true, "ferrite_probe_tool_9a1") == 1) c.bits |= FER_CHAT_CAP_TOOLS;
  if (probe(t, tmpl, PROBE_TOOL_CALLS, true, "ferrite_probe_call_7b2") == 1) c.bits |= FER_CHAT_CAP_TOOL_CALLS;
  if (probe(t, tmpl, PROBE_TOOL_RESPONSES, true, "ferrite-probe-result-3c4") == 1) c.bits |= FER_CHAT_CAP_TOOL_RESPONSES;
  return c;
}

/* The call syntax a template's source shows (FER_CHAT_TOOLS_*): Hermes' and Qwen's <tool_call>
 * tags, Mistral's [TOOL_CALLS], Llama 3.x's JSON with "parameters"; anything else, or a template
 * that does not show the tools list, gets the generic JSON form. */
static uint32_t tool_format_of(const char *src, size_t len, uint32_t caps_bits) {
  if (!(caps_bits & FER_CHAT_CAP_TOOLS)) return FER_CHAT_TOOLS_GENERIC;
  if (memmem(src, len, "<tool_call>", 11)) return FER_CHAT_TOOLS_HERMES;
  if (memmem(src, len, "[TOOL_CALLS]", 12)) return FER_CHAT_TOOLS_MISTRAL;
  if (memmem(src, len, "<|start_header_id|>", 19) && memmem(src, len, "parameters", 10)) return FER_CHAT_TOOLS_LLAMA3;
  return FER_CHAT_TOOLS_GENERIC;
}

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

fer_status feri_chat_template_create(const char *src, size_t len, const char *tool_use, size_t tool_use_len,
                                     const char *bos, const char *eos, feri_chat_template **out) {
  static const char *const fn = "chat template";
  feri_error_clear();
  if (!out) return feri_fail(FER_STATUS_NULL_ARG, "%s: out is NULL", fn);
  *out = NULL;
  if (!src && len) return feri_fail(FER_STATUS_NULL_ARG, "%s: the source is NULL", fn);
  feri_chat_template *t = calloc(1, sizeof *t);
  if (!t) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  fer_status st = feri_tmpl_parse(src, len, &t->main);
  char why[512];
  size_t wl;
  if (st != FER_STATUS_OK) {
    fer_last_error_message(why, sizeof why, &wl);
    feri_chat_template_free(t);
    return feri_fail(st, "%s: %s", fn, why);
  }
  if (tool_use && (st = feri_tmpl_parse(tool_use, tool_use_len, &t->tool_use)) != FER_STATUS_OK) {
    fer_last_error_message(why, sizeof why, &wl);
    feri_chat_template_free(t);
    return feri_fail(st, "%s (tool_use): %s", fn, why);
  }
  t->bos = dup_or_empty(bos), t->eos = dup_or_empty(eos);
  if (!t->bos || !t->eos) {
    feri_chat_template_free(t);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  t->main_caps = probe_caps(t, t->main, false);
  t->tool_caps = t->tool_use ? probe_caps(t, t->tool_use, true) : t->main_caps;
  t->tool_format = t->tool_use ? tool_format_of(tool_use, tool_use_len, t->tool_caps.bits) : tool_format_of(src, len, t->main_caps.bits);
  feri_error_clear(); /* a probe's failure is a finding, not an error */
  *out = t;
  return FER_STATUS_OK;
}

void feri_chat_template_free(feri_chat_template *t) {
  if (!t) return;
  feri_tmpl_free(t->main);
  feri_tmpl_free(t->tool_use);
  free(t->bos);
  free(t->eos);
  free(t);
}

bool feri_chat_template_merges_system(const feri_chat_template *t) { return t && t->main_caps.merge_system; }

void feri_chat_template_info(const feri_chat_template *t, uint32_t *caps_bits, uint32_t *tool_format) {
  /* the system role as plain requests find it, the tool capabilities as requests with tools do */
  *caps_bits = (t->main_caps.bits & FER_CHAT_CAP_SYSTEM) | (t->tool_caps.bits & ~(uint32_t)FER_CHAT_CAP_SYSTEM);
  *tool_format = t->tool_format;
}

fer_status feri_chat_template_apply(const feri_chat_template *t, const char *request, size_t len, uint32_t flags,
                                    int64_t now_unix, char **out, size_t *out_len) {
  static const char *const fn = "chat template";
  if (out) *out = NULL;
  if (out_len) *out_len = 0;
  if (!t || !out || !out_len || (!request && len)) return feri_fail(FER_STATUS_NULL_ARG, "%s: a NULL argument", fn);
  if (flags & ~(uint32_t)(FER_CHAT_ADD_GENERATION_PROMPT | FER_CHAT_VERBATIM))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown flags 0x%x", fn, flags);
  if (!len) return feri_fail(FER_STATUS_INVALID_ARG, "%s: the request is empty (a JSON object with \"messages\")", fn);
  apply_arg a = {.t = t, .request = request, .len = len, .flags = flags};
  const fer_status st = render(t->main, &a, now_unix, out, out_len);
  if (st == FER_STATUS_OK || st == FER_STATUS_OUT_OF_MEMORY || st == FER_STATUS_BUDGET_EXCEEDED) return st;
  char why[1024];
  size_t wl;
  fer_last_error_message(why, sizeof why, &wl);
  if (!a.built) /* the request's shape or its JSON */
    return feri_fail(FER_STATUS_INVALID_ARG, "request: %s", why);
  /* the template raised, failed on this conversation, or used what this engine lacks: its message */
  return feri_fail(st == FER_STATUS_UNSUPPORTED ? st : FER_STATUS_TEMPLATE_ERROR, "%s", why);
}

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) { /* Howard Hinnant's algorithm */
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = (unsigned)(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

bool feri_chat_parse_date(const char *s, int64_t *out_unix) {
  if (!s || strlen(s) != 10 || s[4] != '-' || s[7] != '-') return false;
  for (int i = 0; i < 10; i++)
    if (i != 4 && i != 7 && (s[i] < '0' || s[i] > '9')) return false;
  const int y = atoi(s), m = (s[5] - '0') * 10 + (s[6] - '0'), d = (s[8] - '0') * 10 + (s[9] - '0');
  static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1]) return false;
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (m == 2 && d == 29 && !leap) return false;
  *out_unix = days_from_civil(y, (unsigned)m, (unsigned)d) * 86400;
  return true;
}
