/*
 * JSON columnar bodies read straight into Arrow buffers: msgpack_columns.c's twin for the same
 * document written as JSON, {"m": ..., "columns": {...}, "tags": [...], "precision": ...}.
 *
 * The same descriptions come out (columns.h), so the caller treats both alike. Only the common
 * document is taken: those four keys, each once; strings without escapes; columns of one kind
 * each (integers, numbers with a fraction or exponent - a column holding any is a float column -,
 * strings or booleans; no nulls). Anything else, and anything that is not JSON, is answered "not
 * mine" and the Python decoders read the body and word its errors. Every read is bounds-checked.
 *
 * Two passes, as for MessagePack: arcs_json_scan checks the document and sizes its columns,
 * noting integer bounds and order and whether strings are printable ASCII; arcs_json_fill reads
 * the values again into the caller's block, checking everything it relies on once more.
 */
#include <stdint.h>
#include <string.h>

#include "columns.h"
#include "decimal.h"
#include "text.h"

typedef struct {
    const uint8_t *at;
    const uint8_t *end;
} cursor;

/* JSON's whitespace, of which machine-written bodies have little. */
static inline void skip_space(cursor *c) {
    while (c->at < c->end && (*c->at == ' ' || *c->at == '\n' || *c->at == '\r' || *c->at == '\t')) c->at++;
}

/* The next byte after whitespace is ``byte``: taken (1), or not (0). */
static inline int take(cursor *c, uint8_t byte) {
    skip_space(c);
    if (c->at < c->end && *c->at == byte) {
        c->at++;
        return 1;
    }
    return 0;
}

/* A string without escapes or control characters: the span of the bytes between its quotes,
 * and whether they are all printable ASCII. NOT_MINE for anything else. */
static int read_string(cursor *c, const uint8_t *body, arcs_msgpack_span *span, int *printable) {
    skip_space(c);
    if (c->at >= c->end || *c->at != '"') return NOT_MINE;
    const uint8_t *start = c->at + 1;
    const uint8_t *quote = memchr(start, '"', (size_t)(c->end - start));
    if (!quote) return NOT_MINE;
    uint8_t special = 0, outside = 0;
    for (const uint8_t *p = start; p < quote; p++) {
        special |= (*p == '\\') | (*p < 0x20); /* an escape, or a byte JSON wants escaped */
        outside |= (uint8_t)(*p - 0x20) > 0x5e;
    }
    if (special) return NOT_MINE;
    span->offset = start - body;
    span->length = quote - start;
    *printable = !outside;
    c->at = quote + 1;
    return 0;
}

/* A number in JSON's grammar, -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?: its text, and whether it is an
 * integer (no fraction or exponent). NOT_MINE for other text. */
static int read_number(cursor *c, const uint8_t **text, int64_t *length, int *integer) {
    skip_space(c);
    const uint8_t *p = c->at, *end = c->end;
    if (p < end && *p == '-') p++;
    if (p >= end || !arcs_is_digit(*p)) return NOT_MINE;
    if (*p == '0') p++;
    else
        while (p < end && arcs_is_digit(*p)) p++;
    *integer = 1;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !arcs_is_digit(*p)) return NOT_MINE;
        while (p < end && arcs_is_digit(*p)) p++;
        *integer = 0;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || !arcs_is_digit(*p)) return NOT_MINE;
        while (p < end && arcs_is_digit(*p)) p++;
        *integer = 0;
    }
    *text = c->at;
    *length = p - c->at;
    c->at = p;
    return 0;
}

static int read_bool(cursor *c, int *value) {
    skip_space(c);
    int64_t left = c->end - c->at;
    if (left >= 4 && memcmp(c->at, "true", 4) == 0) {
        *value = 1;
        c->at += 4;
        return 0;
    }
    if (left >= 5 && memcmp(c->at, "false", 5) == 0) {
        *value = 0;
        c->at += 5;
        return 0;
    }
    return NOT_MINE;
}

/* The kind the value at the cursor starts: a number is an integer until the scan meets a
 * fraction or exponent in its column. 0 for null, containers and what is not JSON. */
static int kind_at(cursor *c) {
    skip_space(c);
    if (c->at >= c->end) return 0;
    uint8_t head = *c->at;
    if (head == '"') return KIND_STRING;
    if (head == 't' || head == 'f') return KIND_BOOL;
    if (head == '-' || arcs_is_digit(head)) return KIND_INT64;
    return 0;
}

