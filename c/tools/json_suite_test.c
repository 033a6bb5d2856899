/* json_suite_test.c: `ferrite generate --chat --json-schema` on the real model (SmolLM2-135M-Instruct
 * Q4_1, seeded sampling: --temperature 0.7 --top-p 0.9 and the recorded seed, f32 K and V (the recording's:
 * the engine's default became f16 after it), as the script runs it) over
 * the JSON schema suite, against the outputs scripts/grammar/smollm2_json_suite.py
 * recorded and validated with the `jsonschema` package (testdata/grammar/smollm2-json.txt). Each run
 * must end where the grammar ends (no "incomplete"), print JSON that parses, and print the recorded
 * output; a near-tie decided differently on another CPU may change an output, so up to a tenth may
 * differ (each difference is printed), never the JSON's validity under the grammar's end.
 * One thread per run (the outputs are the same bits at any thread count): Bazel runs two tests at
 * once on two cores, and a second spinning pool thread made this test 157 s against 83 s.
 * usage: json_suite_test PATH-OF-FERRITE GOLDEN (the model from the data directory; SKIPPED without)
 * EVIDENCE: C-GRM-011 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testing/check.h"
#include "testing/run.h"

static char OUT[65536], ERR[65536]; /* large: not on the stack */

/* The JSON string after a line's keyword, decoded (malloc'd), or NULL. */
static char *decoded(const char *line, const char *key) {
  const size_t k = strlen(key);
  if (strncmp(line, key, k) != 0 || line[k] != ' ') return NULL;
  cJSON *j = cJSON_Parse(line + k + 1);
  char *s = cJSON_IsString(j) ? strdup(j->valuestring) : NULL;
  cJSON_Delete(j);
  return s;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: json_suite_test PATH-OF-FERRITE GOLDEN\n");
    return 2;
  }
  char model[1024];
  if (!feri_test_data_path("smollm2-135m-instruct-q4_1.gguf", model, sizeof model)) {
    printf("SKIPPED: json_suite_test: smollm2-135m-instruct-q4_1.gguf not in $FERRITE_DATA_DIR or ~/.cache/ferrite\n");
    return 0;
  }
  FILE *f = fopen(argv[2], "r");
  CHECK(f != NULL);
  if (!f) return feri_test_finish("json_suite_test");
  const char *tmp = getenv("TEST_TMPDIR");
  char dir[512], schema_path[600];
  snprintf(dir, sizeof dir, "%s/ferrite-json-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  CHECK(mkdtemp(dir) != NULL);
  snprintf(schema_path, sizeof schema_path, "%s/schema.json", dir);
#if defined(__SANITIZE_ADDRESS__)
  const int max_cases = 1; /* the sanitizer build is ~20x slower: the first schema only (the paths; the
                            * suite's outputs are the optimised build's to check) */
#else
  const int max_cases = 1 << 20;
#endif
  static char line[1 << 20];
  char *schema = NULL, *prompt = NULL, seed[32] = "1";
  int cases = 0, equal = 0;
  while (cases < max_cases && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    char *v;
    if ((v = decoded(line, "case"))) free(schema), schema = v;
    else if ((v = decoded(line, "prompt"))) free(prompt), prompt = v;
    else if (strncmp(line, "seed ", 5) == 0) snprintf(seed, sizeof seed, "%.20s", line + 5);
    else if ((v = decoded(line, "output")) && schema && prompt) {
      FILE *s = fopen(schema_path, "w");
      CHECK(s != NULL);
      if (s) fputs(schema, s), fclose(s);
      const char *args[] = {"generate", "--model", model, "--chat", "--prompt", prompt, "--json-schema", schema_path,
                            "--max-tokens", "256", "--temperature", "0.7", "--top-p", "0.9", "--seed", seed,
                            "--kv-dtype", "f32", "--threads", "1", NULL};
      const int rc = feri_run_binary(argv[1], args, dir, 600, OUT, sizeof OUT, ERR, sizeof ERR);
      CHECK(rc == 0);
      CHECK(strstr(ERR, "incomplete") == NULL);
      const size_t n = strlen(OUT);
      if (n > 0 && OUT[n - 1] == '\n') OUT[n - 1] = 0;
      cJSON *j = cJSON_Parse(OUT);
      CHECK(j != NULL);
      cJSON_Delete(j);
      if (strcmp(OUT, v) == 0) equal++;
      else fprintf(stderr, "  case %d (%s): output differs from the recorded one:\n    now: %.300s\n    was: %.300s\n", cases, schema, OUT, v);
      cases++;
      free(v);
    } else {
      free(v);
    }
  }
  fclose(f);
  free(schema), free(prompt);
  CHECK(cases > 0);
  CHECK(equal * 10 >= cases * 9);
  printf("json_suite_test: %d cases, %d outputs equal to the recorded ones\n", cases, equal);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "json_suite_test: could not remove %s\n", dir);
  return feri_test_finish("json_suite_test");
}
