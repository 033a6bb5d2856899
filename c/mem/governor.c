/* governor.c: fer_governor, a byte budget with charges by role and transactional growth grants.
 * Every refusal happens before any state changes, so "refused changes nothing" holds by
 * construction; the Rust property test drives random workloads to check it. */
#include "mem/governor.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"

struct fer_governor {
  uint64_t budget;
  uint64_t charged;
  uint64_t reserved;
  uint64_t by_role[FER_MEM_ROLE_COUNT];
  uint64_t refusals;
  uint32_t open_grants;
};

struct fer_grant {
  fer_governor *gov;
  fer_mem_role role;
  uint64_t headroom;
};

static int role_ok(fer_mem_role r) { return r >= 0 && r < FER_MEM_ROLE_COUNT; }

fer_status fer_governor_create(uint64_t budget, fer_governor **out) {
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_governor_create: out_governor is NULL");
  *out = NULL;
  if (budget == 0) return feri_fail(FER_STATUS_INVALID_ARG, "fer_governor_create: a budget of 0 bytes admits nothing");
  fer_governor *g = calloc(1, sizeof *g);
  if (g == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "fer_governor_create: out of memory");
  g->budget = budget;
  *out = g;
  return FER_STATUS_OK;
}

fer_status fer_governor_free(fer_governor *g) {
  feri_error_clear();
  if (g == NULL) return FER_STATUS_OK;
  if (g->charged > 0 || g->open_grants > 0)
    return feri_fail(FER_STATUS_BUSY, "fer_governor_free: %llu bytes charged and %u grants open",
                     (unsigned long long)g->charged, g->open_grants);
  free(g);
  return FER_STATUS_OK;
}

