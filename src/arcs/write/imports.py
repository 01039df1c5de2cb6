"""Bulk import: a file of line protocol, MessagePack, CSV or Parquet, stored as writes are.

A file of any size is read in bounded chunks, twice. The first pass decodes every chunk and checks
it against the stored schemas (planned as if the chunks before it were stored) and stores nothing:
a file that is wrong anywhere is a 4xx naming the lines or rows, and changes nothing. Then the
columns the file adds are recorded in one catalog write, and the second pass decodes the chunks
again and stores them through the ingest protocol (``arcs.write.ingest``), a group of chunks per
attempt, each chunk a write whose id is derived from the database, the import id and the chunk's
number. A retried import (the same id), or one resumed after a crash, stores every chunk once:
the write markers say which chunks a previous run committed.

What one import holds at once is a chunk being decoded, or one being written, whatever the
file's size. Its progress is a small JSON record under
``{prefix}/_arcs/imports/{database}/{id}.json``, updated as it runs (docs/import.md).
"""

from __future__ import annotations

import gzip
import io
import logging
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import asdict, dataclass
from enum import Enum
from typing import IO, TYPE_CHECKING, Any, cast

import msgpack
import pyarrow as pa
import pyarrow.compute as pc
import zstandard

from arcs.errors import ArcsError, BadRequest, Conflict, NotFound, PayloadTooLarge, ServiceUnavailable
from arcs.names import TIME_COLUMN, check_database, check_measurement
from arcs.ports import WriteQueue
from arcs.write.batch import MeasurementRows, WriteBatch
from arcs.write.decoders import WireFormat, decode
from arcs.write.decoders.columns import build_rows, check_precision, shorten
from arcs.write.decoders.compression import GZIP_MAGIC, ZSTD_MAGIC
from arcs.write.import_status import ImportLedger, ImportStatus, chunk_write_id
from arcs.write.ingest import Ingestor, QueuedWrite, decoded_bytes
from arcs.write.schema import SchemaPlan, SchemaRegistry

if TYPE_CHECKING:
    from arcs.runtime import Runtime

logger = logging.getLogger(__name__)

#: Decompressed bytes of line protocol or MessagePack decoded at a time (rows of CSV and Parquet:
#: ``CHUNK_ROWS``). Fixed, not a setting: a retried import must cut its file where the first run did.
CHUNK_BYTES = 8 << 20
CHUNK_ROWS = 100_000
#: A line of line protocol (or one MessagePack object) longer than this is refused.
MAX_LINE_BYTES = 64 << 20
#: Decoded bytes stored in one ingest attempt: about a chunk. Ingest holds several times its group
#: while it merges points written twice (rows sharing tags and time), so larger groups cost memory
#: (64 MiB groups: 170 MB more resident) and saved no time.
GROUP_BYTES = 4 << 20
#: Arc's import limit, and ours unless ``ARCS_IMPORT_MAX_BYTES`` says otherwise; it applies to the
#: file as sent and as decompressed.
DEFAULT_MAX_BYTES = 500 * 1024 * 1024
_LINE = re.compile(r"\bline (\d+)")
_READ = 1 << 20
_PROGRESS_EVERY_S = 1.0


class ImportFormat(Enum):
    LINE_PROTOCOL = "lp"
    MSGPACK = "msgpack"
    CSV = "csv"
    PARQUET = "parquet"


_TIME_FORMATS = {"epoch_s": "s", "epoch_ms": "ms", "epoch_us": "us", "epoch_ns": "ns"}


