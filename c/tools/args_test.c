/* args_test.c: the strict option-value parser (args.c), one row per edge: every kind refuses the
 * empty string, non-numbers, trailing bytes, leading space and signs it does not take, overflow
 * past 64 bits and values outside the range, with a message naming the option and the value; and
 * takes every value at its range's ends. EVIDENCE: C-CLI-001 */
#include "tools/args.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testing/check.h"

/* What the parser wrote on stderr during one call, captured through a temporary file. */
static char captured[1024];
static int saved_stderr = -1;
static FILE *capture_file;

static void capture_begin(void) {
  fflush(stderr);
  capture_file = tmpfile();
  saved_stderr = dup(2);
  dup2(fileno(capture_file), 2);
}

static void capture_end(void) {
  fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  rewind(capture_file);
  const size_t n = fread(captured, 1, sizeof captured - 1, capture_file);
  captured[n] = '\0';
  fclose(capture_file);
}

/* A refused value: false, the output untouched, one message naming the command, option and value
 * and holding why (a word of the reason). */
#define CHECK_REFUSED(call, value, why)                                                        \
  do {                                                                                         \
    capture_begin();                                                                           \
    const bool ok_ = (call);                                                                   \
    capture_end();                                                                             \
    char want_[256];                                                                           \
    snprintf(want_, sizeof want_, "ferrite test: --opt \"%s\": ", (value));                    \
    CHECK(!ok_);                                                                               \
    CHECK(strncmp(captured, want_, strlen(want_)) == 0);                                       \
    CHECK(strstr(captured, (why)) != NULL);                                                    \
    if (ok_ || strncmp(captured, want_, strlen(want_)) != 0 || !strstr(captured, (why)))       \
      fprintf(stderr, "  value \"%s\": got message: %s", (value), captured);                   \
  } while (0)

