/* json_schema.h: JSON Schema compiled into a grammar (matcher.h), as llguidance compiles it
 * (scripts/grammar/LLGUIDANCE.md section 6), so that masks can be compared with it bit for bit.
 *
 * The output is one JSON value: whitespace ([ \t\n\r]+, or the options' pattern) may stand once
 * between any two lexemes, never before the first nor after the last (off: none at all); object
 * members come in the order of "properties", then the "required" keys that are not among them,
 * then (unless "additionalProperties" is false) any number of further members whose keys are
 * other strings; keys are written as serde_json writes them; numbers as JSON writes them (no
 * leading zeros, "-0" allowed, exponents unless the schema bounds the number).
 *
 * Built: type (one or a list), properties, required, additionalProperties (true, false or a
 * schema), patternProperties (patterns that are provably disjoint, as llguidance requires; a named
 * property a pattern matches takes both schemas), minProperties and maxProperties (on the further
 * members when every named property is required, or "at least one" / "at most one" / "exactly
 * one" of optional named ones with additionalProperties false: llguidance's cases), items,
 * prefixItems, minItems, maxItems, minLength, maxLength, pattern (a search unless anchored, \d and
 * \w ASCII: llguidance's regex_to_lark(p, "dw")), format (date, time, date-time, uuid, email,
 * hostname, ipv4, "unknown"; others UNSUPPORTED naming the format) with the lengths and patterns
 * intersected, then each character in the escape forms JSON allows (llguidance's JsonQuote);
 * minimum, maximum, exclusiveMinimum, exclusiveMaximum on integers and numbers (llguidance's range
 * expressions: no exponent once bounded; integers admit "-0" where the range does), multipleOf
 * (derivre's digit automaton: a fraction has all its digits once it can end, 0.25 takes "1.50",
 * not "1.5"), const and enum of any JSON value (objects and arrays as their members in order, with
 * whitespace between), anyOf, oneOf when its options are provably disjoint (by type, by string or
 * boolean constant, or by a required property's disjoint schemas: llguidance's rule; others
 * UNSUPPORTED), allOf merged into one schema (types intersected, properties merged in order with
 * both schemas, required united, the tighter bounds, patterns and formats intersected, the lcm of
 * multipleOf; a keyword such as enum in two of its schemas is UNSUPPORTED), $ref to "#",
 * "#/$defs/..." and "#/definitions/..." (recursion too), and the annotations (title, description,
 * default, examples, $defs, $schema, $id, $comment, ...), which change nothing. Keywords JSON
 * Schema defines that are not built (not, uniqueItems, contains, if/then/else, propertyNames,
 * dependent*, unevaluated*, additionalItems, ...) are refused with UNSUPPORTED naming the keyword
 * and its JSON pointer; keywords JSON Schema does not define are ignored, as llguidance ignores
 * them. */
#ifndef FERI_GRAMMAR_JSON_SCHEMA_H
#define FERI_GRAMMAR_JSON_SCHEMA_H

#include <stddef.h>

#include "ferrite.h"
#include "grammar/matcher.h"

typedef struct feri_json_options {
  int whitespace_flexible;        /* 1 (llguidance's default): whitespace between lexemes */
  const char *whitespace_pattern; /* NULL: [\x20\x0A\x0D\x09]+ */
  const char *item_separator;     /* a regular expression; NULL: "," */
  const char *key_separator;      /* NULL: ":" */
} feri_json_options;

/* llguidance's defaults. */
static inline feri_json_options feri_json_defaults(void) { return (feri_json_options){1, NULL, NULL, NULL}; }

/* Compiles schema[0 .. len) (JSON text). The schema's top-level "x-guidance" object, when present,
 * overrides the options (whitespace_flexible, whitespace_pattern, item_separator, key_separator;
 * others UNSUPPORTED). BAD_FORMAT for text that is not JSON (with the offset); INVALID_ARG for a
 * schema that is not a schema (a "type" that is no type, a negative count, a $ref that leads
 * nowhere) or that no value satisfies; UNSUPPORTED as above. */
fer_status feri_grammar_from_json_schema(const char *schema, size_t len, const feri_json_options *opt,
                                         feri_grammar **out);

#endif
