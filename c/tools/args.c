/* args.c: the strict option-value parser of the `ferrite` program (see args.h). strtol and friends
 * are not used for integers: they skip leading space, accept a sign an unsigned value must not
 * have (strtoull("-1") is 2^64 - 1), and the callers had let their results wrap or truncate. */
#include "tools/args.h"

#include "core/file.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

__attribute__((format(printf, 4, 5))) static bool refuse(const char *cmd, const char *opt, const char *v,
                                                        const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "ferrite %s: %s%s\"%s\": ", cmd, opt ? opt : "", opt ? " " : "", v);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return false;
}

static bool all_digits(const char *s) {
  if (*s == '\0') return false;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return false;
  return true;
}

/* The digits of s as a number; false when it passes 2^64 - 1. */
static bool digits_value(const char *s, const char *end, uint64_t *out) {
  uint64_t n = 0;
  for (; s < end; s++) {
    const uint64_t d = (uint64_t)(*s - '0');
    if (n > (UINT64_MAX - d) / 10) return false;
    n = n * 10 + d;
  }
  *out = n;
  return true;
}

bool feri_arg_unsigned(const char *cmd, const char *opt, const char *v, uint64_t lo, uint64_t hi, uint64_t *out) {
  uint64_t n = 0;
  if (*v == '\0') return refuse(cmd, opt, v, "empty; it takes a whole number in %llu..%llu", (unsigned long long)lo, (unsigned long long)hi);
  if (v[0] == '-' && all_digits(v + 1))
    return refuse(cmd, opt, v, "negative; it takes a whole number in %llu..%llu", (unsigned long long)lo, (unsigned long long)hi);
  if (!all_digits(v)) return refuse(cmd, opt, v, "not a whole number (digits only, in %llu..%llu)", (unsigned long long)lo, (unsigned long long)hi);
  if (!digits_value(v, v + strlen(v), &n) || n < lo || n > hi)
    return refuse(cmd, opt, v, "out of range %llu..%llu", (unsigned long long)lo, (unsigned long long)hi);
  *out = n;
  return true;
}

bool feri_arg_signed(const char *cmd, const char *opt, const char *v, int64_t lo, int64_t hi, int64_t *out) {
  const bool neg = v[0] == '-';
  const char *d = v + neg;
  uint64_t mag = 0;
  if (*v == '\0') return refuse(cmd, opt, v, "empty; it takes a whole number in %lld..%lld", (long long)lo, (long long)hi);
  if (!all_digits(d)) return refuse(cmd, opt, v, "not a whole number (an optional '-' and digits, in %lld..%lld)", (long long)lo, (long long)hi);
  /* the magnitude of INT64_MIN is 2^63, one past INT64_MAX */
  const bool fits = digits_value(d, d + strlen(d), &mag) && mag <= (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX);
  const int64_t n = !fits ? 0 : neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
  if (!fits || n < lo || n > hi) return refuse(cmd, opt, v, "out of range %lld..%lld", (long long)lo, (long long)hi);
  *out = n;
  return true;
}

bool feri_arg_float(const char *cmd, const char *opt, const char *v, float lo, float hi, bool lo_open, float *out) {
  char want[96];
  snprintf(want, sizeof want, "%c%g, %g]", lo_open ? '(' : '[', (double)lo, (double)hi);
  if (*v == '\0') return refuse(cmd, opt, v, "empty; it takes a number in %s", want);
  /* only what a decimal number spells: strtof alone would also take " 1", "nan", "inf", "0x1p3" */
  if (strspn(v, "0123456789.eE+-") != strlen(v)) return refuse(cmd, opt, v, "not a decimal number (in %s)", want);
  char *end = NULL;
  errno = 0;
  const float x = strtof(v, &end);
  if (end == v || *end != '\0') return refuse(cmd, opt, v, "not a decimal number (in %s)", want);
  if (errno == ERANGE || !isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
    return refuse(cmd, opt, v, "out of range %s", want);
  *out = x;
  return true;
}

bool feri_arg_bytes(const char *cmd, const char *opt, const char *v, uint64_t *out) {
  const size_t len = strlen(v);
  const char last = len ? v[len - 1] : '\0';
  const unsigned shift = last == 'K' ? 10 : last == 'M' ? 20 : last == 'G' ? 30 : 0;
  const char *digits_end = v + len - (shift ? 1 : 0);
  uint64_t n = 0;
  if (len == 0) return refuse(cmd, opt, v, "empty; it takes a byte count (digits, then K, M or G if wanted)");
  if (v[0] == '-') return refuse(cmd, opt, v, "negative; it takes a byte count (digits, then K, M or G if wanted)");
  for (const char *p = v; p < digits_end; p++)
    if (*p < '0' || *p > '9') return refuse(cmd, opt, v, "not a byte count (digits, then K, M or G if wanted)");
  if (digits_end == v) return refuse(cmd, opt, v, "not a byte count (digits, then K, M or G if wanted)");
  if (!digits_value(v, digits_end, &n) || n > (UINT64_MAX >> shift))
    return refuse(cmd, opt, v, "out of range: more than 2^64 - 1 bytes");
  *out = n << shift;
  return true;
}

bool feri_arg_pick(const char *cmd, const char *opt, const char *v, const feri_arg_choice *c, int32_t *out) {
  char names[256] = "";
  for (const feri_arg_choice *i = c; i->name; i++) {
    if (strcmp(i->name, v) == 0) {
      *out = i->value;
      return true;
    }
    const size_t used = strlen(names);
    snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", i->name);
  }
  return refuse(cmd, opt, v, "not one of %s", names);
}

int feri_arg_open_regular(const char *cmd, const char *opt, const char *path, uint64_t *size) {
  /* the library's one rule for what a loader may open (c/core/file.h), with the option as the
   * message's prefix */
  char who[96];
  snprintf(who, sizeof who, "ferrite %s%s%s", cmd, opt ? ": " : "", opt ? opt : "");
  int fd;
  uint64_t n;
  if (feri_file_open_regular(path, who, &fd, &n) != FER_STATUS_OK) {
    char msg[600];
    size_t len;
    fer_last_error_message(msg, sizeof msg, &len);
    fprintf(stderr, "%s\n", msg);
    return -1;
  }
  if (size) *size = n;
  return fd;
}

bool feri_arg_is_help(const char *s) {
  return strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0;
}

void feri_arg_usage(FILE *f, const char *text, bool first) {
  for (const char *line = text; *line;) {
    const char *nl = strchr(line, '\n');
    const size_t n = nl ? (size_t)(nl - line) : strlen(line);
    fprintf(f, "%s%.*s\n", first ? "usage: " : "       ", (int)n, line);
    first = false;
    line += n + (nl ? 1 : 0);
  }
}
