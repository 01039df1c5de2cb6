/*
 * MessagePack columnar bodies read straight into Arrow buffers: Arc's fast write path.
 *
 * Only the common document is taken: one map of "m", "columns", "tags" and "precision", whose
 * columns are arrays holding one kind of scalar each (integers, floats, strings or booleans,
 * no nils). Anything else - other keys or shapes, nils, mixed kinds, integers beyond int64, NaN
 * and infinities, extensions, repeated keys, trailing or missing bytes - is answered "not mine" and the Python
 * decoders read the body (and word its errors). Every read is bounds-checked: the body is
 * hostile until proven otherwise.
 *
 * Two passes: arcs_msgpack_scan finds the document's parts and each column's kind, length and
 * string bytes, noting what validation would otherwise look for again (the bounds and order of
 * integer columns, whether string columns are plain printable ASCII); the caller lays every
 * column's buffers out in one block of exactly that size, and arcs_msgpack_fill writes them all.
 */
#include <stdint.h>
#include <string.h>

#include "columns.h"
#include "dictionary.h"
#include "text.h"

typedef struct {
    const uint8_t *at;
    const uint8_t *end;
} cursor;

static inline int has(const cursor *c, int64_t bytes) { return c->end - c->at >= bytes; }

/* MessagePack's big-endian numbers of 1, 2, 4 or 8 bytes (the only sizes it has), on the
 * little-endian machines Lambda offers (x86-64, arm64). */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "byte swaps assume a little-endian host");
static inline uint64_t big_endian(const uint8_t *at, int bytes) {
    uint16_t two;
    uint32_t four;
    uint64_t eight;
    switch (bytes) {
    case 1:
        return at[0];
    case 2:
        memcpy(&two, at, sizeof two);
        return __builtin_bswap16(two);
    case 4:
        memcpy(&four, at, sizeof four);
        return __builtin_bswap32(four);
    default:
        memcpy(&eight, at, sizeof eight);
        return __builtin_bswap64(eight);
    }
}

/* A string's span; 0, or NOT_MINE when the next value is not a complete string. */
static int read_string(cursor *c, const uint8_t *body, arcs_msgpack_span *span) {
    if (!has(c, 1)) return NOT_MINE;
    uint8_t head = *c->at;
    int size_bytes;
    uint64_t length;
    if ((head & 0xe0) == 0xa0) {
        size_bytes = 0;
        length = head & 0x1f;
    } else if (head >= 0xd9 && head <= 0xdb) {
        size_bytes = 1 << (head - 0xd9);
        if (!has(c, 1 + size_bytes)) return NOT_MINE;
        length = big_endian(c->at + 1, size_bytes);
    } else {
        return NOT_MINE;
    }
    c->at += 1 + size_bytes;
    if ((uint64_t)(c->end - c->at) < length) return NOT_MINE;
    span->offset = c->at - body;
    span->length = (int64_t)length;
    c->at += length;
    return 0;
}

/* A container's element count (fixed, 16- or 32-bit), given its three head bytes. */
static int read_container(cursor *c, uint8_t fixed_base, uint8_t head16, uint64_t *count) {
    if (!has(c, 1)) return NOT_MINE;
    uint8_t head = *c->at;
    if ((head & 0xf0) == fixed_base) {
        *count = head & 0x0f;
        c->at += 1;
    } else if (head == head16 || head == head16 + 1) {
        int size_bytes = head == head16 ? 2 : 4;
        if (!has(c, 1 + size_bytes)) return NOT_MINE;
        *count = big_endian(c->at + 1, size_bytes);
        c->at += 1 + size_bytes;
    } else {
        return NOT_MINE;
    }
    /* Every element takes at least a byte: a count beyond the body is a lie, refused early. */
    return *count > (uint64_t)(c->end - c->at) ? NOT_MINE : 0;
}

