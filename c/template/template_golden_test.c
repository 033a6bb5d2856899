/* template_golden_test.c: the 70 real chat templates (llama.cpp's models/templates, extracted by
 * setup into the data directory's templates/) rendered over the 12 message cases of
 * testdata/template, compared byte for byte with what Jinja2 rendered in transformers'
 * environment (testdata/template/goldens.jsonl, scripts/template/make_goldens.py). A golden that
 * is an error must fail with the same message (raise_exception's: feri_tmpl_last_raised too).
 * Prints a line per template and the total; fails on any difference not in DIFFERENCES.
 * usage: template_golden_test GOLDENS CONTEXTS (SKIPPED without the templates directory)
 * EVIDENCE: C-TMPL-001 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "template/template.h"
#include "testing/check.h"

/* Known differences, each with its cause: (template, case). Empty: every render matches. */
static const struct {
  const char *template_name, *case_name, *cause;
} DIFFERENCES[] = {
    {NULL, NULL, NULL},
};

static bool known_difference(const char *t, const char *c) {
  for (size_t i = 0; DIFFERENCES[i].template_name; i++)
    if (!strcmp(DIFFERENCES[i].template_name, t) && !strcmp(DIFFERENCES[i].case_name, c)) return true;
  return false;
}

/* Just past the JSON object starting at p ('{'), strings skipped; NULL when it does not close. */
static const char *object_end(const char *p) {
  int depth = 0;
  for (;; p++) {
    if (!*p) return NULL;
    if (*p == '"') {
      for (p++; *p && *p != '"'; p++)
        if (*p == '\\' && p[1]) p++;
      if (!*p) return NULL;
    } else if (*p == '{' || *p == '[') {
      depth++;
    } else if ((*p == '}' || *p == ']') && --depth == 0) {
      return p + 1;
    }
  }
}

/* The raw text of contexts.json's member "contexts"[name] (the variables exactly as Jinja2 got
 * them, numbers untouched): its first byte and length. */
static bool context_text(const char *doc, const char *name, const char **start, size_t *len) {
  const char *p = strstr(doc, "\"contexts\"");
  char key[300];
  snprintf(key, sizeof key, "\"%s\":", name);
  p = p ? strstr(p, key) : NULL;
  if (!p) return false;
  p += strlen(key);
  while (*p == ' ' || *p == '\n') p++;
  const char *end = *p == '{' ? object_end(p) : NULL;
  if (!end) return false;
  *start = p;
  *len = (size_t)(end - p);
  return true;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: template_golden_test GOLDENS CONTEXTS\n");
    return 2;
  }
  char dir[4096];
  if (!feri_test_data_path("templates", dir, sizeof dir)) {
    printf("SKIPPED: template_golden_test (no templates/ in $FERRITE_DATA_DIR or ~/.cache/ferrite: scripts/template/fetch-templates.sh)\n");
    return 0;
  }
  size_t glen = 0, clen = 0;
  char *goldens = feri_test_read_file(argv[1], &glen), *contexts = feri_test_read_file(argv[2], &clen);
  if (!goldens || !contexts) {
    fprintf(stderr, "template_golden_test: cannot read %s or %s\n", argv[1], argv[2]);
    return 2;
  }
  int64_t now = 0;
  const char *np = strstr(contexts, "\"now\"");
  struct tm tm = {0};
  if (np && sscanf(np, "\"now\": \"%d-%d-%d\"", &tm.tm_year, &tm.tm_mon, &tm.tm_mday) == 3) {
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    now = (int64_t)timegm(&tm);
  }
  CHECK(now > 0);
  const feri_tmpl_options opt = {.struct_size = sizeof opt, .now_unix = now};
  char current[256] = "";
  feri_tmpl *t = NULL;
  int same = 0, total = 0, t_same = 0, t_total = 0, templates = 0;
  for (char *line = strtok(goldens, "\n"); line; line = strtok(NULL, "\n")) {
    cJSON *g = cJSON_Parse(line);
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(g, "template")), *cname = cJSON_GetStringValue(cJSON_GetObjectItem(g, "case"));
    const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(g, "text")), *error = cJSON_GetStringValue(cJSON_GetObjectItem(g, "error"));
    const char *etype = cJSON_GetStringValue(cJSON_GetObjectItem(g, "error_type"));
    if (!name || !cname || (!text && !error)) {
      CHECK(!"a golden line has template, case and text or error");
      cJSON_Delete(g);
      continue;
    }
    if (strcmp(name, current) != 0) {
      if (templates) printf("  %-56s %d/%d\n", current, t_same, t_total);
      feri_tmpl_free(t);
      t = NULL;
      snprintf(current, sizeof current, "%s", name);
      t_same = t_total = 0;
      templates++;
      char rel[600], path[4096];
      snprintf(rel, sizeof rel, "templates/%s", name);
      size_t slen = 0;
      char *src = feri_test_data_path(rel, path, sizeof path) ? feri_test_read_file(path, &slen) : NULL;
      if (!src || feri_tmpl_parse(src, slen, &t) != FER_STATUS_OK) {
        char msg[512];
        size_t ml;
        fer_last_error_message(msg, sizeof msg, &ml);
        printf("  %s: %s\n", name, src ? msg : "not in the templates directory");
      }
      free(src);
    }
    const char *ctx = NULL;
    size_t ctx_len = 0;
    char *out = NULL;
    size_t out_len = 0;
    bool match = false;
    if (t && context_text(contexts, cname, &ctx, &ctx_len)) {
      const fer_status st = feri_tmpl_render(t, ctx, ctx_len, &opt, &out, &out_len);
      char msg[600];
      size_t ml;
      fer_last_error_message(msg, sizeof msg, &ml);
      if (text) match = st == FER_STATUS_OK && out_len == strlen(text) && memcmp(out, text, out_len) == 0;
      else match = st != FER_STATUS_OK && !strcmp(msg, error) && feri_tmpl_last_raised() == (etype && !strcmp(etype, "TemplateError"));
      if (!match && !known_difference(name, cname)) {
        printf("  DIFF %s / %s:\n    want %s[%.300s]\n    got  %s[%.300s]\n", name, cname, text ? "" : "error ", text ? text : error,
               st == FER_STATUS_OK ? "" : "error ", st == FER_STATUS_OK ? out : msg);
        CHECK(!"renders as Jinja2 does");
      }
    } else {
      CHECK(!"the template parses and the case has a context");
    }
    free(out);
    same += match;
    t_same += match;
    total++;
    t_total++;
    cJSON_Delete(g);
  }
  if (templates) printf("  %-56s %d/%d\n", current, t_same, t_total);
  printf("template_golden_test: %d of %d renders identical to Jinja2 (%d templates)\n", same, total, templates);
  feri_tmpl_free(t);
  free(goldens);
  free(contexts);
  return feri_test_finish("template_golden_test");
}
