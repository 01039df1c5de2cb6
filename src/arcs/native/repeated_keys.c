/*
 * Whether a MessagePack or JSON document says a key twice in one map.
 *
 * The fast general decoder (msgspec) keeps the last value of a repeated key without a word, and
 * a dropped value is data lost; the reference decoders refuse such a body and name the key. These
 * walks let the fast decoder take only bodies whose every map's keys are distinct: 0 means they
 * are; ASK_REFERENCE means a key repeats, or the walk cannot tell cheaply (a JSON key with an
 * escape, a map of more keys than a measurement may have columns, nesting deeper than any valid
 * body, bytes that are not a document), and the caller hands the body to the reference decoder.
 * Every read is bounds-checked: the body is hostile until proven otherwise.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Valid bodies nest four deep (a batch, its items, their fields, the values); a map holds at most
 * a measurement's 1,024 columns. */
enum { ASK_REFERENCE = 1, MAX_DEPTH = 64, MAX_KEYS = 1024, FEW_KEYS = 16 };

/* A key's bytes in the body, and its class (a MessagePack string, binary, or another value's
 * whole encoding), which must match too. */
typedef struct {
    uint64_t hash;
    int64_t offset;
    int64_t length;
    int64_t kind;
} key;

static uint64_t hash_bytes(const uint8_t *at, int64_t length, int64_t kind) {
    uint64_t hash = 0xcbf29ce484222325u ^ (uint64_t)kind; /* FNV-1a */
    for (int64_t i = 0; i < length; i++) hash = (hash ^ at[i]) * 0x100000001b3u;
    return hash;
}

/* A map's keys: on the stack while few, on the heap (MAX_KEYS of them) beyond. */
typedef struct {
    key few[FEW_KEYS];
    key *items;
    int64_t count;
} key_list;

static void keys_start(key_list *keys) {
    keys->items = keys->few;
    keys->count = 0;
}

/* Room for one more key; NULL when there is none (beyond MAX_KEYS, or no memory). */
static key *keys_next(key_list *keys) {
    if (keys->count == FEW_KEYS && keys->items == keys->few) {
        key *many = malloc(sizeof(key) * MAX_KEYS);
        if (many == NULL) return NULL;
        memcpy(many, keys->few, sizeof keys->few);
        keys->items = many;
    }
    if (keys->count == MAX_KEYS) return NULL;
    return &keys->items[keys->count++];
}

/* ``outcome``, once the list's memory is given back. */
static int keys_end(key_list *keys, int outcome) {
    if (keys->items != keys->few) free(keys->items);
    return outcome;
}

static int same_key(const uint8_t *body, const key *a, const key *b) {
    return a->kind == b->kind && a->length == b->length &&
           memcmp(body + a->offset, body + b->offset, (size_t)a->length) == 0;
}

static int by_hash(const void *left, const void *right) {
    const key *a = left, *b = right;
    if (a->hash != b->hash) return a->hash < b->hash ? -1 : 1;
    if (a->length != b->length) return a->length < b->length ? -1 : 1;
    return (a->kind > b->kind) - (a->kind < b->kind);
}

/* 0 when the ``count`` keys are distinct; ASK_REFERENCE otherwise (or on a hash collision). */
static int distinct(const uint8_t *body, key *keys, int64_t count) {
    if (count <= FEW_KEYS) {
        for (int64_t i = 1; i < count; i++) {
            for (int64_t j = 0; j < i; j++) {
                if (same_key(body, &keys[i], &keys[j])) return ASK_REFERENCE;
            }
        }
        return 0;
    }
    for (int64_t i = 0; i < count; i++) keys[i].hash = hash_bytes(body + keys[i].offset, keys[i].length, keys[i].kind);
    qsort(keys, (size_t)count, sizeof *keys, by_hash);
    for (int64_t i = 1; i < count; i++) {
        /* Equal hashes are the same key, or a collision the reference decoder settles. */
        if (by_hash(&keys[i - 1], &keys[i]) == 0) return ASK_REFERENCE;
    }
    return 0;
}

/* --- MessagePack ------------------------------------------------------------------------------ */

typedef struct {
    const uint8_t *body;
    const uint8_t *at;
    const uint8_t *end;
} cursor;

static inline int has(const cursor *c, uint64_t bytes) { return (uint64_t)(c->end - c->at) >= bytes; }

static uint64_t big_endian(const uint8_t *at, int bytes) {
    uint64_t value = 0;
    for (int i = 0; i < bytes; i++) value = value << 8 | at[i];
    return value;
}

static int msgpack_value(cursor *c, int depth);

