/* tokenize.c: `ferrite tokenize --model MODEL.gguf|tokenizer.json (--text TEXT | --file PATH)
 * [--count]` prints the ids of a text under a tokenizer (or only their number), e.g. to cut a
 * benchmark prompt to an exact length (scripts/model/bench_engine.sh). The tokenizer file's kind is
 * told by its content, not its name: the GGUF magic at offset 0 means a GGUF file, anything else
 * is read as a Hugging Face tokenizer.json. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ferrite.h"
#include "core/file.h"
#include "tools/args.h"
#include "tools/commands.h"

const char feri_tokenize_usage[] =
    "ferrite tokenize --model MODEL.gguf|tokenizer.json (--text TEXT | --file PATH) [--count]\n"
    "  (the model file's kind is told by its content: the GGUF magic, else tokenizer.json)\n";

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "ferrite tokenize: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (see ferrite tokenize --help)\n");
  va_end(ap);
  return 2;
}

/* Reads up to cap bytes (fewer only at the end of the file); -1 on a read error. */
static ssize_t read_upto(int fd, char *buf, size_t cap) {
  size_t n = 0;
  while (n < cap) {
    const ssize_t got = read(fd, buf + n, cap - n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -1;
    if (got == 0) break;
    n += (size_t)got;
  }
  return (ssize_t)n;
}

/* The content of --file (feri_file_read_all: a regular file only, read up to the size it had when
 * opened, so the read is bounded); NULL after a message. */
static char *read_text(const char *path, size_t *n) {
  char *buf;
  if (feri_file_read_all(path, "ferrite tokenize: --file", &buf, n) != FER_STATUS_OK) {
    char msg[600];
    size_t len;
    fer_last_error_message(msg, sizeof msg, &len);
    fprintf(stderr, "%s\n", msg);
    return NULL;
  }
  return buf;
}

/* The tokenizer of --model: by the file's first four bytes, GGUF or tokenizer.json. */
static fer_tokenizer *load_tokenizer(const char *path) {
  const int fd = feri_arg_open_regular("tokenize", "--model", path, NULL);
  if (fd < 0) return NULL;
  char magic[4];
  const int gguf = read_upto(fd, magic, sizeof magic) == 4 && memcmp(magic, "GGUF", 4) == 0;
  close(fd);
  fer_tokenizer *tok = NULL;
  if ((gguf ? fer_tokenizer_from_gguf_file(path, &tok) : fer_tokenizer_from_json_file(path, &tok)) != FER_STATUS_OK) {
    char msg[512];
    size_t len;
    fer_last_error_message(msg, sizeof msg, &len);
    fprintf(stderr, "ferrite tokenize: --model \"%s\" (read as %s): %s\n", path, gguf ? "GGUF" : "tokenizer.json", msg);
    return NULL;
  }
  return tok;
}

int feri_cmd_tokenize(int argc, char **argv) {
  const char *model = NULL, *text = NULL, *file = NULL;
  int count = 0;
  for (int i = 1; i < argc; i++) {
    const char *k = argv[i];
    if (feri_arg_is_help(k)) {
      feri_arg_usage(stdout, feri_tokenize_usage, true);
      return 0;
    }
    if (strcmp(k, "--count") == 0) {
      count = 1;
      continue;
    }
    const char **slot = strcmp(k, "--model") == 0 ? &model : strcmp(k, "--text") == 0 ? &text
                      : strcmp(k, "--file") == 0 ? &file : NULL;
    if (!slot) return usage_error("%s \"%s\"", k[0] == '-' ? "unknown option" : "unexpected argument", k);
    if (i + 1 >= argc) return usage_error("%s needs a value", k);
    *slot = argv[++i];
  }
  if (!model) return usage_error("--model is required");
  if (!text == !file) return usage_error("give one of --text and --file");
  size_t len = text ? strlen(text) : 0;
  char *owned = file ? read_text(file, &len) : NULL;
  if (file && !owned) return 1;
  fer_tokenizer *tok = load_tokenizer(model);
  int32_t *ids = NULL;
  size_t n = 0;
  int rc = 1;
  const char *src = text ? text : owned;
  if (tok) {
    fer_tokenizer_encode(tok, src, len, FER_ENCODE_ADD_SPECIAL, NULL, 0, &n);
    ids = malloc((n ? n : 1) * sizeof *ids);
    if (ids && fer_tokenizer_encode(tok, src, len, FER_ENCODE_ADD_SPECIAL, ids, n, &n) == FER_STATUS_OK) {
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
      fprintf(stderr, "ferrite tokenize: encoding the text: %s\n", ids ? msg : "out of memory");
    }
  }
  free(ids);
  free(owned);
  fer_tokenizer_free(tok);
  return rc;
}
