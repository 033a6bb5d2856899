/* mem_test.c: commit geometry against hand-computed floors, and the CPU fer_vmm against the
 * operating system's own accounting (st_blocks of the memfd).
 * EVIDENCE: C-MEM-001, C-MEM-002, C-MEM-003, C-MEM-004, C-MEM-005, C-MEM-006, C-MEM-007 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testing/check.h"

static const uint64_t MiB = 1u << 20, G = 2u << 20;

static uint64_t covering(const fer_byte_range *r, size_t n, uint64_t g) {
  uint64_t out = 99;
  CHECK_STATUS(fer_granules_covering(r, n, g, &out), FER_STATUS_OK);
  return out;
}

static void granules_covering(void) {
  fer_byte_range r[4] = {{0, 1}, {G - 1, 2}, {5 * G, 0}, {3 * G + 7, G}};
  CHECK(covering(r, 1, G) == 1);
  CHECK(covering(r, 2, G) == 2);    /* [0,1) and [G-1, G+1): windows 0 and 1 */
  CHECK(covering(r, 3, G) == 2);    /* an empty range counts nothing */
  CHECK(covering(r, 4, G) == 4);    /* plus windows 3 and 4 */
  CHECK(covering(NULL, 0, G) == 0);
  fer_byte_range same[2] = {{10, 10}, {15, 100}};
  CHECK(covering(same, 2, G) == 1); /* overlapping ranges in one window count once */
  fer_byte_range over[1] = {{UINT64_MAX - 1, 5}};
  uint64_t out;
  CHECK_STATUS(fer_granules_covering(over, 1, G, &out), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_granules_covering(r, 1, 0, &out), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_granules_covering(NULL, 1, G, &out), FER_STATUS_NULL_ARG);
}

static fer_kv_geometry geom(fer_kv_layout layout, uint32_t layers, uint32_t heads, uint32_t dim, uint64_t cap) {
  fer_kv_geometry g = {.struct_size = sizeof g, .layout = layout, .n_layers = layers, .n_kv_heads = heads,
                       .head_dim = dim, .elem_bytes = 2, .capacity_tokens = cap};
  return g;
}

static uint64_t committed(fer_kv_geometry g, uint64_t live) {
  uint64_t n = 0;
  CHECK_STATUS(fer_kv_committed_granules(&g, live, G, &n), FER_STATUS_OK);
  return n;
}

/* The original's floor table (original-system.md B.3): one live token, fixed 32,768-token stride. */
static void kv_floors(void) {
  /* qwen14b: 48 layers, 8 KV heads, head_dim 128, fp16 */
  CHECK(committed(geom(FER_KV_LAYOUT_HEAD_MAJOR, 48, 8, 128, 32768), 1) == 768);
  CHECK(committed(geom(FER_KV_LAYOUT_SEQ_MAJOR, 48, 8, 128, 32768), 1) == 96);
  CHECK(committed(geom(FER_KV_LAYOUT_TOKEN_MAJOR, 48, 8, 128, 32768), 1) == 1);
  /* per binding: 8 granules (16 MiB) head-major vs 1 (2 MiB) seq-major */
  CHECK(committed(geom(FER_KV_LAYOUT_HEAD_MAJOR, 1, 8, 128, 32768), 1) == 2 * 8);
  CHECK(committed(geom(FER_KV_LAYOUT_SEQ_MAJOR, 1, 8, 128, 32768), 1) == 2 * 1);
  /* qwen2.5-0.5b: 24 layers, 2 KV heads, head_dim 64: 192 MiB vs 96 MiB model-wide */
  CHECK(committed(geom(FER_KV_LAYOUT_HEAD_MAJOR, 24, 2, 64, 32768), 1) * G == 192 * MiB);
  CHECK(committed(geom(FER_KV_LAYOUT_SEQ_MAJOR, 24, 2, 64, 32768), 1) * G == 96 * MiB);
  /* empty and full */
  CHECK(committed(geom(FER_KV_LAYOUT_HEAD_MAJOR, 24, 2, 64, 32768), 0) == 0);
  CHECK(committed(geom(FER_KV_LAYOUT_SEQ_MAJOR, 24, 2, 64, 32768), 32768) == 48 * 4); /* 8 MiB each */
  /* bad geometry */
  fer_kv_geometry bad = geom(7, 1, 1, 1, 1);
  uint64_t n;
  CHECK_STATUS(fer_kv_committed_granules(&bad, 0, G, &n), FER_STATUS_INVALID_ARG);
  bad = geom(FER_KV_LAYOUT_SEQ_MAJOR, 1, 1, 1, 4);
  CHECK_STATUS(fer_kv_committed_granules(&bad, 5, G, &n), FER_STATUS_INVALID_ARG);
  bad = geom(FER_KV_LAYOUT_TOKEN_MAJOR, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT64_MAX / 2);
  CHECK_STATUS(fer_kv_committed_granules(&bad, 0, G, &n), FER_STATUS_SIZE_OVERFLOW);
  bad.head_dim = 0;
  CHECK_STATUS(fer_kv_committed_granules(&bad, 0, G, &n), FER_STATUS_INVALID_ARG);
}

