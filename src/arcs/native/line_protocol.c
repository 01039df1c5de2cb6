/*
 * Line protocol bodies of one line shape read straight into Arrow buffers.
 *
 * Machine-written bodies repeat one shape: the same measurement, tag keys and field keys, in
 * order, every field of one kind, line after line. The caller reads the shape off the first line;
 * this reader checks every line against it while it converts the values, and answers "not mine"
 * (-1) at the first thing it does not take: an escape, a quote, a comment, a tab or carriage
 * return, odd spacing, another key or kind, an empty value, a number out of range or not
 * finite. The Python decoders then read the body and name the bad line. Every read is
 * bounds-checked.
 */
#define _GNU_SOURCE /* strtod_l and newlocale: decimal points whatever the process's locale */
#include <locale.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "powers_of_five.h"

enum { KIND_TAG = 0, KIND_FLOAT = 1, KIND_INTEGER = 2, KIND_UNSIGNED = 3, KIND_BOOLEAN = 4 };
/* What the reader noted while reading, so the caller need not look again (msgpack_columns.c's
 * values for the first two). */
enum { PRINTABLE_ASCII = 1, NONDECREASING = 2, EVERY_LINE_TIMED = 4 };
#define NOT_MINE (-1)

/* One column of the shape: its key as written, its kind, and where its values go. Tags: int32
 * offsets (lines + 1) and data (data_capacity bytes); numbers: 8 bytes a line; booleans: a
 * bitmap. */
typedef struct {
    const uint8_t *key;
    int64_t key_length;
    int64_t kind;
    uint8_t *values;
    int32_t *offsets;
    uint8_t *data;
    int64_t data_capacity;
    int64_t flags; /* set by the reader: tags whose every value is printable ASCII get PRINTABLE_ASCII */
} arcs_lp_column;

/* The lines' times as the reader saw them: the least and greatest, and flags (NONDECREASING,
 * EVERY_LINE_TIMED). */
typedef struct {
    int64_t minimum;
    int64_t maximum;
    int64_t flags;
} arcs_lp_times;

/* Bytes only the exact parser handles, and the separators that end a key or value. */
static int is_unusual(uint8_t byte) {
    return byte == '\\' || byte == '"' || byte == '#' || byte == '\r' || byte == '\t';
}

/* Whether every byte is in 0x20..0x7e (so valid UTF-8 without control characters); without
 * branches, which the compiler vectorizes. */
static int printable_ascii(const uint8_t *at, int64_t length) {
    uint8_t outside = 0;
    for (int64_t i = 0; i < length; i++) outside |= (uint8_t)(at[i] - 0x20) > 0x5e;
    return !outside;
}

static int is_digit(uint8_t byte) { return byte >= '0' && byte <= '9'; }

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
 * always, enough bits below them to round by. 0, or NOT_MINE where it cannot decide (a product
 * too close to a rounding boundary, a subnormal result: rare) or the value is not finite. */
static int eisel_lemire(uint64_t mantissa, int64_t exponent, double *out) {
    if (exponent < ARCS_SMALLEST_POWER_OF_FIVE || exponent > ARCS_LARGEST_POWER_OF_FIVE) return NOT_MINE;
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
    if (low == UINT64_MAX && (exponent < -27 || exponent > 55)) return NOT_MINE;
    int top = (int)(high >> 63);
    uint64_t bits = high >> (top + 9); /* 54 or 55 bits: the double's 53 and a rounding bit */
    /* floor(exponent * log2(10)) + 63, as (217706 * exponent) >> 16 computes it for |exponent| < 1,000 */
    int64_t biased = ((217706 * exponent) >> 16) + 63 + top - leading_zeros + 1023;
    if (biased <= 0) return NOT_MINE; /* subnormal */
    /* Exactly halfway between two doubles (possible only for small exponents): round to even. */
    if (low <= 1 && exponent >= -4 && exponent <= 23 && (bits & 3) == 1 && (bits << (top + 9)) == high) bits &= ~UINT64_C(1);
    bits = (bits + (bits & 1)) >> 1;
    if (bits >= UINT64_C(2) << 52) { /* rounding carried into a new bit */
        bits = UINT64_C(1) << 52;
        biased++;
    }
    if (biased >= 0x7ff) return NOT_MINE;
    uint64_t word = (bits & ~(UINT64_C(1) << 52)) | ((uint64_t)biased << 52);
    memcpy(out, &word, sizeof word);
    return 0;
}

/* A decimal float in line protocol's syntax, [+-]?(d+.?d*|.d+)([eE][+-]?d+)?, correctly rounded:
 * exactly by one multiplication or division when the digits fit 53 bits and the power of ten is
 * exact (at most 22); else, for up to 19 significant digits, by eisel_lemire; else (or where it
 * cannot decide) by strtod over a terminated copy. 0, or NOT_MINE for other text, a value too
 * long to copy, or a result that is not finite. */
