/* chat_golden_test.c: the 70 real chat templates through the public entry (fer_chat_template_apply)
 * on the 12 message cases as a client sends them (testdata/template/cases.json: the raw messages
 * and tools, the case's extra variables as chat_template_kwargs), with FER_CHAT_VERBATIM, compared
 * byte for byte with Jinja2's renders in transformers' environment (goldens.jsonl). So the
 * preparation transformers does (null members, reasoning aliases) is ferrite's, not the golden
 * script's. A golden error must come back as TEMPLATE_ERROR with the same message. Then, without
 * VERBATIM, lists the templates whose probe found no system role (the merge applies) and checks
 * that each renders the system text of the system_user case.
 * usage: chat_golden_test CASES GOLDENS (SKIPPED without the templates directory)
 * EVIDENCE: C-CHAT-004 C-CHAT-007 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_template.h"
#include "ferrite.h"
#include "testing/check.h"

static const char *skip_space(const char *p) {
  while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
  return p;
}

/* Just past the JSON value at p (raw: numbers keep their spelling); NULL when malformed. */
static const char *value_end(const char *p) {
  if (*p == '"') {
    for (p++; *p && *p != '"'; p++)
      if (*p == '\\' && p[1]) p++;
    return *p ? p + 1 : NULL;
  }
  if (*p != '{' && *p != '[') {
    while (*p && !strchr(",}] \n\t\r", *p)) p++;
    return p;
  }
  int depth = 0;
  for (;; p++) {
    if (!*p) return NULL;
    if (*p == '"') {
      if (!(p = value_end(p))) return NULL;
      p--;
    } else if (*p == '{' || *p == '[') {
      depth++;
    } else if ((*p == '}' || *p == ']') && --depth == 0) {
      return p + 1;
    }
  }
}

typedef struct span {
  const char *p;
  size_t n;
} span;

/* The raw value of obj's member key (obj at its '{'); {NULL, 0} when absent. */
static span member(const char *obj, const char *key) {
  const char *p = skip_space(obj + 1);
  const size_t kl = strlen(key);
  while (*p == '"') {
    const char *kend = value_end(p);
    if (!kend) break;
    const bool match = (size_t)(kend - p) == kl + 2 && memcmp(p + 1, key, kl) == 0;
    p = skip_space(kend);
    if (*p != ':') break;
    p = skip_space(p + 1);
    const char *vend = value_end(p);
    if (!vend) break;
    if (match) return (span){p, (size_t)(vend - p)};
    p = skip_space(vend);
    if (*p != ',') break;
    p = skip_space(p + 1);
  }
  return (span){NULL, 0};
}

typedef struct test_case {
  char name[64];
  char *request; /* as a client sends it */
  bool add_generation_prompt;
} test_case;

/* The cases of cases.json, each made into a request; the count. */
static int read_cases(const char *doc, test_case *out, int cap) {
  const span cases = member(doc, "cases");
  if (!cases.p || *cases.p != '[') return 0;
  int n = 0;
  for (const char *p = skip_space(cases.p + 1); *p == '{' && n < cap;) {
    const char *end = value_end(p);
    if (!end) break;
    const span name = member(p, "name"), msgs = member(p, "messages"), tools = member(p, "tools"), extra = member(p, "extra");
    const span agp = member(p, "add_generation_prompt");
    test_case *c = &out[n++];
    snprintf(c->name, sizeof c->name, "%.*s", name.n > 2 ? (int)name.n - 2 : 0, name.p ? name.p + 1 : "");
    c->add_generation_prompt = agp.p && agp.n == 4 && !memcmp(agp.p, "true", 4);
    const size_t need = msgs.n + tools.n + extra.n + 96;
    c->request = malloc(need);
    int w = snprintf(c->request, need, "{\"model\": \"any\", \"messages\": %.*s", (int)msgs.n, msgs.p ? msgs.p : "null");
    if (tools.p) w += snprintf(c->request + w, need - (size_t)w, ", \"tools\": %.*s", (int)tools.n, tools.p);
    if (extra.p) w += snprintf(c->request + w, need - (size_t)w, ", \"chat_template_kwargs\": %.*s", (int)extra.n, extra.p);
    snprintf(c->request + w, need - (size_t)w, "}");
    p = skip_space(end);
    if (*p == ',') p = skip_space(p + 1);
  }
  return n;
}

/* The template through the public entry; *merges: whether the internal one made from the same
 * source found no system role. */