fer_status fer_governor_get_stats(const fer_governor *g, fer_governor_stats *out) {
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_governor_get_stats: out_stats is NULL");
  memset(out, 0, sizeof *out);
  if (g == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_governor_get_stats: governor is NULL");
  out->budget_bytes = g->budget;
  out->charged_bytes = g->charged;
  out->reserved_bytes = g->reserved;
  memcpy(out->charged_by_role, g->by_role, sizeof g->by_role);
  out->refusals = g->refusals;
  out->open_grants = g->open_grants;
  return FER_STATUS_OK;
}

/* Whether bytes more fit: charged + reserved + bytes <= budget, without overflow. */
static int fits(const fer_governor *g, uint64_t bytes) {
  uint64_t used = g->charged + g->reserved; /* <= budget always */
  return bytes <= g->budget - used;
}

fer_status feri_governor_charge(fer_governor *g, fer_mem_role role, uint64_t bytes, const char *fn) {
  if (!fits(g, bytes)) {
    g->refusals++;
    return feri_fail(FER_STATUS_BUDGET_EXCEEDED,
                     "%s: %llu bytes do not fit: %llu charged + %llu reserved of a %llu-byte budget", fn,
                     (unsigned long long)bytes, (unsigned long long)g->charged, (unsigned long long)g->reserved,
                     (unsigned long long)g->budget);
  }
  g->charged += bytes;
  g->by_role[role] += bytes;
  return FER_STATUS_OK;
}

void feri_governor_release(fer_governor *g, fer_mem_role role, uint64_t bytes) {
  g->charged -= bytes;
  g->by_role[role] -= bytes;
}

fer_status fer_governor_charge(fer_governor *g, fer_mem_role role, uint64_t bytes) {
  static const char *const fn = "fer_governor_charge";
  feri_error_clear();
  if (g == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: governor is NULL", fn);
  if (!role_ok(role)) return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown role %d", fn, (int)role);
  return feri_governor_charge(g, role, bytes, fn);
}

fer_status fer_governor_release(fer_governor *g, fer_mem_role role, uint64_t bytes) {
  static const char *const fn = "fer_governor_release";
  feri_error_clear();
  if (g == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: governor is NULL", fn);
  if (!role_ok(role)) return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown role %d", fn, (int)role);
  if (bytes > g->by_role[role])
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: releasing %llu bytes but role %d holds %llu", fn,
                     (unsigned long long)bytes, (int)role, (unsigned long long)g->by_role[role]);
  feri_governor_release(g, role, bytes);
  return FER_STATUS_OK;
}

fer_status fer_governor_grant_begin(fer_governor *g, fer_mem_role role, uint64_t headroom, fer_grant **out) {
  static const char *const fn = "fer_governor_grant_begin";
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_grant is NULL", fn);
  *out = NULL;
  if (g == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: governor is NULL", fn);
  if (!role_ok(role)) return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown role %d", fn, (int)role);
  if (!fits(g, headroom)) {
    g->refusals++;
    return feri_fail(FER_STATUS_BUDGET_EXCEEDED,
                     "%s: headroom of %llu bytes does not fit: %llu charged + %llu reserved of a %llu-byte budget",
                     fn, (unsigned long long)headroom, (unsigned long long)g->charged,
                     (unsigned long long)g->reserved, (unsigned long long)g->budget);
  }
  fer_grant *gr = malloc(sizeof *gr);
  if (gr == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  gr->gov = g;
  gr->role = role;
  gr->headroom = headroom;
  g->reserved += headroom;
  g->open_grants++;
  *out = gr;
  return FER_STATUS_OK;
}

fer_status fer_grant_commit(fer_grant *gr, uint64_t used) {
  feri_error_clear();
  if (gr == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_grant_commit: grant is NULL");
  if (used > gr->headroom)
    return feri_fail(FER_STATUS_INVALID_ARG, "fer_grant_commit: used %llu bytes > headroom %llu",
                     (unsigned long long)used, (unsigned long long)gr->headroom);
  fer_governor *g = gr->gov;
  g->reserved -= gr->headroom; /* the headroom becomes the charge: it fitted, so `used` fits */
  g->charged += used;
  g->by_role[gr->role] += used;
  g->open_grants--;
  free(gr);
  return FER_STATUS_OK;
}

fer_status fer_grant_cancel(fer_grant *gr) {
  feri_error_clear();
  if (gr == NULL) return FER_STATUS_OK;
  gr->gov->reserved -= gr->headroom;
  gr->gov->open_grants--;
  free(gr);
  return FER_STATUS_OK;
}

fer_status fer_governor_admit_sequence(fer_governor *g, const fer_kv_geometry *geometry, uint64_t max_tokens,
                                       uint64_t granule_bytes, uint64_t *out_bytes) {
  static const char *const fn = "fer_governor_admit_sequence";
  feri_error_clear();
  if (out_bytes == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_bytes is NULL", fn);
  *out_bytes = 0;
  if (g == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: governor is NULL", fn);
  uint64_t granules, bytes;
  fer_status st = fer_kv_committed_granules(geometry, max_tokens, granule_bytes, &granules);
  if (st != FER_STATUS_OK) return st;
  if (__builtin_mul_overflow(granules, granule_bytes, &bytes))
    return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: projected bytes overflow", fn);
  if (!fits(g, bytes)) {
    g->refusals++;
    return feri_fail(FER_STATUS_BUDGET_EXCEEDED,
                     "%s: sequence refused: projected KV commit %llu bytes (%llu granules of %llu) at %llu tokens; "
                     "%llu charged + %llu reserved of a %llu-byte budget",
                     fn, (unsigned long long)bytes, (unsigned long long)granules, (unsigned long long)granule_bytes,
                     (unsigned long long)max_tokens, (unsigned long long)g->charged,
                     (unsigned long long)g->reserved, (unsigned long long)g->budget);
  }
  g->charged += bytes;
  g->by_role[FER_MEM_ROLE_KV] += bytes;
  *out_bytes = bytes;
  return FER_STATUS_OK;
}