/* A float column's integers must be ones Arrow widens to the same double as the text reads:
 * up to 15 digits, so exactly. Longer ones go to the Python decoders. */
#define MAX_WIDENED_DIGITS 15

/* The column array after its '[': its kind, length and facts; the cursor moves past its ']'. */
static int scan_column(cursor *c, const uint8_t *body, arcs_msgpack_column *column) {
    int kind = kind_at(c);
    if (!kind) return NOT_MINE;
    column->array_offset = c->at - body;
    column->row_base = column->data_base = 0;
    int64_t count = 0, string_bytes = 0, descents = 0, longest_integer = 0;
    int64_t minimum = INT64_MAX, maximum = INT64_MIN;
    int printable = 1, fraction = 0;
    do {
        if (kind == KIND_STRING) {
            arcs_msgpack_span span;
            int plain;
            if (read_string(c, body, &span, &plain)) return NOT_MINE;
            string_bytes += span.length;
            printable &= plain;
        } else if (kind == KIND_BOOL) {
            int value;
            if (read_bool(c, &value)) return NOT_MINE;
        } else {
            const uint8_t *text;
            int64_t length;
            int integer;
            if (read_number(c, &text, &length, &integer)) return NOT_MINE;
            if (integer) {
                int64_t value;
                if (arcs_parse_int64(text, length, &value)) return NOT_MINE;
                descents += count > 0 && value < maximum;
                if (value < minimum) minimum = value;
                if (value > maximum) maximum = value;
                if (length - (text[0] == '-') > longest_integer) longest_integer = length - (text[0] == '-');
            } else {
                fraction = 1;
            }
        }
        count++;
    } while (take(c, ','));
    if (!take(c, ']')) return NOT_MINE;
    if (kind == KIND_INT64 && fraction) {
        if (longest_integer > MAX_WIDENED_DIGITS) return NOT_MINE;
        kind = KIND_FLOAT64;
    }
    column->kind = kind;
    column->count = count;
    column->string_bytes = string_bytes;
    column->minimum = minimum;
    column->maximum = maximum;
    column->flags = kind == KIND_STRING && printable ? PRINTABLE_ASCII : kind == KIND_INT64 && descents == 0 ? NONDECREASING : 0;
    return 0;
}

/* The document's parts and up to max_columns columns' descriptions, laid out; 0, or NOT_MINE. */
int64_t arcs_json_scan(const uint8_t *body, int64_t length, arcs_msgpack_document *document,
                       arcs_msgpack_column *columns, int64_t max_columns) {
    cursor c = {body, body + length};
    int printable;
    document->measurement.offset = document->precision.offset = document->tags_offset = -1;
    document->tag_count = 0;
    document->column_count = -1;
    if (!take(&c, '{')) return NOT_MINE;
    do {
        arcs_msgpack_span key;
        if (read_string(&c, body, &key, &printable) || !take(&c, ':')) return NOT_MINE;
        const uint8_t *name = body + key.offset;
        if (key.length == 1 && name[0] == 'm' && document->measurement.offset < 0) {
            if (read_string(&c, body, &document->measurement, &printable)) return NOT_MINE;
        } else if (key.length == 9 && memcmp(name, "precision", 9) == 0 && document->precision.offset < 0) {
            if (read_string(&c, body, &document->precision, &printable)) return NOT_MINE;
        } else if (key.length == 4 && memcmp(name, "tags", 4) == 0 && document->tags_offset < 0) {
            if (!take(&c, '[')) return NOT_MINE;
            document->tags_offset = c.at - body;
            if (!take(&c, ']')) {
                do {
                    arcs_msgpack_span tag;
                    if (read_string(&c, body, &tag, &printable)) return NOT_MINE;
                    document->tag_count++;
                } while (take(&c, ','));
                if (!take(&c, ']')) return NOT_MINE;
            }
        } else if (key.length == 7 && memcmp(name, "columns", 7) == 0 && document->column_count < 0) {
            if (!take(&c, '{')) return NOT_MINE;
            int64_t count = 0;
            do {
                if (count >= max_columns) return NOT_MINE;
                arcs_msgpack_column *column = &columns[count];
                if (read_string(&c, body, &column->name, &printable) || repeats_a_name(body, columns, count) ||
                    !take(&c, ':') || !take(&c, '['))
                    return NOT_MINE;
                if (scan_column(&c, body, column)) return NOT_MINE;
                count++;
            } while (take(&c, ','));
            if (!take(&c, '}')) return NOT_MINE;
            document->column_count = count;
        } else {
            return NOT_MINE; /* another key, or one said twice */
        }
    } while (take(&c, ','));
    if (!take(&c, '}')) return NOT_MINE;
    skip_space(&c);
    if (document->column_count < 0 || c.at != c.end) return NOT_MINE;
    return finish_document(columns, document);
}

