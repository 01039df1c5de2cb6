"""Line protocol decoded column-wise with Arrow kernels: the fast path for uniform bodies.

Most bodies are machine-written: no escapes, no quoted strings, and a handful of line shapes
(the same measurement, tag keys and field keys line after line). Such a body is split into
columns once with Arrow's string kernels instead of line by line in Python. Anything else —
escapes, quotes, comments, odd spacing, many shapes, or any value the kernels would have to
judge — returns ``None`` and the exact line parser (``line_protocol``) decodes the body and
names the bad lines. Both paths give the same result for every body this one accepts (a
property test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as csv

from arcs.errors import BadRequest
from arcs.names import TIME_COLUMN
from arcs.write.batch import MeasurementRows
from arcs.write.decoders import columns as limits
from arcs.write.decoders.columns import build_rows

MAX_SHAPES = 32
_INT64_MAX = (1 << 63) - 1
_FLOAT = r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"
_TRUE = ["t", "T", "true", "True", "TRUE"]
_FALSE = ["f", "F", "false", "False", "FALSE"]


class _Fallback(Exception):
    """This body needs the exact line parser."""


@dataclass
class _Column:
    kind: str  # "tag", "float", "integer", "boolean"
    values: pa.Array


def decode_uniform(text: str, now_micros: int, precision: str) -> list[MeasurementRows] | None:
    data = text.encode()
    if data.translate(None, _NOT_UNUSUAL):
        return None  # escapes, quotes, comments, CR or tabs: the exact parser
    try:
        return _one_shape(text, data, now_micros, precision)
    except (_Fallback, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    try:
        return _decode(text, now_micros, precision)
    except (_Fallback, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


# Everything but what only the exact parser handles: deleting it leaves nothing in a common body
# (one pass over the bytes instead of a search for each character).
_NOT_UNUSUAL = bytes(b for b in range(256) if b not in b'\\"#\r\t')
# Bytes that are not a separator of line protocol: deleting them leaves a line's skeleton.
_NOT_SEPARATORS = bytes(b for b in range(256) if b not in b", =\n")
# Spaces and '=' as commas: a line becomes one CSV record of measurement, key, value, ..., time.
_AS_COMMAS = bytes.maketrans(b" =", b",,")
_CSV_PARSE = csv.ParseOptions(quote_char=False, escape_char=False, newlines_in_values=False)


def _one_shape(text: str, data: bytes, now_micros: int, precision: str) -> list[MeasurementRows]:
    """The commonest body in a handful of passes: every line has the first line's keys, in order.

    Whether it does is read off the separators alone: deleting everything else from the body
    must leave the first line's separators once per line (values cannot hold separators here:
    no escapes or quotes). Then, with spaces and '=' turned into commas, Arrow's CSV reader
    splits and converts every column at once, and the key columns must each hold one name.
    """
    if text.endswith("\n"):
        text, data = text[:-1], data[:-1]
    first = text.partition("\n")[0]
    sections = first.split(" ")
    if len(sections) != 3:
        raise _Fallback  # a missing time (or odd spacing): the general path
    if (b"x" in data and b"0x" in data) or (b"X" in data and b"0X" in data):
        # Arrow reads hexadecimal integers; line protocol has none. (The one-byte tests are memchr;
        # a two-byte search crawls through the many zeros of numbers.)
        raise _Fallback
    measurement, *tag_pairs = sections[0].split(",")
    pairs = [pair.partition("=") for pair in (*tag_pairs, *sections[1].split(","))]
    names = [name for name, _eq, _value in pairs]
    folded = [name.lower() for name in names]
    if (
        not measurement
        or "=" in measurement
        or any(not name or not eq or not value or "=" in value for name, eq, value in pairs)
        or len(set(folded)) != len(folded)
        or TIME_COLUMN in folded
    ):
        raise _Fallback
    line_skeleton = first.encode().translate(None, _NOT_SEPARATORS)
    skeleton = data.translate(None, _NOT_SEPARATORS)
    lines = skeleton.count(b"\n") + 1  # counted in the skeleton: a tenth of the body's bytes
    if skeleton != b"\n".join([line_skeleton] * lines):
        raise _Fallback
    flat = data.translate(_AS_COMMAS)
    kinds = ["tag"] * len(tag_pairs) + [field_kind(value) for _name, _eq, value in pairs[len(tag_pairs) :]]
    header = ["m"]
    types: dict[str, pa.DataType] = {"m": _NAME}
    for index, kind in enumerate(kinds):
        header += [f"k{index}", f"v{index}"]
        types[f"k{index}"] = _NAME
        types[f"v{index}"] = pa.float64() if kind == "float" else pa.string()
    header.append(TIME_COLUMN)
    types[TIME_COLUMN] = pa.int64()
    table = csv.read_csv(
        pa.py_buffer(flat),
        read_options=csv.ReadOptions(use_threads=False, column_names=header),
        parse_options=_CSV_PARSE,
        convert_options=csv.ConvertOptions(
            column_types=types, null_values=[], strings_can_be_null=False, quoted_strings_can_be_null=False
        ),
    )
    if table.num_rows != lines:
        raise _Fallback
    for column, expected in (("m", measurement), *((f"k{i}", name) for i, name in enumerate(names))):
        if any(chunk.dictionary.to_pylist() != [expected] for chunk in table.column(column).chunks):
            raise _Fallback  # another key at this place in some line
    columns: dict[str, pa.Array] = {TIME_COLUMN: table.column(TIME_COLUMN).combine_chunks()}
    for index, (name, kind) in enumerate(zip(names, kinds, strict=True)):
        columns[name] = _converted(table.column(f"v{index}").combine_chunks(), kind)
    tags = names[: len(tag_pairs)]
    try:
        return [build_rows(measurement, columns, tags, precision, now_micros, null_time_is_now=True)]
    except BadRequest:
        raise _Fallback from None  # the exact parser names the line


_NAME = pa.dictionary(pa.int32(), pa.string())


def field_kind(value: str) -> str:
    """A field's kind from its first value (a column of mixed kinds fails to convert and falls back)."""
    if value in _TRUE or value in _FALSE:
        return "boolean"
    if value.endswith("i"):
        return "integer"
    if value.endswith("u"):
        return "unsigned"
    return "float"


