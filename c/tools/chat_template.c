/* chat_template.c: `ferrite chat-template (--model FILE.gguf | --template FILE.jinja) --messages
 * FILE.json [--no-generation-prompt] [--as-served]` prints a conversation rendered by a chat
 * template, byte for byte, nothing added: for people debugging a template, and for tests.
 *
 * FILE.json is {"messages": [...], "tools": [...], "documents": [...], "chat_template_kwargs":
 * {...}, "bos_token": "...", "eos_token": "..."}, all but messages optional. The special tokens
 * come from the file's vocabulary with --model, from FILE.json with --template ("" when absent).
 * By default the render is transformers' apply_chat_template exactly (FER_CHAT_VERBATIM);
 * --as-served makes ferrite-serve's adjustments (text parts joined, system text merged into the
 * user turn where the template has no system role). strftime_now reads the clock, or the date in
 * FERRITE_TEMPLATE_NOW=YYYY-MM-DD. Exit 0 with the text on stdout; a template that raises or
 * fails prints "template error: MESSAGE" on stderr, exit 1; other failures (a file that cannot be
 * read, a template that does not compile, a request that is not as above) exit 1 too; usage
 * errors exit 2. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chat/chat_gguf.h"
#include "chat/chat_template.h"
#include "core/file.h"
#include "ferrite.h"
#include "gguf/gguf.h"
#include "tools/args.h"
#include "tools/commands.h"

const char feri_chat_template_usage[] =
    "ferrite chat-template (--model FILE.gguf | --template FILE.jinja) --messages FILE.json\n"
    "                      [--no-generation-prompt] [--as-served]\n"
    "  (FILE.json: {\"messages\": [...], \"tools\": [...]}, and with --template \"bos_token\" and\n"
    "  \"eos_token\"; FERRITE_TEMPLATE_NOW=YYYY-MM-DD fixes strftime_now's date)\n";

enum { MAX_FILE = 64 << 20 };

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "ferrite chat-template: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (see ferrite chat-template --help)\n");
  va_end(ap);
  return 2;
}

static void print_error(const char *what) {
  char msg[1024];
  size_t len;
  fer_last_error_message(msg, sizeof msg, &len);
  fprintf(stderr, "ferrite chat-template: %s: %s\n", what, msg);
}

/* A whole regular file (NULL after a message). */
static char *read_file(const char *opt, const char *path, size_t *n) {
  const int fd = feri_arg_open_regular("chat-template", opt, path, NULL);
  if (fd < 0) return NULL;
  close(fd);
  char *buf = NULL;
  char what[64];
  snprintf(what, sizeof what, "ferrite chat-template: %s", opt);
  if (feri_file_read_all(path, what, &buf, n) != FER_STATUS_OK) {
    char msg[600];
    size_t len;
    fer_last_error_message(msg, sizeof msg, &len);
    fprintf(stderr, "%s\n", msg);
    return NULL;
  }
  if (*n > MAX_FILE) {
    fprintf(stderr, "ferrite chat-template: %s: '%s' is %zu bytes (at most %d)\n", opt, path, *n, MAX_FILE);
    free(buf);
    return NULL;
  }
  return buf;
}

/* The string member key of the request, or "" (false when present but not a string). */
static bool special_token(const cJSON *req, const char *key, const char **out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, key);
  *out = "";
  if (!v) return true;
  if (!cJSON_IsString(v)) return false;
  *out = v->valuestring;
  return true;
}

