/*
 * A string column as a dictionary of its distinct values and each row's index into it: how ingest
 * hands tag columns to the Parquet writer. Given dictionary arrays, the writer stores their
 * indices as they are instead of hashing every string itself, which was most of a data file's
 * write (tags repeat: a host name, a region, thousands of times a file). Arrow's own
 * dictionary_encode costs more than it saves; tag values are short and few, and a small
 * open-addressing table of them does the work in a fraction of the time.
 *
 * The table is the caller's memory, so several arrays may be encoded into one dictionary, call
 * after call (each one's indices refer to the dictionary as it stands after the last); ingest
 * joins a column's chunks and calls once.
 * The caller sizes the table for a few values first: a table of thousands of slots for fifty
 * values would miss the cache on every look-up, which cost more than the encoding saves. A
 * column with more distinct values than the table allows is FULL, and the caller starts again
 * with a larger one, or at the largest writes it as plain strings, as the Parquet writer would
 * end up doing with a dictionary that outgrows its page.
 */
#include <stdint.h>
#include <string.h>

#include "text.h"

enum { FULL = -2 };

typedef struct {
    int64_t *slots;          /* slot_count entries, 0 when empty: (hash's high 32 bits << 32) | (index + 1) */
    int64_t slot_count;      /* a power of two, at least twice max_values */
    int32_t *offsets;        /* max_values + 1: the dictionary's string offsets (offsets[0] = 0) */
    uint8_t *data;           /* max_bytes + 16: the dictionary's string bytes (16 more may be read) */
    int64_t max_values;
    int64_t max_bytes;
    int64_t values;          /* distinct values so far */
} arcs_dictionary;

/* The low ``n`` (0 to 8) bytes of a word. */
static inline uint64_t low_bytes(int64_t n) { return n >= 8 ? ~0ull : (1ull << (8 * n)) - 1; }

/* A text of at most 16 bytes as two words, the bytes past it zero: hashed and compared without a
 * loop or a branch on its length (tags' lengths vary from row to row, and such branches would be
 * mispredicted), unlike longer text. */
typedef struct {
    uint64_t low, high;
} short_text;

/* From 16 readable bytes: two loads and masks. */
static inline short_text read_short(const uint8_t *at, int64_t length) {
    short_text text;
    memcpy(&text.low, at, sizeof text.low);
    memcpy(&text.high, at + 8, sizeof text.high);
    text.low &= low_bytes(length);
    text.high &= low_bytes(length > 8 ? length - 8 : 0);
    return text;
}

/* The same near the end of the data, where 16 bytes cannot be read: byte by byte. */
static inline short_text read_short_at_end(const uint8_t *at, int64_t length) {
    short_text text = {0, 0};
    for (int64_t k = 0; k < length; k++) {
        if (k < 8) text.low |= (uint64_t)at[k] << (8 * k);
        else text.high |= (uint64_t)at[k] << (8 * (k - 8));
    }
    return text;
}

static inline int same_short(short_text a, short_text b) { return ((a.low ^ b.low) | (a.high ^ b.high)) == 0; }

static const uint64_t MULTIPLIER = 0x9e3779b97f4a7c15u;

/* Mixed so that every bit reaches the low ones, which pick the slot (the low bits of a product
 * depend only on the low bits of its factors: a text's first bytes, which tags often share). */
static inline uint64_t finish_hash(uint64_t hash) {
    hash ^= hash >> 32;
    hash *= 0xd6e8feb86659fd93u;
    return hash ^ (hash >> 32);
}

static inline uint64_t hash_short(short_text text, int64_t length) {
    uint64_t hash = ((uint64_t)length * MULTIPLIER ^ text.low) * MULTIPLIER;
    return finish_hash((hash ^ (hash >> 29) ^ text.high) * MULTIPLIER);
}

/* Text longer than 16 bytes: a multiply per eight bytes, the last eight (overlapping the ones
 * before) closing it. */
static inline uint64_t hash_long(const uint8_t *at, int64_t length) {
    uint64_t hash = (uint64_t)length * MULTIPLIER, word;
    int64_t i = 0;
    for (; i + 8 <= length; i += 8) {
        memcpy(&word, at + i, sizeof word);
        hash = (hash ^ word) * MULTIPLIER;
        hash ^= hash >> 29;
    }
    memcpy(&word, at + length - 8, sizeof word);
    return finish_hash((hash ^ word) * MULTIPLIER);
}

/* Rows [0, rows) of the string array (int32 ``offsets``, rows + 1 of them, and ``data``) as
 * indices into the dictionary, which grows by their new values. The number of distinct values
 * the dictionary holds after them; FULL when it would pass max_values or max_bytes (the caller
 * may start again with a larger one), or -1 for a description that does not fit: offsets that
 * decrease or leave ``data`` (``data_bytes`` long), limits out of range. */
int64_t arcs_dictionary_encode(arcs_dictionary *dictionary, const int32_t *offsets, const uint8_t *data,
                               int64_t data_bytes, int64_t rows, int32_t *indices) {
    if (dictionary->max_values < 1 || dictionary->max_values >= INT32_MAX || dictionary->max_bytes < 0 ||
        dictionary->max_bytes > INT32_MAX || dictionary->values < 0 || dictionary->values > dictionary->max_values ||
        dictionary->slot_count < 2 * dictionary->max_values || dictionary->slot_count & (dictionary->slot_count - 1))
        return -1;
    if (dictionary->values == 0) dictionary->offsets[0] = 0;
    uint64_t mask = (uint64_t)dictionary->slot_count - 1;
    int32_t *dictionary_offsets = dictionary->offsets;
    for (int64_t row = 0; row < rows; row++) {
        int64_t start = offsets[row], end = offsets[row + 1];
        if (start < 0 || end < start || end > data_bytes) return -1;
        const uint8_t *text = data + start;
        int64_t length = end - start;
        int short_form = length <= 16;
        short_text words = {0, 0};
        uint64_t hash;
        if (short_form) {
            words = data_bytes - start >= 16 ? read_short(text, length) : read_short_at_end(text, length);
            hash = hash_short(words, length);
        } else {
            hash = hash_long(text, length);
        }
        uint64_t tag = hash >> 32;
        int64_t index = -1;
        for (uint64_t slot = hash & mask;; slot = (slot + 1) & mask) {
            int64_t entry = dictionary->slots[slot];
            if (entry == 0) {
                /* A new value: appended to the dictionary, if it has room. */
                int64_t values = dictionary->values, used = dictionary_offsets[values];
                if (values >= dictionary->max_values || length > dictionary->max_bytes - used) return FULL;
                memcpy(dictionary->data + used, text, (size_t)length);
                dictionary_offsets[values + 1] = (int32_t)(used + length);
                dictionary->slots[slot] = (int64_t)((tag << 32) | (uint64_t)(values + 1));
                dictionary->values = values + 1;
                index = values;
                break;
            }
            if ((uint64_t)entry >> 32 != tag) continue;
            int64_t candidate = (entry & 0xffffffff) - 1;
            int64_t known = dictionary_offsets[candidate], known_length = dictionary_offsets[candidate + 1] - known;
            if (known_length != length) continue;
            /* The dictionary's text has 16 readable bytes too (``data`` has that much beyond max_bytes). */
            if (short_form ? same_short(read_short(dictionary->data + known, length), words)
                           : arcs_same_bytes(dictionary->data + known, text, length)) {
                index = candidate;
                break;
            }
        }
        indices[row] = (int32_t)index;
    }
    return dictionary->values;
}