def _converted(values: pa.Array, kind: str) -> pa.Array:
    # An empty value reads as "" (tags) or fails to convert (fields); an empty measurement or key
    # fails the one-name check of its column.
    if kind == "tag":
        if pc.any(pc.equal(values, "")).as_py():
            raise _Fallback
        return values
    if kind == "float":
        # The CSV reader also reads "nan" and "inf", which line protocol does not have.
        if not pc.all(pc.is_finite(values)).as_py():
            raise _Fallback
        return values
    if kind == "boolean":
        truth = pc.is_in(values, pa.array(_TRUE))
        if not pc.all(pc.or_(truth, pc.is_in(values, pa.array(_FALSE)))).as_py():
            raise _Fallback
        return truth
    suffix = "i" if kind == "integer" else "u"
    if not pc.all(pc.ends_with(values, suffix)).as_py():
        raise _Fallback
    # Arrow's string-to-integer cast takes optional '-' and digits, as line protocol does, and
    # hexadecimal, which _one_shape turned away.
    digits = pc.utf8_slice_codeunits(values, 0, -1)
    if kind == "integer":
        return digits.cast(pa.int64())
    unsigned = digits.cast(pa.uint64())
    if len(unsigned) and pc.max(unsigned).as_py() > _INT64_MAX:
        raise _Fallback
    return unsigned.cast(pa.int64())