/* Whether ``head`` starts a value of ``kind`` (the kinds' head bytes, which do not overlap), in a
 * form the compiler folds when ``kind`` is a constant (the column loops below are made once per kind). */
static inline int of_kind(uint8_t head, int kind) {
    switch (kind) {
    case KIND_INT64:
        return head <= 0x7f || head >= 0xe0 || (head >= 0xcc && head <= 0xd3);
    case KIND_FLOAT64:
        return head == 0xca || head == 0xcb;
    case KIND_STRING:
        return (head & 0xe0) == 0xa0 || (head >= 0xd9 && head <= 0xdb);
    case KIND_BOOL:
        return head == 0xc2 || head == 0xc3;
    default:
        return 0;
    }
}

/* The kind a value starting with ``head`` is of; 0 for nil, binary, extensions, containers and
 * the unused 0xc1. */
static int kind_of(uint8_t head) {
    for (int kind = KIND_INT64; kind <= KIND_BOOL; kind++) {
        if (of_kind(head, kind)) return kind;
    }
    return 0;
}

/* One scalar of the column's kind: its value (integers, floats as bits, booleans), or its
 * string's span. NOT_MINE for another kind, a truncated value or an integer beyond int64. */
static inline __attribute__((always_inline)) int read_scalar(cursor *c, const uint8_t *body, int kind,
                                                             uint64_t *value, arcs_msgpack_span *span) {
    if (!has(c, 1)) return NOT_MINE;
    uint8_t head = *c->at;
    if (!of_kind(head, kind)) return NOT_MINE;
    if (kind == KIND_STRING) return read_string(c, body, span);
    if (kind == KIND_BOOL) {
        *value = head == 0xc3;
        c->at += 1;
        return 0;
    }
    if (head <= 0x7f || head >= 0xe0) {
        *value = (uint64_t)(int64_t)(int8_t)head; /* positive and negative fixints */
        c->at += 1;
        return 0;
    }
    int bytes;
    if (head == 0xca) bytes = 4;
    else if (head == 0xcb) bytes = 8;
    else bytes = 1 << ((head - 0xcc) & 3); /* uint8..uint64 0xcc-0xcf, int8..int64 0xd0-0xd3 */
    if (!has(c, 1 + bytes)) return NOT_MINE;
    uint64_t raw = big_endian(c->at + 1, bytes);
    c->at += 1 + bytes;
    if (head == 0xca) {
        uint32_t bits = (uint32_t)raw;
        float single;
        memcpy(&single, &bits, sizeof single);
        double widened = single;
        memcpy(value, &widened, sizeof widened);
    } else if (head == 0xcb) {
        *value = raw;
    } else if (head <= 0xcf) {
        if (raw > (uint64_t)INT64_MAX) return NOT_MINE; /* Python's path says why */
        *value = raw;
    } else {
        int shift = 64 - 8 * bytes; /* sign-extend the int8..int64 */
        *value = (uint64_t)((int64_t)(raw << shift) >> shift);
    }
    return 0;
}

static int key_is(const uint8_t *body, const arcs_msgpack_span *key, const char *name) {
    size_t length = strlen(name);
    return (size_t)key->length == length && memcmp(body + key->offset, name, length) == 0;
}

/* Whether the next ``count`` values all start with ``head`` and so take ``width`` bytes each: a
 * column of one encoding, as writers produce for floats and for times. Found without following
 * each value's length, so no load waits on the one before it, as reading value by value must
 * (a few times faster on such columns). */
static inline int uniform(const cursor *c, uint64_t count, uint8_t head, int64_t width) {
    if ((uint64_t)(c->end - c->at) / (uint64_t)width < count) return 0;
    uint8_t differs = 0;
    for (uint64_t i = 0; i < count; i++) differs |= (uint8_t)(c->at[i * (uint64_t)width] ^ head);
    return differs == 0;
}

/* Value ``i`` of a uniform column of 9-byte integers (uint64 0xcf, int64 0xd3) or floats (0xcb):
 * its 8 bytes after the head, as a host number's bits. */
