/* prefetch_walk.c: does a software prefetch to a page that is not in the TLB get done, or is it
 * dropped? (Claim C-ATT-010.) For bursts of 4, 16 and 64 random lines of a 1 GiB region of 4 KiB
 * pages: flush the lines, read 64 MiB of another region (evicts the caches, the TLB entries and
 * the cached page-table lines), then act on each line (nothing, a load, or a prefetch of one
 * kind), wait about 10 us and time a load of every line again. A prefetch that was dropped
 * leaves that load as slow as after nothing (a page walk plus DRAM); one that was done makes it
 * as fast as after a load. Times are TSC ticks per line, rdtscp included.
 *
 * build: cc -O2 -o prefetch_walk scripts/kernels/prefetch_walk.c
 * usage: prefetch_walk [ROUNDS]   (default 40 rounds per burst size and action)
 * EVIDENCE: C-ATT-010 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <x86intrin.h>

static uint64_t ticks(void) {
  unsigned aux;
  return __rdtscp(&aux);
}

enum { ACT_NONE, ACT_LOAD, ACT_T0, ACT_T2, ACT_NTA, N_ACTS };

int main(int argc, char **argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 40;
  if (rounds <= 0) {
    fprintf(stderr, "usage: prefetch_walk [ROUNDS > 0]\n");
    return 2;
  }
  const size_t region = (size_t)1 << 30, evict = (size_t)64 << 20;
  char *r = mmap(NULL, region, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char *e = mmap(NULL, evict, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (r == MAP_FAILED || e == MAP_FAILED) {
    fprintf(stderr, "prefetch_walk: cannot map %zu + %zu bytes\n", region, evict);
    return 1;
  }
  /* 4 KiB pages, as the engine's memfd-backed KV cache gets on this machine */
  madvise(r, region, MADV_NOHUGEPAGE);
  madvise(e, evict, MADV_NOHUGEPAGE);
  memset(r, 1, region);
  memset(e, 2, evict);
  static const char *names[N_ACTS] = {"nothing", "load", "prefetcht0", "prefetcht2", "prefetchnta"};
  static const int bursts[3] = {4, 16, 64};
  uint64_t seed = 1;
  unsigned sink = 0;
  printf("ticks per line for a load ~10 us after the action (caches, TLB and page-table lines evicted first)\n");
  for (int bi = 0; bi < 3; bi++) {
    const int b = bursts[bi];
    printf("burst %2d:", b);
    for (int act = 0; act < N_ACTS; act++) {
      uint64_t total = 0;
      for (int round = 0; round < rounds; round++) {
        char *line[64];
        for (int i = 0; i < b; i++) {
          seed = seed * 6364136223846793005ull + 1442695040888963407ull;
          line[i] = r + (seed >> 20) % (region / 4096) * 4096 + 64 * ((seed >> 8) % 64);
          _mm_clflush(line[i]);
        }
        for (size_t k = 0; k < evict; k += 64) sink += (unsigned char)e[k];
        _mm_mfence();
        for (int i = 0; i < b; i++) {
          if (act == ACT_LOAD) sink += *(volatile unsigned char *)line[i];
          if (act == ACT_T0) _mm_prefetch(line[i], _MM_HINT_T0);
          if (act == ACT_T2) _mm_prefetch(line[i], _MM_HINT_T2);
          if (act == ACT_NTA) _mm_prefetch(line[i], _MM_HINT_NTA);
        }
        const uint64_t wait = ticks();
        while (ticks() - wait < 30000) {
        }
        const uint64_t t0 = ticks();
        for (int i = 0; i < b; i++) sink += *(volatile unsigned char *)line[i];
        total += ticks() - t0;
      }
      printf("  %s %.0f", names[act], (double)total / rounds / b);
    }
    printf("\n");
  }
  printf("(checksum %u)\n", sink & 1);
  return 0;
}