/* The template of --template (special tokens from the request) or of --model's file. */
static fer_chat_template *open_template(const char *model, const char *tmpl_path, const char *request, size_t request_len,
                                        int64_t now) {
  fer_chat_template *t = NULL;
  if (model) {
    const int fd = feri_arg_open_regular("chat-template", "--model", model, NULL);
    if (fd < 0) return NULL;
    close(fd);
    feri_gguf *g = NULL;
    if (feri_gguf_open_file(model, &g) != FER_STATUS_OK) {
      print_error("--model");
      return NULL;
    }
    const fer_status st = feri_chat_template_from_gguf(g, NULL, 0, now, &t);
    if (st != FER_STATUS_OK) print_error("--model");
    if (st == FER_STATUS_UNSUPPORTED) fprintf(stderr, "ferrite chat-template: here: --template FILE.jinja instead of --model\n");
    feri_gguf_close(g);
    return t;
  }
  size_t n = 0;
  char *src = read_file("--template", tmpl_path, &n);
  if (!src) return NULL;
  cJSON *req = cJSON_ParseWithLength(request, request_len);
  fer_chat_template_options o;
  fer_chat_template_options_init(&o);
  o.now_unix = now;
  if (!special_token(req, "bos_token", &o.bos_token) || !special_token(req, "eos_token", &o.eos_token))
    fprintf(stderr, "ferrite chat-template: --messages: bos_token and eos_token must be strings\n");
  else if (fer_chat_template_create(src, n, &o, &t) != FER_STATUS_OK)
    print_error("--template");
  cJSON_Delete(req);
  free(src);
  return t;
}

int feri_cmd_chat_template(int argc, char **argv) {
  const char *model = NULL, *tmpl = NULL, *messages = NULL;
  uint32_t flags = FER_CHAT_ADD_GENERATION_PROMPT | FER_CHAT_VERBATIM;
  for (int i = 1; i < argc; i++) {
    const char *k = argv[i];
    if (feri_arg_is_help(k)) {
      feri_arg_usage(stdout, feri_chat_template_usage, true);
      return 0;
    }
    if (strcmp(k, "--no-generation-prompt") == 0) {
      flags &= ~(uint32_t)FER_CHAT_ADD_GENERATION_PROMPT;
      continue;
    }
    if (strcmp(k, "--as-served") == 0) {
      flags &= ~(uint32_t)FER_CHAT_VERBATIM;
      continue;
    }
    const char **slot = strcmp(k, "--model") == 0 ? &model : strcmp(k, "--template") == 0 ? &tmpl
                      : strcmp(k, "--messages") == 0 ? &messages : NULL;
    if (!slot) return usage_error("%s \"%s\"", k[0] == '-' ? "unknown option" : "unexpected argument", k);
    if (i + 1 >= argc) return usage_error("%s needs a value", k);
    if (*slot) return usage_error("%s given twice", k);
    *slot = argv[++i];
  }
  if (!model == !tmpl) return usage_error("give one of --model and --template");
  if (!messages) return usage_error("--messages is required");
  int64_t now = 0;
  const char *date = getenv("FERRITE_TEMPLATE_NOW");
  if (date && !feri_chat_parse_date(date, &now)) return usage_error("FERRITE_TEMPLATE_NOW \"%s\" is not a date YYYY-MM-DD", date);
  if (!date) now = (int64_t)time(NULL);
  if (now == 0) now = 1; /* 0 asks for the clock: the first second of 1970 is one more */
  size_t len = 0;
  char *request = read_file("--messages", messages, &len);
  if (!request) return 1;
  int rc = 1;
  fer_chat_template *t = open_template(model, tmpl, request, len, now);
  char *out = NULL;
  uint64_t n = 0;
  if (t) {
    const fer_status st = fer_chat_template_apply(t, request, len, flags, &out, &n);
    if (st == FER_STATUS_OK) {
      rc = fwrite(out, 1, (size_t)n, stdout) == n && fflush(stdout) == 0 ? 0 : 1;
      if (rc) fprintf(stderr, "ferrite chat-template: writing the text failed\n");
    } else if (st == FER_STATUS_TEMPLATE_ERROR) {
      char msg[4096];
      size_t ml;
      fer_last_error_message(msg, sizeof msg, &ml);
      fprintf(stderr, "template error: %s\n", msg);
    } else {
      print_error("--messages");
    }
  }
  fer_buffer_free(out);
  fer_chat_template_free(t);
  free(request);
  return rc;
}