static fer_vmm_stats stats(fer_vmm *v) {
  fer_vmm_stats s;
  CHECK_STATUS(fer_vmm_get_stats(v, &s), FER_STATUS_OK);
  CHECK(s.ledger_bytes == s.os_bytes); /* the ledger agrees with the kernel at every step */
  return s;
}

/* A write through a read-only mapping must fault: done in a child process. */
static int write_faults(volatile char *p) {
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL); /* a sanitizer's handler would turn the fault into an exit code */
    p[0] = 1;
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

static void vmm_basics(void) {
  fer_vmm *v = NULL;
  CHECK_STATUS(fer_vmm_create(NULL, &v), FER_STATUS_OK);
  CHECK(stats(v).granule_bytes == G && stats(v).os_bytes == 0);
  uint64_t g0, g1;
  CHECK_STATUS(fer_vmm_granule_create(v, &g0), FER_STATUS_OK);
  CHECK_STATUS(fer_vmm_granule_create(v, &g1), FER_STATUS_OK);
  CHECK(stats(v).os_bytes == 2 * G && stats(v).live_granules == 2);
  fer_vmm_range *a = NULL, *b = NULL;
  CHECK_STATUS(fer_vmm_range_reserve(v, 3 * G - 5, &a), FER_STATUS_OK); /* rounds up to 3 windows */
  CHECK_STATUS(fer_vmm_range_reserve(v, G, &b), FER_STATUS_OK);
  char *pa, *pb;
  uint64_t na, nb;
  CHECK_STATUS(fer_vmm_range_base(a, (void **)&pa, &na), FER_STATUS_OK);
  CHECK_STATUS(fer_vmm_range_base(b, (void **)&pb, &nb), FER_STATUS_OK);
  CHECK(na == 3 * G && nb == G);
  /* One granule at two addresses: writes through one are seen through the other; the shared
   * granule costs nothing extra. */
  CHECK_STATUS(fer_vmm_map(a, 2 * G, g0, FER_VMM_ACCESS_READ_WRITE), FER_STATUS_OK);
  CHECK_STATUS(fer_vmm_map(b, 0, g0, FER_VMM_ACCESS_READ_ONLY), FER_STATUS_OK);
  memset(pa + 2 * G, 0x5a, G);
  CHECK(pb[0] == 0x5a && pb[G - 1] == 0x5a);
  CHECK(stats(v).os_bytes == 2 * G && stats(v).mapped_windows == 2);
  CHECK(write_faults(pb));          /* read-only enforced by the MMU */
  CHECK(!write_faults(pa + 2 * G)); /* read-write is writable */
  CHECK(pa[2 * G] == 1 && pb[0] == 1); /* MAP_SHARED: the child's write is the same memory */
  /* bad input, state unchanged */
  CHECK_STATUS(fer_vmm_map(a, G + 4096, g1, FER_VMM_ACCESS_READ_WRITE), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_vmm_map(a, 3 * G, g1, FER_VMM_ACCESS_READ_WRITE), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_vmm_map(a, 2 * G, g1, FER_VMM_ACCESS_READ_WRITE), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_vmm_map(a, 0, 77, FER_VMM_ACCESS_READ_WRITE), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_vmm_map(a, 0, g1, 9), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_vmm_unmap(a, 0), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_vmm_granule_release(v, g0), FER_STATUS_BUSY);
  CHECK_STATUS(fer_vmm_free(v), FER_STATUS_BUSY);
  /* frozen: map and unmap are BUSY, nothing changes */
  CHECK_STATUS(fer_vmm_set_frozen(v, true), FER_STATUS_OK);
  CHECK_STATUS(fer_vmm_map(a, 0, g1, FER_VMM_ACCESS_READ_WRITE), FER_STATUS_BUSY);
  CHECK_STATUS(fer_vmm_unmap(b, 0), FER_STATUS_BUSY);
  CHECK_STATUS(fer_vmm_range_free(b), FER_STATUS_BUSY);
  CHECK_STATUS(fer_vmm_set_frozen(v, false), FER_STATUS_OK);
  CHECK(stats(v).mapped_windows == 2);
  /* unmap, double unmap, release: the OS gives the bytes back */
  CHECK_STATUS(fer_vmm_unmap(b, 0), FER_STATUS_OK);
  CHECK_STATUS(fer_vmm_unmap(b, 0), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_vmm_range_free(a), FER_STATUS_OK); /* unmaps its window too */
  CHECK_STATUS(fer_vmm_granule_release(v, g0), FER_STATUS_OK);
  CHECK_STATUS(fer_vmm_granule_release(v, g0), FER_STATUS_INVALID_ARG);
  CHECK(stats(v).os_bytes == G);
  CHECK_STATUS(fer_vmm_granule_release(v, g1), FER_STATUS_OK);
  CHECK(stats(v).os_bytes == 0 && stats(v).live_granules == 0);
  CHECK_STATUS(fer_vmm_range_free(b), FER_STATUS_OK);
  CHECK_STATUS(fer_vmm_free(v), FER_STATUS_OK);
  CHECK_STATUS(fer_vmm_free(NULL), FER_STATUS_OK);
  /* options */
  fer_vmm_options o;
  fer_vmm_options_init(&o);
  o.granule_bytes = 12345;
  CHECK_STATUS(fer_vmm_create(&o, &v), FER_STATUS_INVALID_ARG);
  CHECK(v == NULL);
  o.granule_bytes = 4096;
  o.backend = FER_VMM_BACKEND_CUDA;
  fer_status cuda_st = fer_vmm_create(&o, &v);
  CHECK(cuda_st == FER_STATUS_NO_DEVICE || cuda_st == FER_STATUS_UNSUPPORTED || cuda_st == FER_STATUS_INVALID_ARG);
  if (cuda_st == FER_STATUS_OK) fer_vmm_free(v);
  v = NULL;
  o.backend = FER_VMM_BACKEND_CPU;
  o.max_granules = 2;
  CHECK_STATUS(fer_vmm_create(&o, &v), FER_STATUS_OK);
  CHECK_STATUS(fer_vmm_granule_create(v, &g0), FER_STATUS_OK);
  CHECK_STATUS(fer_vmm_granule_create(v, &g1), FER_STATUS_OK);
  uint64_t g2 = 0;
  CHECK_STATUS(fer_vmm_granule_create(v, &g2), FER_STATUS_BUDGET_EXCEEDED);
  CHECK(g2 == UINT64_MAX && stats(v).os_bytes == 2 * 4096);
  fer_vmm_granule_release(v, g0), fer_vmm_granule_release(v, g1);
  CHECK_STATUS(fer_vmm_free(v), FER_STATUS_OK);
}