static fer_chat_template *open_template(const char *name, const char *bos, const char *eos, int64_t now, bool *merges) {
  char rel[600], path[4096];
  snprintf(rel, sizeof rel, "templates/%s", name);
  size_t slen = 0;
  char *src = feri_test_data_path(rel, path, sizeof path) ? feri_test_read_file(path, &slen) : NULL;
  fer_chat_template_options o;
  fer_chat_template_options_init(&o);
  o.bos_token = bos, o.eos_token = eos, o.now_unix = now;
  fer_chat_template *t = NULL;
  if (!src || fer_chat_template_create(src, slen, &o, &t) != FER_STATUS_OK) {
    char msg[512];
    size_t ml;
    fer_last_error_message(msg, sizeof msg, &ml);
    printf("  %s: %s\n", name, src ? msg : "not in the templates directory");
    CHECK(!"the template compiles");
  }
  feri_chat_template *inner = NULL;
  *merges = false;
  if (t && feri_chat_template_create(src, slen, NULL, 0, bos, eos, &inner) == FER_STATUS_OK) *merges = feri_chat_template_merges_system(inner);
  feri_chat_template_free(inner);
  free(src);
  return t;
}

/* Without VERBATIM on the system_user case: a template that merges renders the system text; one
 * that does not renders exactly as with VERBATIM (the same text, or the same failure). */
static void check_merge(const char *name, fer_chat_template *t, bool merges, const test_case *c, int *merging) {
  char *out = NULL, *verbatim = NULL;
  uint64_t n = 0, vn = 0;
  const size_t len = strlen(c->request);
  const fer_status st = fer_chat_template_apply(t, c->request, len, FER_CHAT_ADD_GENERATION_PROMPT, &out, &n);
  const fer_status vst = fer_chat_template_apply(t, c->request, len, FER_CHAT_ADD_GENERATION_PROMPT | FER_CHAT_VERBATIM, &verbatim, &vn);
  bool ok;
  if (merges) {
    (*merging)++;
    printf("  merges the system message: %s (verbatim: %s)\n", name,
           vst != FER_STATUS_OK ? "refused" : strstr(verbatim, "You are a helpful assistant.") ? "shown" : "dropped");
    ok = st == FER_STATUS_OK && strstr(out, "You are a helpful assistant.");
  } else {
    ok = st == vst && n == vn && (st != FER_STATUS_OK || memcmp(out, verbatim, n) == 0);
  }
  CHECK(ok);
  if (!ok) printf("  system_user without VERBATIM: status %d (verbatim %d) [%.300s]: %s\n", st, vst, out ? out : "", name);
  fer_buffer_free(out);
  fer_buffer_free(verbatim);
}

