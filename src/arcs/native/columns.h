/*
 * The column descriptions the columnar readers (msgpack_columns.c, json_columns.c) share with
 * their caller: one document's parts, each column's kind, length and facts, and where the caller
 * lays its Arrow buffers out in one block.
 */
#ifndef ARCS_COLUMNS_H
#define ARCS_COLUMNS_H

#include <stdint.h>
#include <string.h>

enum { NOT_MINE = 1 };
enum { KIND_INT64 = 1, KIND_FLOAT64 = 2, KIND_STRING = 3, KIND_BOOL = 4 };
/* flags: every string byte is in 0x20..0x7e; every integer at least the one before it */
enum { PRINTABLE_ASCII = 1, NONDECREASING = 2 };

/* Where a string is in the body (offset -1: absent). */
typedef struct {
    int64_t offset;
    int64_t length;
} arcs_msgpack_span;

typedef struct {
    arcs_msgpack_span name;
    int64_t kind;
    int64_t count;
    int64_t string_bytes; /* strings: their bytes summed */
    int64_t array_offset; /* the array's first element */
    /* Set by the caller before the fill: where the column's buffers start in the output block. */
    int64_t values_at;    /* integers and floats: 8 bytes each; booleans: a bitmap; strings: int32 offsets */
    int64_t data_at;      /* strings: their bytes */
    /* Set by the scan. */
    int64_t minimum;      /* integers: the least and the greatest value */
    int64_t maximum;
    int64_t flags;        /* strings: PRINTABLE_ASCII; integers: NONDECREASING */
    /* Set by the caller before the fill (0 for a column of its own): where in the column this
     * body's rows go, when several bodies fill one column - the row they start at and, for strings,
     * the byte their data starts at (the offsets written count from the column's first byte). */
    int64_t row_base;
    int64_t data_base;
} arcs_msgpack_column;

typedef struct {
    arcs_msgpack_span measurement;
    arcs_msgpack_span precision;
    int64_t tags_offset; /* the tags array's first element, or -1 */
    int64_t tag_count;
    int64_t column_count;
    int64_t block_bytes; /* the fill's block, with every column's buffers laid out in it */
    int64_t rows;        /* every column's length when they have one, else -1 */
    int64_t flags;       /* PRINTABLE_ASCII: every string of every column is */
} arcs_msgpack_document;

static inline int64_t aligned(int64_t bytes) { return (bytes + 63) / 64 * 64; } /* Arrow's buffer alignment */

/* Each column's place in the fill's block, one after another (the caller may choose others: the
 * fill checks them). NOT_MINE for strings beyond Arrow's 32-bit offsets. Counts and string bytes
 * are bounded by the body's length, so the sums cannot overflow. */
static inline int lay_out(arcs_msgpack_column *columns, arcs_msgpack_document *document) {
    int64_t size = 0;
    for (int64_t i = 0; i < document->column_count; i++) {
        arcs_msgpack_column *column = &columns[i];
        int64_t count = column->count;
        if (column->kind == KIND_STRING && column->string_bytes > INT32_MAX) return NOT_MINE;
        column->values_at = size;
        size += aligned(column->kind == KIND_STRING ? 4 * (count + 1)
                        : column->kind == KIND_BOOL ? (count + 7) / 8
                                                    : 8 * count);
        column->data_at = size;
        if (column->kind == KIND_STRING) size += aligned(column->string_bytes);
    }
    document->block_bytes = size;
    return 0;
}

/* Whether column ``count``'s name repeats an earlier column's: a map or object decoder keeps the
 * last silently, so the readers leave such bodies to the Python decoders. */
static inline int repeats_a_name(const uint8_t *body, const arcs_msgpack_column *columns, int64_t count) {
    const arcs_msgpack_span *name = &columns[count].name;
    for (int64_t j = 0; j < count; j++) {
        const arcs_msgpack_span *other = &columns[j].name;
        if (other->length == name->length &&
            memcmp(body + other->offset, body + name->offset, (size_t)other->length) == 0)
            return 1;
    }
    return 0;
}

/* The scanned document's rows and flags from its columns, and the columns laid out (lay_out). */
static inline int finish_document(arcs_msgpack_column *columns, arcs_msgpack_document *document) {
    document->rows = columns[0].count;
    document->flags = PRINTABLE_ASCII;
    for (int64_t i = 0; i < document->column_count; i++) {
        if (columns[i].count != document->rows) document->rows = -1;
        if (columns[i].kind == KIND_STRING && !(columns[i].flags & PRINTABLE_ASCII)) document->flags = 0;
    }
    return lay_out(columns, document);
}

/* Whether ``bytes`` from ``at`` lie within a block of ``block_length`` (without overflow). */
static inline int fits(int64_t at, int64_t bytes, int64_t block_length) {
    return at >= 0 && bytes >= 0 && at <= block_length && bytes <= block_length - at;
}

#endif
