/* pages.h: fer_kv_pages, the paged KV mode (ABI in ferrite.h). Internal: nothing shared. */
#ifndef FERI_KV_PAGES_H
#define FERI_KV_PAGES_H

#include "ferrite.h"

#endif
