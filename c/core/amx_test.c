/* amx_test.c: the AMX gate's decision for every way a check can fail (the first failing check
 * wins, each with its reason), then the gate on this CPU: where CPUID lists no AMX it says so;
 * where it does, the canary's verdict against the scalar product decides (SKIPPED here without AMX).
 * EVIDENCE: C-AMX-001 */
#include <cpuid.h>
#include <stdio.h>
#include <string.h>

#include "core/amx.h"
#include "testing/check.h"

static void expect(const feri_amx_probe *p, uint32_t check, const char *reason_has) {
  fer_amx_info info;
  memset(&info, 0x55, sizeof info);
  feri_amx_decide(p, &info);
  CHECK(info.failed_check == check && info.usable == (check == FER_AMX_CHECK_NONE));
  CHECK(strstr(info.reason, reason_has) != NULL);
  if (!strstr(info.reason, reason_has)) fprintf(stderr, "  reason '%s' lacks '%s'\n", info.reason, reason_has);
}

int main(void) {
  const uint64_t tiles = (1ull << 17) | (1ull << 18) | 0xe7;
  feri_amx_probe all = {.x86_64 = true, .cpuid_tile = true, .cpuid_int8 = true, .xcr0 = tiles, .canary_ran = true,
                        .canary_ok = true};
  expect(&all, FER_AMX_CHECK_NONE, "usable");
  feri_amx_probe p = all;
  p.disabled = true;
  expect(&p, FER_AMX_CHECK_DISABLED, "FERRITE_AMX=0");
  p = all, p.x86_64 = false;
  expect(&p, FER_AMX_CHECK_CPUID, "not an x86-64");
  p = all, p.cpuid_tile = false;
  expect(&p, FER_AMX_CHECK_CPUID, "no AMX-TILE");
  p = all, p.cpuid_int8 = false;
  expect(&p, FER_AMX_CHECK_CPUID, "no AMX-INT8");
  p = all, p.xcr0 = 0xe7 | (1ull << 17); /* XTILEDATA missing */
  expect(&p, FER_AMX_CHECK_XCR0, "lacks bits 17-18");
  p = all, p.permission_errno = 22;
  expect(&p, FER_AMX_CHECK_PERMISSION, "arch_prctl");
  p = all, p.canary_ok = false;
  expect(&p, FER_AMX_CHECK_CANARY, "canary");
  p = all, p.canary_ran = false;
  expect(&p, FER_AMX_CHECK_CANARY, "canary");
  p = all, p.cpuid_tile = false, p.permission_errno = 1, p.canary_ok = false; /* the first failure wins */
  expect(&p, FER_AMX_CHECK_CPUID, "AMX-TILE");

  /* this CPU */
  fer_amx_info info;
  CHECK_STATUS(fer_amx_info_get(&info), FER_STATUS_OK);
  CHECK_STATUS(fer_amx_info_get(NULL), FER_STATUS_NULL_ARG);
  unsigned a, b, c, d;
  const int has = __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((d >> 24) & 1) && ((d >> 25) & 1);
  printf("amx_test: %s\n", info.reason);
  if (!has) {
    CHECK(!info.usable && (info.failed_check == FER_AMX_CHECK_CPUID || info.failed_check == FER_AMX_CHECK_DISABLED));
    printf("SKIPPED: amx_test's canary on this CPU (CPUID lists no AMX-TILE/AMX-INT8)\n");
  } else if (info.failed_check == FER_AMX_CHECK_NONE || info.failed_check == FER_AMX_CHECK_CANARY) {
    CHECK(info.usable == feri_amx_canary()); /* the gate's verdict is the canary's, run again */
    CHECK(info.usable); /* a CPU that lists AMX and lets the process have it must multiply right */
  }
  fer_amx_info again;
  CHECK_STATUS(fer_amx_info_get(&again), FER_STATUS_OK);
  CHECK(memcmp(&info, &again, sizeof info) == 0); /* decided once */
  return feri_test_finish("amx_test");
}