/* The floors realised for real: one reservation per binding, a granule mapped over every window
 * that holds a live byte, and the kernel's count of the memfd's bytes equal to the geometry's.
 * (qwen2.5-0.5b geometry: 192 MiB head-major at most, so the test stays cheap.) */
static void floors_against_the_os(void) {
  const fer_kv_layout layouts[] = {FER_KV_LAYOUT_HEAD_MAJOR, FER_KV_LAYOUT_SEQ_MAJOR, FER_KV_LAYOUT_TOKEN_MAJOR};
  for (int li = 0; li < 3; li++) {
    fer_kv_geometry g = geom(layouts[li], 24, 2, 64, 32768);
    fer_vmm *v = NULL;
    CHECK_STATUS(fer_vmm_create(NULL, &v), FER_STATUS_OK);
    uint32_t nb = 0;
    size_t n = 0;
    fer_byte_range ranges[2];
    CHECK_STATUS(fer_kv_live_ranges(&g, 1, 0, ranges, 2, &n, &nb), FER_STATUS_OK);
    fer_vmm_range **rs = calloc(nb, sizeof *rs);
    uint64_t binding_bytes = (uint64_t)g.n_kv_heads * g.head_dim * g.elem_bytes * g.capacity_tokens *
                             (layouts[li] == FER_KV_LAYOUT_TOKEN_MAJOR ? 2u * g.n_layers : 1u);
    for (uint32_t b = 0; b < nb; b++) {
      CHECK_STATUS(fer_vmm_range_reserve(v, binding_bytes, &rs[b]), FER_STATUS_OK);
      CHECK_STATUS(fer_kv_live_ranges(&g, 1, b, ranges, 2, &n, NULL), FER_STATUS_OK);
      for (size_t i = 0; i < n; i++) {
        uint64_t off = ranges[i].offset / G * G, gid;
        CHECK_STATUS(fer_vmm_granule_create(v, &gid), FER_STATUS_OK);
        CHECK_STATUS(fer_vmm_map(rs[b], off, gid, FER_VMM_ACCESS_READ_WRITE), FER_STATUS_OK);
      }
    }
    fer_vmm_stats s = stats(v);
    CHECK(s.os_bytes == committed(g, 1) * G);
    for (uint32_t b = 0; b < nb; b++) CHECK_STATUS(fer_vmm_range_free(rs[b]), FER_STATUS_OK);
    for (uint64_t gid = 0; gid < s.live_granules; gid++) CHECK_STATUS(fer_vmm_granule_release(v, gid), FER_STATUS_OK);
    CHECK(stats(v).os_bytes == 0);
    CHECK_STATUS(fer_vmm_free(v), FER_STATUS_OK);
    free(rs);
  }
}