/* The key at the cursor, and the cursor past it: a string's or binary's bytes, or another value's
 * whole encoding. */
static int msgpack_key(cursor *c, key *k, int depth) {
    if (!has(c, 1)) return ASK_REFERENCE;
    uint8_t head = *c->at;
    int size_bytes = -1;
    if ((head & 0xe0) == 0xa0) { /* fixstr */
        size_bytes = 0;
        k->kind = 0;
    } else if (head >= 0xd9 && head <= 0xdb) { /* str 8/16/32 */
        size_bytes = 1 << (head - 0xd9);
        k->kind = 0;
    } else if (head >= 0xc4 && head <= 0xc6) { /* bin 8/16/32 */
        size_bytes = 1 << (head - 0xc4);
        k->kind = 1;
    }
    if (size_bytes < 0) {
        const uint8_t *start = c->at;
        if (msgpack_value(c, depth + 1)) return ASK_REFERENCE;
        k->offset = start - c->body;
        k->length = c->at - start;
        k->kind = 2;
        return 0;
    }
    if (!has(c, 1 + (uint64_t)size_bytes)) return ASK_REFERENCE;
    uint64_t length = size_bytes ? big_endian(c->at + 1, size_bytes) : (uint64_t)(head & 0x1f);
    c->at += 1 + size_bytes;
    if (!has(c, length)) return ASK_REFERENCE;
    k->offset = c->at - c->body;
    k->length = (int64_t)length;
    c->at += length;
    return 0;
}

/* A map of ``count`` pairs at the cursor (past its head). */
static int msgpack_map(cursor *c, uint64_t count, int depth) {
    if (count > MAX_KEYS || count * 2 > (uint64_t)(c->end - c->at)) return ASK_REFERENCE;
    key_list keys;
    keys_start(&keys);
    for (uint64_t i = 0; i < count; i++) {
        key *k = keys_next(&keys);
        if (k == NULL || msgpack_key(c, k, depth) || msgpack_value(c, depth + 1))
            return keys_end(&keys, ASK_REFERENCE);
    }
    return keys_end(&keys, distinct(c->body, keys.items, keys.count));
}

/* Past the value at the cursor, checking the maps within it. */
static int msgpack_value(cursor *c, int depth) {
    if (depth > MAX_DEPTH || !has(c, 1)) return ASK_REFERENCE;
    uint8_t head = *c->at++;
    uint64_t count, skip = 0;
    if (head <= 0x7f || head >= 0xe0 || head == 0xc0 || head == 0xc2 || head == 0xc3) return 0; /* fixint, nil, bool */
    if ((head & 0xf0) == 0x80) return msgpack_map(c, head & 0x0f, depth);
    if ((head & 0xf0) == 0x90) {
        count = head & 0x0f;
        goto array;
    }
    if ((head & 0xe0) == 0xa0) skip = head & 0x1f;
    else if (head >= 0xc4 && head <= 0xc6) { /* bin */
        int bytes = 1 << (head - 0xc4);
        if (!has(c, (uint64_t)bytes)) return ASK_REFERENCE;
        skip = bytes + big_endian(c->at, bytes);
    } else if (head >= 0xc7 && head <= 0xc9) { /* ext 8/16/32: size, type, data */
        int bytes = 1 << (head - 0xc7);
        if (!has(c, (uint64_t)bytes)) return ASK_REFERENCE;
        skip = bytes + 1 + big_endian(c->at, bytes);
    } else if (head == 0xca) skip = 4;
    else if (head == 0xcb) skip = 8;
    else if (head >= 0xcc && head <= 0xd3) skip = 1u << ((head - 0xcc) & 3);
    else if (head >= 0xd4 && head <= 0xd8) skip = 1 + (1u << (head - 0xd4)); /* fixext: type, data */
    else if (head >= 0xd9 && head <= 0xdb) {                                  /* str 8/16/32 */
        int bytes = 1 << (head - 0xd9);
        if (!has(c, (uint64_t)bytes)) return ASK_REFERENCE;
        skip = bytes + big_endian(c->at, bytes);
    } else if (head == 0xdc || head == 0xdd || head == 0xde || head == 0xdf) {
        int bytes = head == 0xdc || head == 0xde ? 2 : 4;
        if (!has(c, (uint64_t)bytes)) return ASK_REFERENCE;
        count = big_endian(c->at, bytes);
        c->at += bytes;
        if (head >= 0xde) return msgpack_map(c, count, depth);
        goto array;
    } else {
        return ASK_REFERENCE; /* 0xc1, never used */
    }
    if (!has(c, skip)) return ASK_REFERENCE;
    c->at += skip;
    return 0;
array:
    if (count > (uint64_t)(c->end - c->at)) return ASK_REFERENCE; /* each element takes a byte */
    for (uint64_t i = 0; i < count; i++) {
        if (msgpack_value(c, depth + 1)) return ASK_REFERENCE;
    }
    return 0;
}

