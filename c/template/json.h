/* json.h: JSON text to template values and back, as Python's json.loads and json.dumps do it. */
#ifndef FERI_TEMPLATE_JSON_H
#define FERI_TEMPLATE_JSON_H

#include "template/value.h"

/* Parses one JSON document (integers without fraction or exponent stay ints, objects keep their
 * key order); throws FER_STATUS_BAD_FORMAT with the byte offset on malformed input. */
feri_tmpl_value feri_tmpl_json_parse(feri_tmpl_rt *rt, const char *text, size_t len);

typedef struct feri_tmpl_json_style {
  bool ensure_ascii;
  int indent; /* < 0: on one line */
  const char *item_sep, *key_sep; /* NULL: Python's defaults for the indent */
  bool sort_keys;
} feri_tmpl_json_style;

/* json.dumps(v, ...) appended to b; throws Python's TypeError message for what JSON cannot hold. */
void feri_tmpl_json_write(feri_tmpl_rt *rt, feri_tmpl_buf *b, feri_tmpl_value v, const feri_tmpl_json_style *style);

#endif
