"""The few loops no vectorized kernel offers, in C, loaded through ctypes: the JSON text of
integers and timestamps (``json_values.c``), the interleaving of a result's rows (``json_rows.c``)
MessagePack columnar and one-shape line protocol bodies read into Arrow buffers
(``msgpack_columns.c``, ``line_protocol.c``), tag columns made dictionaries for the Parquet
writer (``dictionary.c``), and whether a MessagePack or JSON document repeats a key in a map
(``repeated_keys.c``).

The library is built by ``layers/native.py`` (``make setup`` for this machine, the layer build for
Lambda). Where it is missing, :func:`library` is None and callers take their Arrow-only path, which
gives the same bytes more slowly; ``ARCS_NATIVE=0`` chooses that path on purpose.
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path

from arcs.envvars import NATIVE

LIBRARY_PATH = Path(__file__).with_name("_arcs_native.so")


class TextColumn(ctypes.Structure):
    """``arcs_text_column``: one column's JSON text (an Arrow large-string array) and its wrapping."""

    _fields_ = [
        ("offsets", ctypes.c_void_p),
        ("data", ctypes.c_void_p),
        ("validity", ctypes.c_void_p),
        ("validity_offset", ctypes.c_int64),
        ("before", ctypes.c_char_p),
        ("before_length", ctypes.c_int64),
        ("after", ctypes.c_char_p),
        ("after_length", ctypes.c_int64),
        ("escape", ctypes.c_int64),
    ]


class Dictionary(ctypes.Structure):
    """``arcs_dictionary``: a string column's distinct values so far, and the table finding them."""

    _fields_ = [
        ("slots", ctypes.c_void_p),
        ("slot_count", ctypes.c_int64),
        ("offsets", ctypes.c_void_p),
        ("data", ctypes.c_void_p),
        ("max_values", ctypes.c_int64),
        ("max_bytes", ctypes.c_int64),
        ("values", ctypes.c_int64),
        ("refused", ctypes.c_int64),  # set when a value found no room
    ]


class MsgpackSpan(ctypes.Structure):
    """``arcs_msgpack_span``: where a string is in the body (offset -1: absent)."""

    _fields_ = [("offset", ctypes.c_int64), ("length", ctypes.c_int64)]


class MsgpackColumn(ctypes.Structure):
    """``arcs_msgpack_column``: a column found by the scan."""

    _fields_ = [
        ("name", MsgpackSpan),
        ("kind", ctypes.c_int64),  # MSGPACK_INT64, MSGPACK_FLOAT64, MSGPACK_STRING, MSGPACK_BOOL
        ("count", ctypes.c_int64),
        ("string_bytes", ctypes.c_int64),
        ("array_offset", ctypes.c_int64),
        ("values_at", ctypes.c_int64),  # set by the scan: where its buffers go in the fill's block
        ("data_at", ctypes.c_int64),
        ("minimum", ctypes.c_int64),  # set by the scan: integers' bounds
        ("maximum", ctypes.c_int64),
        ("flags", ctypes.c_int64),  # MSGPACK_PRINTABLE_ASCII, MSGPACK_NONDECREASING
        ("row_base", ctypes.c_int64),  # set by the caller when bodies share a column: its first row
        ("data_base", ctypes.c_int64),  # and (strings) its first byte
    ]


class MsgpackDocument(ctypes.Structure):
    """``arcs_msgpack_document``: the parts of a columnar document found by the scan."""

    _fields_ = [
        ("measurement", MsgpackSpan),
        ("precision", MsgpackSpan),
        ("tags_offset", ctypes.c_int64),
        ("tag_count", ctypes.c_int64),
        ("column_count", ctypes.c_int64),
        ("block_bytes", ctypes.c_int64),  # the fill's block, every column laid out in it
        ("rows", ctypes.c_int64),  # every column's length when they share one, else -1
        ("flags", ctypes.c_int64),  # MSGPACK_PRINTABLE_ASCII: every string column's is
    ]


class LineProtocolColumn(ctypes.Structure):
    """``arcs_lp_column``: one key of a line shape and the buffers its values go to."""

    _fields_ = [
        ("key", ctypes.c_char_p),
        ("key_length", ctypes.c_int64),
        ("kind", ctypes.c_int64),  # LP_KINDS
        ("values", ctypes.c_void_p),
        ("offsets", ctypes.c_void_p),
        ("data", ctypes.c_void_p),
        ("data_capacity", ctypes.c_int64),
        ("flags", ctypes.c_int64),  # set by the reader: LP_PRINTABLE_ASCII for tags
    ]


class LineProtocolTimes(ctypes.Structure):
    """``arcs_lp_times``: the lines' times as the reader saw them."""

    _fields_ = [
        ("minimum", ctypes.c_int64),
        ("maximum", ctypes.c_int64),
        ("flags", ctypes.c_int64),  # LP_NONDECREASING, LP_EVERY_LINE_TIMED
    ]


#: The most bytes Arrow's 32-bit string offsets (what the readers write) can span.
MAX_INT32_OFFSET = (1 << 31) - 1

#: ``kind`` codes of line_protocol.c.
LP_KINDS = {"tag": 0, "float": 1, "integer": 2, "unsigned": 3, "boolean": 4}
#: ``flags`` of line_protocol.c.
LP_PRINTABLE_ASCII, LP_NONDECREASING, LP_EVERY_LINE_TIMED = 1, 2, 4

