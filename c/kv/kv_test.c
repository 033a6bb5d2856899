/* kv_test.c: the paged mode's table growth near 2^32 entries (arithmetic only: no table that large
 * is allocated) and its out-parameters on failure.
 * EVIDENCE: C-KV-009, C-KV-010 */
#include <stdint.h>

#include "kv/pages.h"
#include "testing/check.h"

static uint32_t cap_for(uint32_t cap, uint32_t n) {
  uint32_t out = 7;
  CHECK_STATUS(feri_kv_pages_table_cap(cap, n, "kv_test", &out), FER_STATUS_OK);
  return out;
}

/* A 32-bit capacity doubled past 2^31 wrapped to 0 and looped for ever: growth is computed in 64
 * bits and stops at UINT32_MAX entries, the most a table of 32-bit page ids can need. */
static void table_growth(void) {
  CHECK(cap_for(0, 1) == 16);
  CHECK(cap_for(16, 16) == 16);
  CHECK(cap_for(16, 17) == 32);
  CHECK(cap_for(5, 3) == 5);
  CHECK(cap_for(1u << 30, 1u << 31) == 1u << 31);
  CHECK(cap_for(1u << 31, (1u << 31) + 1) == UINT32_MAX);
  CHECK(cap_for(16, UINT32_MAX) == UINT32_MAX);
  CHECK(cap_for(0, UINT32_MAX) == UINT32_MAX);
  CHECK(cap_for(UINT32_MAX - 1, UINT32_MAX) == UINT32_MAX);
}

static void table_out_params(void) {
  fer_kv_pages *p = NULL;
  CHECK_STATUS(fer_kv_pages_create(8, 4, &p), FER_STATUS_OK);
  uint32_t id = 0;
  CHECK_STATUS(fer_kv_pages_seq_create(p, &id), FER_STATUS_OK);
  CHECK_STATUS(fer_kv_pages_append(p, id, 9), FER_STATUS_OK); /* 3 pages */
  size_t n = 99;
  uint64_t tokens = 99;
  /* the size query: BUFFER_TOO_SMALL with the count needed */
  CHECK_STATUS(fer_kv_pages_table(p, id, NULL, 0, &n, &tokens), FER_STATUS_BUFFER_TOO_SMALL);
  CHECK(n == 3 && tokens == 9);
  /* room claimed but no buffer: NULL_ARG, out-parameters zeroed */
  n = 99, tokens = 99;
  CHECK_STATUS(fer_kv_pages_table(p, id, NULL, 8, &n, &tokens), FER_STATUS_NULL_ARG);
  CHECK(n == 0 && tokens == 0);
  char msg[256];
  size_t len = 0;
  fer_last_error_message(msg, sizeof msg, &len);
  CHECK(len > 0);
  /* a NULL pool: ids are UINT32_MAX, counts zero */
  uint32_t none = 5;
  CHECK_STATUS(fer_kv_pages_seq_create(NULL, &none), FER_STATUS_NULL_ARG);
  CHECK(none == UINT32_MAX);
  none = 5;
  CHECK_STATUS(fer_kv_pages_fork(NULL, 0, &none), FER_STATUS_NULL_ARG);
  CHECK(none == UINT32_MAX);
  n = 99, tokens = 99;
  CHECK_STATUS(fer_kv_pages_table(NULL, 0, NULL, 0, &n, &tokens), FER_STATUS_NULL_ARG);
  CHECK(n == 0 && tokens == 0);
  CHECK_STATUS(fer_kv_pages_seq_free(p, id), FER_STATUS_OK);
  CHECK_STATUS(fer_kv_pages_free(p), FER_STATUS_OK);
}

int main(void) {
  table_growth();
  table_out_params();
  return feri_test_finish("kv_test");
}
