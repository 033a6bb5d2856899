/* tiny.h: a tiny Llama model in GGUF form, generated deterministically from a seed: the shape of
 * SmolLM2 (grouped-query attention, SwiGLU, tied embeddings, a byte-level gpt2 tokenizer of 256
 * byte tokens and 4 merges) at a few thousand parameters, with F32 weights. For tests, seeds of
 * the loader's fuzzing, and as the fallback model of `make run`. */
#ifndef FERI_MODEL_TINY_H
#define FERI_MODEL_TINY_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"

/* Writes the GGUF image into a malloc'd buffer (*out, *out_size; free() it). */
fer_status feri_tiny_llama_image(uint64_t seed, void **out, size_t *out_size);

/* The same for architecture "llama", "qwen2" (adds q, k and v biases), "qwen3" (per-head QK-norm
 * weights, and a head size of twice embedding / heads given as key_length) or "gemma3" (qwen3's
 * and the post norms, 6 layers: five local with a window of 16, one global). */
fer_status feri_tiny_model_image(const char *arch, uint64_t seed, void **out, size_t *out_size);

/* A tiny gemma3 with the KV geometry of a real one: `layers` layers (five local of every six),
 * one kv head of head_dim, sliding window `window` (0: the key says 0, every layer global), 2 q
 * heads over an embedding of 32. */
fer_status feri_tiny_gemma3_image(uint64_t seed, uint32_t layers, uint32_t head_dim, uint32_t window, void **out,
                                  size_t *out_size);

/* The tiny llama with `<arch>.pooling_type` = pooling in its metadata (any value, for tests of
 * what the loader takes and refuses). */
fer_status feri_tiny_embedding_image(uint64_t seed, uint32_t pooling, void **out, size_t *out_size);

#endif
