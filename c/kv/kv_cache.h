/* kv_cache.h: fer_kv_cache and fer_kv_seq (the ABI is in ferrite.h). Internal: nothing shared. */
#ifndef FERI_KV_KV_CACHE_H
#define FERI_KV_KV_CACHE_H

#include "ferrite.h"

#endif