static void test_unsigned(void) {
  static const struct { const char *v; const char *why; } bad[] = {
      {"", "empty"}, {"abc", "not a whole number"}, {"12x", "not a whole number"}, {" 12", "not a whole number"},
      {"12 ", "not a whole number"}, {"+5", "not a whole number"}, {"-1", "negative"}, {"-0", "negative"},
      {"0x10", "not a whole number"}, {"1.5", "not a whole number"}, {"1e3", "not a whole number"},
      {"--", "not a whole number"}, {"-", "not a whole number"},
      {"18446744073709551616", "out of range"}, {"99999999999999999999999", "out of range"},
      {"4294967297", "out of range"}, {"0", "out of range"}, {"101", "out of range"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t x = 77;
    CHECK_REFUSED(feri_arg_unsigned("test", "--opt", bad[i].v, 1, 100, &x), bad[i].v, bad[i].why);
    CHECK(x == 77);
  }
  uint64_t x = 0;
  CHECK(feri_arg_unsigned("test", "--opt", "1", 1, 100, &x) && x == 1);
  CHECK(feri_arg_unsigned("test", "--opt", "100", 1, 100, &x) && x == 100);
  CHECK(feri_arg_unsigned("test", "--opt", "007", 1, 100, &x) && x == 7);
  CHECK(feri_arg_unsigned("test", "--opt", "18446744073709551615", 0, UINT64_MAX, &x) && x == UINT64_MAX);
  CHECK(feri_arg_unsigned("test", "--opt", "0", 0, UINT64_MAX, &x) && x == 0);
  CHECK_REFUSED(feri_arg_unsigned("test", "--opt", "18446744073709551616", 0, UINT64_MAX, &x), "18446744073709551616",
                "out of range");
  CHECK(feri_arg_unsigned("test", "--opt", "2147483647", 0, INT32_MAX, &x) && x == INT32_MAX);
  CHECK_REFUSED(feri_arg_unsigned("test", "--opt", "2147483648", 0, INT32_MAX, &x), "2147483648", "out of range");
}

static void test_signed(void) {
  static const struct { const char *v; const char *why; } bad[] = {
      {"", "empty"}, {"abc", "not a whole number"}, {"-", "not a whole number"}, {"--1", "not a whole number"},
      {"+1", "not a whole number"}, {" -1", "not a whole number"}, {"-1x", "not a whole number"},
      {"9223372036854775808", "out of range"}, {"-9223372036854775809", "out of range"},
      {"99999999999999999999999", "out of range"}, {"-99999999999999999999999", "out of range"},
      {"-11", "out of range"}, {"11", "out of range"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t x = 77;
    CHECK_REFUSED(feri_arg_signed("test", "--opt", bad[i].v, -10, 10, &x), bad[i].v, bad[i].why);
    CHECK(x == 77);
  }
  int64_t x = 0;
  CHECK(feri_arg_signed("test", "--opt", "-10", -10, 10, &x) && x == -10);
  CHECK(feri_arg_signed("test", "--opt", "10", -10, 10, &x) && x == 10);
  CHECK(feri_arg_signed("test", "--opt", "-0", -10, 10, &x) && x == 0);
  CHECK(feri_arg_signed("test", "--opt", "-9223372036854775808", INT64_MIN, INT64_MAX, &x) && x == INT64_MIN);
  CHECK(feri_arg_signed("test", "--opt", "9223372036854775807", INT64_MIN, INT64_MAX, &x) && x == INT64_MAX);
  CHECK_REFUSED(feri_arg_signed("test", "--opt", "9223372036854775808", INT64_MIN, INT64_MAX, &x), "9223372036854775808",
                "out of range");
}

static void test_float(void) {
  static const struct { const char *v; const char *why; } bad[] = {
      {"", "empty"}, {"abc", "not a decimal number"}, {"0.5x", "not a decimal number"}, {" 0.5", "not a decimal number"},
      {"0.5 ", "not a decimal number"}, {"nan", "not a decimal number"}, {"inf", "not a decimal number"},
      {"-inf", "not a decimal number"}, {"infinity", "not a decimal number"}, {"0x1p-1", "not a decimal number"},
      {"1.2.3", "not a decimal number"}, {"e5", "not a decimal number"}, {"-", "not a decimal number"},
      {".", "not a decimal number"}, {"1e", "not a decimal number"}, {"0,5", "not a decimal number"},
      {"1e39", "out of range"}, {"-1e39", "out of range"}, {"1e-50", "out of range"}, {"1e999999", "out of range"},
      {"-0.5", "out of range"}, {"1.5", "out of range"}, {"0", "out of range"}, {"1.0000001", "out of range"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    float x = 77;
    /* (0, 1]: top-p's range */
    CHECK_REFUSED(feri_arg_float("test", "--opt", bad[i].v, 0, 1, true, &x), bad[i].v, bad[i].why);
    CHECK(x == 77);
  }
  float x = 0;
  CHECK(feri_arg_float("test", "--opt", "1", 0, 1, true, &x) && x == 1);
  CHECK(feri_arg_float("test", "--opt", "1e-3", 0, 1, true, &x) && x == 1e-3f);
  CHECK(feri_arg_float("test", "--opt", "+.25", 0, 1, true, &x) && x == 0.25f);
  CHECK(feri_arg_float("test", "--opt", "0", 0, 1, false, &x) && x == 0);
  CHECK(feri_arg_float("test", "--opt", "0.0", 0, 1, false, &x) && x == 0);
  CHECK(feri_arg_float("test", "--opt", "3.4e38", 0, FLT_MAX, false, &x) && x == 3.4e38f);
  CHECK_REFUSED(feri_arg_float("test", "--opt", "3.5e38", 0, FLT_MAX, false, &x), "3.5e38", "out of range");
  CHECK_REFUSED(feri_arg_float("test", "--opt", "-1e-30", 0, FLT_MAX, false, &x), "-1e-30", "out of range");
}

static void test_bytes(void) {
  static const struct { const char *v; const char *why; } bad[] = {
      {"", "empty"}, {"abc", "not a byte count"}, {"12x", "not a byte count"}, {"1KB", "not a byte count"},
      {"1.5G", "not a byte count"}, {"K", "not a byte count"}, {"G", "not a byte count"}, {" 1", "not a byte count"},
      {"1 ", "not a byte count"}, {"+1", "not a byte count"}, {"1k", "not a byte count"}, {"1GG", "not a byte count"},
      {"1T", "not a byte count"}, {"0x10", "not a byte count"}, {"-1", "negative"}, {"-1G", "negative"},
      {"17179869184G", "out of range"}, {"17592186044416M", "out of range"}, {"18014398509481984K", "out of range"},
      {"18446744073709551616", "out of range"}, {"99999999999999999999999", "out of range"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t x = 77;
    CHECK_REFUSED(feri_arg_bytes("test", "--opt", bad[i].v, &x), bad[i].v, bad[i].why);
    CHECK(x == 77);
  }
  uint64_t x = 1;
  CHECK(feri_arg_bytes("test", "--opt", "0", &x) && x == 0);
  CHECK(feri_arg_bytes("test", "--opt", "40M", &x) && x == 40ull << 20);
  CHECK(feri_arg_bytes("test", "--opt", "3K", &x) && x == 3072);
  CHECK(feri_arg_bytes("test", "--opt", "17179869183G", &x) && x == 17179869183ull << 30);
  CHECK(feri_arg_bytes("test", "--opt", "18446744073709551615", &x) && x == UINT64_MAX);
}

static void test_pick(void) {
  static const feri_arg_choice c[] = {{"f32", 7}, {"f16", 8}, {NULL, 0}};
  int32_t x = 77;
  CHECK(feri_arg_pick("test", "--opt", "f16", c, &x) && x == 8);
  x = 77;
  CHECK_REFUSED(feri_arg_pick("test", "--opt", "F16", c, &x), "F16", "not one of f32, f16");
  CHECK_REFUSED(feri_arg_pick("test", "--opt", "", c, &x), "", "not one of f32, f16");
  CHECK_REFUSED(feri_arg_pick("test", "--opt", "f16 ", c, &x), "f16 ", "not one of");
  CHECK(x == 77);
}

int main(void) {
  test_unsigned();
  test_signed();
  test_float();
  test_bytes();
  test_pick();
  return feri_test_finish("args_test");
}