static inline uint64_t uniform_value(const uint8_t *at, uint64_t i) { return big_endian(at + 9 * i + 1, 8); }

/* A uniform column of 9-byte integers with head ``head``: its facts as scan_values notes them;
 * NOT_MINE for a uint64 beyond int64 (the Python decoders say why). */
static inline int scan_uniform_integers(cursor *c, uint64_t count, uint8_t head, arcs_msgpack_column *column) {
    int64_t minimum = INT64_MAX, maximum = INT64_MIN, descents = 0;
    uint64_t beyond = 0;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t raw = uniform_value(c->at, i);
        beyond |= head == 0xcf ? raw >> 63 : 0;
        int64_t number = (int64_t)raw;
        descents += i > 0 && number < maximum;
        minimum = number < minimum ? number : minimum;
        maximum = number > maximum ? number : maximum;
    }
    if (beyond) return NOT_MINE;
    c->at += 9 * count;
    column->string_bytes = 0;
    column->minimum = minimum;
    column->maximum = maximum;
    column->flags = descents == 0 ? NONDECREASING : 0;
    return 0;
}

/* Past ``count`` values of ``kind``, adding up their string bytes and noting the column's facts
 * (integers' bounds and order, strings' printability). */
static inline __attribute__((always_inline)) int scan_values(cursor *c, const uint8_t *body, int kind, uint64_t count,
                                                             arcs_msgpack_column *column) {
    /* The first value's head says which uniform encoding to look for (the cursor is on it). */
    uint8_t head = *c->at;
    if (kind == KIND_INT64 && (head == 0xcf || head == 0xd3) && uniform(c, count, head, 9))
        return scan_uniform_integers(c, count, head, column);
    int64_t float_width = head == 0xcb ? 9 : 5; /* float64 or float32 */
    if (kind == KIND_FLOAT64 && uniform(c, count, head, float_width)) {
        /* NaN and infinities (every exponent bit set) are refused: the Python decoders say so. */
        uint64_t exponent = float_width == 9 ? 0x7ff0000000000000u : 0x7f800000u, special = 0;
        for (uint64_t i = 0; i < count; i++) {
            uint64_t bits = big_endian(c->at + (uint64_t)float_width * i + 1, (int)float_width - 1);
            special |= (bits & exponent) == exponent;
        }
        if (special) return NOT_MINE;
        c->at += float_width * (int64_t)count;
        column->string_bytes = 0;
        column->minimum = INT64_MAX;
        column->maximum = INT64_MIN;
        column->flags = 0;
        return 0;
    }
    int64_t minimum = INT64_MAX, maximum = INT64_MIN, descents = 0, string_bytes = 0;
    int printable = 1;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t value = 0;
        arcs_msgpack_span span = {0, 0};
        if (read_scalar(c, body, kind, &value, &span)) return NOT_MINE;
        if (kind == KIND_STRING) {
            string_bytes += span.length;
            printable &= arcs_printable_ascii(body + span.offset, span.length);
        } else if (kind == KIND_FLOAT64) {
            if ((value & 0x7ff0000000000000u) == 0x7ff0000000000000u) return NOT_MINE; /* NaN, infinite */
        } else if (kind == KIND_INT64) {
            int64_t number = (int64_t)value;
            descents += i > 0 && number < maximum;
            if (number < minimum) minimum = number;
            if (number > maximum) maximum = number;
        }
    }
    column->string_bytes = string_bytes;
    column->minimum = minimum;
    column->maximum = maximum;
    column->flags = kind == KIND_STRING && printable ? PRINTABLE_ASCII : kind == KIND_INT64 && descents == 0 ? NONDECREASING : 0;
    return 0;
}