#: ``kind`` codes of msgpack_columns.c.
MSGPACK_INT64, MSGPACK_FLOAT64, MSGPACK_STRING, MSGPACK_BOOL = 1, 2, 3, 4
#: ``flags`` of a filled msgpack column: a string column's bytes are all printable ASCII
#: (0x20..0x7e); an integer column never goes down.
MSGPACK_PRINTABLE_ASCII, MSGPACK_NONDECREASING = 1, 2


@functools.cache
def library() -> ctypes.CDLL | None:
    """The loaded library, or None when it was not built (or ``ARCS_NATIVE=0``)."""
    if os.environ.get(NATIVE, "1") == "0" or not LIBRARY_PATH.exists():
        return None
    loaded = ctypes.CDLL(str(LIBRARY_PATH))
    columns = ctypes.POINTER(TextColumn)
    loaded.arcs_json_rows_size.argtypes = [columns, ctypes.c_int32, ctypes.c_int64, ctypes.c_int32]
    loaded.arcs_json_rows_size.restype = ctypes.c_int64
    loaded.arcs_json_rows_write.argtypes = [
        columns,
        ctypes.c_int32,
        ctypes.c_int64,
        ctypes.c_int32,
        ctypes.c_void_p,
        ctypes.c_int64,
    ]
    loaded.arcs_json_rows_write.restype = ctypes.c_int64
    values, offsets, data = ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
    loaded.arcs_format_int64.argtypes = [values, ctypes.c_int64, offsets, data]
    loaded.arcs_format_int64.restype = ctypes.c_int64
    loaded.arcs_timestamp_width.argtypes = [ctypes.c_int32]
    loaded.arcs_timestamp_width.restype = ctypes.c_int64
    loaded.arcs_format_timestamps.argtypes = [values, ctypes.c_int64, ctypes.c_int32, offsets, data]
    loaded.arcs_format_timestamps.restype = ctypes.c_int64
    body = ctypes.c_char_p
    body_at = ctypes.c_void_p  # a bytes object, or the address of a buffer's bytes
    loaded.arcs_msgpack_scan.argtypes = [
        body_at,
        ctypes.c_int64,
        ctypes.POINTER(MsgpackDocument),
        ctypes.POINTER(MsgpackColumn),
        ctypes.c_int64,
    ]
    loaded.arcs_msgpack_scan.restype = ctypes.c_int64
    loaded.arcs_msgpack_tags.argtypes = [
        body_at,
        ctypes.c_int64,
        ctypes.POINTER(MsgpackDocument),
        ctypes.POINTER(MsgpackSpan),
    ]
    loaded.arcs_msgpack_tags.restype = ctypes.c_int64
    loaded.arcs_msgpack_fill.argtypes = [
        body,
        ctypes.c_int64,
        ctypes.POINTER(MsgpackColumn),
        ctypes.c_int64,
        ctypes.c_void_p,
        ctypes.c_int64,
    ]
    loaded.arcs_msgpack_fill.restype = ctypes.c_int64
    # json_columns.c reads JSON's columnar document into the same descriptions.
    for reader in ("scan", "tags", "fill"):
        twin = getattr(loaded, f"arcs_json_{reader}")
        twin.argtypes = getattr(loaded, f"arcs_msgpack_{reader}").argtypes
        twin.restype = ctypes.c_int64
    int64s = ctypes.POINTER(ctypes.c_int64)
    loaded.arcs_msgpack_fill_into.argtypes = [
        body_at,
        ctypes.c_int64,
        ctypes.POINTER(MsgpackColumn),
        ctypes.c_int64,
        ctypes.c_void_p,
        ctypes.c_int64,
        int64s,
        ctypes.c_int64,
        int64s,
        int64s,
        int64s,
        ctypes.c_void_p,  # arcs_dictionary *[targets], or None
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_int64,
    ]
    loaded.arcs_msgpack_fill_into.restype = ctypes.c_int64
    loaded.arcs_msgpack_shape.argtypes = [
        body_at,
        ctypes.c_int64,
        ctypes.POINTER(MsgpackDocument),
        ctypes.POINTER(MsgpackColumn),
        ctypes.c_void_p,
        ctypes.c_int64,
    ]
    loaded.arcs_msgpack_shape.restype = ctypes.c_int64
    loaded.arcs_msgpack_rescale.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]
    loaded.arcs_msgpack_rescale.restype = ctypes.c_int64
    loaded.arcs_lp_read.argtypes = [
        body,
        ctypes.c_int64,
        body,
        ctypes.c_int64,
        ctypes.POINTER(LineProtocolColumn),
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.POINTER(LineProtocolTimes),
    ]
    loaded.arcs_lp_read.restype = ctypes.c_int64
    for reader in ("msgpack", "json"):
        repeated = getattr(loaded, f"arcs_{reader}_repeated_keys")
        repeated.argtypes = [body, ctypes.c_int64]
        repeated.restype = ctypes.c_int64
    loaded.arcs_count_byte.argtypes = [body, ctypes.c_int64, ctypes.c_int32]
    loaded.arcs_count_byte.restype = ctypes.c_int64
    loaded.arcs_dictionary_encode.argtypes = [
        ctypes.POINTER(Dictionary),
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_void_p,
    ]
    loaded.arcs_dictionary_encode.restype = ctypes.c_int64
    return loaded
