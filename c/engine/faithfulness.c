/* faithfulness.c: see faithfulness.h. */
#include "engine/faithfulness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file.h"
#include "core/status.h"
#include "model/llama.h"

/* Positions evaluated per forward call: every route's logits of one chunk are held at once
 * (Gemma 3's 262,144-entry vocabulary: 32 MiB a route). */
enum { FAITH_CHUNK = 32, MAX_MESSAGES = 16, MAX_LINE = 8192 };

void feri_faith_corpus_free(feri_faith_corpus *c) {
  if (c == NULL) return;
  for (uint32_t i = 0; i < c->n_seqs; i++) free(c->seqs[i].ids);
  free(c->seqs);
  memset(c, 0, sizeof *c);
}

static fer_status corpus_add(feri_faith_corpus *c, const int32_t *ids, uint32_t n, int chat) {
  feri_faith_seq *s = realloc(c->seqs, (c->n_seqs + 1) * sizeof *s);
  if (s == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "faithfulness: no memory for the corpus");
  c->seqs = s;
  int32_t *copy = malloc((n ? n : 1) * sizeof *copy);
  if (copy == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "faithfulness: no memory for the corpus");
  memcpy(copy, ids, n * sizeof *copy);
  c->seqs[c->n_seqs++] = (feri_faith_seq){copy, n, chat};
  return FER_STATUS_OK;
}

/* Cleanup calls (fer_engine_free, feri_llama_close) clear the thread's last error: st's message is
 * kept across them and set again. */
typedef struct kept_error {
  char msg[512];
} kept_error;

static void keep_error(fer_status st, kept_error *k) {
  size_t len = 0;
  k->msg[0] = '\0';
  if (st != FER_STATUS_OK) fer_last_error_message(k->msg, sizeof k->msg, &len);
}

static fer_status restore_error(fer_status st, const kept_error *k) {
  return st == FER_STATUS_OK ? st : feri_fail(st, "%s", k->msg);
}

/* Tokenizes text with the model's special tokens (BOS where the model adds one). */
static fer_status encode(const fer_tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n) {
  *ids = NULL;
  fer_status st = fer_tokenizer_encode(tok, text, len, FER_ENCODE_ADD_SPECIAL, NULL, 0, n);
  if (st != FER_STATUS_OK && st != FER_STATUS_BUFFER_TOO_SMALL) return st;
  *ids = malloc((*n ? *n : 1) * sizeof **ids);
  if (*ids == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "faithfulness: no memory for %zu ids", *n);
  return fer_tokenizer_encode(tok, text, len, FER_ENCODE_ADD_SPECIAL, *ids, *n, n);
}

/* The whole regular file at path (feri_file_read_all: a FIFO or directory is refused, not
 * waited on) into *out, NUL-terminated (*out NULL on failure). */
static fer_status read_text(const char *path, char **out, size_t *len) {
  char *buf = NULL;
  *out = NULL;
  fer_status st = feri_file_read_all(path, "faithfulness", &buf, len);
  if (st != FER_STATUS_OK) return st;
  char *t = realloc(buf, *len + 1);
  if (t == NULL) {
    free(buf);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "faithfulness: no memory for %s", path);
  }
  t[*len] = '\0';
  *out = t;
  return FER_STATUS_OK;
}

/* "\n" in a message becomes a line break, in place. */
static void unescape(char *s) {
  char *w = s;
  for (const char *r = s; *r; r++) {
    if (r[0] == '\\' && r[1] == 'n') {
      *w++ = '\n';
      r++;
    } else {
      *w++ = *r;
    }
  }
  *w = '\0';
}

/* Renders and tokenizes one conversation of msgs[0..n) into the corpus. */
static fer_status add_conversation(fer_engine *e, const fer_tokenizer *tok, const fer_chat_message *msgs, size_t n,
                                   feri_faith_corpus *c) {
  size_t len = 0;
  fer_status st = fer_engine_chat_render(e, msgs, n, 0, NULL, 0, &len);
  if (st != FER_STATUS_OK && st != FER_STATUS_BUFFER_TOO_SMALL) return st;
  char *text = malloc(len + 1);
  if (text == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "faithfulness: no memory to render a conversation");
  st = fer_engine_chat_render(e, msgs, n, 0, text, len + 1, &len);
  int32_t *ids = NULL;
  size_t n_ids = 0;
  if (st == FER_STATUS_OK) st = encode(tok, text, len, &ids, &n_ids);
  if (st == FER_STATUS_OK) st = corpus_add(c, ids, (uint32_t)n_ids, 1);
  free(ids);
  free(text);
  return st;
}

