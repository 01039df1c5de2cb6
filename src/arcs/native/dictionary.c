/*
 * A string column as a dictionary of its distinct values and each row's index into it: how ingest
 * hands tag columns to the Parquet writer when they come as strings (the line protocol and JSON
 * readers', and MessagePack bodies the general path read; the columnar lane's fill encodes them
 * itself). Given dictionary arrays, the writer stores their indices as they are instead of hashing
 * every string itself, which was most of a data file's write (tags repeat: a host name, a region,
 * thousands of times a file). Arrow's own dictionary_encode costs more than it saves; tag values
 * are short and few, and the small table of dictionary.h does the work in a fraction of the time.
 * Ingest joins a column's chunks and calls once.
 */
#include <stdint.h>

#include "dictionary.h"

/* Rows [0, rows) of the string array (int32 ``offsets``, rows + 1 of them, and ``data``) as
 * indices into the dictionary, which grows by their new values. The number of distinct values
 * the dictionary holds after them; DICTIONARY_FULL when it would pass max_values or max_bytes
 * (the caller may start again with a larger one), or -1 for a description that does not fit:
 * offsets that decrease or leave ``data`` (``data_bytes`` long), limits out of range. */
int64_t arcs_dictionary_encode(arcs_dictionary *dictionary, const int32_t *offsets, const uint8_t *data,
                               int64_t data_bytes, int64_t rows, int32_t *indices) {
    if (!arcs_dictionary_ready(dictionary)) return -1;
    for (int64_t row = 0; row < rows; row++) {
        int64_t start = offsets[row], end = offsets[row + 1];
        if (start < 0 || end < start || end > data_bytes) return -1;
        int64_t index = arcs_dictionary_index(dictionary, data + start, end - start, data_bytes - start >= 16);
        if (index < 0) return DICTIONARY_FULL;
        indices[row] = (int32_t)index;
    }
    return dictionary->values;
}
