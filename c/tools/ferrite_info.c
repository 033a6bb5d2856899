/* ferrite_info.c: prints the ABI version, build, CPU features and CUDA state, then times the
 * kernels on the original benchmark shapes and reports each as a fraction of this machine's memory
 * bandwidth measured by a streaming copy in the same run. A quick look, not the benchmark of
 * record: that is `make bench` (criterion), whose results go to docs/BENCHMARKS.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/dtype.h"
#include "ferrite.h"
#include "tools/args.h"
#include "tools/commands.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef int (*bench_fn)(void *ctx);

/* Median over 9 batches of the time per call; each batch runs for at least `batch_s`. */
static double time_per_call(bench_fn fn, void *ctx, double batch_s) {
  double t[9];
  long iters = 1;
  for (;;) { /* calibrate */
    double t0 = now_s();
    for (long i = 0; i < iters; i++) fn(ctx);
    if (now_s() - t0 >= batch_s / 4 || iters > (1L << 30)) break;
    iters *= 2;
  }
  iters *= 4;
  for (int b = 0; b < 9; b++) {
    double t0 = now_s();
    for (long i = 0; i < iters; i++) fn(ctx);
    t[b] = (now_s() - t0) / (double)iters;
  }
  for (int i = 1; i < 9; i++)
    for (int j = i; j > 0 && t[j - 1] > t[j]; j--) {
      double x = t[j];
      t[j] = t[j - 1];
      t[j - 1] = x;
    }
  return t[4];
}

typedef struct copy_ctx {
  const float *src;
  float *dst;
  size_t n;
} copy_ctx;

/* A plain streaming copy: the ceiling the kernels are measured against. */
static int copy_once(void *ctx) {
  copy_ctx *c = ctx;
  for (size_t i = 0; i < c->n; i++) c->dst[i] = c->src[i];
  __asm__ volatile("" ::: "memory");
  return 0;
}

typedef struct kernel_ctx {
  int kind; /* 0 add, 1 gather, 2 reduce_mean */
  fer_tensor a, b, out;
} kernel_ctx;

static int kernel_once(void *ctx) {
  kernel_ctx *k = ctx;
  switch (k->kind) {
    case 0: return fer_add(NULL, &k->a, &k->b, &k->out);
    case 1: return fer_gather(NULL, &k->a, &k->b, &k->out);
    default: return fer_reduce_mean(NULL, &k->a, &k->out);
  }
}

/* The original benchmark generator: element i is ((i % 251) - 125) / 64. */
static void *float_values(fer_dtype dt, size_t n) {
  size_t es = dt == FER_DTYPE_F32 ? 4 : 2;
  unsigned char *p = malloc(n * es);
  if (p == NULL) return NULL;
  for (size_t i = 0; i < n; i++) {
    float v = (float)((int)(i % 251) - 125) / 64.0f;
    if (dt == FER_DTYPE_F32) memcpy(p + 4 * i, &v, 4);
    else {
      uint16_t h = dt == FER_DTYPE_F16 ? feri_f32_to_f16(v) : feri_f32_to_bf16(v);
      memcpy(p + 2 * i, &h, 2);
    }
  }
  return p;
}

static const char *dtype_name(fer_dtype dt) {
  return dt == FER_DTYPE_F32 ? "f32" : dt == FER_DTYPE_F16 ? "f16" : "bf16";
}

static void print_features(void) {
  static const struct { uint64_t bit; const char *name; } f[] = {
      {FER_CPU_FEATURE_SSE42, "sse4.2"}, {FER_CPU_FEATURE_AVX, "avx"},
      {FER_CPU_FEATURE_AVX2, "avx2"},    {FER_CPU_FEATURE_FMA, "fma"},
      {FER_CPU_FEATURE_F16C, "f16c"},    {FER_CPU_FEATURE_AVX512F, "avx512f"},
      {FER_CPU_FEATURE_AVX512BW, "avx512bw"}, {FER_CPU_FEATURE_AVX512BF16, "avx512bf16"},
      {FER_CPU_FEATURE_AVXVNNI, "avx-vnni"},  {FER_CPU_FEATURE_AVX512VL, "avx512vl"},
      {FER_CPU_FEATURE_AVX512VNNI, "avx512vnni"}, {FER_CPU_FEATURE_AVX512DQ, "avx512dq"}};
  uint64_t have = fer_cpu_features();
  printf("cpu features : ");
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (have & f[i].bit) printf("%s ", f[i].name);
  printf("\n");
}

