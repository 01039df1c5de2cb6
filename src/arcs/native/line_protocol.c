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
#include <stdint.h>
#include <string.h>

#include "decimal.h"
#include "text.h"

enum { KIND_TAG = 0, KIND_FLOAT = 1, KIND_INTEGER = 2, KIND_UNSIGNED = 3, KIND_BOOLEAN = 4 };
/* What the reader noted while reading, so the caller need not look again (msgpack_columns.c's
 * values for the first two). */
enum { PRINTABLE_ASCII = 1, NONDECREASING = 2, EVERY_LINE_TIMED = 4 };
#define NOT_MINE (-1)
#define OUT_OF_ROOM (-2) /* a tag column's data did not fit its capacity: the caller may give it more */

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

/* What a byte means inside a value: 0 nothing special, ENDS_VALUE for the separators that end
 * one, REFUSED for '=' and the bytes only the exact parser handles (escapes, quotes, comments, tab
 * and carriage return). One look-up a byte instead of seven comparisons. */
enum { ENDS_VALUE = 1, REFUSED = 2 };
static const uint8_t BYTE_CLASS[256] = {
    [','] = ENDS_VALUE, [' '] = ENDS_VALUE, ['='] = REFUSED,  ['\\'] = REFUSED,
    ['"'] = REFUSED,    ['#'] = REFUSED,    ['\r'] = REFUSED, ['\t'] = REFUSED,
};

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

/* Each byte of ``word`` equal to ``byte`` as its high bit (exact for the lowest such byte; the
 * borrow may mark bytes above it too, which the callers never look at). */
static inline uint64_t bytes_equal(uint64_t word, uint8_t byte) {
    const uint64_t ones = 0x0101010101010101u;
    uint64_t differs = word ^ (ones * byte);
    return (differs - ones) & ~differs & (ones << 7);
}

/* The value at `at`: its end, the first of `,`, ` `, `\n` or the line's end; NOT_MINE for an
 * empty value, a `=` in it or a byte only the exact parser takes. Eight bytes at a time while
 * eight can be read from the body (``length`` long): the byte-at-a-time loop waited on a table
 * look-up a byte. */
static int64_t value_end(const uint8_t *body, int64_t at, int64_t line_end, int64_t length) {
    int64_t start = at;
    while (at < line_end && length - at >= 8) {
        uint64_t word;
        memcpy(&word, body + at, sizeof word);
        uint64_t special = bytes_equal(word, ',') | bytes_equal(word, ' ') | bytes_equal(word, '=') |
                           bytes_equal(word, '\\') | bytes_equal(word, '"') | bytes_equal(word, '#') |
                           bytes_equal(word, '\r') | bytes_equal(word, '\t') | bytes_equal(word, '\n');
        if (special == 0) {
            at += 8;
            continue;
        }
        at += __builtin_ctzll(special) / 8; /* the first special byte: its class decides below */
        break;
    }
    if (at > line_end) at = line_end;
    for (; at < line_end; at++) {
        uint8_t class = BYTE_CLASS[body[at]];
        if (class == ENDS_VALUE) break;
        if (class == REFUSED) return NOT_MINE;
    }
    return at > start ? at : NOT_MINE;
}

static int expect(const uint8_t *body, int64_t *at, int64_t line_end, const uint8_t *bytes, int64_t length) {
    if (line_end - *at < length || !arcs_same_bytes(body + *at, bytes, length)) return NOT_MINE;
    *at += length;
    return 0;
}

/* Reads every line (one optional final newline allowed) into the columns: tags first (tag_count
 * of them), then fields, in the shape's order, and each line's time (times_valid: a bitmap, set
 * where the line had one). Returns the lines read (at most max_lines), OUT_OF_ROOM, or NOT_MINE. */
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
            int64_t end = value_end(body, at, line_end, length);
            if (end < 0) return NOT_MINE;
            const uint8_t *text = body + at;
            int64_t size = end - at;
            if (column->kind == KIND_TAG) {
                int64_t used = column->offsets[line];
                if (used + size > INT32_MAX) return NOT_MINE;
                if (used + size > column->data_capacity) return OUT_OF_ROOM;
                memcpy(column->data + used, text, (size_t)size);
                column->offsets[line + 1] = (int32_t)(used + size);
                if (!arcs_printable_ascii(text, size)) column->flags &= ~(int64_t)PRINTABLE_ASCII;
            } else if (column->kind == KIND_FLOAT) {
                double value;
                if (arcs_parse_decimal(text, size, &value)) return NOT_MINE;
                memcpy(column->values + 8 * line, &value, sizeof value);
            } else if (column->kind == KIND_INTEGER || column->kind == KIND_UNSIGNED) {
                int64_t value;
                uint8_t suffix = column->kind == KIND_INTEGER ? 'i' : 'u';
                if (size < 2 || text[size - 1] != suffix) return NOT_MINE;
                if (column->kind == KIND_UNSIGNED && text[0] == '-') return NOT_MINE;
                if (arcs_parse_int64(text, size - 1, &value)) return NOT_MINE;
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
            if (arcs_parse_int64(body + at, line_end - at, &times[line])) return NOT_MINE;
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