static fer_status read_conversations(fer_engine *e, const fer_tokenizer *tok, const char *path, uint32_t max_conv,
                                     feri_faith_corpus *c) {
  size_t text_len = 0;
  char *text = NULL;
  fer_status rs = read_text(path, &text, &text_len);
  if (rs != FER_STATUS_OK) return rs;
  FILE *f = fmemopen(text, text_len + 1, "r");
  if (f == NULL) {
    free(text);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "faithfulness: cannot read %s", path);
  }
  static const char *const roles[] = {"system", "user", "assistant"};
  char *lines[MAX_MESSAGES] = {0};
  fer_chat_message msgs[MAX_MESSAGES];
  size_t n = 0;
  uint32_t done = 0;
  char line[MAX_LINE];
  fer_status st = FER_STATUS_OK;
  for (int lineno = 1; st == FER_STATUS_OK; lineno++) {
    const int eof = fgets(line, sizeof line, f) == NULL;
    const size_t len = eof ? 0 : strlen(line);
    if (!eof && len == sizeof line - 1 && line[len - 1] != '\n') {
      st = feri_fail(FER_STATUS_INVALID_ARG, "faithfulness: %s:%d: a line longer than %d bytes", path, lineno, MAX_LINE - 2);
      break;
    }
    if (!eof) line[strcspn(line, "\r\n")] = '\0';
    if (!eof && line[0] == '#') continue;
    if (eof || line[0] == '\0') { /* a conversation ends */
      if (n > 0 && (max_conv == 0 || done < max_conv)) {
        st = add_conversation(e, tok, msgs, n, c);
        done++;
      }
      for (size_t i = 0; i < n; i++) free(lines[i]);
      n = 0;
      if (eof) break;
      continue;
    }
    const char *colon = strstr(line, ": ");
    int role = -1;
    for (int r = 0; r < 3 && colon; r++)
      if ((size_t)(colon - line) == strlen(roles[r]) && memcmp(line, roles[r], strlen(roles[r])) == 0) role = r;
    if (role < 0 || n == MAX_MESSAGES) {
      st = feri_fail(FER_STATUS_INVALID_ARG, "faithfulness: %s:%d: %s", path, lineno,
                     role < 0 ? "expected 'system: ', 'user: ' or 'assistant: ' and the text"
                              : "more than 16 messages in one conversation");
      break;
    }
    lines[n] = malloc(strlen(colon + 2) + 1);
    if (lines[n] == NULL) {
      st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "faithfulness: no memory for %s", path);
      break;
    }
    strcpy(lines[n], colon + 2);
    unescape(lines[n]);
    msgs[n] = (fer_chat_message){roles[role], lines[n]};
    n++;
  }
  for (size_t i = 0; i < n; i++) free(lines[i]);
  fclose(f);
  free(text);
  return st;
}

fer_status feri_faith_corpus_build(const char *model_path, const char *chat_template_path, const char *prose_path,
                                   uint32_t n_prose, const char *chats_path, uint32_t max_conversations, feri_faith_corpus *out) {
  if (out == NULL || model_path == NULL) return feri_fail(FER_STATUS_NULL_ARG, "feri_faith_corpus_build: NULL argument");
  memset(out, 0, sizeof *out);
  fer_engine_config cfg;
  fer_engine_config_init(&cfg);
  cfg.model_path = model_path;
  cfg.chat_template_path = chat_template_path;
  cfg.n_threads = 1;
  cfg.max_seqs = 1;
  fer_engine *e = NULL;
  fer_status st = fer_engine_create(&cfg, &e);
  const fer_tokenizer *tok = NULL;
  if (st == FER_STATUS_OK) st = fer_engine_tokenizer(e, &tok);
  feri_faith_corpus c = {0};
  if (st == FER_STATUS_OK && prose_path != NULL && n_prose > 0) {
    size_t len = 0, n = 0;
    char *text = NULL;
    int32_t *ids = NULL;
    st = read_text(prose_path, &text, &len);
    if (st == FER_STATUS_OK) st = encode(tok, text, len, &ids, &n);
    if (st == FER_STATUS_OK && n < n_prose)
      st = feri_fail(FER_STATUS_INVALID_ARG, "faithfulness: %s has %zu tokens, fewer than %u", prose_path, n, n_prose);
    if (st == FER_STATUS_OK) st = corpus_add(&c, ids, n_prose, 0);
    free(ids);
    free(text);
  }
  if (st == FER_STATUS_OK && chats_path != NULL) st = read_conversations(e, tok, chats_path, max_conversations, &c);
  kept_error k;
  keep_error(st, &k);
  fer_engine_free(e);
  if (st != FER_STATUS_OK) {
    feri_faith_corpus_free(&c);
    return restore_error(st, &k);
  }
  *out = c;
  return FER_STATUS_OK;
}

