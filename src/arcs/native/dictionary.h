/*
 * A dictionary of distinct strings and the small open-addressing table that finds them: how tag
 * columns reach the Parquet writer as indices (dictionary.c encodes an Arrow string array;
 * msgpack_columns.c encodes a body's tag column as it fills it, so the strings are never copied).
 *
 * Every buffer is the caller's, so one dictionary may take values from many calls. The caller
 * sizes the table for few values first (tags have few): thousands of slots for fifty values would
 * miss the cache on every look-up. A value that finds no room marks the dictionary ``refused`` and
 * is FULL; the caller starts again with a larger one or, past the largest, with plain strings.
 */
#ifndef ARCS_DICTIONARY_H
#define ARCS_DICTIONARY_H

#include <stdint.h>
#include <string.h>

#include "text.h"

enum { DICTIONARY_FULL = -2 };

typedef struct {
    int64_t *slots;          /* slot_count entries, 0 when empty: (hash's high 32 bits << 32) | (index + 1) */
    int64_t slot_count;      /* a power of two, at least twice max_values */
    int32_t *offsets;        /* max_values + 1: the dictionary's string offsets (offsets[0] = 0) */
    uint8_t *data;           /* max_bytes + 16: the dictionary's string bytes (16 more may be read) */
    int64_t max_values;
    int64_t max_bytes;
    int64_t values;          /* distinct values so far */
    int64_t refused;         /* set when a value found no room (the call returned FULL) */
} arcs_dictionary;

/* Whether the description can be used: limits in range, a table of the right size. It then
 * starts its offsets, when empty. */
static inline int arcs_dictionary_ready(arcs_dictionary *dictionary) {
    if (dictionary->max_values < 1 || dictionary->max_values >= INT32_MAX || dictionary->max_bytes < 0 ||
        dictionary->max_bytes > INT32_MAX || dictionary->values < 0 || dictionary->values > dictionary->max_values ||
        dictionary->slot_count < 2 * dictionary->max_values || dictionary->slot_count & (dictionary->slot_count - 1))
        return 0;
    if (dictionary->values == 0) dictionary->offsets[0] = 0;
    return 1;
}

/* The low ``n`` (0 to 8) bytes of a word. */
static inline uint64_t arcs_low_bytes(int64_t n) { return n >= 8 ? ~0ull : (1ull << (8 * n)) - 1; }

/* A text of at most 16 bytes as two words, the bytes past it zero: hashed and compared without a
 * loop or a branch on its length (tags' lengths vary from row to row, and such branches would be
 * mispredicted), unlike longer text. */
typedef struct {
    uint64_t low, high;
} arcs_short_text;

/* From 16 readable bytes: two loads and masks. */
static inline arcs_short_text arcs_read_short(const uint8_t *at, int64_t length) {
    arcs_short_text text;
    memcpy(&text.low, at, sizeof text.low);
    memcpy(&text.high, at + 8, sizeof text.high);
    text.low &= arcs_low_bytes(length);
    text.high &= arcs_low_bytes(length > 8 ? length - 8 : 0);
    return text;
}

/* The same where 16 bytes cannot be read (near the end of the caller's data): byte by byte. */
static inline arcs_short_text arcs_read_short_at_end(const uint8_t *at, int64_t length) {
    arcs_short_text text = {0, 0};
    for (int64_t k = 0; k < length; k++) {
        if (k < 8) text.low |= (uint64_t)at[k] << (8 * k);
        else text.high |= (uint64_t)at[k] << (8 * (k - 8));
    }
    return text;
}

static const uint64_t ARCS_MULTIPLIER = 0x9e3779b97f4a7c15u;

/* Mixed so that every bit reaches the low ones, which pick the slot (the low bits of a product
 * depend only on the low bits of its factors: a text's first bytes, which tags often share). */
static inline uint64_t arcs_finish_hash(uint64_t hash) {
    hash ^= hash >> 32;
    hash *= 0xd6e8feb86659fd93u;
    return hash ^ (hash >> 32);
}

static inline uint64_t arcs_hash_short(arcs_short_text text, int64_t length) {
    uint64_t hash = ((uint64_t)length * ARCS_MULTIPLIER ^ text.low) * ARCS_MULTIPLIER;
    return arcs_finish_hash((hash ^ (hash >> 29) ^ text.high) * ARCS_MULTIPLIER);
}

/* Text longer than 16 bytes: a multiply per eight bytes, the last eight (overlapping the ones
 * before) closing it. */
static inline uint64_t arcs_hash_long(const uint8_t *at, int64_t length) {
    uint64_t hash = (uint64_t)length * ARCS_MULTIPLIER, word;
    int64_t i = 0;
    for (; i + 8 <= length; i += 8) {
        memcpy(&word, at + i, sizeof word);
        hash = (hash ^ word) * ARCS_MULTIPLIER;
        hash ^= hash >> 29;
    }
    memcpy(&word, at + length - 8, sizeof word);
    return arcs_finish_hash((hash ^ word) * ARCS_MULTIPLIER);
}

/* The index of ``text`` in a ready dictionary, added if new; DICTIONARY_FULL (and ``refused`` set)
 * when it would pass max_values or max_bytes. ``sixteen_readable``: 16 bytes may be read from
 * ``text`` whatever its length. */
static inline int64_t arcs_dictionary_index(arcs_dictionary *dictionary, const uint8_t *text, int64_t length,
                                            int sixteen_readable) {
    int short_form = length <= 16;
    arcs_short_text words = {0, 0};
    uint64_t hash;
    if (short_form) {
        words = sixteen_readable ? arcs_read_short(text, length) : arcs_read_short_at_end(text, length);
        hash = arcs_hash_short(words, length);
    } else {
        hash = arcs_hash_long(text, length);
    }
    uint64_t tag = hash >> 32, mask = (uint64_t)dictionary->slot_count - 1;
    int32_t *offsets = dictionary->offsets;
    for (uint64_t slot = hash & mask;; slot = (slot + 1) & mask) {
        int64_t entry = dictionary->slots[slot];
        if (entry == 0) {
            /* A new value: appended to the dictionary, if it has room. */
            int64_t values = dictionary->values, used = offsets[values];
            if (values >= dictionary->max_values || length > dictionary->max_bytes - used) {
                dictionary->refused = 1;
                return DICTIONARY_FULL;
            }
            memcpy(dictionary->data + used, text, (size_t)length);
            offsets[values + 1] = (int32_t)(used + length);
            dictionary->slots[slot] = (int64_t)((tag << 32) | (uint64_t)(values + 1));
            dictionary->values = values + 1;
            return values;
        }
        if ((uint64_t)entry >> 32 != tag) continue;
        int64_t candidate = (entry & 0xffffffff) - 1;
        int64_t known = offsets[candidate], known_length = offsets[candidate + 1] - known;
        if (known_length != length) continue;
        /* The dictionary's text has 16 readable bytes too (``data`` has that much beyond max_bytes). */
        if (short_form) {
            arcs_short_text stored = arcs_read_short(dictionary->data + known, length);
            if (((stored.low ^ words.low) | (stored.high ^ words.high)) == 0) return candidate;
        } else if (arcs_same_bytes(dictionary->data + known, text, length)) {
            return candidate;
        }
    }
}

#endif