/* The column array at the cursor: its kind, length and string bytes; the cursor moves past it. */
static int scan_column(cursor *c, const uint8_t *body, arcs_msgpack_column *column) {
    uint64_t count;
    if (read_container(c, 0x90, 0xdc, &count) || count == 0 || !has(c, 1)) return NOT_MINE;
    column->array_offset = c->at - body;
    column->kind = kind_of(*c->at);
    column->count = (int64_t)count;
    column->row_base = column->data_base = 0;
    switch (column->kind) {
    case KIND_INT64:
        return scan_values(c, body, KIND_INT64, count, column);
    case KIND_FLOAT64:
        return scan_values(c, body, KIND_FLOAT64, count, column);
    case KIND_STRING:
        return scan_values(c, body, KIND_STRING, count, column);
    case KIND_BOOL:
        return scan_values(c, body, KIND_BOOL, count, column);
    default:
        return NOT_MINE;
    }
}

/* The document's parts and up to max_columns columns' descriptions, laid out; 0, or NOT_MINE. */
int64_t arcs_msgpack_scan(const uint8_t *body, int64_t length, arcs_msgpack_document *document,
                          arcs_msgpack_column *columns, int64_t max_columns) {
    cursor c = {body, body + length};
    uint64_t keys;
    document->measurement.offset = document->precision.offset = document->tags_offset = -1;
    document->tag_count = 0;
    document->column_count = -1;
    if (read_container(&c, 0x80, 0xde, &keys)) return NOT_MINE;
    for (uint64_t k = 0; k < keys; k++) {
        arcs_msgpack_span key;
        if (read_string(&c, body, &key)) return NOT_MINE;
        if (key_is(body, &key, "m") && document->measurement.offset < 0) {
            if (read_string(&c, body, &document->measurement)) return NOT_MINE;
        } else if (key_is(body, &key, "precision") && document->precision.offset < 0) {
            if (read_string(&c, body, &document->precision)) return NOT_MINE;
        } else if (key_is(body, &key, "tags") && document->tags_offset < 0) {
            uint64_t count;
            if (read_container(&c, 0x90, 0xdc, &count)) return NOT_MINE;
            document->tags_offset = c.at - body;
            document->tag_count = (int64_t)count;
            for (uint64_t t = 0; t < count; t++) {
                arcs_msgpack_span tag;
                if (read_string(&c, body, &tag)) return NOT_MINE;
            }
        } else if (key_is(body, &key, "columns") && document->column_count < 0) {
            uint64_t count;
            if (read_container(&c, 0x80, 0xde, &count) || count == 0 || count > (uint64_t)max_columns) return NOT_MINE;
            document->column_count = (int64_t)count;
            for (uint64_t i = 0; i < count; i++) {
                if (read_string(&c, body, &columns[i].name) || repeats_a_name(body, columns, (int64_t)i))
                    return NOT_MINE;
                if (scan_column(&c, body, &columns[i])) return NOT_MINE;
            }
        } else {
            return NOT_MINE; /* another key, or one said twice */
        }
    }
    if (document->column_count < 0 || c.at != c.end) return NOT_MINE;
    return finish_document(columns, document);
}

/* The tags array's spans (tag_count of them, as scanned). */
int64_t arcs_msgpack_tags(const uint8_t *body, int64_t length, const arcs_msgpack_document *document,
                          arcs_msgpack_span *tags) {
    cursor c = {body + document->tags_offset, body + length};
    for (int64_t t = 0; t < document->tag_count; t++) {
        if (read_string(&c, body, &tags[t])) return NOT_MINE;
    }
    return 0;
}

/* Appends a length-prefixed span to the shape key; 0, or NOT_MINE when it would not fit. */
static int put_span(uint8_t *out, int64_t capacity, int64_t *used, const uint8_t *body, arcs_msgpack_span span,
                    int64_t kind) {
    int64_t length = span.offset < 0 ? -1 : span.length;
    int64_t bytes = length < 0 ? 0 : length;
    if (capacity - *used < 16 + bytes) return NOT_MINE;
    memcpy(out + *used, &length, 8);
    memcpy(out + *used + 8, &kind, 8);
    if (bytes) memcpy(out + *used + 16, body + span.offset, (size_t)bytes);
    *used += 16 + bytes;
    return 0;
}

