/* pages.h: fer_kv_pages, the paged KV mode (ABI in ferrite.h). */
#ifndef FERI_KV_PAGES_H
#define FERI_KV_PAGES_H

#include "ferrite.h"

/* The capacity a page table of `cap` entries grows to for `n` (doubling from 16, clamped to
 * UINT32_MAX entries); SIZE_OVERFLOW when the table's bytes exceed size_t. Shared with the test,
 * which checks the arithmetic near 2^32 without allocating tables that large. */
fer_status feri_kv_pages_table_cap(uint32_t cap, uint32_t n, const char *fn, uint32_t *out);

#endif