static int parse_float(const uint8_t *text, int64_t length, double *out) {
    /* Longer text is left to Python: it also bounds how far the digits can move the exponent. */
    if (length >= 128) return NOT_MINE;
    int64_t at = 0;
    int negative = 0;
    if (at < length && (text[at] == '+' || text[at] == '-')) negative = text[at++] == '-';
    uint64_t mantissa = 0;
    int64_t digits = 0, significant = 0, exponent = 0;
    int64_t integer_digits = 0, fraction_digits = 0;
    for (; at < length && is_digit(text[at]); at++, integer_digits++) {
        if (significant || text[at] != '0') significant++;
        if (significant <= 19) mantissa = mantissa * 10 + (uint64_t)(text[at] - '0');
        else exponent++;
    }
    if (at < length && text[at] == '.') {
        for (at++; at < length && is_digit(text[at]); at++, fraction_digits++) {
            if (significant || text[at] != '0') significant++;
            if (significant <= 19) {
                mantissa = mantissa * 10 + (uint64_t)(text[at] - '0');
                exponent--;
            }
        }
    }
    digits = integer_digits + fraction_digits;
    if (digits == 0) return NOT_MINE;
    if (at < length && (text[at] == 'e' || text[at] == 'E')) {
        at++;
        int exponent_negative = 0;
        if (at < length && (text[at] == '+' || text[at] == '-')) exponent_negative = text[at++] == '-';
        if (at >= length || !is_digit(text[at])) return NOT_MINE;
        int64_t written = 0;
        for (; at < length && is_digit(text[at]); at++) {
            if (written < 100000) written = written * 10 + (text[at] - '0');
        }
        exponent += exponent_negative ? -written : written;
    }
    if (at != length) return NOT_MINE;
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
        if (!locale) return NOT_MINE;
        memcpy(copy, text, (size_t)length);
        copy[length] = '\0';
        value = strtod_l(copy, NULL, locale);
        negative = 0; /* strtod read the sign */
    }
    if (negative) value = -value;
    if (value - value != 0) return NOT_MINE; /* infinite (NaN cannot be written in this syntax) */
    *out = value;
    return 0;
}

/* -?digits within int64 (the integer kind and timestamps). */
static int parse_int64(const uint8_t *text, int64_t length, int64_t *out) {
    int64_t at = 0;
    int negative = 0;
    if (at < length && text[at] == '-') {
        negative = 1;
        at++;
    }
    if (at >= length) return NOT_MINE;
    uint64_t magnitude = 0, limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; at < length; at++) {
        if (!is_digit(text[at])) return NOT_MINE;
        uint64_t digit = (uint64_t)(text[at] - '0');
        if (magnitude > (limit - digit) / 10) return NOT_MINE;
        magnitude = magnitude * 10 + digit;
    }
    *out = negative ? (int64_t)(0 - magnitude) : (int64_t)magnitude;
    return 0;
}

static int parse_boolean(const uint8_t *text, int64_t length, int *out) {
    static const char *const truths[] = {"t", "T", "true", "True", "TRUE"};
    static const char *const falsehoods[] = {"f", "F", "false", "False", "FALSE"};
    for (int i = 0; i < 5; i++) {
        if ((size_t)length == strlen(truths[i]) && memcmp(text, truths[i], (size_t)length) == 0) {
            *out = 1;
            return 0;
        }
        if ((size_t)length == strlen(falsehoods[i]) && memcmp(text, falsehoods[i], (size_t)length) == 0) {
            *out = 0;
            return 0;
        }
    }
    return NOT_MINE;
}

/* The value at `at`: its end, the first of `,`, ` `, `\n` or the line's end; NOT_MINE for an
 * empty value, a `=` in it or a byte only the exact parser takes. */
static int64_t value_end(const uint8_t *body, int64_t at, int64_t line_end) {
    int64_t start = at;
    for (; at < line_end; at++) {
        uint8_t byte = body[at];
        if (byte == ',' || byte == ' ') break;
        if (byte == '=' || is_unusual(byte)) return NOT_MINE;
    }
    return at > start ? at : NOT_MINE;
}

static int expect(const uint8_t *body, int64_t *at, int64_t line_end, const uint8_t *bytes, int64_t length) {
    if (line_end - *at < length || memcmp(body + *at, bytes, (size_t)length) != 0) return NOT_MINE;
    *at += length;
    return 0;
}

/* Reads every line (one optional final newline allowed) into the columns: tags first (tag_count
 * of them), then fields, in the shape's order, and each line's time (times_valid: a bitmap, set
 * where the line had one). Returns the lines read (at most max_lines), or NOT_MINE. */