/* The scanned document's shape - its measurement, precision, tags and each column's name and kind,
 * length-prefixed so no two shapes write the same bytes - into ``out``: a key under which whatever
 * was concluded from them holds for every body of that shape. Its length, or -1 when it needs more
 * than ``capacity`` bytes. */
int64_t arcs_msgpack_shape(const uint8_t *body, int64_t length, const arcs_msgpack_document *document,
                           const arcs_msgpack_column *columns, uint8_t *out, int64_t capacity) {
    int64_t used = 0;
    if (put_span(out, capacity, &used, body, document->measurement, 0) ||
        put_span(out, capacity, &used, body, document->precision, 0))
        return -1;
    cursor c = {body + (document->tags_offset < 0 ? length : document->tags_offset), body + length};
    for (int64_t t = 0; t < document->tag_count; t++) {
        arcs_msgpack_span tag;
        if (read_string(&c, body, &tag) || put_span(out, capacity, &used, body, tag, -1)) return -1;
    }
    for (int64_t i = 0; i < document->column_count; i++) {
        if (put_span(out, capacity, &used, body, columns[i].name, columns[i].kind)) return -1;
    }
    return used;
}

typedef struct {
    uint8_t *values;  /* at this body's first row */
    int32_t *offsets; /* at this body's first row */
    uint8_t *data;    /* at this body's first string byte */
    int64_t row_base;
    int64_t data_base;    /* the column's string bytes before this body's */
    int64_t string_bytes; /* what ``data`` holds */
    int64_t written;      /* of it so far */
} fill_buffers;

/* ``count`` values of ``kind`` into their buffers (made once per kind, the kind a constant). */
static inline __attribute__((always_inline)) int fill_values(cursor *c, const uint8_t *body, int kind, int64_t count,
                                                             fill_buffers *out) {
    /* Uniform columns of 9-byte values (see ``uniform``): integers (uint64 0xcf, int64 0xd3, the
     * scan refused uint64s beyond int64; checked again, as the fill trusts nothing) or floats. */
    uint8_t head = c->at < c->end ? *c->at : 0;
    if ((kind == KIND_INT64 && (head == 0xcf || head == 0xd3)) || (kind == KIND_FLOAT64 && head == 0xcb)) {
        if (uniform(c, (uint64_t)count, head, 9)) {
            uint64_t beyond = 0;
            for (int64_t i = 0; i < count; i++) {
                uint64_t raw = uniform_value(c->at, (uint64_t)i);
                beyond |= head == 0xcf ? raw >> 63 : 0;
                memcpy(out->values + 8 * i, &raw, sizeof raw);
            }
            if (beyond) return NOT_MINE;
            c->at += 9 * count;
            return 0;
        }
    }
    for (int64_t i = 0; i < count; i++) {
        uint64_t value = 0;
        arcs_msgpack_span span = {0, 0};
        if (read_scalar(c, body, kind, &value, &span)) return NOT_MINE;
        if (kind == KIND_STRING) {
            if (out->written + span.length > out->string_bytes) return NOT_MINE;
            if (span.length > 0) memcpy(out->data + out->written, body + span.offset, (size_t)span.length);
            out->written += span.length;
            out->offsets[i + 1] = (int32_t)(out->data_base + out->written);
        } else if (kind == KIND_BOOL) {
            int64_t bit = out->row_base + i; /* set or cleared: the bitmap may hold another body's bits */
            uint8_t mask = (uint8_t)(1u << (bit & 7));
            out->values[bit >> 3] = (uint8_t)((out->values[bit >> 3] & ~mask) | (value ? mask : 0));
        } else {
            memcpy(out->values + 8 * i, &value, sizeof value);
        }
    }
    return 0;
}

