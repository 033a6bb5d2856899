/* tokenize.c: `ferrite tokenize --model PATH (--text TEXT | --file PATH) [--count]` prints the ids of
 * a text under the model's tokenizer (or only their number), e.g. to cut a benchmark prompt to an
 * exact length (scripts/model/bench_engine.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferrite.h"
#include "tools/commands.h"

static char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t cap = 0;
  *n = 0;
  for (;;) {
    if (*n + 65536 > cap) {
      char *p = realloc(buf, cap = *n + 65536 * 2);
      if (!p) break;
      buf = p;
    }
    size_t got = fread(buf + *n, 1, cap - *n, f);
    *n += got;
    if (got == 0) break;
  }
  fclose(f);
  return buf;
}

int feri_cmd_tokenize(int argc, char **argv) {
  const char *model = NULL, *text = NULL, *file = NULL;
  int count = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--count") == 0) count = 1;
    else if (i + 1 < argc && strcmp(argv[i], "--model") == 0) model = argv[++i];
    else if (i + 1 < argc && strcmp(argv[i], "--text") == 0) text = argv[++i];
    else if (i + 1 < argc && strcmp(argv[i], "--file") == 0) file = argv[++i];
    else model = NULL, i = argc;
  }
  if (!model || (!text == !file)) {
    fprintf(stderr, "usage: ferrite tokenize --model PATH (--text TEXT | --file PATH) [--count]\n");
    return 2;
  }
  size_t len = text ? strlen(text) : 0;
  char *owned = file ? read_file(file, &len) : NULL;
  if (file && !owned) {
    fprintf(stderr, "ferrite tokenize: cannot read %s\n", file);
    return 1;
  }
  fer_tokenizer *tok = NULL;
  int32_t *ids = NULL;
  size_t n = 0;
  int rc = 1;
  if (fer_tokenizer_from_gguf_file(model, &tok) == FER_STATUS_OK &&
      (fer_tokenizer_encode(tok, text ? text : owned, len, FER_ENCODE_ADD_SPECIAL, NULL, 0, &n),
       ids = malloc((n ? n : 1) * sizeof *ids)) != NULL &&
      fer_tokenizer_encode(tok, text ? text : owned, len, FER_ENCODE_ADD_SPECIAL, ids, n, &n) == FER_STATUS_OK) {
    if (count) {
      printf("%zu\n", n);
    } else {
      for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
      printf("\n");
    }
    rc = 0;
  } else {
    char msg[512];
    size_t ml;
    fer_last_error_message(msg, sizeof msg, &ml);
    fprintf(stderr, "ferrite tokenize: %s\n", msg);
  }
  free(ids);
  free(owned);
  fer_tokenizer_free(tok);
  return rc;
}