fer_status feri_faith_corpus_write(const feri_faith_corpus *c, FILE *f) {
  for (uint32_t i = 0; i < c->n_seqs; i++) {
    fprintf(f, "%s %u", c->seqs[i].chat ? "chat" : "prose", c->seqs[i].n);
    for (uint32_t j = 0; j < c->seqs[i].n; j++) fprintf(f, " %d", c->seqs[i].ids[j]);
    fputc('\n', f);
  }
  return ferror(f) ? feri_fail(FER_STATUS_INVALID_ARG, "faithfulness: writing the corpus failed") : FER_STATUS_OK;
}

fer_status feri_faith_corpus_read(const char *path, feri_faith_corpus *out) {
  memset(out, 0, sizeof *out);
  size_t len = 0;
  char *text = NULL;
  fer_status rs = read_text(path, &text, &len);
  if (rs != FER_STATUS_OK) return rs;
  feri_faith_corpus c = {0};
  fer_status st = FER_STATUS_OK;
  int32_t *ids = NULL;
  int lineno = 0;
  for (char *line = text, *next; st == FER_STATUS_OK && line && *line; line = next) {
    lineno++;
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    char kind[8];
    unsigned n = 0;
    int used = 0;
    if (sscanf(line, "%7s %u%n", kind, &n, &used) != 2 || (strcmp(kind, "chat") != 0 && strcmp(kind, "prose") != 0) ||
        n == 0 || n > (1u << 20)) {
      st = feri_fail(FER_STATUS_INVALID_ARG, "faithfulness: %s:%d: expected 'prose|chat N id...'", path, lineno);
      break;
    }
    free(ids);
    ids = malloc(n * sizeof *ids);
    if (ids == NULL) {
      st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "faithfulness: no memory for %u ids", n);
      break;
    }
    char *p = line + used, *e;
    for (unsigned j = 0; j < n && st == FER_STATUS_OK; j++, p = e) {
      const long v = strtol(p, &e, 10);
      if (e == p || v < 0 || v > INT32_MAX)
        st = feri_fail(FER_STATUS_INVALID_ARG, "faithfulness: %s:%d: id %u of %u is missing or bad", path, lineno, j, n);
      else
        ids[j] = (int32_t)v;
    }
    if (st == FER_STATUS_OK) st = corpus_add(&c, ids, n, kind[0] == 'c');
  }
  free(ids);
  free(text);
  if (st != FER_STATUS_OK) {
    feri_faith_corpus_free(&c);
    return st;
  }
  *out = c;
  return FER_STATUS_OK;
}

/* log sum exp of row[0..n), in f64 */
static double log_sum_exp(const float *row, uint32_t n) {
  double mx = -INFINITY;
  for (uint32_t v = 0; v < n; v++) mx = row[v] > mx ? row[v] : mx;
  double z = 0;
  for (uint32_t v = 0; v < n; v++) z += exp((double)row[v] - mx);
  return mx + log(z);
}

static uint32_t argmax(const float *row, uint32_t n) {
  uint32_t best = 0;
  for (uint32_t v = 1; v < n; v++)
    if (row[v] > row[best]) best = v;
  return best;
}

/* KL(P || Q) = E_P[log P - log Q] = E_P[p - q] - lse(p) + lse(q), with P's probabilities pp. */
static double kl_with(const double *pp, double lse_p, const float *p, const float *q, uint32_t n) {
  double e = 0;
  for (uint32_t v = 0; v < n; v++) e += pp[v] * ((double)p[v] - (double)q[v]);
  const double kl = e - lse_p + log_sum_exp(q, n);
  return kl < 0 ? 0 : kl; /* rounding can leave -1e-16 for identical rows */
}

static int finite_row(const float *row, uint32_t n) {
  for (uint32_t v = 0; v < n; v++)
    if (!isfinite(row[v])) return 0;
  return 1;
}

static void probabilities(const float *p, uint32_t n, double lse, double *pp) {
  for (uint32_t v = 0; v < n; v++) pp[v] = exp((double)p[v] - lse);
}