/* A tag column's strings as indices into ``dictionary`` (int32 each): hashed where they lie in the
 * body, never copied (dictionary.h). 0, NOT_MINE, or DICTIONARY_FULL when the dictionary has no
 * room left (the caller starts again with a larger one). */
static int fill_dictionary(cursor *c, const uint8_t *body, int64_t length, int64_t count, arcs_dictionary *dictionary,
                           int32_t *indices) {
    for (int64_t i = 0; i < count; i++) {
        uint64_t unused = 0;
        arcs_msgpack_span span = {0, 0};
        if (read_scalar(c, body, KIND_STRING, &unused, &span)) return NOT_MINE;
        int64_t index =
            arcs_dictionary_index(dictionary, body + span.offset, span.length, length - span.offset >= 16);
        if (index < 0) return DICTIONARY_FULL;
        indices[i] = (int32_t)index;
    }
    return 0;
}

/* One scanned column's Arrow buffers in the block: values (8 bytes each for integers and floats;
 * a bitmap for booleans), or int32 offsets (rows + 1) and data for strings; this body's rows from
 * ``row_base`` on (and its strings from ``data_base``). The column's facts are the scan's: the
 * fill reads the same bytes. */
static int fill_column(const uint8_t *body, int64_t length, arcs_msgpack_column *column, uint8_t *block,
                       int64_t block_length, arcs_dictionary *dictionary) {
    int kind = (int)column->kind;
    int64_t count = column->count, row_base = column->row_base, data_base = column->data_base;
    /* The description is checked before any size is computed from it: each element takes at least
     * a byte of the body, and the bases at most the block, so no size below can overflow. */
    if (count <= 0 || column->array_offset < 0 || column->array_offset >= length ||
        count > length - column->array_offset)
        return NOT_MINE;
    if (row_base < 0 || row_base > block_length || data_base < 0 || data_base > block_length) return NOT_MINE;
    cursor c = {body + column->array_offset, body + length};
    int64_t rows = row_base + count;
    if (dictionary != NULL) {
        if (kind != KIND_STRING || !arcs_dictionary_ready(dictionary)) return NOT_MINE;
        if (column->values_at % 8 || !fits(column->values_at, 4 * rows, block_length)) return NOT_MINE;
        return fill_dictionary(&c, body, length, count, dictionary, (int32_t *)(block + column->values_at) + row_base);
    }
    int64_t values_bytes = kind == KIND_STRING ? 4 * (rows + 1) : kind == KIND_BOOL ? (rows + 7) / 8 : 8 * rows;
    /* The caller's layout is checked for bounds and alignment (offsets are written as int32); that
     * the columns' regions do not overlap is the caller's part. */
    if (column->values_at % 8 || !fits(column->values_at, values_bytes, block_length)) return NOT_MINE;
    if (kind == KIND_STRING && (!fits(column->data_at, data_base + column->string_bytes, block_length) ||
                                data_base + column->string_bytes > INT32_MAX))
        return NOT_MINE;
    uint8_t *values = block + column->values_at;
    int32_t *offsets = (int32_t *)values + row_base;
    uint8_t *data = kind == KIND_STRING ? block + column->data_at + data_base : block;
    if (kind == KIND_STRING) offsets[0] = (int32_t)data_base;
    fill_buffers buffers = {
        kind == KIND_BOOL ? values : values + 8 * row_base, offsets, data, row_base, data_base,
        column->string_bytes, 0,
    };
    int refused;
    switch (kind) {
    case KIND_INT64:
        refused = fill_values(&c, body, KIND_INT64, count, &buffers);
        break;
    case KIND_FLOAT64:
        refused = fill_values(&c, body, KIND_FLOAT64, count, &buffers);
        break;
    case KIND_STRING:
        refused = fill_values(&c, body, KIND_STRING, count, &buffers);
        break;
    case KIND_BOOL:
        refused = fill_values(&c, body, KIND_BOOL, count, &buffers);
        break;
    default:
        refused = NOT_MINE;
    }
    if (refused) return NOT_MINE;
    if (kind == KIND_STRING && buffers.written != column->string_bytes) return NOT_MINE;
    return 0;
}

