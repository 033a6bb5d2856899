/* config.c: fer_engine_config defaults, the one place FERRITE_* variables are read (from the
 * environment array a caller passes, at engine creation), and the checks of every field. */
#include "engine/config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_template.h"
#include "core/status.h"

fer_status fer_engine_config_init(fer_engine_config *c) {
  feri_error_clear();
  if (c == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_engine_config_init: config is NULL");
  memset(c, 0, sizeof *c);
  c->struct_size = sizeof *c;
  c->matmul = FER_MATMUL_I8;
  c->kv_layout = FER_KV_LAYOUT_SEQ_MAJOR;
  c->kv_policy = FER_KV_POLICY_FIXED_MAX;
  c->kv_dtype = FER_DTYPE_F16; /* KL 7e-7 nats against f32, 5,000x under the 8-bit route's: docs/BENCHMARKS.md, faithfulness */
  c->kv_min_bucket = 8;
  c->plan = FER_PLAN_ADDRESS_STABLE;
  c->kv_budget_bytes = 1ull << 30;
  c->max_seqs = 16;
  return FER_STATUS_OK;
}

typedef struct name_value {
  const char *name;
  int32_t value;
} name_value;

static const name_value MATMUL[] = {{"i8", FER_MATMUL_I8}, {"exact", FER_MATMUL_EXACT}, {NULL, 0}};
static const name_value LAYOUT[] = {{"head-major", FER_KV_LAYOUT_HEAD_MAJOR},
                                    {"seq-major", FER_KV_LAYOUT_SEQ_MAJOR},
                                    {"token-major", FER_KV_LAYOUT_TOKEN_MAJOR},
                                    {NULL, 0}};
static const name_value POLICY[] = {{"bucketed", FER_KV_POLICY_BUCKETED}, {"fixed", FER_KV_POLICY_FIXED_MAX}, {NULL, 0}};
static const name_value DTYPE[] = {
    {"f32", FER_DTYPE_F32}, {"f16", FER_DTYPE_F16}, {"bf16", FER_DTYPE_BF16}, {"q8_0", FER_DTYPE_Q8_0}, {NULL, 0}};
static const name_value WIRE[] = {{"f32", FER_TP_WIRE_F32}, {"q8_0", FER_TP_WIRE_Q8_0}, {NULL, 0}};
static const name_value PLAN[] = {{"off", FER_PLAN_OFF},
                                  {"unconditional", FER_PLAN_UNCONDITIONAL},
                                  {"address-stable", FER_PLAN_ADDRESS_STABLE},
                                  {NULL, 0}};

int feri_parse_device(const char *v, int32_t *device, uint32_t *index) {
  if (strcmp(v, "cpu") == 0) {
    *device = FER_DEVICE_CPU, *index = 0;
    return 1;
  }
  if (strncmp(v, "cuda", 4) != 0) return 0;
  if (v[4] == '\0') {
    *device = FER_DEVICE_CUDA, *index = 0;
    return 1;
  }
  if (v[4] != ':' || v[5] < '0' || v[5] > '9') return 0;
  char *end = NULL;
  errno = 0;
  const unsigned long n = strtoul(v + 5, &end, 10);
  if (errno != 0 || *end != '\0' || n > 4095) return 0;
  *device = FER_DEVICE_CUDA, *index = (uint32_t)n;
  return 1;
}

static int lookup(const name_value *t, const char *v, int32_t *out) {
  for (; t->name; t++)
    if (strcmp(t->name, v) == 0) {
      *out = t->value;
      return 1;
    }
  return 0;
}

const char *feri_engine_name_of(int what, int32_t value) {
  const name_value *t = what == 0 ? MATMUL : what == 1 ? LAYOUT : what == 2 ? POLICY : what == 3 ? DTYPE : PLAN;
  for (; t->name; t++)
    if (t->value == value) return t->name;
  return "?";
}

/* A byte count: digits with an optional K, M or G (binary) suffix. */
static int parse_bytes(const char *v, uint64_t *out) {
  char *end;
  errno = 0;
  if (*v < '0' || *v > '9') return 0;
  unsigned long long n = strtoull(v, &end, 10);
  uint64_t mul = 1;
  if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
  else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
  else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
  if (errno || *end != '\0' || n > UINT64_MAX / mul) return 0;
  *out = (uint64_t)n * mul;
  return 1;
}

static int parse_u32(const char *v, uint32_t *out) {
  uint64_t n;
  if (!parse_bytes(v, &n) || strpbrk(v, "KkMmGg") || n > UINT32_MAX) return 0;
  *out = (uint32_t)n;
  return 1;
}

fer_status feri_engine_config_apply_env(fer_engine_config *c, const char *const *env) {
  for (; env && *env; env++) {
    const char *kv = *env, *eq = strchr(kv, '=');
    if (strncmp(kv, "FERRITE_", 8) != 0 || !eq) continue;
    const size_t n = (size_t)(eq - kv);
    const char *v = eq + 1;
    int ok = 1, known = 1;
#define IS(name) (n == strlen(name) && memcmp(kv, name, n) == 0)
    if (IS("FERRITE_THREADS")) ok = parse_u32(v, &c->n_threads);
    else if (IS("FERRITE_MATMUL")) ok = lookup(MATMUL, v, &c->matmul);
    else if (IS("FERRITE_KV_LAYOUT")) ok = lookup(LAYOUT, v, &c->kv_layout);
    else if (IS("FERRITE_KV_POLICY")) ok = lookup(POLICY, v, &c->kv_policy);
    else if (IS("FERRITE_KV_DTYPE")) ok = lookup(DTYPE, v, &c->kv_dtype);
    else if (IS("FERRITE_KV_MIN_BUCKET")) ok = parse_u32(v, &c->kv_min_bucket);
    else if (IS("FERRITE_PLAN")) ok = lookup(PLAN, v, &c->plan);
    else if (IS("FERRITE_WEIGHT_BUDGET")) ok = parse_bytes(v, &c->weight_budget_bytes);
    else if (IS("FERRITE_KV_BUDGET")) ok = parse_bytes(v, &c->kv_budget_bytes);
    else if (IS("FERRITE_MAX_SEQS")) ok = parse_u32(v, &c->max_seqs);
    else if (IS("FERRITE_MAX_TOKENS")) ok = parse_u32(v, &c->max_tokens);
    else if (IS("FERRITE_CHAT_TEMPLATE")) ok = *v != '\0', c->chat_template_path = v;
    else if (IS("FERRITE_TEMPLATE_NOW")) ok = feri_chat_parse_date(v, &c->chat_template_now_unix);
    else if (IS("FERRITE_TENSOR_PARALLEL")) ok = parse_u32(v, &c->tensor_parallel);
    else if (IS("FERRITE_TP_TIMEOUT_MS")) ok = parse_u32(v, &c->tensor_parallel_timeout_ms);
    else if (IS("FERRITE_PIPELINE_PARALLEL")) ok = parse_u32(v, &c->pipeline_parallel);
    else if (IS("FERRITE_TP_WIRE")) ok = lookup(WIRE, v, &c->tensor_parallel_wire);
    else if (IS("FERRITE_DEVICE")) ok = feri_parse_device(v, &c->device, &c->device_index);
    else known = 0; /* FERRITE_DATA_DIR and the like belong to tools */
#undef IS
    if (known && !ok)
      return feri_fail(FER_STATUS_INVALID_ARG, "fer_engine_create: %.*s has the bad value '%.64s'", (int)n, kv, v);
  }
  return FER_STATUS_OK;
}

fer_status feri_engine_config_check(const fer_engine_config *c) {
  static const char *const fn = "fer_engine_create";
  int32_t unused;
  if (c->model_path == NULL && (c->model_image == NULL || c->model_image_bytes == 0))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: neither model_path nor model_image is set", fn);
  if (c->model_path == NULL && c->weight_budget_bytes != 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: weight_budget_bytes needs a model file (model_path)", fn);
  if (c->n_threads > 1024) return feri_fail(FER_STATUS_INVALID_ARG, "%s: n_threads %u > 1024", fn, c->n_threads);
  if (!lookup(MATMUL, feri_engine_name_of(0, c->matmul), &unused))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: matmul %d is not a fer_matmul_mode_code", fn, (int)c->matmul);
  if (!lookup(LAYOUT, feri_engine_name_of(1, c->kv_layout), &unused))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: kv_layout %d is not a fer_kv_layout_code", fn, (int)c->kv_layout);
  if (!lookup(POLICY, feri_engine_name_of(2, c->kv_policy), &unused))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: kv_policy %d is not a fer_kv_policy_code", fn, (int)c->kv_policy);
  if (!lookup(DTYPE, feri_engine_name_of(3, c->kv_dtype), &unused))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: kv_dtype %d is not F32, F16, BF16 or Q8_0", fn, (int)c->kv_dtype);
  if (!lookup(PLAN, feri_engine_name_of(4, c->plan), &unused))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: plan %d is not a fer_plan_policy_code", fn, (int)c->plan);
  if (c->kv_min_bucket == 0) return feri_fail(FER_STATUS_INVALID_ARG, "%s: kv_min_bucket is 0", fn);
  if (c->kv_budget_bytes == 0) return feri_fail(FER_STATUS_INVALID_ARG, "%s: kv_budget_bytes is 0", fn);
  if (c->max_seqs == 0 || c->max_seqs > 4096)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: max_seqs %u (1 .. 4096)", fn, c->max_seqs);
  if (c->max_tokens > (1u << 20)) return feri_fail(FER_STATUS_INVALID_ARG, "%s: max_tokens %u > 2^20", fn, c->max_tokens);
  if (c->chat_template_path && !*c->chat_template_path)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: chat_template_path is empty", fn);
  if (c->device != FER_DEVICE_CPU && c->device != FER_DEVICE_CUDA)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: device %d is not a fer_device_code (0 cpu, 1 cuda)", fn, (int)c->device);
  if (c->device_index > 4095) return feri_fail(FER_STATUS_INVALID_ARG, "%s: device_index %u (0 .. 4095)", fn, c->device_index);
  if (c->tensor_parallel_wire != FER_TP_WIRE_F32 && c->tensor_parallel_wire != FER_TP_WIRE_Q8_0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: tensor_parallel_wire %d is not a fer_tp_wire_code (0 f32, 1 q8_0)", fn,
                     (int)c->tensor_parallel_wire);
  if (c->tensor_parallel > 4096 || c->pipeline_parallel > 4096)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: tensor_parallel %u, pipeline_parallel %u (each at most 4096)", fn,
                     c->tensor_parallel, c->pipeline_parallel);
  /* both: pipeline stages of tensor-parallel ranks, tp x pp processes */
  const uint32_t ranks = (c->tensor_parallel > 1 ? c->tensor_parallel : 1) * (c->pipeline_parallel > 1 ? c->pipeline_parallel : 1);
  const char *what = c->tensor_parallel > 1 && c->pipeline_parallel > 1 ? "tensor_parallel x pipeline_parallel"
                     : c->tensor_parallel > 1                          ? "tensor_parallel"
                                                                       : "pipeline_parallel";
  if (ranks > 1 && c->model_path == NULL)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: %s %u needs a model file (model_path) every rank opens", fn, what, ranks);
  if (ranks > 1 && c->weight_budget_bytes != 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: %s %u maps the file's weights (weight_budget_bytes must be 0)", fn, what,
                     ranks);
  if (ranks > 4096) return feri_fail(FER_STATUS_INVALID_ARG, "%s: %s %u > 4096", fn, what, ranks);
  return FER_STATUS_OK;
}
