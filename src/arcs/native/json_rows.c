/*
 * The rows of a JSON query result, written from the JSON text of each of its columns.
 *
 * Arrow's kernels turn every column into the JSON text of its values (arcs/query/results.py); what is
 * left is interleaving them row by row, `[a,"b",c]` with commas between rows. Arrow's
 * element-wise join does that at ~7 ns per value and literal; this loop copies each value once,
 * straight into the response body. Plain C with no Python API: loaded through ctypes, built for
 * each Lambda architecture by arcs/native/build.py.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* One column: the JSON text of its values as an Arrow large-string array, and what goes around
 * each non-null value (the quotes of strings, "Z\"" after a timestamp). A null value is `null`.
 * With escape set the values are raw UTF-8 strings, escaped on the way (quotes, backslashes and
 * control characters; the rest is copied as it is). */
typedef struct {
    const int64_t *offsets;  /* offsets[i]..offsets[i+1] is row i's text in data */
    const uint8_t *data;
    const uint8_t *validity; /* Arrow validity bitmap, or NULL when every value is valid */
    int64_t validity_offset; /* bit of row 0 in validity */
    const uint8_t *before;
    int64_t before_length;
    const uint8_t *after;
    int64_t after_length;
    int64_t escape;
} arcs_text_column;

static const uint8_t NULL_TEXT[4] = {'n', 'u', 'l', 'l'};

/* How each byte is written inside a JSON string: 0 as it is, else the escape's second character
 * ('u' for the \u00XX form). */
static const uint8_t ESCAPE[256] = {
    'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'b', 't', 'n', 'u', 'f', 'r', 'u', 'u',
    'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u',
    0, 0, '"', ['\\'] = '\\',
};
static const uint8_t HEX[16] = {'0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};

/* Whether any of the 8 bytes needs escaping (exact): one below 0x20, a quote or a backslash. */
static inline int word_needs_escape(uint64_t word) {
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    uint64_t quotes = word ^ (ones * '"'), backslashes = word ^ (ones * '\\');
    uint64_t below_space = (word - ones * 0x20) & ~word;
    uint64_t is_quote = (quotes - ones) & ~quotes, is_backslash = (backslashes - ones) & ~backslashes;
    return ((below_space | is_quote | is_backslash) & highs) != 0;
}

/* The first byte of text[start, end) that needs escaping, or end. */
static inline int64_t next_to_escape(const uint8_t *text, int64_t start, int64_t end) {
    int64_t at = start;
    for (; at + 8 <= end; at += 8) {
        uint64_t word;
        memcpy(&word, text + at, sizeof word);
        if (word_needs_escape(word)) break;
    }
    for (; at < end; at++) {
        if (ESCAPE[text[at]]) return at;
    }
    return end;
}

static int64_t escaped_length(const uint8_t *text, int64_t length) {
    int64_t size = length;
    for (int64_t at = next_to_escape(text, 0, length); at < length; at = next_to_escape(text, at + 1, length)) {
        size += ESCAPE[text[at]] == 'u' ? 5 : 1;
    }
    return size;
}

static uint8_t *put_escaped(uint8_t *out, const uint8_t *text, int64_t length) {
    int64_t done = 0;
    for (int64_t at = next_to_escape(text, 0, length); at < length; at = next_to_escape(text, done, length)) {
        memcpy(out, text + done, (size_t)(at - done));
        out += at - done;
        uint8_t escape = ESCAPE[text[at]];
        *out++ = '\\';
        *out++ = escape;
        if (escape == 'u') {
            *out++ = '0';
            *out++ = '0';
            *out++ = HEX[text[at] >> 4];
            *out++ = HEX[text[at] & 15];
        }
        done = at + 1;
    }
    if (length > done) memcpy(out, text + done, (size_t)(length - done));
    return out + (length - done);
}

static inline int is_valid(const arcs_text_column *column, int64_t row) {
    if (column->validity == NULL) return 1;
    int64_t bit = column->validity_offset + row;
    return (column->validity[bit >> 3] >> (bit & 7)) & 1;
}

/* Bytes the rows take: each row is `[` + values + commas + `]`, rows separated by commas, and
 * one comma before the first row when `after_earlier_rows` (this batch continues a document). */
int64_t arcs_json_rows_size(const arcs_text_column *columns, int32_t column_count, int64_t row_count,
                            int32_t after_earlier_rows) {
    if (row_count <= 0) return 0;
    int64_t size = row_count * (2 + (column_count > 0 ? column_count - 1 : 0)) + (row_count - 1);
    if (after_earlier_rows) size += 1;
    for (int32_t c = 0; c < column_count; c++) {
        const arcs_text_column *column = &columns[c];
        int64_t wrapped = column->before_length + column->after_length;
        if (column->escape) {
            for (int64_t row = 0; row < row_count; row++) {
                if (is_valid(column, row)) {
                    int64_t start = column->offsets[row], length = column->offsets[row + 1] - start;
                    size += (length > 0 ? escaped_length(column->data + start, length) : 0) + wrapped;
                } else {
                    size += (int64_t)sizeof NULL_TEXT;
                }
            }
            continue;
        }
        if (column->validity == NULL) {
            size += column->offsets[row_count] - column->offsets[0] + row_count * wrapped;
            continue;
        }
        for (int64_t row = 0; row < row_count; row++) {
            if (is_valid(column, row)) {
                size += column->offsets[row + 1] - column->offsets[row] + wrapped;
            } else {
                size += (int64_t)sizeof NULL_TEXT;
            }
        }
    }
    return size;
}

static inline uint8_t *put(uint8_t *out, const uint8_t *bytes, int64_t length) {
    if (length > 0) memcpy(out, bytes, (size_t)length); /* an empty column may have no data buffer */
    return out + length;
}

/* Writes the rows into out and returns the bytes written: exactly arcs_json_rows_size(), or -1
 * (and nothing written) when that is more than capacity. */
int64_t arcs_json_rows_write(const arcs_text_column *columns, int32_t column_count, int64_t row_count,
                             int32_t after_earlier_rows, uint8_t *out, int64_t capacity) {
    int64_t size = arcs_json_rows_size(columns, column_count, row_count, after_earlier_rows);
    if (size > capacity) return -1;
    uint8_t *at = out;
    for (int64_t row = 0; row < row_count; row++) {
        if (row > 0 || after_earlier_rows) *at++ = ',';
        *at++ = '[';
        for (int32_t c = 0; c < column_count; c++) {
            const arcs_text_column *column = &columns[c];
            if (c > 0) *at++ = ',';
            if (!is_valid(column, row)) {
                at = put(at, NULL_TEXT, (int64_t)sizeof NULL_TEXT);
                continue;
            }
            at = put(at, column->before, column->before_length);
            int64_t start = column->offsets[row], length = column->offsets[row + 1] - start;
            if (length > 0) { /* an empty column may have no data buffer at all */
                const uint8_t *text = column->data + start;
                at = column->escape ? put_escaped(at, text, length) : put(at, text, length);
            }
            at = put(at, column->after, column->after_length);
        }
        *at++ = ']';
    }
    return at - out;
}