@dataclass(frozen=True)
class ImportOptions:
    """What an import is asked to do: Arc's query parameters, and ``tag_columns`` of ours."""

    format: ImportFormat
    database: str
    measurement: str | None = None  # line protocol / MessagePack: a filter; CSV / Parquet: required
    precision: str | None = None
    time_column: str = TIME_COLUMN
    time_format: str | None = None  # epoch_s|ms|us|ns; None: by magnitude, or timestamps
    delimiter: str = ","
    skip_rows: int = 0
    tag_columns: tuple[str, ...] = ()

    @classmethod
    def parse(cls, kind: str, database: str | None, param: Callable[[str], str | None]) -> ImportOptions:
        """The options a request's parameters give, or a 400 naming the one that is wrong."""
        try:
            fmt = ImportFormat(kind)
        except ValueError:
            raise NotFound(f"no import format {kind!r}: use lp, msgpack, csv or parquet") from None
        if not database:
            raise BadRequest("database is required (set the x-arc-database header or the db query parameter)")
        measurement = param("measurement") or None
        if measurement is not None:
            check_measurement(measurement)
        elif fmt in (ImportFormat.CSV, ImportFormat.PARQUET):
            raise BadRequest("measurement query parameter is required")
        time_format = param("time_format") or None
        if time_format is not None and time_format not in _TIME_FORMATS:
            raise BadRequest(
                f"invalid time_format {shorten(repr(time_format), 40)}: use epoch_s, epoch_ms, epoch_us or epoch_ns"
            )
        delimiter = param("delimiter") or ","
        if len(delimiter) != 1 or delimiter in '\r\n"':
            raise BadRequest(f"delimiter must be a single character, got {shorten(repr(delimiter), 40)}")
        skip = param("skip_rows") or "0"
        if not skip.isascii() or not skip.isdigit() or int(skip) > 1_000_000:
            raise BadRequest(f"skip_rows must be a whole number up to 1000000, got {shorten(repr(skip), 40)}")
        tags = tuple(t.strip() for t in (param("tag_columns") or "").split(",") if t.strip())
        time_column = param("time_column") or TIME_COLUMN
        if time_column in tags:
            raise BadRequest(f"the time column {time_column!r} cannot be a tag column")
        precision = check_precision(param("precision"))
        if fmt is ImportFormat.LINE_PROTOCOL:
            precision = precision or "ns"  # line protocol's default, named so a retry reads the same
        return cls(
            fmt,
            check_database(database),
            measurement,
            precision,
            time_column,
            time_format,
            delimiter,
            int(skip),
            tags,
        )

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "format": self.format.value, "tag_columns": list(self.tag_columns)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ImportOptions:
        return cls(**{**data, "format": ImportFormat(data["format"]), "tag_columns": tuple(data["tag_columns"])})


# -- reading a file ------------------------------------------------------------------------------


class _Capped(io.RawIOBase):
    """A stream that refuses to give more than ``limit`` bytes (a decompression bomb stops there)."""

    def __init__(self, inner: IO[bytes], limit: int, on_read: Callable[[int], None]) -> None:
        self.inner = inner
        self.limit = limit
        self.count = 0
        self.on_read = on_read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer)
        try:
            data = self.inner.read(len(view))
        except (OSError, EOFError, zlib.error, zstandard.ZstdError) as exc:
            raise BadRequest(f"the file's compression is corrupt or truncated: {exc}") from exc
        n = len(data)
        self.count += n
        if self.count > self.limit:
            raise PayloadTooLarge(f"the file exceeds the import limit of {self.limit} bytes (decompressed)")
        view[:n] = data
        self.on_read(self.count)
        return n


def open_decompressed(raw: IO[bytes], limit: int, on_read: Callable[[int], None]) -> IO[bytes]:
    """``raw`` undone of gzip or zstd (found by their magic bytes), capped at ``limit`` bytes."""
    buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(_Plain(raw), _READ)
    magic = buffered.peek(4)[:4]
    inner: Any
    if magic.startswith(GZIP_MAGIC):
        inner = gzip.GzipFile(fileobj=buffered, mode="rb")
    elif magic.startswith(ZSTD_MAGIC):
        frames = _ZstdFrames(buffered)
        reader = zstandard.ZstdDecompressor().stream_reader(cast(IO[bytes], frames), read_across_frames=True)
        inner = _EndChecked(reader, frames)
    else:
        inner = buffered
    return io.BufferedReader(_Capped(inner, limit, on_read), _READ)


_SKIPPABLE = b"\x2a\x4d\x18"  # the last three bytes of a skippable frame's magic (0x184D2A5?)


