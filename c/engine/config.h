/* config.h: the engine configuration's environment reading and checks (contract in ferrite.h). */
#ifndef FERI_ENGINE_CONFIG_H
#define FERI_ENGINE_CONFIG_H

#include "ferrite.h"

/* Applies the FERRITE_* entries of a NULL-terminated "NAME=value" array to c (NULL: none). */
fer_status feri_engine_config_apply_env(fer_engine_config *c, const char *const *env);

/* INVALID_ARG naming the first bad field of a configuration, after the environment. */
fer_status feri_engine_config_check(const fer_engine_config *c);

/* "cpu", "cuda" or "cuda:N" (N < 4096) into a fer_device_code and an index; 0 for anything else
 * (outputs untouched). The CLI's and the environment's spelling. */
int feri_parse_device(const char *v, int32_t *device, uint32_t *index);

/* The configuration names of a value: what 0 matmul, 1 kv layout, 2 kv policy, 3 kv dtype,
 * 4 plan policy; "?" for a value without one. */
const char *feri_engine_name_of(int what, int32_t value);

#endif