int64_t arcs_lp_read(const uint8_t *body, int64_t length, const uint8_t *measurement, int64_t measurement_length,
                     arcs_lp_column *columns, int64_t column_count, int64_t tag_count, int64_t *times,
                     uint8_t *times_valid, int64_t max_lines, arcs_lp_times *time_facts) {
    if (length > 0 && body[length - 1] == '\n') length--;
    int64_t line = 0, at = 0, timed = 0, descents = 0;
    int64_t earliest = INT64_MAX, latest = INT64_MIN;
    for (int64_t c = 0; c < column_count; c++) columns[c].flags = columns[c].kind == KIND_TAG ? PRINTABLE_ASCII : 0;
    for (int64_t c = 0; c < tag_count; c++) columns[c].offsets[0] = 0;
    while (at < length) {
        if (line >= max_lines) return NOT_MINE;
        const uint8_t *newline = memchr(body + at, '\n', (size_t)(length - at));
        int64_t line_end = newline ? newline - body : length;
        if (expect(body, &at, line_end, measurement, measurement_length)) return NOT_MINE;
        for (int64_t c = 0; c < column_count; c++) {
            arcs_lp_column *column = &columns[c];
            uint8_t separator = c == 0 ? (tag_count ? ',' : ' ') : (c == tag_count ? ' ' : ',');
            if (at >= line_end || body[at] != separator) return NOT_MINE;
            at++;
            if (expect(body, &at, line_end, column->key, column->key_length)) return NOT_MINE;
            if (at >= line_end || body[at] != '=') return NOT_MINE;
            at++;
            int64_t end = value_end(body, at, line_end);
            if (end < 0) return NOT_MINE;
            const uint8_t *text = body + at;
            int64_t size = end - at;
            if (column->kind == KIND_TAG) {
                int64_t used = column->offsets[line];
                if (used + size > column->data_capacity || used + size > INT32_MAX) return NOT_MINE;
                memcpy(column->data + used, text, (size_t)size);
                column->offsets[line + 1] = (int32_t)(used + size);
                if (!printable_ascii(text, size)) column->flags &= ~(int64_t)PRINTABLE_ASCII;
            } else if (column->kind == KIND_FLOAT) {
                double value;
                if (parse_float(text, size, &value)) return NOT_MINE;
                memcpy(column->values + 8 * line, &value, sizeof value);
            } else if (column->kind == KIND_INTEGER || column->kind == KIND_UNSIGNED) {
                int64_t value;
                uint8_t suffix = column->kind == KIND_INTEGER ? 'i' : 'u';
                if (size < 2 || text[size - 1] != suffix) return NOT_MINE;
                if (column->kind == KIND_UNSIGNED && text[0] == '-') return NOT_MINE;
                if (parse_int64(text, size - 1, &value)) return NOT_MINE;
                memcpy(column->values + 8 * line, &value, sizeof value);
            } else if (column->kind == KIND_BOOLEAN) {
                int value;
                if (parse_boolean(text, size, &value)) return NOT_MINE;
                if ((line & 7) == 0) column->values[line >> 3] = 0; /* no stray bits past the last line */
                if (value) column->values[line >> 3] |= (uint8_t)(1u << (line & 7));
            } else {
                return NOT_MINE;
            }
            at = end;
        }
        if (at < line_end) {
            if (body[at] != ' ') return NOT_MINE;
            at++;
            if (parse_int64(body + at, line_end - at, &times[line])) return NOT_MINE;
            if ((line & 7) == 0) times_valid[line >> 3] = 0;
            times_valid[line >> 3] |= (uint8_t)(1u << (line & 7));
            int64_t time = times[line];
            descents += timed > 0 && time < latest;
            if (time < earliest) earliest = time;
            if (time > latest) latest = time;
            timed++;
        } else {
            times[line] = 0;
            if ((line & 7) == 0) times_valid[line >> 3] = 0;
        }
        at = line_end + 1;
        line++;
    }
    time_facts->minimum = earliest;
    time_facts->maximum = latest;
    time_facts->flags = (descents == 0 ? NONDECREASING : 0) | (timed == line ? EVERY_LINE_TIMED : 0);
    return line;
}

/* How many times byte occurs in text (memchr, so the runs between are skipped in wide steps). */
int64_t arcs_count_byte(const uint8_t *text, int64_t length, int32_t byte) {
    int64_t count = 0;
    const uint8_t *at = text, *end = text + length;
    while (at < end) {
        const uint8_t *found = memchr(at, byte, (size_t)(end - at));
        if (!found) break;
        count++;
        at = found + 1;
    }
    return count;
}
