/* toktrie.c: building the flat trie of toktrie.h from the tokens sorted by their bytes (a sorted
 * list's shared prefixes are contiguous, so one pass appends each token's new suffix in preorder). */
#include "grammar/toktrie.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"

typedef struct sort_ctx {
  const uint8_t *const *bytes;
  const uint32_t *lens;
} sort_ctx;

/* qsort has no context argument: the ids sort through a thread-local pointer to the strings. */
static _Thread_local const sort_ctx *sorting;

static int by_bytes(const void *pa, const void *pb) {
  const uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
  const uint32_t la = sorting->lens[a], lb = sorting->lens[b];
  const int c = memcmp(sorting->bytes[a], sorting->bytes[b], la < lb ? la : lb);
  if (c != 0) return c;
  if (la != lb) return la < lb ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0; /* the lowest id of equal strings holds the node */
}

void feri_toktrie_free(feri_toktrie *t) {
  if (!t) return;
  free(t->byte);
  free(t->depth);
  free(t->subtree);
  free(t->token);
  free(t->dup_node);
  free(t->dup_token);
  free(t->blob);
  free(t->off);
  free(t->len);
  free(t->in_trie);
  memset(t, 0, sizeof *t);
}

fer_status feri_toktrie_build(const uint8_t *const *bytes, const uint32_t *lens, uint32_t n_vocab,
                              const uint8_t *include, feri_toktrie *out) {
  memset(out, 0, sizeof *out);
  uint32_t n = 0;
  size_t total = 1; /* nodes: at most the root plus every byte of every token */
  for (uint32_t t = 0; t < n_vocab; t++) {
    if ((include && !include[t]) || lens[t] == 0) continue;
    if (lens[t] > FERI_TOKTRIE_MAX_BYTES)
      return feri_fail(FER_STATUS_INVALID_ARG, "toktrie: token %u has %u bytes (at most %d)", t, lens[t],
                       FERI_TOKTRIE_MAX_BYTES);
    n++;
    total += lens[t];
  }
  if (total > UINT32_MAX) return feri_fail(FER_STATUS_INVALID_ARG, "toktrie: %zu trie nodes", total);
  uint32_t *ids = malloc(sizeof *ids * (n ? n : 1)), *stack = NULL;
  feri_toktrie t = {0};
  t.n_vocab = n_vocab;
  t.byte = malloc(total);
  t.depth = malloc(sizeof *t.depth * total);
  t.subtree = malloc(sizeof *t.subtree * total);
  t.token = malloc(sizeof *t.token * total);
  t.dup_node = malloc(sizeof *t.dup_node * (n ? n : 1));
  t.dup_token = malloc(sizeof *t.dup_token * (n ? n : 1));
  size_t blob_bytes = 0;
  for (uint32_t i = 0; i < n_vocab; i++) blob_bytes += lens[i];
  t.blob = malloc(blob_bytes ? blob_bytes : 1);
  t.off = malloc(sizeof *t.off * (n_vocab ? n_vocab : 1));
  t.len = malloc(sizeof *t.len * (n_vocab ? n_vocab : 1));
  t.in_trie = calloc(n_vocab ? n_vocab : 1, 1);
  if (t.blob && t.off && t.len && t.in_trie) {
    size_t at = 0;
    for (uint32_t i = 0; i < n_vocab; at += lens[i], i++) {
      if (lens[i]) memcpy(t.blob + at, bytes[i], lens[i]);
      t.off[i] = at;
      t.len[i] = lens[i];
      t.in_trie[i] = !((include && !include[i]) || lens[i] == 0);
    }
  }
  uint32_t longest = 0;
  for (uint32_t i = 0, k = 0; i < n_vocab; i++)
    if (!((include && !include[i]) || lens[i] == 0)) {
      ids[k++] = i;
      if (lens[i] > longest) longest = lens[i];
    }
  stack = malloc(sizeof *stack * ((size_t)longest + 1));
  if (!ids || !stack || !t.byte || !t.depth || !t.subtree || !t.token || !t.dup_node || !t.dup_token || !t.blob ||
      !t.off || !t.len || !t.in_trie) {
    free(ids);
    free(stack);
    feri_toktrie_free(&t);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "toktrie: %zu nodes", total);
  }
  const sort_ctx ctx = {bytes, lens};
  sorting = &ctx;
  qsort(ids, n, sizeof *ids, by_bytes);
  sorting = NULL;
  t.byte[0] = 0;
  t.depth[0] = 0;
  t.token[0] = -1;
  t.n_nodes = 1;
  stack[0] = 0;
  uint32_t depth = 0; /* the path on the stack: the previous token's bytes */
  const uint8_t *prev = NULL;
  uint32_t prev_len = 0;
  for (uint32_t k = 0; k < n; k++) {
    const uint32_t id = ids[k], len = lens[id];
    const uint8_t *s = bytes[id];
    uint32_t l = 0;
    while (l < len && l < prev_len && s[l] == prev[l]) l++;
    if (l == len && l == prev_len) { /* the same bytes as the previous token */
      t.dup_node[t.n_dups] = stack[len];
      t.dup_token[t.n_dups++] = (int32_t)id;
      continue;
    }
    for (; depth > l; depth--) t.subtree[stack[depth]] = t.n_nodes - stack[depth]; /* close the old path */
    for (; depth < len; depth++) {
      const uint32_t node = t.n_nodes++;
      t.byte[node] = s[depth];
      t.depth[node] = (uint16_t)(depth + 1);
      t.token[node] = -1;
      stack[depth + 1] = node;
    }
    t.token[stack[len]] = (int32_t)id;
    prev = s;
    prev_len = len;
  }
  for (; depth > 0; depth--) t.subtree[stack[depth]] = t.n_nodes - stack[depth];
  t.subtree[0] = t.n_nodes;
  t.max_depth = longest;
  free(ids);
  free(stack);
  *out = t;
  return FER_STATUS_OK;
}

fer_status feri_toktrie_build_bytes(feri_toktrie *out) {
  static const uint8_t none = 0;
  uint8_t one[256];
  const uint8_t *bytes[257];
  uint32_t lens[257];
  for (int b = 0; b < 256; b++) one[b] = (uint8_t)b, bytes[b] = one + b, lens[b] = 1;
  bytes[256] = &none, lens[256] = 0;
  return feri_toktrie_build(bytes, lens, 257, NULL, out);
}