/* The original's prefix-sharing record (original-system.md B): one layer, 8 KV heads, head_dim 128,
 * f16, seq-major; a 1,024-token prefix (exactly one 2 MiB granule per binding) and a 1,024-token
 * private tail per sequence. Two sequences: 8 granules (16,777,216 bytes) independent, 6
 * (12,582,912) shared; a third sharer adds only its tail. The OS and the governor agree. Then
 * copy-on-write: a sharer writing into the prefix copies one granule, the others are untouched. */
static void prefix_sharing(void) {
  fer_vmm *v = NULL;
  fer_governor *gov = NULL;
  CHECK_STATUS(fer_vmm_create(NULL, &v), FER_STATUS_OK);
  CHECK_STATUS(fer_governor_create(1u << 30, &gov), FER_STATUS_OK);
  CHECK_STATUS(fer_vmm_set_governor(v, gov, FER_MEM_ROLE_KV), FER_STATUS_OK);
  enum { SEQS = 3, BINDINGS = 2 }; /* K and V of the one layer */
  fer_vmm_range *r[SEQS][BINDINGS];
  uint64_t prefix[BINDINGS], tail[SEQS][BINDINGS];
  for (int b = 0; b < BINDINGS; b++) CHECK_STATUS(fer_vmm_granule_create(v, &prefix[b]), FER_STATUS_OK);
  uint64_t expect_bytes[SEQS + 1] = {2 * G, 4 * G, 6 * G, 8 * G};
  for (int s = 0; s < SEQS; s++)
    for (int b = 0; b < BINDINGS; b++) {
      CHECK_STATUS(fer_vmm_range_reserve(v, 2 * G, &r[s][b]), FER_STATUS_OK);
      CHECK_STATUS(fer_vmm_map(r[s][b], 0, prefix[b], FER_VMM_ACCESS_READ_ONLY), FER_STATUS_OK);
      CHECK_STATUS(fer_vmm_granule_create(v, &tail[s][b]), FER_STATUS_OK);
      CHECK_STATUS(fer_vmm_map(r[s][b], G, tail[s][b], FER_VMM_ACCESS_READ_WRITE), FER_STATUS_OK);
      if (b == BINDINGS - 1) {
        fer_vmm_stats st = stats(v);
        fer_governor_stats gs;
        fer_governor_get_stats(gov, &gs);
        CHECK(st.os_bytes == expect_bytes[s + 1] && gs.charged_bytes == expect_bytes[s + 1]);
        if (s == 1) CHECK(st.os_bytes == 12582912); /* two sharers; independent would be 16,777,216 */
      }
    }
  /* The same two sequences without sharing: 8 granules. */
  CHECK(4 * 2 * G == 16777216);
  /* Copy-on-write: sequence 1 writes into its prefix of binding 0. */
  char *b1, *b0;
  uint64_t n;
  CHECK_STATUS(fer_vmm_range_base(r[1][0], (void **)&b1, &n), FER_STATUS_OK);
  CHECK_STATUS(fer_vmm_range_base(r[0][0], (void **)&b0, &n), FER_STATUS_OK);
  uint64_t fresh = 0, copied = 0;
  CHECK_STATUS(fer_vmm_copy_on_write(r[1][0], 0, &fresh, &copied), FER_STATUS_OK);
  CHECK(copied == G && fresh != prefix[0]);
  b1[5] = 42; /* writable now, private */
  CHECK(b0[5] == 0);
  CHECK(stats(v).os_bytes == 9 * G); /* exactly one granule more */
  uint64_t none = 0, none_copied = 1;
  CHECK_STATUS(fer_vmm_copy_on_write(r[1][0], G + 4096, &none, &none_copied), FER_STATUS_INVALID_ARG);
  CHECK(none == UINT64_MAX && none_copied == 0);
  /* teardown: everything released, the OS and the governor back at zero */
  for (int s = 0; s < SEQS; s++)
    for (int b = 0; b < BINDINGS; b++) {
      CHECK_STATUS(fer_vmm_range_free(r[s][b]), FER_STATUS_OK);
      CHECK_STATUS(fer_vmm_granule_release(v, tail[s][b]), FER_STATUS_OK);
    }
  for (int b = 0; b < BINDINGS; b++) CHECK_STATUS(fer_vmm_granule_release(v, prefix[b]), FER_STATUS_OK);
  CHECK_STATUS(fer_vmm_granule_release(v, fresh), FER_STATUS_OK);
  fer_governor_stats gs;
  fer_governor_get_stats(gov, &gs);
  CHECK(stats(v).os_bytes == 0 && gs.charged_bytes == 0);
  CHECK_STATUS(fer_vmm_free(v), FER_STATUS_OK);
  CHECK_STATUS(fer_governor_free(gov), FER_STATUS_OK);
}

int main(void) {
  prefix_sharing();
  granules_covering();
  kv_floors();
  vmm_basics();
  floors_against_the_os();
  return feri_test_finish("mem_test");
}