double feri_faith_kl(const float *p, const float *q, uint32_t n, int *same_top1) {
  if (same_top1) *same_top1 = n > 0 && argmax(p, n) == argmax(q, n);
  if (n == 0 || !finite_row(p, n) || !finite_row(q, n)) return NAN;
  double *pp = malloc(n * sizeof *pp);
  if (pp == NULL) return NAN;
  const double lse = log_sum_exp(p, n);
  probabilities(p, n, lse, pp);
  const double kl = kl_with(pp, lse, p, q, n);
  free(pp);
  return kl;
}

/* One route's per-position results, kept until the end for the percentiles. */
typedef struct route_log {
  double *kl;
  uint8_t *chat, *same;
  uint64_t n;
} route_log;

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static feri_faith_stats stats_of(const route_log *l, int which /* -1 all, 0 prose, 1 chat */) {
  feri_faith_stats s = {0};
  double *v = malloc((l->n ? l->n : 1) * sizeof *v);
  if (v == NULL) return s;
  double sum = 0;
  for (uint64_t i = 0; i < l->n; i++) {
    if (which >= 0 && l->chat[i] != which) continue;
    v[s.positions++] = l->kl[i];
    sum += l->kl[i];
    s.top1_same += l->same[i];
  }
  if (s.positions) {
    qsort(v, s.positions, sizeof *v, cmp_double);
    s.kl_mean = sum / (double)s.positions;
    /* the smallest value at or above 99% of the positions (nearest rank) */
    const uint64_t rank = (uint64_t)ceil(0.99 * (double)s.positions);
    s.kl_p99 = v[(rank ? rank : 1) - 1];
    s.kl_max = v[s.positions - 1];
  }
  free(v);
  return s;
}

typedef struct peer_file {
  FILE *f;
  uint32_t rows, n_vocab;
} peer_file;

static fer_status peer_open(const char *path, uint64_t rows, uint32_t n_vocab, peer_file *p) {
  int fd = -1;
  uint64_t size = 0;
  fer_status st = feri_file_open_regular(path, "faithfulness", &fd, &size);
  if (st != FER_STATUS_OK) return st;
  p->f = fdopen(fd, "rb");
  if (p->f == NULL) {
    close(fd);
    return feri_fail(FER_STATUS_INVALID_ARG, "faithfulness: cannot read the peer's logits %s", path);
  }
  char magic[8];
  uint32_t hdr[2];
  if (fread(magic, 1, 8, p->f) != 8 || memcmp(magic, "FERLOGIT", 8) != 0 || fread(hdr, 4, 2, p->f) != 2 ||
      hdr[0] != rows || hdr[1] != n_vocab) {
    fclose(p->f);
    p->f = NULL;
    return feri_fail(FER_STATUS_INVALID_ARG,
                     "faithfulness: %s is not FERLOGIT logits of %llu rows of %u (the corpus's shape)", path,
                     (unsigned long long)rows, n_vocab);
  }
  p->rows = hdr[0];
  p->n_vocab = hdr[1];
  return FER_STATUS_OK;
}

