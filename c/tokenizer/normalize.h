/* normalize.h: the normalizer chain (Unicode forms through utf8proc, lowercase, replace, prepend). */
#ifndef FERI_TOKENIZER_NORMALIZE_H
#define FERI_TOKENIZER_NORMALIZE_H

#include "tokenizer/encode_ctx.h"

/* Runs t's normalizers over s[0..n) (well-formed UTF-8). *out points either at s (nothing changed)
 * or into one of ctx's buffers. */
fer_status feri_normalize(const fer_tokenizer *t, feri_encode_ctx *ctx, const uint8_t *s, size_t n,
                          const uint8_t **out, size_t *out_len);

/* true when NFC (nfkc = false) or NFKC (true) leaves s[0..n) unchanged by a conservative test on
 * its code points (used to skip the library call; never true for text that would change). */
bool feri_normal_form_is_stable(const uint8_t *s, size_t n, bool nfkc);

#endif
