/* Decimal text to double (decimal.c). */
#ifndef ARCS_DECIMAL_H
#define ARCS_DECIMAL_H

#include <stdint.h>

/* A decimal float, [+-]?(d+.?d*|.d+)([eE][+-]?d+)?, correctly rounded: 0, or -1 for other text,
 * text of 128 bytes or more, or a value that is not finite. The callers check their own grammar
 * (JSON's is stricter) before asking. */
int arcs_parse_decimal(const uint8_t *text, int64_t length, double *out);

#endif
