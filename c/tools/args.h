/* args.h: the one strict parser of the `ferrite` program's option values. Every numeric option of
 * every subcommand goes through one of these, so a value is taken only when the whole string is a
 * number of the option's kind inside its range: no empty string, no leading space or sign the
 * kind does not allow, no trailing bytes, no wrap-around on overflow, no silent clamping. A refused
 * value gets one line on stderr, "ferrite CMD: OPTION "VALUE": why", naming the option and the
 * value; the caller then exits 2 (a usage error). */
#ifndef FERI_TOOLS_ARGS_H
#define FERI_TOOLS_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* A decimal integer in [lo, hi]: one or more digits and nothing else (no sign, no space). A
 * leading '-' is refused as negative, more digits than 64 bits hold as out of range. */
bool feri_arg_unsigned(const char *cmd, const char *opt, const char *v, uint64_t lo, uint64_t hi, uint64_t *out);

/* A decimal integer in [lo, hi]: an optional '-' and one or more digits, nothing else. */
bool feri_arg_signed(const char *cmd, const char *opt, const char *v, int64_t lo, int64_t hi, int64_t *out);

/* A decimal number (digits, '.', an exponent) that is finite as a float and in [lo, hi], or in
 * (lo, hi] when lo_open. No nan, inf, hex or space; a value a float cannot hold (1e39, 1e-46)
 * is out of range, not rounded to infinity or zero. */
bool feri_arg_float(const char *cmd, const char *opt, const char *v, float lo, float hi, bool lo_open, float *out);

/* A byte count: digits with an optional K, M or G (binary: 2^10, 2^20, 2^30), nothing else; a
 * product past 2^64 - 1 is out of range. */
bool feri_arg_bytes(const char *cmd, const char *opt, const char *v, uint64_t *out);

/* One of a list of names. */
typedef struct feri_arg_choice {
  const char *name;
  int32_t value;
} feri_arg_choice;

/* The value of the entry named v in c (ended by a NULL name), or a message listing the names. */
bool feri_arg_pick(const char *cmd, const char *opt, const char *v, const feri_arg_choice *c, int32_t *out);

/* Opens path for reading when it is a regular file (feri_file_open_regular: checked before the
 * open, which never waits) and returns the descriptor (and its size in *size when size is not
 * NULL); otherwise prints "ferrite CMD: OPTION: 'PATH' why" (missing, a directory, a FIFO, a
 * device...) and returns -1. opt may be NULL for a positional argument. */
int feri_arg_open_regular(const char *cmd, const char *opt, const char *path, uint64_t *size);

/* True when s is -h or --help. */
bool feri_arg_is_help(const char *s);

/* Prints a usage text (lines of "ferrite ..." with their continuations): the first line after
 * "usage: " when first, every other line indented to match. */
void feri_arg_usage(FILE *f, const char *text, bool first);

#endif