/* The tags array's spans (tag_count of them, as scanned). */
int64_t arcs_json_tags(const uint8_t *body, int64_t length, const arcs_msgpack_document *document,
                       arcs_msgpack_span *tags) {
    if (document->tags_offset < 0 || document->tags_offset > length) return document->tag_count ? NOT_MINE : 0;
    cursor c = {body + document->tags_offset, body + length};
    int printable;
    for (int64_t t = 0; t < document->tag_count; t++) {
        if ((t > 0 && !take(&c, ',')) || read_string(&c, body, &tags[t], &printable)) return NOT_MINE;
    }
    return 0;
}

/* One scanned column's values into its buffers in the block, as msgpack_columns.c lays them
 * out (its own rows only: JSON bodies take the general path to a shared block). */
static int fill_column(const uint8_t *body, int64_t length, const arcs_msgpack_column *column, uint8_t *block,
                       int64_t block_length) {
    int64_t count = column->count, kind = column->kind;
    if (count <= 0 || column->array_offset < 0 || column->array_offset >= length || count > length) return NOT_MINE;
    int64_t values_bytes = kind == KIND_STRING ? 4 * (count + 1) : kind == KIND_BOOL ? (count + 7) / 8 : 8 * count;
    if (column->values_at % 8 || !fits(column->values_at, values_bytes, block_length)) return NOT_MINE;
    if (kind == KIND_STRING && (!fits(column->data_at, column->string_bytes, block_length) ||
                                column->string_bytes > INT32_MAX))
        return NOT_MINE;
    cursor c = {body + column->array_offset, body + length};
    uint8_t *values = block + column->values_at;
    int32_t *offsets = (int32_t *)values;
    uint8_t *data = block + column->data_at;
    int64_t written = 0;
    if (kind == KIND_STRING) offsets[0] = 0;
    if (kind == KIND_BOOL) memset(values, 0, (size_t)values_bytes);
    for (int64_t i = 0; i < count; i++) {
        if (i > 0 && !take(&c, ',')) return NOT_MINE;
        if (kind == KIND_STRING) {
            arcs_msgpack_span span;
            int printable;
            if (read_string(&c, body, &span, &printable) || span.length > column->string_bytes - written)
                return NOT_MINE;
            memcpy(data + written, body + span.offset, (size_t)span.length);
            written += span.length;
            offsets[i + 1] = (int32_t)written;
        } else if (kind == KIND_BOOL) {
            int value;
            if (read_bool(&c, &value)) return NOT_MINE;
            values[i >> 3] |= (uint8_t)(value << (i & 7));
        } else {
            const uint8_t *text;
            int64_t size;
            int integer;
            if (read_number(&c, &text, &size, &integer)) return NOT_MINE;
            if (kind == KIND_INT64) {
                int64_t value;
                if (!integer || arcs_parse_int64(text, size, &value)) return NOT_MINE;
                memcpy(values + 8 * i, &value, sizeof value);
            } else if (kind == KIND_FLOAT64) {
                double value;
                if (arcs_parse_decimal(text, size, &value)) return NOT_MINE; /* not finite, too long */
                memcpy(values + 8 * i, &value, sizeof value);
            } else {
                return NOT_MINE;
            }
        }
    }
    if (!take(&c, ']')) return NOT_MINE;
    if (kind == KIND_STRING && written != column->string_bytes) return NOT_MINE;
    return 0;
}

/* Every scanned column into the caller's block, at the places each column names (regions that
 * must not overlap); 0 or NOT_MINE. */
int64_t arcs_json_fill(const uint8_t *body, int64_t length, const arcs_msgpack_column *columns, int64_t column_count,
                       uint8_t *block, int64_t block_length) {
    for (int64_t i = 0; i < column_count; i++) {
        if (fill_column(body, length, &columns[i], block, block_length)) return NOT_MINE;
    }
    return 0;
}