/* The capabilities and the tool syntax; the formats of a few well-known templates checked. */
static void check_info(const char *name, const fer_chat_template *t, int formats[4], int with_caps[4]) {
  fer_chat_template_info info = {.struct_size = sizeof info};
  CHECK_STATUS(fer_chat_template_get_info(t, &info), FER_STATUS_OK);
  if (info.tool_format < 4) formats[info.tool_format]++;
  for (int b = 1; b < 4; b++) with_caps[b] += (info.caps >> b) & 1;
  static const struct {
    const char *name;
    uint32_t format, caps;
  } KNOWN[] = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", FER_CHAT_TOOLS_HERMES, 15},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", FER_CHAT_TOOLS_HERMES, 14}, /* no system role without tools */
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", FER_CHAT_TOOLS_LLAMA3, 15},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", FER_CHAT_TOOLS_MISTRAL, 15},
      {"google-gemma-2-2b-it.jinja", FER_CHAT_TOOLS_GENERIC, 0},
  };
  for (size_t k = 0; k < sizeof KNOWN / sizeof KNOWN[0]; k++)
    if (!strcmp(name, KNOWN[k].name) && (info.tool_format != KNOWN[k].format || info.caps != KNOWN[k].caps)) {
      printf("  %s: tool format %u caps 0x%x, want %u and 0x%x\n", name, info.tool_format, info.caps, KNOWN[k].format, KNOWN[k].caps);
      CHECK(!"a known template's tool format and capabilities");
    }
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: chat_golden_test CASES GOLDENS\n");
    return 2;
  }
  char dir[4096];
  if (!feri_test_data_path("templates", dir, sizeof dir)) {
    printf("SKIPPED: chat_golden_test (no templates/ in $FERRITE_DATA_DIR or ~/.cache/ferrite: scripts/template/fetch-templates.sh)\n");
    return 0;
  }
  size_t clen = 0, glen = 0;
  char *cases_doc = feri_test_read_file(argv[1], &clen), *goldens = feri_test_read_file(argv[2], &glen);
  if (!cases_doc || !goldens) {
    fprintf(stderr, "chat_golden_test: cannot read %s or %s\n", argv[1], argv[2]);
    return 2;
  }
  cJSON *meta = cJSON_Parse(cases_doc);
  const char *bos = cJSON_GetStringValue(cJSON_GetObjectItem(meta, "bos_token"));
  const char *eos = cJSON_GetStringValue(cJSON_GetObjectItem(meta, "eos_token"));
  int64_t now = 0;
  CHECK(feri_chat_parse_date(cJSON_GetStringValue(cJSON_GetObjectItem(meta, "now")), &now));
  test_case cases[32];
  const int n_cases = read_cases(cases_doc, cases, 32);
  CHECK(n_cases == 12);
  const test_case *system_user = NULL;
  for (int i = 0; i < n_cases; i++)
    if (!strcmp(cases[i].name, "system_user")) system_user = &cases[i];
  CHECK(system_user != NULL);

  char current[256] = "";
  fer_chat_template *t = NULL;
  int same = 0, total = 0, templates = 0, merging = 0, adjusted_ok = 0, verbatim_ok = 0;
  int formats[4] = {0}, with_caps[4] = {0};
  for (char *line = strtok(goldens, "\n"); line; line = strtok(NULL, "\n")) {
    cJSON *g = cJSON_Parse(line);
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(g, "template")), *cname = cJSON_GetStringValue(cJSON_GetObjectItem(g, "case"));
    const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(g, "text")), *error = cJSON_GetStringValue(cJSON_GetObjectItem(g, "error"));
    const test_case *c = NULL;
    for (int i = 0; cname && i < n_cases; i++)
      if (!strcmp(cases[i].name, cname)) c = &cases[i];
    if (!name || !c || (!text && !error)) {
      CHECK(!"a golden line names a template, a case of cases.json, and text or error");
      cJSON_Delete(g);
      continue;
    }
    if (strcmp(name, current) != 0) {
      fer_chat_template_free(t);
      snprintf(current, sizeof current, "%s", name);
      templates++;
      bool merges = false;
      if ((t = open_template(name, bos, eos, now, &merges)) != NULL && system_user) check_merge(name, t, merges, system_user, &merging);
      if (t) check_info(name, t, formats, with_caps);
    }
    char *out = NULL;
    uint64_t out_len = 0;
    const uint32_t flags = FER_CHAT_VERBATIM | (c->add_generation_prompt ? FER_CHAT_ADD_GENERATION_PROMPT : 0);
    const fer_status st = t ? fer_chat_template_apply(t, c->request, strlen(c->request), flags, &out, &out_len) : FER_STATUS_NULL_ARG;
    char msg[600];
    size_t ml;
    fer_last_error_message(msg, sizeof msg, &ml);
    bool match;
    if (text) match = st == FER_STATUS_OK && out_len == strlen(text) && memcmp(out, text, out_len) == 0;
    else match = st == FER_STATUS_TEMPLATE_ERROR && !strcmp(msg, error) && !out && !out_len;
    if (!match) {
      printf("  DIFF %s / %s:\n    want %s[%.300s]\n    got  status %d [%.300s]\n", name, cname, text ? "" : "error ", text ? text : error,
             st, st == FER_STATUS_OK ? out : msg);
      CHECK(!"renders as Jinja2 does through the public entry");
    }
    fer_buffer_free(out);
    same += match;
    total++;
    /* with the adjustments: never a failure where the verbatim render succeeded */
    if (t) {
      char *adj = NULL;
      uint64_t adj_len = 0;
      const fer_status ast = fer_chat_template_apply(t, c->request, strlen(c->request), flags & ~(uint32_t)FER_CHAT_VERBATIM, &adj, &adj_len);
      adjusted_ok += ast == FER_STATUS_OK;
      if (ast != FER_STATUS_OK && text) {
        fer_last_error_message(msg, sizeof msg, &ml);
        printf("  adjusted render fails where Jinja2's succeeds: %s / %s: %s\n", name, cname, msg);
        CHECK(!"the adjustments never break a render");
      }
      fer_buffer_free(adj);
    }
    verbatim_ok += text != NULL;
    cJSON_Delete(g);
  }
  printf("chat_golden_test: %d of %d renders identical to Jinja2 through fer_chat_template_apply (%d templates, %d merge the "
         "system message)\n",
         same, total, templates, merging);
  printf("chat_golden_test: with the adjustments %d of %d render (verbatim %d); tool formats: generic %d, hermes %d, llama3 %d, "
         "mistral %d; showing tools %d, tool calls %d, tool results %d\n",
         adjusted_ok, total, verbatim_ok, formats[0], formats[1], formats[2], formats[3], with_caps[1], with_caps[2], with_caps[3]);
  CHECK(adjusted_ok > verbatim_ok); /* string arguments parsed, tool turns shown: some more render */
  CHECK(total == 840 && templates == 70);
  fer_chat_template_free(t);
  for (int i = 0; i < n_cases; i++) free(cases[i].request);
  cJSON_Delete(meta);
  free(cases_doc);
  free(goldens);
  return feri_test_finish("chat_golden_test");
}