/* Every scanned column into the caller's block, at the places each column names (regions that
 * must not overlap); 0 or NOT_MINE. */
int64_t arcs_msgpack_fill(const uint8_t *body, int64_t length, arcs_msgpack_column *columns, int64_t column_count,
                          uint8_t *block, int64_t block_length) {
    for (int64_t i = 0; i < column_count; i++) {
        if (fill_column(body, length, &columns[i], block, block_length, NULL)) return NOT_MINE;
    }
    return 0;
}

/* A filled integer column scaled in place, values * multiply / divide (one of them 1): the time
 * column turned into nanoseconds. The caller chose the factors from the column's bounds, so no
 * product overflows. Dividing by 1,000 gets a loop of its own: dividing by a constant compiles to
 * a multiply and shifts, where a division by a variable takes tens of cycles a value (the Python
 * side asks for no division today: nanoseconds are kept as written).
 * 0, or NOT_MINE for factors it does not take. */
int64_t arcs_msgpack_rescale(int64_t *values, int64_t count, int64_t multiply, int64_t divide) {
    if (count < 0 || multiply < 1 || divide < 1 || (multiply != 1 && divide != 1)) return NOT_MINE;
    if (divide == 1000) {
        for (int64_t i = 0; i < count; i++) values[i] /= 1000;
    } else if (divide != 1) {
        for (int64_t i = 0; i < count; i++) values[i] /= divide;
    } else if (multiply != 1) {
        for (int64_t i = 0; i < count; i++) values[i] *= multiply;
    }
    return 0;
}

/* One body's columns filled where several bodies of one shape share a block: body column i goes
 * to the block's column target[i], whose values start at values_at[target[i]] (and strings'
 * bytes at data_at[...], after the data_bases[...] bytes earlier bodies put there, which this
 * adds to); its rows start at row_base. A string column whose block column has a dictionary
 * (``dictionaries[target[i]]``; the array may be NULL for none) is filled as int32 indices into it
 * instead. Its time column (``time_column``, or -1) is then scaled by multiply / divide, as
 * arcs_msgpack_rescale does. 0, NOT_MINE, or DICTIONARY_FULL (the dictionary that had no room is
 * marked ``refused``; the block is then partly filled). */
int64_t arcs_msgpack_fill_into(const uint8_t *body, int64_t length, arcs_msgpack_column *columns, int64_t column_count,
                               uint8_t *block, int64_t block_length, const int64_t *target, int64_t targets,
                               const int64_t *values_at, const int64_t *data_at, int64_t *data_bases,
                               arcs_dictionary *const *dictionaries, int64_t row_base, int64_t time_column,
                               int64_t multiply, int64_t divide) {
    if (time_column >= column_count) return NOT_MINE;
    for (int64_t i = 0; i < column_count; i++) {
        int64_t t = target[i];
        if (t < 0 || t >= targets) return NOT_MINE;
        arcs_msgpack_column *column = &columns[i];
        arcs_dictionary *dictionary = dictionaries != NULL ? dictionaries[t] : NULL;
        column->values_at = values_at[t];
        column->data_at = data_at[t];
        column->row_base = row_base;
        column->data_base = data_bases[t];
        int outcome = fill_column(body, length, column, block, block_length, dictionary);
        if (outcome) return outcome;
        if (dictionary == NULL) data_bases[t] += column->string_bytes;
    }
    if (time_column < 0) return 0;
    const arcs_msgpack_column *time = &columns[time_column];
    if (time->kind != KIND_INT64) return NOT_MINE;
    /* fill_column checked values_at and the rows against the block; the values are 8-aligned */
    return arcs_msgpack_rescale((int64_t *)(block + time->values_at) + row_base, time->count, multiply, divide);
}
