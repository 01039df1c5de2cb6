"""Reading an import's file in bounded chunks: each format cut into pieces decoded one at a time.

Chunks are numbered from the file's start and cut the same way on every read, so a retried or
resumed import derives the same write id for each chunk (``arcs.write.import_status``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from typing import IO, Any

import msgpack
import pyarrow as pa
import pyarrow.compute as pc

from arcs.errors import BadRequest, PayloadTooLarge
from arcs.names import TIME_COLUMN
from arcs.write.batch import MeasurementRows
from arcs.write.decoders import WireFormat, decode
from arcs.write.decoders.columns import build_rows, shorten
from arcs.write.imports.decompress import open_decompressed
from arcs.write.imports.options import TIME_FORMATS, ImportFormat, ImportOptions

#: Decompressed bytes of line protocol or MessagePack decoded at a time (rows of CSV and Parquet:
#: ``CHUNK_ROWS``). Fixed, not a setting: a retried import must cut its file where the first run did.
CHUNK_BYTES = 8 << 20
CHUNK_ROWS = 100_000
#: A line of line protocol (or one MessagePack object) longer than this is refused.
MAX_LINE_BYTES = 64 << 20
_LINE = re.compile(r"\bline (\d+)")


@dataclass
class Chunk:
    number: int
    parts: list[MeasurementRows]

    @property
    def rows(self) -> int:
        return sum(part.table.num_rows for part in self.parts)


def _renumbered(exc: BadRequest, first_line: int) -> BadRequest:
    """A decoder's message about lines of a chunk, with the lines counted from the file's start."""
    if first_line == 1:
        return exc
    return BadRequest(_LINE.sub(lambda m: f"line {int(m[1]) + first_line - 1}", exc.message))


def _lp_chunks(stream: IO[bytes], options: ImportOptions, now_micros: int) -> Iterator[Chunk]:
    """Pieces of whole lines of about ``CHUNK_BYTES``, decoded one at a time.

    A quoted string may span lines (InfluxDB allows it): when the last line of a piece fails as a
    string that goes on, the piece is decoded again with the next read joined to it."""
    first_line = 1
    number = 0
    pending = b""
    eof = False
    while True:
        data = b"" if eof else stream.read(CHUNK_BYTES)
        eof = not data
        pending += data
        # Only the line carried over from earlier reads can be longer than one read.
        first_end = pending.find(b"\n")
        if (first_end if first_end >= 0 else len(pending)) > MAX_LINE_BYTES:
            raise BadRequest(f"line {first_line}: longer than {MAX_LINE_BYTES} bytes")
        cut = len(pending) - 1 if eof else pending.rfind(b"\n")
        if cut < 0:
            if eof:
                return
            continue
        piece = pending[: cut + 1]
        lines = piece.count(b"\n")
        parts: list[MeasurementRows] = []
        if piece.strip():
            try:
                parts = decode(WireFormat.LINE_PROTOCOL, piece, now_micros, options.precision)
            except BadRequest as exc:
                if not eof and _string_goes_on(exc) and len(pending) <= MAX_LINE_BYTES:
                    continue  # read on: the next piece holds the rest of the string
                if exc.message != "the request holds no lines":  # a chunk of comments only
                    raise _renumbered(exc, first_line) from None
        pending = pending[cut + 1 :]
        yield Chunk(number, _only(parts, options.measurement))
        number += 1
        first_line += lines
        if eof:
            return


def _string_goes_on(exc: BadRequest) -> bool:
    """Whether a piece failed on a quoted string that runs to its end (the decoder reports such a
    string last: it cannot tell where the next line starts)."""
    return "unterminated string" in exc.message.rsplit("; ", 1)[-1]


def _msgpack_chunks(stream: IO[bytes], options: ImportOptions, now_micros: int) -> Iterator[Chunk]:
    """A MessagePack file is a sequence of bodies as the write route takes them, one after another."""
    unpacker = msgpack.Unpacker(max_buffer_size=MAX_LINE_BYTES + CHUNK_BYTES)
    held = bytearray()  # the bytes fed but not yet cut into whole objects
    start = 0  # where ``held`` begins in the file
    number = 0
    objects = 0
    while True:
        data = stream.read(CHUNK_BYTES)
        if data:
            try:
                unpacker.feed(data)
            except msgpack.BufferFull:
                raise BadRequest(f"MessagePack object {objects + 1} is longer than {MAX_LINE_BYTES} bytes") from None
            held += data
        ends: list[int] = []
        while True:
            try:
                unpacker.skip()
            except msgpack.OutOfData:
                break
            except (ValueError, msgpack.UnpackException) as exc:
                raise BadRequest(f"MessagePack object {objects + len(ends) + 1} is not valid: {exc}") from None
            ends.append(unpacker.tell() - start)
        parts: list[MeasurementRows] = []
        begin = 0
        for end in ends:
            objects += 1
            try:
                parts += decode(WireFormat.MSGPACK, bytes(held[begin:end]), now_micros, options.precision)
            except BadRequest as exc:
                raise BadRequest(f"MessagePack object {objects}: {exc.message}") from None
            begin = end
        del held[:begin]
        start += begin
        if parts:
            yield Chunk(number, _only(parts, options.measurement))
            number += 1
        if not data:
            if held:
                raise BadRequest(f"the file ends inside MessagePack object {objects + 1} (truncated)")
            return


def _only(parts: list[MeasurementRows], measurement: str | None) -> list[MeasurementRows]:
    return parts if measurement is None else [p for p in parts if p.measurement == measurement]


def _table_rows(
    table: pa.Table, options: ImportOptions, measurement: str, now_micros: int, first_row: int
) -> MeasurementRows:
    """Rows of a CSV or Parquet file -> one measurement's rows, checked as a write's are."""
    names = table.column_names
    if options.time_column not in names:
        raise BadRequest(
            f"time column {options.time_column!r} not found in file; available columns: {shorten(', '.join(names))}"
        )
    if options.time_column != TIME_COLUMN and TIME_COLUMN in names:
        raise BadRequest(
            f"cannot rename time column {options.time_column!r} to 'time': a column named 'time' already exists"
        )
    missing = [tag for tag in options.tag_columns if tag not in names]
    if missing:
        raise BadRequest(f"tag columns {shorten(repr(missing))} not found in file")
    columns: dict[str, Any] = {}
    for name in names:
        values = table.column(name).combine_chunks()
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        if name == options.time_column:
            if pa.types.is_string(values.type) and options.time_format is None:
                with suppress(pa.ArrowInvalid):
                    values = values.cast(pa.timestamp("ns"))  # "2024-01-01 00:00:00": UTC, as Arc reads it
            columns[TIME_COLUMN] = values
        elif name in options.tag_columns:
            columns[name] = values.cast(pa.string()) if not pa.types.is_string(values.type) else values
        else:
            columns[name] = _field_values(values, measurement, name)
    precision = TIME_FORMATS.get(options.time_format or "") or options.precision
    return build_rows(
        measurement,
        columns,
        list(options.tag_columns),
        precision,
        now_micros,
        label=lambda row: f"row {first_row + row}",
    )


def _field_values(values: pa.Array, measurement: str, name: str) -> pa.Array:
    kind = values.type
    if kind == pa.uint64() and (pc.max(values).as_py() or 0) > (1 << 63) - 1:
        raise BadRequest(f"measurement {measurement!r}, column {name!r}: integer out of the int64 range")
    if pa.types.is_integer(kind):
        return values.cast(pa.int64())
    if pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return values.cast(pa.float64())
    if pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return values.cast(pa.string())
    if pa.types.is_date(kind):
        return values.cast(pa.timestamp("ns"))
    return values  # column_array judges the rest (strings, booleans, timestamps; others are a 400)


def _csv_chunks(stream: IO[bytes], options: ImportOptions, now_micros: int) -> Iterator[Chunk]:
    from pyarrow import csv

    measurement = options.measurement or ""
    try:
        reader = csv.open_csv(
            stream,
            read_options=csv.ReadOptions(block_size=CHUNK_BYTES, skip_rows=options.skip_rows),
            parse_options=csv.ParseOptions(delimiter=options.delimiter),
            # Tags are text whatever they look like; times are read as text when a format names them.
            convert_options=csv.ConvertOptions(
                column_types={
                    **{tag: pa.string() for tag in options.tag_columns},
                    **({options.time_column: pa.string()} if options.time_format else {}),
                },
                strings_can_be_null=False,
            ),
        )
    except pa.ArrowInvalid as exc:
        raise BadRequest(f"the CSV file cannot be read: {_arrow_message(exc)}") from None
    except StopIteration:
        raise BadRequest("the file is empty") from None
    first_row = 1
    number = 0
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        except pa.ArrowInvalid as exc:
            raise BadRequest(f"CSV rows from {first_row}: {_arrow_message(exc)}") from None
        if batch.num_rows == 0:
            continue
        table = pa.Table.from_batches([batch])
        if options.time_format is not None:
            table = _time_text_as_numbers(table, options.time_column, first_row)
        yield Chunk(number, [_table_rows(table, options, measurement, now_micros, first_row)])
        number += 1
        first_row += batch.num_rows


def _time_text_as_numbers(table: pa.Table, column: str, first_row: int) -> pa.Table:
    if column not in table.column_names:
        return table
    index = table.column_names.index(column)
    text = table.column(index)
    for kind in (pa.int64(), pa.float64()):
        try:
            return table.set_column(index, column, text.cast(kind))
        except pa.ArrowInvalid:
            continue
    raise BadRequest(f"rows from {first_row}: time column {column!r} holds values that are not epoch numbers")


def _arrow_message(exc: Exception) -> str:
    return shorten(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, 300)


def _parquet_chunks(stream: IO[bytes], options: ImportOptions, now_micros: int) -> Iterator[Chunk]:
    import pyarrow.parquet as pq

    measurement = options.measurement or ""
    try:
        parquet = pq.ParquetFile(stream)
    except (pa.ArrowInvalid, OSError) as exc:
        raise BadRequest(f"not a Parquet file: {_arrow_message(exc)}") from None
    first_row = 1
    number = 0
    try:
        for batch in parquet.iter_batches(batch_size=CHUNK_ROWS):
            if batch.num_rows == 0:
                continue
            table = pa.Table.from_batches([batch])
            yield Chunk(number, [_table_rows(table, options, measurement, now_micros, first_row)])
            number += 1
            first_row += batch.num_rows
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
        raise BadRequest(f"Parquet rows from {first_row}: {_arrow_message(exc)}") from None


_READERS: dict[ImportFormat, Callable[[IO[bytes], ImportOptions, int], Iterator[Chunk]]] = {
    ImportFormat.LINE_PROTOCOL: _lp_chunks,
    ImportFormat.MSGPACK: _msgpack_chunks,
    ImportFormat.CSV: _csv_chunks,
    ImportFormat.PARQUET: _parquet_chunks,
}


#: Opens the file as it was sent (from its start), each time it is called.
Opener = Callable[[], IO[bytes]]


def file_opener(path: str) -> Opener:
    def opener() -> IO[bytes]:
        return open(path, "rb")

    return opener


def read_chunks(
    opener: Opener, options: ImportOptions, now_micros: int, size: int, max_bytes: int, on_read: Callable[[int], None]
) -> Iterator[Chunk]:
    """The chunks of the file ``opener`` opens (``size`` bytes as sent), read once from its start;
    ``on_read`` is told the decompressed bytes read so far."""
    with opener() as raw:
        if options.format is ImportFormat.PARQUET:
            # Parquet is read by its footer first: the file itself, seekable, as it was sent
            # (its pages carry their own compression).
            if size > max_bytes:
                raise PayloadTooLarge(f"the file exceeds the import limit of {max_bytes} bytes")
            yield from _parquet_chunks(raw, options, now_micros)
            return
        stream = open_decompressed(raw, max_bytes, on_read)
        yield from _READERS[options.format](stream, options, now_micros)
