/* amx.c: the AMX gate (amx.h) and fer_amx_info_get. */
#include "core/amx.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

void feri_amx_decide(const feri_amx_probe *p, fer_amx_info *out) {
  memset(out, 0, sizeof *out);
  const uint64_t tile_state = (1ull << 17) | (1ull << 18);
  uint32_t check = FER_AMX_CHECK_NONE;
  const char *why = "AMX int8: usable (CPUID, XCR0, permission and canary passed)";
  char buf[160];
  if (p->disabled) check = FER_AMX_CHECK_DISABLED, why = "AMX int8: off (FERRITE_AMX=0)";
  else if (!p->x86_64 || !p->cpuid_tile || !p->cpuid_int8)
    check = FER_AMX_CHECK_CPUID,
    why = !p->x86_64 ? "AMX int8: not an x86-64 CPU"
          : !p->cpuid_tile ? "AMX int8: CPUID lists no AMX-TILE"
                           : "AMX int8: CPUID lists AMX-TILE but no AMX-INT8";
  else if ((p->xcr0 & tile_state) != tile_state) {
    check = FER_AMX_CHECK_XCR0;
    snprintf(buf, sizeof buf, "AMX int8: the OS does not enable the tile state (XCR0 0x%llx lacks bits 17-18)",
             (unsigned long long)p->xcr0);
    why = buf;
  } else if (p->permission_errno != 0) {
    check = FER_AMX_CHECK_PERMISSION;
    snprintf(buf, sizeof buf, "AMX int8: Linux refused the tile data (arch_prctl ARCH_REQ_XCOMP_PERM: %s)",
             strerror(p->permission_errno));
    why = buf;
  } else if (!p->canary_ran || !p->canary_ok) {
    check = FER_AMX_CHECK_CANARY, why = "AMX int8: the canary tile product differs from the scalar one";
  }
  out->usable = check == FER_AMX_CHECK_NONE;
  out->failed_check = check;
  snprintf(out->reason, sizeof out->reason, "%s", why);
}

#if defined(__x86_64__)
#define ARCH_GET_XCOMP_PERM 0x1022
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static uint64_t xgetbv0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

/* The tile configuration: palette 1, three tiles of 16 rows by 64 bytes. Memory operands are
 * spelled out in every asm statement: GCC 12's _tile_loadconfig and _tile_loadd declare too
 * little of the memory they read, which lets the compiler drop the stores before them (the
 * crash llama.cpp's AMX path shows when built with GCC). */
typedef struct tile_config {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} tile_config;

bool feri_amx_canary(void) {
  static int8_t a[16][64], b[16][64];
  static int32_t c[16][16], want[16][16];
  for (int i = 0; i < 16; i++)
    for (int k = 0; k < 64; k++) a[i][k] = (int8_t)((i * 7 + k * 13) % 255 - 127), b[i][k] = (int8_t)((i * 11 + k * 5) % 253 - 126);
  /* TDPBSSD: c[m][n] += sum over k of a[m][4k + j] * b[k][4n + j], j = 0..3 (b holds 16 rows of
   * 16 quads of int8) */
  for (int m = 0; m < 16; m++)
    for (int n = 0; n < 16; n++) {
      int32_t s = 0;
      for (int k = 0; k < 16; k++)
        for (int j = 0; j < 4; j++) s += (int32_t)a[m][4 * k + j] * (int32_t)b[k][4 * n + j];
      want[m][n] = s;
      c[m][n] = 0;
    }
  tile_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 3; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  const long stride = 64;
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg) : "memory");
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm0" : : "r"(&c[0][0]), "r"(stride), "m"(c) : "memory");
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm1" : : "r"(&a[0][0]), "r"(stride), "m"(a) : "memory");
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm2" : : "r"(&b[0][0]), "r"(stride), "m"(b) : "memory");
  __asm__ volatile("tdpbssd %%tmm2, %%tmm1, %%tmm0" : : : "memory");
  __asm__ volatile("tilestored %%tmm0, (%0,%1,1)" : : "r"(&c[0][0]), "r"(stride) : "memory");
  __asm__ volatile("tilerelease" : : : "memory");
  return memcmp(c, want, sizeof c) == 0;
}

static void probe(feri_amx_probe *p) {
  memset(p, 0, sizeof *p);
  const char *env = getenv("FERRITE_AMX");
  p->disabled = env != NULL && strcmp(env, "0") == 0;
  p->x86_64 = true;
  unsigned a, b, c, d;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) p->cpuid_tile = (d >> 24) & 1, p->cpuid_int8 = (d >> 25) & 1;
  if (p->disabled || !p->cpuid_tile || !p->cpuid_int8) return;
  unsigned a1, b1, c1, d1;
  if (__get_cpuid(1, &a1, &b1, &c1, &d1) && (c1 & bit_OSXSAVE)) p->xcr0 = xgetbv0();
  if ((p->xcr0 & ((1ull << 17) | (1ull << 18))) != ((1ull << 17) | (1ull << 18))) return;
  p->permission_errno = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 ? 0 : errno;
  if (p->permission_errno != 0) return;
  p->canary_ran = true;
  p->canary_ok = feri_amx_canary();
}
#else
bool feri_amx_canary(void) { return false; }
static void probe(feri_amx_probe *p) {
  memset(p, 0, sizeof *p);
  const char *env = getenv("FERRITE_AMX");
  p->disabled = env != NULL && strcmp(env, "0") == 0;
}
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static fer_amx_info decided;

static void decide_once(void) {
  feri_amx_probe p;
  probe(&p);
  feri_amx_decide(&p, &decided);
}

fer_status fer_amx_info_get(fer_amx_info *out) {
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_amx_info_get: out_info is NULL");
  pthread_once(&once, decide_once);
  *out = decided;
  return FER_STATUS_OK;
}