def _decode(text: str, now_micros: int, precision: str) -> list[MeasurementRows]:
    all_lines = pa.array(text.split("\n"), pa.string())
    present = pc.not_equal(all_lines, "")
    numbers = pc.add(pc.indices_nonzero(present), 1)  # 1-based line numbers
    lines = all_lines.filter(present)
    if not len(lines):
        return []  # the exact parser gives the right error
    parts = pc.split_pattern(lines, " ")
    sizes = pc.list_value_length(parts)
    if not pc.all(pc.or_(pc.equal(sizes, 2), pc.equal(sizes, 3))).as_py():
        raise _Fallback
    flat = pc.list_flatten(parts)
    if not pc.all(pc.greater(pc.utf8_length(flat), 0)).as_py():
        raise _Fallback
    keys = pc.list_element(parts, 0)
    fields = pc.list_element(parts, 1)
    has_time = pc.equal(sizes, 3)
    stamps = _third(parts, has_time)
    measurements: dict[str, list[tuple[pa.Array, dict[str, _Column], pa.Array]]] = {}
    for mask, shape in _shapes(keys, fields):
        if mask is None:
            group_numbers, group_keys, group_fields, group_stamps = numbers, keys, fields, stamps
        else:
            group_numbers, group_keys = numbers.filter(mask), keys.filter(mask)
            group_fields, group_stamps = fields.filter(mask), stamps.filter(mask)
        measurement, columns = _shape_columns(shape, group_keys, group_fields)
        measurements.setdefault(measurement, []).append((group_numbers, columns, _timestamps(group_stamps)))
    # The exact parser enforces the request's size limits (and names the line that crosses them).
    widths = [len({name for _n, columns, _t in groups for name in columns}) for groups in measurements.values()]
    empty_cells = sum(
        len(numbers) * (width - len(columns))
        for width, groups in zip(widths, measurements.values(), strict=True)
        for numbers, columns, _times in groups
    )
    if (
        len(measurements) > limits.MAX_PARTS
        or sum(widths) + len(widths) > limits.MAX_REQUEST_COLUMNS
        or empty_cells > limits.MAX_EMPTY_CELLS
    ):
        raise _Fallback
    return [_build(m, groups, now_micros, precision) for m, groups in measurements.items()]


def _shape_of(key: str, fields: str) -> str:
    """``cpu,host=a v=1,w=2`` -> ``cpu,host= v=,w=``: what the lines of one shape share."""
    measurement, *tags = key.split(",")
    names = [piece.partition("=")[0] + "=" for piece in (*tags, *fields.split(","))]
    return ",".join([measurement, *names[: len(tags)]]) + " " + ",".join(names[len(tags) :])


def _shapes(keys: pa.Array, fields: pa.Array) -> list[tuple[pa.Array | None, str]]:
    """Lines grouped by shape, in order of first appearance (the exact parser's order).

    The common body has one shape; checking that takes cheap prefix tests, so the regex work of
    telling many shapes apart is only paid when there are several.
    """
    shape = _shape_of(keys[0].as_py(), fields[0].as_py())
    if _all_have_shape(shape, keys, fields):
        return [(None, shape)]
    shapes = pc.binary_join_element_wise(
        pc.replace_substring_regex(keys, "=[^,]*", "="), pc.replace_substring_regex(fields, "=[^,]*", "="), " "
    ).dictionary_encode()
    if len(shapes.dictionary) > MAX_SHAPES:
        raise _Fallback
    order = sorted(range(len(shapes.dictionary)), key=lambda i: pc.index(shapes.indices, i).as_py())
    return [(pc.equal(shapes.indices, i), shapes.dictionary[i].as_py()) for i in order]


def _all_have_shape(shape: str, keys: pa.Array, fields: pa.Array) -> bool:
    key_shape, field_shape = shape.split(" ")
    for values, pieces in ((keys, key_shape.split(",")), (fields, field_shape.split(","))):
        parts = pc.split_pattern(values, ",")
        if not pc.all(pc.equal(pc.list_value_length(parts), len(pieces))).as_py():
            return False
        for position, piece in enumerate(pieces):
            element = pc.list_element(parts, position)
            if piece.endswith("="):
                # exactly this key, then '=' (a value holding another '=' is checked later)
                if not pc.all(pc.starts_with(element, piece)).as_py():
                    return False
            elif not pc.all(pc.equal(element, piece)).as_py():
                return False
    return True


def _third(parts: pa.Array, has_time: pa.Array) -> pa.Array:
    padded = pc.list_slice(parts, 2, 3)
    return pc.list_element(pc.if_else(has_time, padded, pa.scalar([""], padded.type)), 0)


