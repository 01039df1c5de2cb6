"""How number columns are encoded in the data files that ingest and compaction write.

Numbers are mostly distinct, so a dictionary of them only grows until the writer gives up on it
(strings are the callers' to choose: tags repeat, so they take dictionaries). Sorted times and
counters differ little from row to row, so delta encoding stores just that; floats are split into
byte streams, which lets the compressor find the exponent bytes' repetition. Measured on the ingest
benchmark's batch (100,000 rows, 2 tags, 2 floats, 1 integer; zstd level 1): 90 us per 1,000 rows
and 1.69 MB, against 118 us and 1.99 MB with plain encodings.
"""

from __future__ import annotations

import pyarrow as pa


def column_encodings(schema: pa.Schema) -> dict[str, str]:
    """Parquet encodings by column name, for the integer, timestamp and float columns."""
    encodings: dict[str, str] = {}
    for field in schema:
        if pa.types.is_integer(field.type) or pa.types.is_timestamp(field.type):
            encodings[field.name] = "DELTA_BINARY_PACKED"
        elif field.type in (pa.float32(), pa.float64()):
            encodings[field.name] = "BYTE_STREAM_SPLIT"
    return encodings