class _ZstdFrames(io.RawIOBase):
    """The compressed bytes, followed through zstd's frame format (RFC 8878) as they are read.

    The decompressor reads a stream that ends inside a frame to its end without a word; this tells
    such a stream (a truncated file) from a whole one: ``whole`` once every frame ended.
    """

    def __init__(self, inner: IO[bytes]) -> None:
        self.inner = inner
        self.wanted = 4  # header bytes to gather next, into ``held``
        self.held = b""
        self.step: Callable[[bytes], None] = self._magic
        self.skip = 0  # bytes of a block (or skippable frame) to pass over
        self.checksum = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        self._follow(data)
        buffer[: len(data)] = data
        return len(data)

    @property
    def whole(self) -> bool:
        return self.step == self._magic and not self.held and not self.skip

    def _follow(self, data: bytes) -> None:
        pos = 0
        while pos < len(data):
            if self.skip:
                taken = min(self.skip, len(data) - pos)
                self.skip -= taken
                pos += taken
                continue
            taken = min(self.wanted - len(self.held), len(data) - pos)
            self.held += data[pos : pos + taken]
            pos += taken
            if len(self.held) == self.wanted:
                held, self.held = self.held, b""
                self.step(held)

    def _expect(self, count: int, step: Callable[[bytes], None]) -> None:
        self.wanted, self.step = count, step
        if count == 0:
            step(b"")

    def _magic(self, magic: bytes) -> None:
        if magic == ZSTD_MAGIC:
            self._expect(1, self._descriptor)
        elif magic[1:] == _SKIPPABLE and 0x50 <= magic[0] <= 0x5F:
            self._expect(4, self._skippable)
        else:
            raise BadRequest("the file's compression is corrupt: not a zstd frame")

    def _skippable(self, size: bytes) -> None:
        self.skip = int.from_bytes(size, "little")
        self._expect(4, self._magic)

    def _descriptor(self, descriptor: bytes) -> None:
        flags = descriptor[0]
        single = bool(flags & 0x20)
        self.checksum = bool(flags & 0x04)
        content_size = (1 if single else 0, 2, 4, 8)[flags >> 6]
        rest = (0 if single else 1) + (0, 1, 2, 4)[flags & 0x03] + content_size
        self._expect(rest, lambda _header: self._expect(3, self._block))

    def _block(self, header: bytes) -> None:
        value = int.from_bytes(header, "little")
        last, kind, size = value & 1, (value >> 1) & 3, value >> 3
        self.skip = 1 if kind == 1 else size
        if not last:
            self._expect(3, self._block)
        elif self.checksum:
            self._expect(4, lambda _sum: self._expect(4, self._magic))
        else:
            self._expect(4, self._magic)


class _EndChecked(io.RawIOBase):
    """The decompressed stream; its end is an error when the compressed one stopped inside a frame."""

    def __init__(self, inner: Any, frames: _ZstdFrames) -> None:
        self.inner = inner
        self.frames = frames

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        if not data and not self.frames.whole:
            raise BadRequest("the file's compression is corrupt or truncated: its zstd stream ends inside a frame")
        buffer[: len(data)] = data
        return len(data)


class _Plain(io.RawIOBase):
    def __init__(self, inner: IO[bytes]) -> None:
        self.inner = inner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


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
    precision = _TIME_FORMATS.get(options.time_format or "") or options.precision
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


#: Where checked chunks go: stored at once, or queued as writes; returns once they are durable.
ChunkSink = Callable[[list[QueuedWrite]], None]


class IngestSink:
    """Chunks stored through the ingest protocol, here and now: the standalone server, and the
    compact function on AWS. The import's answer comes once every row is queryable."""

    def __init__(self, ingestor: Ingestor) -> None:
        self.ingestor = ingestor

    def __call__(self, writes: list[QueuedWrite]) -> None:
        for attempt in range(5):
            result = self.ingestor.ingest(writes)
            if not result.failed and not result.poison:
                return
            writes = [w for w in writes if w.handle in result.failed]
            if result.poison or attempt == 4:
                reason = next(iter({**result.poison, **result.failed}.values()))
                raise ServiceUnavailable(f"storing the import failed ({reason}); retry it with the same import id")
            time.sleep(0.2 * (attempt + 1))