/* 0 when the one MessagePack object that is ``body`` says no key twice in any map; else ASK_REFERENCE. */
int64_t arcs_msgpack_repeated_keys(const uint8_t *body, int64_t length) {
    cursor c = {body, body, body + length};
    if (msgpack_value(&c, 0)) return ASK_REFERENCE;
    return c.at == c.end ? 0 : ASK_REFERENCE;
}

/* --- JSON ------------------------------------------------------------------------------------ */

static void json_space(cursor *c) {
    while (c->at < c->end && (*c->at == ' ' || *c->at == '\t' || *c->at == '\n' || *c->at == '\r')) c->at++;
}

/* Past a string at the cursor (on its opening quote); its contents' span, and whether it has an escape. */
static int json_string(cursor *c, key *span, int *escaped) {
    if (!has(c, 1) || *c->at != '"') return ASK_REFERENCE;
    const uint8_t *start = ++c->at;
    *escaped = 0;
    for (;;) {
        const uint8_t *quote = memchr(c->at, '"', (size_t)(c->end - c->at));
        if (quote == NULL) return ASK_REFERENCE;
        const uint8_t *slash = memchr(c->at, '\\', (size_t)(quote - c->at));
        if (slash == NULL) {
            span->offset = start - c->body;
            span->length = quote - start;
            span->kind = 0;
            c->at = quote + 1;
            return 0;
        }
        *escaped = 1;
        c->at = slash + 2; /* past the escape's first character ("\u" is skipped a digit at a time) */
        if (c->at > c->end) return ASK_REFERENCE;
    }
}

static int json_value(cursor *c, int depth);

static int json_object(cursor *c, int depth) {
    json_space(c);
    if (has(c, 1) && *c->at == '}') {
        c->at++;
        return 0;
    }
    key_list keys;
    keys_start(&keys);
    for (;;) {
        int escaped;
        json_space(c);
        key *k = keys_next(&keys);
        if (k == NULL || json_string(c, k, &escaped) || escaped) return keys_end(&keys, ASK_REFERENCE);
        json_space(c);
        if (!has(c, 1) || *c->at++ != ':' || json_value(c, depth + 1) || !has(c, 1))
            return keys_end(&keys, ASK_REFERENCE);
        uint8_t next = *c->at++;
        if (next == '}') return keys_end(&keys, distinct(c->body, keys.items, keys.count));
        if (next != ',') return keys_end(&keys, ASK_REFERENCE);
    }
}

/* Past the value at the cursor (with the space around it), checking the objects within it. */
static int json_value(cursor *c, int depth) {
    if (depth > MAX_DEPTH) return ASK_REFERENCE;
    json_space(c);
    if (!has(c, 1)) return ASK_REFERENCE;
    uint8_t head = *c->at;
    if (head == '{') {
        c->at++;
        return json_object(c, depth);
    }
    if (head == '[') {
        c->at++;
        json_space(c);
        if (has(c, 1) && *c->at == ']') {
            c->at++;
            return 0;
        }
        for (;;) {
            if (json_value(c, depth + 1)) return ASK_REFERENCE;
            if (!has(c, 1)) return ASK_REFERENCE;
            uint8_t next = *c->at++;
            if (next == ']') break;
            if (next != ',') return ASK_REFERENCE;
        }
    } else if (head == '"') {
        key unused;
        int escaped;
        if (json_string(c, &unused, &escaped)) return ASK_REFERENCE;
    } else {
        /* A number or a literal: up to the next delimiter (the parser before us checked it). */
        const uint8_t *start = c->at;
        while (c->at < c->end && *c->at != ',' && *c->at != ']' && *c->at != '}' && *c->at != ' ' &&
               *c->at != '\t' && *c->at != '\n' && *c->at != '\r')
            c->at++;
        if (c->at == start) return ASK_REFERENCE;
    }
    json_space(c);
    return 0;
}

/* 0 when the JSON document that is ``body`` says no key twice in any object; else ASK_REFERENCE. */
int64_t arcs_json_repeated_keys(const uint8_t *body, int64_t length) {
    cursor c = {body, body, body + length};
    if (json_value(&c, 0)) return ASK_REFERENCE;
    return c.at == c.end ? 0 : ASK_REFERENCE;
}
