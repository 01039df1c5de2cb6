/*
 * Decimal text to the nearest double, for the readers of text formats (line_protocol.c,
 * json_columns.c): exact arithmetic where it suffices, the Eisel-Lemire method for up to 19
 * significant digits, strtod for the rest.
 */
#define _GNU_SOURCE /* strtod_l and newlocale: decimal points whatever the process's locale */
#include "decimal.h"

#include <locale.h>
#include <stdlib.h>
#include <string.h>

#include "powers_of_five.h"
#include "text.h"

static const double POWERS_OF_TEN[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                         1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The C locale, made once (threads racing to make it keep one and free the others). */
static locale_t c_locale(void) {
    static locale_t shared = (locale_t)0;
    locale_t current = __atomic_load_n(&shared, __ATOMIC_ACQUIRE);
    if (current) return current;
    locale_t made = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (!made) return (locale_t)0;
    locale_t expected = (locale_t)0;
    if (__atomic_compare_exchange_n(&shared, &expected, made, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return made;
    freelocale(made);
    return expected;
}

/* mantissa * 10**exponent as a double, correctly rounded, by the Eisel-Lemire method: the
 * mantissa (not zero) times a 128-bit power of five gives the double's 53 bits and, nearly
 * always, enough bits below them to round by. 0, or -1 where it cannot decide (a product
 * too close to a rounding boundary, a subnormal result: rare) or the value is not finite. */
static int eisel_lemire(uint64_t mantissa, int64_t exponent, double *out) {
    if (exponent < ARCS_SMALLEST_POWER_OF_FIVE || exponent > ARCS_LARGEST_POWER_OF_FIVE) return -1;
    const uint64_t *power = ARCS_POWERS_OF_FIVE[exponent - ARCS_SMALLEST_POWER_OF_FIVE];
    int leading_zeros = __builtin_clzll(mantissa);
    uint64_t normalized = mantissa << leading_zeros;
    unsigned __int128 product = (unsigned __int128)normalized * power[0];
    uint64_t high = (uint64_t)(product >> 64), low = (uint64_t)product;
    if ((high & 0x1ff) == 0x1ff) { /* the 9 bits below the 55 kept are all ones: a carry may reach them */
        uint64_t next = (uint64_t)(((unsigned __int128)normalized * power[1]) >> 64);
        low += next;
        high += next > low;
    }
    /* Still all ones below: only exact when 5**exponent itself is (or its reciprocal is exact enough). */
    if (low == UINT64_MAX && (exponent < -27 || exponent > 55)) return -1;
    int top = (int)(high >> 63);
    uint64_t bits = high >> (top + 9); /* 54 or 55 bits: the double's 53 and a rounding bit */
    /* floor(exponent * log2(10)) + 63, as (217706 * exponent) >> 16 computes it for |exponent| < 1,000 */
    int64_t biased = ((217706 * exponent) >> 16) + 63 + top - leading_zeros + 1023;
    if (biased <= 0) return -1; /* subnormal */
    /* Exactly halfway between two doubles (possible only for small exponents): round to even. */
    if (low <= 1 && exponent >= -4 && exponent <= 23 && (bits & 3) == 1 && (bits << (top + 9)) == high) bits &= ~UINT64_C(1);
    bits = (bits + (bits & 1)) >> 1;
    if (bits >= UINT64_C(2) << 52) { /* rounding carried into a new bit */
        bits = UINT64_C(1) << 52;
        biased++;
    }
    if (biased >= 0x7ff) return -1;
    uint64_t word = (bits & ~(UINT64_C(1) << 52)) | ((uint64_t)biased << 52);
    memcpy(out, &word, sizeof word);
    return 0;
}

/* The eight bytes at ``at`` as a number, if they are all digits: checked and converted a word at a
 * time (pairs of digits, then fours, then the eight), where the digit loop's multiply-adds wait on
 * one another. 1 and ``*value``, or 0. */
static inline int eight_digits(const uint8_t *at, uint64_t *value) {
    const uint64_t ones = 0x0101010101010101u, high_nibbles = 0xf0f0f0f0f0f0f0f0u;
    uint64_t word;
    memcpy(&word, at, sizeof word);
    /* every byte 0x30..0x39: its high nibble is 3, and adding 6 leaves it 3 */
    if (((word & high_nibbles) | (((word + 6 * ones) & high_nibbles) >> 4)) != 0x33 * ones) return 0;
    word -= 0x30 * ones; /* little-endian: the first digit is the lowest byte */
    word = word * 10 + (word >> 8); /* bytes 0, 2, 4, 6: two-digit numbers */
    const uint64_t pairs = 0x000000ff000000ffu;
    word = ((word & pairs) * (100 + (UINT64_C(1000000) << 32)) + ((word >> 16) & pairs) * (1 + (UINT64_C(10000) << 32))) >> 32;
    *value = word;
    return 1;
}

/* A decimal float in line protocol's syntax, [+-]?(d+.?d*|.d+)([eE][+-]?d+)?, correctly rounded:
 * exactly by one multiplication or division when the digits fit 53 bits and the power of ten is
 * exact (at most 22); else, for up to 19 significant digits, by eisel_lemire; else (or where it
 * cannot decide) by strtod over a terminated copy. 0, or -1 for other text, a value too
 * long to copy, or a result that is not finite. */
int arcs_parse_decimal(const uint8_t *text, int64_t length, double *out) {
    /* Longer text is left to Python: it also bounds how far the digits can move the exponent. */
    if (length >= 128) return -1;
    int64_t at = 0;
    int negative = 0;
    if (at < length && (text[at] == '+' || text[at] == '-')) negative = text[at++] == '-';
    uint64_t mantissa = 0;
    int64_t digits = 0, significant = 0, exponent = 0;
    int64_t integer_digits = 0, fraction_digits = 0;
    for (; at < length && arcs_is_digit(text[at]); at++, integer_digits++) {
        if (significant || text[at] != '0') significant++;
        if (significant <= 19) mantissa = mantissa * 10 + (uint64_t)(text[at] - '0');
        else exponent++;
    }
    if (at < length && text[at] == '.') {
        at++;
        /* Once a digit other than zero has come, every digit counts: eight at a time while they
         * keep within the 19 taken (the loop below takes the rest, leading zeros and all). */
        uint64_t eight;
        while (significant > 0 && significant <= 11 && length - at >= 8 && eight_digits(text + at, &eight)) {
            mantissa = mantissa * 100000000 + eight;
            significant += 8;
            exponent -= 8;
            fraction_digits += 8;
            at += 8;
        }
        for (; at < length && arcs_is_digit(text[at]); at++, fraction_digits++) {
            if (significant || text[at] != '0') significant++;
            if (significant <= 19) {
                mantissa = mantissa * 10 + (uint64_t)(text[at] - '0');
                exponent--;
            }
        }
    }
    digits = integer_digits + fraction_digits;
    if (digits == 0) return -1;
    if (at < length && (text[at] == 'e' || text[at] == 'E')) {
        at++;
        int exponent_negative = 0;
        if (at < length && (text[at] == '+' || text[at] == '-')) exponent_negative = text[at++] == '-';
        if (at >= length || !arcs_is_digit(text[at])) return -1;
        int64_t written = 0;
        for (; at < length && arcs_is_digit(text[at]); at++) {
            if (written < 100000) written = written * 10 + (text[at] - '0');
        }
        exponent += exponent_negative ? -written : written;
    }
    if (at != length) return -1;
    double value;
    if (significant <= 19 && mantissa <= (UINT64_C(1) << 53) && exponent >= -22 && exponent <= 22) {
        value = (double)mantissa;
        value = exponent < 0 ? value / POWERS_OF_TEN[-exponent] : value * POWERS_OF_TEN[exponent];
    } else if (significant <= 19 && mantissa == 0) {
        value = 0.0;
    } else if (significant <= 19 && eisel_lemire(mantissa, exponent, &value) == 0) {
        /* value is set */
    } else {
        char copy[128];
        locale_t locale = c_locale();
        if (!locale) return -1;
        memcpy(copy, text, (size_t)length);
        copy[length] = '\0';
        value = strtod_l(copy, NULL, locale);
        negative = 0; /* strtod read the sign */
    }
    if (negative) value = -value;
    if (value - value != 0) return -1; /* infinite (NaN cannot be written in this syntax) */
    *out = value;
    return 0;
}