class QueueSink:
    """Chunks queued as writes (SQS on AWS: the edge function, which stores no data itself); the
    ingest function stores them, each once, by its write id. Durable, as a write's 204 is."""

    def __init__(self, queue: WriteQueue, compression: str | None) -> None:
        self.queue = queue
        self.compression = compression

    def __call__(self, writes: list[QueuedWrite]) -> None:
        for write in writes:
            assert write.batch is not None
            self.queue.enqueue(write.write_id, write.batch.to_bytes(self.compression))


class Importer:
    """Runs imports: checks a whole file, then stores it chunk group by chunk group, exactly once."""

    def __init__(
        self,
        registry: SchemaRegistry,
        sink: ChunkSink,
        ledger: ImportLedger,
        max_bytes: int = DEFAULT_MAX_BYTES,
        group_bytes: int = GROUP_BYTES,
    ) -> None:
        self.registry = registry
        self.sink = sink
        self.ledger = ledger
        self.max_bytes = max_bytes
        self.group_bytes = group_bytes
        self._running: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def begin(
        self, import_id: str, options: ImportOptions, sha256: str | None, size: int, upload: str | None = None
    ) -> ImportStatus:
        """The status record of a new run of ``import_id``, or the finished one when it already ran
        on this same file (sha256); a 409 when it runs now or ran on another file."""
        key = (options.database, import_id)
        self.ledger.count(requests=1)
        with self._lock:
            if key in self._running:
                raise Conflict(f"import {import_id!r} is running; see /api/v1/import/status/{import_id}")
            previous = self.ledger.get(options.database, import_id)
            if previous is not None and previous.sha256 and sha256 and previous.sha256 != sha256:
                raise Conflict(f"import id {import_id!r} was used for another file; choose a new id")
            if previous is not None and previous.state in ("storing", "done") and previous.options != options.to_json():
                # Its chunks are (partly) stored as those parameters read them.
                raise Conflict(f"import id {import_id!r} was used with other parameters; choose a new id")
            if previous is not None and previous.state == "done":
                return previous
            now = time.time()
            status = ImportStatus(
                import_id,
                options.database,
                options.format.value,
                options.to_json(),
                sha256=sha256,
                bytes_total=size,
                # Resumed runs keep the first run's clock: lines without a time land where they did.
                now_micros=previous.now_micros
                if previous is not None and previous.now_micros
                else time.time_ns() // 1000,
                started_at=now,
                upload=upload,
            )
            self._running.add(key)
        return status

    def resume(self, status: ImportStatus, opener: Opener) -> ImportStatus:
        """Run again an import a crash stopped (its chunks already stored are stored once)."""
        with self._lock:
            key = (status.database, status.import_id)
            if key in self._running:
                raise Conflict(f"import {status.import_id!r} is running")
            self._running.add(key)
        status.state, status.error, status.error_status = "validating", None, None
        status.rows_checked = 0
        return self.run(status, opener)

    def run(self, status: ImportStatus, opener: Opener) -> ImportStatus:
        """Check then store the file; returns the finished status (raises with it recorded as failed)."""
        key = (status.database, status.import_id)
        if status.state == "done":
            return status
        options = ImportOptions.from_json(status.options)
        try:
            self.ledger.put(status)
            self._check(status, options, opener)
            status.state = "storing"
            status.bytes_read = 0
            self.ledger.put(status)
            self._store(status, options, opener)
            status.state = "done"
            status.finished_at = time.time()
            status.upload = None
            self.ledger.put(status)
            self.ledger.count(records=status.rows_imported)
            return status
        except ArcsError as exc:
            status.error = exc.message
            status.error_status = exc.status
            status.finished_at = time.time()
            if status.state == "validating" or exc.client_error:
                # Nothing was stored (a client error can only come from the check).
                status.state = "failed"
                status.upload = None
            self.ledger.put(status)
            self.ledger.count(errors=1)
            raise
        finally:
            with self._lock:
                self._running.discard(key)

    def _chunks(self, status: ImportStatus, options: ImportOptions, opener: Opener) -> Iterator[Chunk]:
        last = [0.0]

        def progress(count: int) -> None:
            status.bytes_read = count
            now = time.monotonic()
            if now - last[0] >= _PROGRESS_EVERY_S:
                last[0] = now
                self.ledger.put(status)

        with opener() as raw:
            if options.format is ImportFormat.PARQUET:
                # Parquet is read by its footer first: the file itself, seekable, as it was sent
                # (its pages carry their own compression).
                if status.bytes_total > self.max_bytes:
                    raise PayloadTooLarge(f"the file exceeds the import limit of {self.max_bytes} bytes")
                yield from _parquet_chunks(raw, options, status.now_micros)
                return
            stream = open_decompressed(raw, self.max_bytes, progress)
            yield from _READERS[options.format](stream, options, status.now_micros)

    def _check(self, status: ImportStatus, options: ImportOptions, opener: Opener) -> None:
        plan = SchemaPlan(self.registry, options.database)
        measurements: dict[str, None] = {}
        columns: dict[str, None] = {}
        hours: set[int] = set()
        low: int | None = None
        high: int | None = None
        chunks = 0
        for chunk in self._chunks(status, options, opener):
            plan.check(chunk.parts)
            for part in chunk.parts:
                measurements.setdefault(part.measurement)
                columns.update(dict.fromkeys(part.table.column_names))
                times = part.table.column(TIME_COLUMN).cast(pa.int64())
                bounds = pc.min_max(times).as_py()
                low = bounds["min"] if low is None else min(low, bounds["min"])
                high = bounds["max"] if high is None else max(high, bounds["max"])
                hours.update(pc.unique(pc.divide(times, 3_600_000_000_000)).to_pylist())
            status.rows_checked += chunk.rows
            chunks += 1
        if status.rows_checked == 0:
            if options.measurement is not None:
                raise BadRequest(f"no records found for measurement {options.measurement!r}")
            raise BadRequest("the file holds no rows")
        plan.reserve()
        status.chunks = chunks
        status.measurements = list(measurements)
        status.columns = list(columns)
        status.time_min_ns, status.time_max_ns, status.hours = low, high, len(hours)

    def _store(self, status: ImportStatus, options: ImportOptions, opener: Opener) -> None:
        group: list[tuple[QueuedWrite, int]] = []
        held = 0
        status.rows_imported = 0
        status.chunks_stored = 0
        for chunk in self._chunks(status, options, opener):
            if not chunk.parts:
                continue
            parts = self.registry.apply(options.database, chunk.parts)
            write_id = chunk_write_id(options.database, status.import_id, chunk.number)
            batch = WriteBatch(write_id, options.database, tuple(parts))
            group.append((QueuedWrite(f"chunk-{chunk.number}", write_id, _no_envelope, batch=batch), batch.row_count))
            held += decoded_bytes(batch)
            if held >= self.group_bytes:
                self._commit(status, group)
                group, held = [], 0
        if group:
            self._commit(status, group)

    def _commit(self, status: ImportStatus, group: list[tuple[QueuedWrite, int]]) -> None:
        self.sink([write for write, _rows in group])
        status.rows_imported += sum(rows for _write, rows in group)
        status.chunks_stored += len(group)
        self.ledger.put(status)


def _no_envelope() -> bytes:
    raise AssertionError("an import's chunks are handed to ingest decoded")


def run_uploaded(runtime: Runtime, database: str, import_id: str) -> ImportStatus | None:
    """Import a file a client uploaded to the bucket (the compact function's ``import`` task).

    Runs again after a failed or cut-short invocation (Lambda retries an event invocation twice):
    the chunks an earlier run stored are stored once. A file refused for what it holds is not
    retried; its status says why. The uploaded object is deleted once the import is over."""
    ledger = runtime.import_ledger
    status = ledger.get(database, import_id)
    if status is None or status.state in ("done", "failed", "awaiting_upload") or status.upload is None:
        return status
    uploads = runtime.uploads
    if uploads is None:
        raise ServiceUnavailable("this deployment has no upload store")
    key = status.upload
    size = status.bytes_total

    def opener() -> IO[bytes]:
        return uploads.open_ranges(key, size)

    try:
        status = runtime.importer.resume(status, opener)
    except ArcsError as exc:
        if not exc.client_error:
            raise
        logger.warning("import %s of database %s refused: %s", import_id, database, exc.message)
    runtime.store.delete(key)
    return status
