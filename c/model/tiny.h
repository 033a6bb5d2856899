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

/* The same for architecture "llama", "qwen2" (adds q, k and v biases) or "qwen3" (per-head QK-norm
 * weights, and a head size of twice embedding / heads given as key_length). */
fer_status feri_tiny_model_image(const char *arch, uint64_t seed, void **out, size_t *out_size);

#endif