fer_status feri_faith_measure(const char *model_path, const feri_faith_corpus *c, const feri_faith_route *routes,
                              size_t n_routes, fer_threadpool *pool, feri_faith_result *out) {
  if (model_path == NULL || c == NULL || (routes == NULL && n_routes) || out == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "feri_faith_measure: NULL argument");
  feri_llama *exact = NULL, *i8 = NULL;
  const feri_llama_options eo = {.weights = FERI_WEIGHTS_MAPPED, .matmul = FERI_MATMUL_EXACT};
  const feri_llama_options io = {.weights = FERI_WEIGHTS_MAPPED, .matmul = FERI_MATMUL_I8};
  fer_status st = feri_llama_open_with(model_path, &eo, &exact);
  if (st == FER_STATUS_OK) st = feri_llama_open_with(model_path, &io, &i8);
  if (st != FER_STATUS_OK) {
    feri_llama_close(exact);
    return st;
  }
  const uint32_t V = feri_llama_config_of(exact)->n_vocab;
  uint64_t rows = 0;
  for (uint32_t s = 0; s < c->n_seqs; s++) rows += c->seqs[s].n;

  const size_t row_bytes = (size_t)V * sizeof(float);
  float *ref = malloc(FAITH_CHUNK * row_bytes);
  float *got = malloc((n_routes ? n_routes : 1) * FAITH_CHUNK * row_bytes);
  double *pp = malloc((size_t)V * sizeof *pp);
  route_log *logs = calloc(n_routes ? n_routes : 1, sizeof *logs);
  peer_file *peers = calloc(n_routes ? n_routes : 1, sizeof *peers);
  feri_llama_seq **seqs = calloc(n_routes + 1, sizeof *seqs);
  if (!ref || !got || !pp || !logs || !peers || !seqs)
    st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "faithfulness: no memory for %zu routes' logits", n_routes);
  for (size_t r = 0; st == FER_STATUS_OK && r < n_routes; r++) {
    logs[r].kl = malloc((rows ? rows : 1) * sizeof(double));
    logs[r].chat = malloc(rows ? rows : 1);
    logs[r].same = malloc(rows ? rows : 1);
    if (!logs[r].kl || !logs[r].chat || !logs[r].same) st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "faithfulness: no memory");
    if (st == FER_STATUS_OK && routes[r].peer_logits) st = peer_open(routes[r].peer_logits, rows, V, &peers[r]);
  }

  for (uint32_t s = 0; st == FER_STATUS_OK && s < c->n_seqs; s++) {
    const feri_faith_seq *q = &c->seqs[s];
    feri_llama_seq_options so = feri_llama_seq_defaults();
    st = feri_llama_seq_create(exact, q->n, &so, &seqs[n_routes]);
    for (size_t r = 0; st == FER_STATUS_OK && r < n_routes; r++) {
      if (routes[r].peer_logits) continue;
      feri_llama_seq_options ro = feri_llama_seq_defaults();
      ro.dtype = routes[r].kv_dtype;
      st = feri_llama_seq_create(routes[r].matmul == FERI_MATMUL_EXACT ? exact : i8, q->n, &ro, &seqs[r]);
    }
    for (uint32_t p = 0; st == FER_STATUS_OK && p < q->n; p += FAITH_CHUNK) {
      const uint32_t m = q->n - p < FAITH_CHUNK ? q->n - p : FAITH_CHUNK;
      st = feri_llama_forward_all(seqs[n_routes], pool, q->ids + p, m, ref);
      for (size_t r = 0; st == FER_STATUS_OK && r < n_routes; r++) {
        float *g = got + r * FAITH_CHUNK * (size_t)V;
        if (routes[r].peer_logits) {
          if (fread(g, row_bytes, m, peers[r].f) != m)
            st = feri_fail(FER_STATUS_INVALID_ARG, "faithfulness: %s ends early", routes[r].peer_logits);
        } else {
          st = feri_llama_forward_all(seqs[r], pool, q->ids + p, m, g);
        }
      }
      for (uint32_t i = 0; st == FER_STATUS_OK && i < m; i++) {
        const float *rrow = ref + (size_t)i * V;
        if (!finite_row(rrow, V)) {
          st = feri_fail(FER_STATUS_CORRUPT, "faithfulness: the reference's logits at position %u are not finite", p + i);
          break;
        }
        const double lse = log_sum_exp(rrow, V);
        probabilities(rrow, V, lse, pp);
        const uint32_t top = argmax(rrow, V);
        for (size_t r = 0; r < n_routes; r++) {
          const float *grow = got + (r * FAITH_CHUNK + i) * (size_t)V;
          route_log *l = &logs[r];
          l->kl[l->n] = finite_row(grow, V) ? kl_with(pp, lse, rrow, grow, V) : INFINITY;
          l->chat[l->n] = (uint8_t)q->chat;
          l->same[l->n] = argmax(grow, V) == top;
          l->n++;
        }
      }
    }
    for (size_t r = 0; r <= n_routes; r++) {
      feri_llama_seq_free(seqs[r]);
      seqs[r] = NULL;
    }
  }
  if (st == FER_STATUS_OK)
    for (size_t r = 0; r < n_routes; r++)
      out[r] = (feri_faith_result){stats_of(&logs[r], -1), stats_of(&logs[r], 0), stats_of(&logs[r], 1)};
  for (size_t r = 0; r < n_routes; r++) {
    if (logs) {
      free(logs[r].kl);
      free(logs[r].chat);
      free(logs[r].same);
    }
    if (peers && peers[r].f) fclose(peers[r].f);
  }
  kept_error k;
  keep_error(st, &k);
  free(seqs);
  free(peers);
  free(logs);
  free(pp);
  free(got);
  free(ref);
  feri_llama_close(i8);
  feri_llama_close(exact);
  return restore_error(st, &k);
}
