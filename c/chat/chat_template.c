/* chat_template.c: see chat_template.h. The request is parsed into the render's own arena
 * (template/json.h keeps Python's int/float distinction and key order, so a tool schema's 1.0
 * stays 1.0 through tojson), prepared there, and handed to the template as its variables. */
#include "chat/chat_template.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "template/json.h"
#include "template/template.h"

struct feri_chat_template {
  feri_tmpl *main, *tool_use; /* tool_use: NULL when the file has no such variant */
  char *bos, *eos;
  bool merge_main, merge_tool_use; /* the probe found no system role */
};

/* What the variables are made from, and what became of it. */
typedef struct apply_arg {
  const feri_chat_template *t;
  const char *request;
  size_t len;
  uint32_t flags;
  int probe;         /* PROBE_*: the request is fixed, nothing merged */
  bool probe_tools;  /* the probe carries a tools list (for the tool_use variant) */
  bool merge_system; /* decided while building: the chosen template's flag */
  bool built;        /* the variables were made: a failure after this is the template's */
} apply_arg;

enum { NO_PROBE, PROBE_SYSTEM_USER, PROBE_USER };
static const char PROBE_NEEDLE[] = "ferrite-system-role-probe-5f1c";
static const char PROBE_TOOLS[] = "[{\"type\": \"function\", \"function\": {\"name\": \"probe\", \"description\": \"A probe.\", "
                                  "\"parameters\": {\"type\": \"object\", \"properties\": {}}}}]";

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

static const feri_tmpl *build_vars(feri_tmpl_rt *rt, feri_tmpl_dict *vars, void *varg) {
  apply_arg *a = varg;
  const feri_chat_template *t = a->t;
  feri_tmpl_value req;
  if (a->probe) {
    req = feri_tmpl_dict_new(rt, FERI_TMPL_DICT);
  } else {
    /* the parser's errors (BAD_FORMAT with the offset) are the request's */
    req = feri_tmpl_json_parse(rt, a->request, a->len);
    if (req.kind != FERI_TMPL_DICT) feri_tmpl_throw(rt, FER_STATUS_INVALID_ARG, "the request is not a JSON object");
  }
  const feri_tmpl_dict *r = req.u.dict;
  feri_tmpl_value messages;
  if (a->probe) {
    messages = feri_tmpl_list_new(rt, 2);
    static const char *const roles[2] = {"system", "user"}, *const texts[2] = {PROBE_NEEDLE, "Hello."};
    if (a->probe_tools) feri_tmpl_dict_set(rt, req.u.dict, key("tools"), feri_tmpl_json_parse(rt, PROBE_TOOLS, sizeof PROBE_TOOLS - 1));
    for (int i = a->probe == PROBE_USER; i < 2; i++) {
      feri_tmpl_value m = feri_tmpl_dict_new(rt, FERI_TMPL_DICT);
      feri_tmpl_dict_set(rt, m.u.dict, key("role"), key(roles[i]));
      feri_tmpl_dict_set(rt, m.u.dict, key("content"), key(texts[i]));
      feri_tmpl_list_push(rt, messages.u.list, m);
    }
  } else {
    const feri_tmpl_value *given = feri_tmpl_dict_find_str(r, "messages");
    if (!given || given->kind != FERI_TMPL_LIST)
      feri_tmpl_throw(rt, FER_STATUS_INVALID_ARG, "the request's \"messages\" is missing or not a list");
    messages = feri_tmpl_list_new(rt, given->u.list->n);
    const bool verbatim = a->flags & FER_CHAT_VERBATIM;
    for (size_t i = 0; i < given->u.list->n; i++)
      feri_tmpl_list_push(rt, messages.u.list, prepare_message(rt, given->u.list->items[i], i, verbatim));
  }
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
  a->merge_system = !a->probe && !(a->flags & FER_CHAT_VERBATIM) && (tool_variant ? t->merge_tool_use : t->merge_main);
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
  return tool_variant ? t->tool_use : t->main;
}

static fer_status render(const feri_tmpl *tmpl, apply_arg *a, int64_t now_unix, char **out, size_t *out_len) {
  const feri_tmpl_options o = {.struct_size = sizeof o, .now_unix = now_unix};
  return feri_tmpl_render_vars(tmpl, build_vars, a, &o, out, out_len);
}

/* Whether tmpl lacks a system role: a system + user probe renders without the system text, or
 * fails where the user alone renders (minja's test, except that a template that cannot render the
 * user alone either, such as a tool_use variant without tools, is not taken to lack one: merging
 * would not help it). The tool_use variant is probed with a tools list, as it is used. */
static bool lacks_system_role(const feri_chat_template *t, const feri_tmpl *tmpl, bool tools) {
  apply_arg a = {.t = t, .probe = PROBE_SYSTEM_USER, .probe_tools = tools, .flags = FER_CHAT_ADD_GENERATION_PROMPT};
  char *text = NULL;
  size_t n = 0;
  fer_status st = render(tmpl, &a, 0, &text, &n);
  const bool rendered = st == FER_STATUS_OK, found = rendered && strstr(text, PROBE_NEEDLE) != NULL;
  free(text);
  if (rendered) return !found;
  a.probe = PROBE_USER;
  text = NULL;
  st = render(tmpl, &a, 0, &text, &n);
  free(text);
  return st == FER_STATUS_OK;
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
  t->merge_main = lacks_system_role(t, t->main, false);
  t->merge_tool_use = t->tool_use && lacks_system_role(t, t->tool_use, true);
  feri_error_clear(); /* the probe's failure is a finding, not an error */
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

bool feri_chat_template_merges_system(const feri_chat_template *t) { return t && t->merge_main; }

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