const char feri_info_usage[] =
    "ferrite info [--full]       the build, the CPU, CUDA and a quick kernel table (--full: longer runs)\n"
    "ferrite info MODEL.gguf     what a model file holds and whether ferrite can run it\n";

int feri_cmd_info(int argc, char **argv) {
  const int full = argc == 2 && strcmp(argv[1], "--full") == 0;
  for (int i = 1; i < argc; i++)
    if (feri_arg_is_help(argv[i])) {
      feri_arg_usage(stdout, feri_info_usage, true);
      return 0;
    }
  if (argc > 2 || (argc == 2 && !full && argv[1][0] == '-')) {
    fprintf(stderr, "ferrite info: %s \"%s\" (see ferrite info --help)\n",
            argc > 2 ? "one argument at most, got also" : "unknown option", argv[argc > 2 ? 2 : 1]);
    return 2;
  }
  if (argc == 2 && !full) {
    /* refused before the GGUF reader opens it: a FIFO would block that open */
    const int fd = feri_arg_open_regular("info", NULL, argv[1], NULL);
    if (fd < 0) return 1;
    close(fd);
    return feri_cmd_model_info(argv[1]);
  }
  double batch_s = full ? 0.2 : 0.02;
  printf("ferrite info\n");
  printf("abi version  : %u (header %d)\n", fer_abi_version(), (int)FER_ABI_VERSION);
  printf("version      : %s\n", fer_version_string());
  printf("build        : %s\n", fer_build_info());
  print_features();
  fer_threadpool *pool = NULL;
  fer_isa isa = FER_ISA_PORTABLE;
  if (fer_threadpool_create(NULL, &pool) == FER_STATUS_OK) fer_threadpool_isa(pool, &isa);
  uint32_t nt = 0;
  fer_threadpool_n_threads(pool, &nt);
  fer_threadpool_free(pool);
  const char *isa_name = isa == FER_ISA_AVX512 ? "avx512+avx2+fma+f16c" : isa == FER_ISA_AVX2 ? "avx2+fma+f16c" : "portable";
  printf("kernel isa   : %s (default pool: %u threads)\n", isa_name, nt);
  fer_amx_info amx;
  if (fer_amx_info_get(&amx) == FER_STATUS_OK) printf("amx          : %s\n", amx.reason);
  int32_t ndev = 0;
  fer_status cst = fer_cuda_device_count(&ndev);
  printf("cuda         : %s; %s (%d device%s)\n", fer_cuda_is_built() ? "built in" : "not built",
         fer_status_str(cst), ndev, ndev == 1 ? "" : "s");

  /* Ceiling: copy 64 MiB, far beyond any cache of this machine class. */
  copy_ctx cc = {.n = (64u << 20) / 4};
  cc.src = float_values(FER_DTYPE_F32, cc.n);
  cc.dst = calloc(cc.n, 4);
  if (cc.src == NULL || cc.dst == NULL) return 1;
  double tc = time_per_call(copy_once, &cc, batch_s * 5);
  double ceiling = 2.0 * (double)cc.n * 4 / tc; /* bytes read + written per second */
  printf("\nstreaming copy 64 MiB: %.1f GB/s (read + write), the ceiling below\n\n", ceiling / 1e9);
  printf("%-52s %12s %10s %9s\n", "scenario (single thread, pool NULL)", "time/call", "GB/s", "ceiling");

  static const struct { int kind; const char *name; int64_t rows, cols, idx; } shapes[] = {
      {0, "add/small", 1, 1024, 0},       {0, "add/medium", 256, 1024, 0},
      {0, "add/large", 1024, 4096, 0},    {1, "gather/small", 4096, 128, 32},
      {1, "gather/medium", 16384, 256, 128}, {1, "gather/large", 32768, 512, 256},
      {2, "reduce_mean/small", 32, 128, 0}, {2, "reduce_mean/medium", 128, 512, 0},
      {2, "reduce_mean/large", 256, 1024, 0}};
  const fer_dtype dts[] = {FER_DTYPE_F32, FER_DTYPE_F16, FER_DTYPE_BF16};
  int failures = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    for (int d = 0; d < 3; d++) {
      fer_dtype dt = dts[d];
      size_t es = dt == FER_DTYPE_F32 ? 4 : 2;
      int64_t rows = shapes[s].rows, cols = shapes[s].cols;
      kernel_ctx k = {.kind = shapes[s].kind};
      void *a = float_values(dt, (size_t)(rows * cols)), *b = NULL, *out = NULL;
      double bytes = 0;
      const int64_t sa[] = {rows, cols}, sb[] = {cols};
      int64_t param;
      if (k.kind == 0) {
        b = float_values(dt, (size_t)cols);
        out = malloc((size_t)(rows * cols) * es);
        fer_tensor_init_contiguous(&k.a, a, dt, rows == 1 ? 1 : 2, rows == 1 ? sb : sa);
        fer_tensor_init_contiguous(&k.b, b, dt, 1, sb);
        fer_tensor_init_contiguous(&k.out, out, dt, rows == 1 ? 1 : 2, rows == 1 ? sb : sa);
        bytes = (double)(2 * rows * cols + cols) * (double)es;
        param = rows * cols;
      } else if (k.kind == 1) {
        int64_t n = shapes[s].idx;
        int64_t *idx = malloc((size_t)n * 8);
        for (int64_t i = 0; i < n; i++) idx[i] = (i * 97) % rows;
        b = idx;
        out = malloc((size_t)(n * cols) * es);
        const int64_t si[] = {n}, so[] = {n, cols};
        fer_tensor_init_contiguous(&k.a, a, dt, 2, sa);
        fer_tensor_init_contiguous(&k.b, idx, FER_DTYPE_I64, 1, si);
        fer_tensor_init_contiguous(&k.out, out, dt, 2, so);
        bytes = (double)(2 * n * cols) * (double)es + (double)n * 8;
        param = n * cols;
      } else {
        out = malloc((size_t)rows * es);
        const int64_t so[] = {rows, 1};
        fer_tensor_init_contiguous(&k.a, a, dt, 2, sa);
        fer_tensor_init_contiguous(&k.out, out, dt, 2, so);
        bytes = (double)(rows * cols + rows) * (double)es;
        param = rows * cols;
      }
      fer_status st = (fer_status)kernel_once(&k);
      char name[96];
      snprintf(name, sizeof name, "%s_%s_threads=1-internal/%lld", shapes[s].name, dtype_name(dt),
               (long long)param);
      if (st != FER_STATUS_OK) {
        printf("%-52s FAILED: %s\n", name, fer_status_str(st));
        failures++;
      } else {
        double t = time_per_call(kernel_once, &k, batch_s);
        double bw = bytes / t;
        printf("%-52s %9.2f us %10.1f %8.0f%%\n", name, t * 1e6, bw / 1e9, 100.0 * bw / ceiling);
      }
      free(a), free(b), free(out);
    }
  }
  printf("\nGB/s counts bytes read + written once per call; small shapes live in cache and can pass\n"
         "the DRAM ceiling. Numbers of record: docs/BENCHMARKS.md (criterion, `make bench`).\n");
  free((void *)cc.src);
  free(cc.dst);
  return failures ? 1 : 0;
}