def _shape_columns(shape: str, keys: pa.Array, fields: pa.Array) -> tuple[str, dict[str, _Column]]:
    key_shape, field_shape = shape.split(" ")
    key_names = key_shape.split(",")
    measurement, tag_names = key_names[0], key_names[1:]
    field_names = field_shape.split(",")
    names = [name[:-1] for name in (*tag_names, *field_names)]
    if (
        not measurement
        or any(not n or "=" in n for n in names)
        or not all(p.endswith("=") for p in (*tag_names, *field_names))
    ):
        raise _Fallback
    folded = [n.lower() for n in names]
    if len(set(folded)) != len(folded) or TIME_COLUMN in folded:
        raise _Fallback
    columns: dict[str, _Column] = {}
    key_parts = pc.split_pattern(keys, ",")
    for position, name in enumerate(names[: len(tag_names)], start=1):
        columns[name] = _Column("tag", _after(pc.list_element(key_parts, position), name))
    field_parts = pc.split_pattern(fields, ",")
    for position, name in enumerate(names[len(tag_names) :]):
        columns[name] = _typed(_after(pc.list_element(field_parts, position), name))
    return measurement, columns


def _after(pieces: pa.Array, name: str) -> pa.Array:
    values = pc.utf8_slice_codeunits(pieces, len(name) + 1)
    if not pc.all(pc.greater(pc.utf8_length(values), 0)).as_py():
        raise _Fallback  # key= with no value: the exact parser names the line
    return values


def _typed(raw: pa.Array) -> _Column:
    if pc.all(pc.match_substring_regex(raw, _FLOAT)).as_py():
        values = raw.cast(pa.float64())
        if not pc.all(pc.is_finite(values)).as_py():
            raise _Fallback
        return _Column("float", values)
    if pc.all(pc.match_substring_regex(raw, "^-?[0-9]+i$")).as_py():
        return _Column("integer", pc.utf8_slice_codeunits(raw, 0, -1).cast(pa.int64()))
    if pc.all(pc.match_substring_regex(raw, "^[0-9]+u$")).as_py():
        unsigned = pc.utf8_slice_codeunits(raw, 0, -1).cast(pa.uint64())
        if len(unsigned) and pc.max(unsigned).as_py() > _INT64_MAX:
            raise _Fallback
        return _Column("integer", unsigned.cast(pa.int64()))
    truth = pc.is_in(raw, pa.array(_TRUE))
    if pc.all(pc.or_(truth, pc.is_in(raw, pa.array(_FALSE)))).as_py():
        return _Column("boolean", truth)
    raise _Fallback


def _timestamps(stamps: pa.Array) -> pa.Array:
    valid = pc.not_equal(stamps, "")
    if not pc.all(pc.or_(pc.invert(valid), pc.match_substring_regex(stamps, "^-?[0-9]+$"))).as_py():
        raise _Fallback
    return pc.if_else(valid, stamps, pa.scalar(None, pa.string())).cast(pa.int64())


def _build(
    measurement: str, groups: list[tuple[pa.Array, dict[str, _Column], pa.Array]], now_micros: int, precision: str
) -> MeasurementRows:
    kinds: dict[str, str] = {}
    for _numbers, columns, _times in groups:
        for name, column in columns.items():
            known = kinds.get(name)
            if known is None:
                kinds[name] = column.kind
            elif known != column.kind:
                if {known, column.kind} != {"integer", "float"}:
                    raise _Fallback
                kinds[name] = "float"
    types = {"tag": pa.string(), "float": pa.float64(), "integer": pa.int64(), "boolean": pa.bool_()}
    tables = []
    for numbers, columns, times in groups:
        arrays = {"__line": numbers, TIME_COLUMN: times}
        for name, kind in kinds.items():
            present = columns.get(name)
            arrays[name] = (
                present.values.cast(types[kind]) if present is not None else pa.nulls(len(numbers), types[kind])
            )
        tables.append(pa.table(arrays))
    table = tables[0]
    if len(tables) > 1:
        # Rows in line order, as the exact parser keeps them (equal times keep their order).
        table = pa.concat_tables(tables)
        table = table.take(pc.sort_indices(table, [("__line", "ascending")]))
    line_numbers = table.column("__line")
    columns_out = {name: table.column(name).combine_chunks() for name in (TIME_COLUMN, *kinds)}
    tags = [name for name, kind in kinds.items() if kind == "tag"]

    def label(row: int) -> str:
        return f"line {line_numbers[row].as_py()}"

    try:
        return build_rows(measurement, columns_out, tags, precision, now_micros, null_time_is_now=True, label=label)
    except BadRequest:
        raise _Fallback from None
