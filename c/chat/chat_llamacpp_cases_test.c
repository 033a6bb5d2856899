/* chat_llamacpp_cases_test.c: llama.cpp's own chat-template test cases (tests/test-chat-template.cpp,
 * main_automated_tests' jinja loop), extracted from the pinned sdist by
 * scripts/template/extract_llamacpp_cases.py into the data directory by fetch-templates.sh: each
 * case's template over llama.cpp's six-message conversation (plus the case's extra messages) with
 * its bos and eos texts and a generation prompt, rendered through fer_chat_template_apply with
 * llama.cpp's adjustments (as llama.cpp's format_using_common renders through libcommon), must
 * equal the case's expected jinja output byte for byte. The same cases rendered VERBATIM are
 * counted too: the cases that differ are those where llama.cpp merges the system message into the
 * first user turn, which the test checks by name.
 * (SKIPPED without the extracted cases.)
 * EVIDENCE: C-CHAT-009 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferrite.h"
#include "testing/check.h"

/* The request JSON of the conversation and the case's extra messages. */
static char *request_of(const cJSON *conversation, const cJSON *extra) {
  cJSON *req = cJSON_CreateObject();
  cJSON *msgs = cJSON_AddArrayToObject(req, "messages");
  const cJSON *lists[2] = {conversation, extra};
  for (int l = 0; l < 2; l++) {
    const cJSON *m;
    cJSON_ArrayForEach(m, lists[l]) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "role", cJSON_GetArrayItem(m, 0)->valuestring);
      cJSON_AddStringToObject(o, "content", cJSON_GetArrayItem(m, 1)->valuestring);
      cJSON_AddItemToArray(msgs, o);
    }
  }
  char *text = cJSON_PrintUnformatted(req);
  cJSON_Delete(req);
  return text;
}

/* Renders one case; 1 when it equals the expected text. */
static int render_equals(const cJSON *c, const char *request, uint32_t flags, int report) {
  const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
  const char *tmpl = cJSON_GetObjectItem(c, "template")->valuestring;
  const char *want = cJSON_GetObjectItem(c, "expected")->valuestring;
  fer_chat_template_options o;
  fer_chat_template_options_init(&o);
  o.bos_token = cJSON_GetObjectItem(c, "bos_token")->valuestring;
  o.eos_token = cJSON_GetObjectItem(c, "eos_token")->valuestring;
  fer_chat_template *t = NULL;
  fer_status st = fer_chat_template_create(tmpl, strlen(tmpl), &o, &t);
  char *out = NULL;
  uint64_t len = 0;
  if (st == FER_STATUS_OK) st = fer_chat_template_apply(t, request, strlen(request), flags, &out, &len);
  const int same = st == FER_STATUS_OK && len == strlen(want) && memcmp(out, want, len) == 0;
  if (!same && report) {
    char msg[256];
    size_t ml = 0;
    fer_last_error_message(msg, sizeof msg, &ml);
    printf("  %s: %s\n    got:  %.*s\n    want: %s\n", name, st == FER_STATUS_OK ? "differs" : msg,
           out ? (int)(len < 300 ? len : 300) : 0, out ? out : "", want);
  }
  fer_buffer_free(out);
  fer_chat_template_free(t);
  return same;
}

int main(void) {
  char path[4096];
  if (!feri_test_data_path("templates/llamacpp-chat-template-cases.json", path, sizeof path)) {
    printf("SKIPPED: chat_llamacpp_cases_test (no templates/llamacpp-chat-template-cases.json in $FERRITE_DATA_DIR or "
           "~/.cache/ferrite: scripts/template/fetch-templates.sh)\n");
    return 0;
  }
  size_t n = 0;
  char *text = feri_test_read_file(path, &n);
  CHECK(text != NULL);
  cJSON *doc = text ? cJSON_ParseWithLength(text, n) : NULL;
  CHECK(doc != NULL);
  if (!doc) return feri_test_finish("chat_llamacpp_cases_test");
  const cJSON *conversation = cJSON_GetObjectItem(doc, "conversation"), *cases = cJSON_GetObjectItem(doc, "cases");
  CHECK(cJSON_GetArraySize(conversation) == 6 && cJSON_GetArraySize(cases) >= 30);
  int total = 0, adjusted = 0, verbatim = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, cases) {
    char *request = request_of(conversation, cJSON_GetObjectItem(c, "extra"));
    total++;
    adjusted += render_equals(c, request, FER_CHAT_ADD_GENERATION_PROMPT, 1);
    const int v = render_equals(c, request, FER_CHAT_ADD_GENERATION_PROMPT | FER_CHAT_VERBATIM, 0);
    verbatim += v;
    /* where verbatim differs, llama.cpp's expected output holds the system text in the first
     * user turn: "You are a helpful assistant" followed by "\n" and "Hello" */
    if (!v) {
      const char *want = cJSON_GetObjectItem(c, "expected")->valuestring;
      CHECK(strstr(want, "You are a helpful assistant\nHello") != NULL || strstr(want, "You are a helpful assistant\n\nHello"));
    }
    free(request);
  }
  printf("chat_llamacpp_cases_test: %d of %d of llama.cpp's cases render as llama.cpp expects (%d verbatim, "
         "without the system merge)\n",
         adjusted, total, verbatim);
  CHECK(adjusted == total);
  CHECK(verbatim < total); /* the merge is what makes the others equal: the cases exercise it */
  cJSON_Delete(doc);
  free(text);
  return feri_test_finish("chat_llamacpp_cases_test");
}
