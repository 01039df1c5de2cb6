/* Byte-level helpers the readers share (line_protocol.c, json_columns.c, msgpack_columns.c, decimal.c,
 * dictionary.h). */
#ifndef ARCS_TEXT_H
#define ARCS_TEXT_H

#include <stdint.h>
#include <string.h>

static inline int arcs_is_digit(uint8_t byte) { return byte >= '0' && byte <= '9'; }

/* Whether every byte is in 0x20..0x7e (so valid UTF-8 without control characters); without
 * branches, which the compiler vectorizes (the strings are mostly printable, so stopping early
 * saves little). */
static inline int arcs_printable_ascii(const uint8_t *at, int64_t length) {
    uint8_t outside = 0;
    for (int64_t i = 0; i < length; i++) outside |= (uint8_t)(at[i] - 0x20) > 0x5e;
    return !outside;
}

/* Whether the ``length`` bytes at ``a`` and ``b`` are the same: inline, eight at a time (keys and
 * tag values are short, and a call to memcmp for each costs more than the comparison). */
static inline int arcs_same_bytes(const uint8_t *a, const uint8_t *b, int64_t length) {
    uint64_t differs = 0;
    int64_t i = 0;
    for (; i + 8 <= length; i += 8) {
        uint64_t x, y;
        memcpy(&x, a + i, sizeof x);
        memcpy(&y, b + i, sizeof y);
        differs |= x ^ y;
    }
    for (; i < length; i++) differs |= (uint64_t)(a[i] ^ b[i]);
    return differs == 0;
}

/* -?digits within int64: 0, or -1 for other text or a value beyond int64. */
static inline int arcs_parse_int64(const uint8_t *text, int64_t length, int64_t *out) {
    int64_t at = 0;
    int negative = 0;
    if (at < length && text[at] == '-') {
        negative = 1;
        at++;
    }
    if (at >= length) return -1;
    uint64_t magnitude = 0, limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    /* Up to 18 digits cannot pass int64 (10**18 < 2**63): no check but that they are digits. */
    int64_t unchecked = length - at < 18 ? length : at + 18;
    for (; at < unchecked; at++) {
        uint64_t digit = (uint64_t)(text[at] - '0');
        if (digit > 9) return -1;
        magnitude = magnitude * 10 + digit;
    }
    for (; at < length; at++) {
        uint64_t digit = (uint64_t)(text[at] - '0');
        if (digit > 9 || magnitude > (limit - digit) / 10) return -1;
        magnitude = magnitude * 10 + digit;
    }
    *out = negative ? (int64_t)(0 - magnitude) : (int64_t)magnitude;
    return 0;
}

#endif
