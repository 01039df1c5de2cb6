"""Bulk import against the local ports: readers in bounded chunks, all-or-nothing, stored once."""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

import msgpack
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from arcs.errors import BadRequest, Conflict, PayloadTooLarge
from arcs.ports import Catalog, ObjectStore
from arcs.write.import_status import ImportLedger, ImportStatus, chunk_write_id
from arcs.write.imports import chunks
from arcs.write.imports.options import ImportFormat, ImportOptions
from arcs.write.imports.store import Importer, IngestSink
from arcs.write.ingest import Ingestor
from arcs.write.schema import SchemaRegistry
from tests.helpers import local_ports, visible_rows


class Crash(BaseException):
    """Like the process dying: no ``except Exception`` in the code under test catches it."""


def lines(count: int, start: int = 0, measurement: str = "cpu") -> bytes:
    return b"".join(
        f"{measurement},host=h{i % 3} v={i}i,f={i}.5 {1_700_000_000 + i}\n".encode()
        for i in range(start, start + count)
    )


def opener(data: bytes) -> Callable[[], IO[bytes]]:
    return lambda: io.BytesIO(data)


@pytest.fixture
def ports(tmp_path: Path) -> tuple[ObjectStore, Catalog]:
    return local_ports(tmp_path)


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of a few lines, so a small file is many chunks (and many ingest attempts)."""
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 256)
    monkeypatch.setattr(chunks, "CHUNK_ROWS", 7)


def importer(ports: tuple[ObjectStore, Catalog], max_bytes: int = 1 << 30) -> Importer:
    store, catalog = ports
    return Importer(SchemaRegistry(catalog), IngestSink(Ingestor(catalog, store)), ImportLedger(store, ""), max_bytes)


def run(imp: Importer, data: bytes, options: ImportOptions, import_id: str = "imp-1") -> ImportStatus:
    return imp.run(imp.begin(import_id, options, None, len(data)), opener(data))


LP = ImportOptions(ImportFormat.LINE_PROTOCOL, "db", precision="s")


def count(ports: tuple[ObjectStore, Catalog], measurement: str = "cpu") -> int:
    store, catalog = ports
    if not catalog.list_files("db", measurement):
        return 0
    return visible_rows(catalog, store, "db", measurement).num_rows


def test_line_protocol_in_many_chunks_is_stored_once_per_line(ports, small_chunks) -> None:  # type: ignore[no-untyped-def]
    data = lines(100) + b"# a comment\n\n" + lines(50, 100, "mem")
    status = run(importer(ports), data, LP)
    assert status.state == "done" and status.chunks > 10
    assert (status.rows_imported, count(ports), count(ports, "mem")) == (150, 100, 50)
    assert status.measurements == ["cpu", "mem"]
    times = visible_rows(*reversed(ports), "db", "cpu").column("time").cast("int64").to_pylist()  # type: ignore[misc]
    assert sorted(times) == [(1_700_000_000 + i) * 10**9 for i in range(100)]


def test_a_bad_line_anywhere_stores_nothing_and_names_its_line_in_the_file(ports, small_chunks) -> None:  # type: ignore[no-untyped-def]
    data = lines(80) + b"cpu,host=x v=oops 1700000000\n" + lines(5, 80)
    with pytest.raises(BadRequest, match=r"line 81: field 'v'"):
        run(importer(ports), data, LP)
    store, catalog = ports
    assert count(ports) == 0
    assert catalog.get_schema("db", "cpu") is None  # not even the schema
    status = ImportLedger(store, "").get("db", "imp-1")
    assert status is not None and status.state == "failed" and "line 81" in str(status.error)


def test_a_type_conflict_with_storage_in_the_last_chunk_stores_nothing(ports, small_chunks) -> None:  # type: ignore[no-untyped-def]
    imp = importer(ports)
    run(imp, b"cpu,host=a w=1i 1700000000\n", LP, "first")
    data = lines(60, 1) + b'cpu,host=a w="text" 1700009999\n'
    with pytest.raises(BadRequest, match="column 'w' is int64 in storage but the request sends string"):
        run(imp, data, LP, "second")
    assert count(ports) == 1


def test_a_retried_import_stores_nothing_again(ports, small_chunks) -> None:  # type: ignore[no-untyped-def]
    imp = importer(ports)
    data = lines(90)
    first = run(imp, data, LP)
    again = imp.begin("imp-1", LP, None, len(data))
    assert again.state == "done"  # answered from its record
    assert imp.run(again, opener(data)).rows_imported == 90
    # Even with its record gone, the chunks' write markers keep every row stored once.
    store, _catalog = ports
    store.delete(ImportLedger(store, "").key("db", "imp-1"))
    assert run(imp, data, LP).rows_imported == 90
    assert count(ports) == 90 == first.rows_imported


def test_an_import_id_reused_for_another_file_is_a_conflict(ports) -> None:  # type: ignore[no-untyped-def]
    imp = importer(ports)
    imp.run(imp.begin("same", LP, "a" * 64, 10), opener(lines(3)))
    with pytest.raises(Conflict, match="another file"):
        imp.begin("same", LP, "b" * 64, 10)
    with pytest.raises(Conflict, match="other parameters"):
        imp.begin("same", ImportOptions(ImportFormat.LINE_PROTOCOL, "db", precision="ms"), "a" * 64, 10)


def test_a_crash_while_storing_is_finished_by_resuming_and_duplicates_nothing(ports, small_chunks) -> None:  # type: ignore[no-untyped-def]
    store, _catalog = ports
    imp = importer(ports)
    imp.group_bytes = 1  # every chunk an attempt of its own
    calls = {"n": 0}
    sink = imp.sink
    assert isinstance(sink, IngestSink)
    real = sink.ingestor.ingest

    def dies_on_the_fourth(writes):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 4:
            raise Crash("killed")
        return real(writes)

    sink.ingestor.ingest = dies_on_the_fourth  # type: ignore[method-assign]
    data = lines(120)
    with pytest.raises(Crash):
        run(imp, data, LP)
    assert 0 < count(ports) < 120  # the chunks stored before the crash
    (unfinished,) = ImportLedger(store, "").unfinished()
    assert unfinished.state == "storing"
    fresh = importer(ports)  # a new process
    status = fresh.resume(unfinished, opener(data))
    assert status.state == "done" and status.rows_imported == 120
    assert count(ports) == 120


def test_messagepack_file_is_a_sequence_of_write_bodies(ports, small_chunks) -> None:  # type: ignore[no-untyped-def]
    bodies = [
        msgpack.packb(
            {"m": "cpu", "tags": ["host"], "columns": {"time": [1_700_000_000_000 + i], "host": ["a"], "v": [i]}}
        )
        for i in range(40)
    ]
    bodies.append(msgpack.packb([{"m": "mem", "t": 1_700_000_000_000, "fields": {"free": 1}, "tags": {"host": "a"}}]))
    options = ImportOptions(ImportFormat.MSGPACK, "db")
    status = run(importer(ports), b"".join(bodies), options)
    assert (status.rows_imported, count(ports), count(ports, "mem")) == (41, 40, 1)


def test_messagepack_truncated_or_corrupt_is_refused(ports) -> None:  # type: ignore[no-untyped-def]
    body = msgpack.packb({"m": "cpu", "columns": {"time": [1_700_000_000_000], "v": [1]}})
    options = ImportOptions(ImportFormat.MSGPACK, "db")
    with pytest.raises(BadRequest, match="truncated"):
        run(importer(ports), body + body[:-3], options)
    with pytest.raises(BadRequest, match="object 2"):
        run(importer(ports), body + b"\xc1", options, "b")
    assert count(ports) == 0


def test_csv_with_tags_time_format_and_rows_named_in_errors(ports, small_chunks) -> None:  # type: ignore[no-untyped-def]
    rows = "".join(f"{1_700_000_000 + i};h{i % 2};{i * 1.5}\n" for i in range(30))
    data = f"# exported\nts;host;usage\n{rows}".encode()
    options = ImportOptions(
        ImportFormat.CSV, "db", "cpu", time_column="ts", time_format="epoch_s", delimiter=";", skip_rows=1,
        tag_columns=("host",),
    )  # fmt: skip
    status = run(importer(ports), data, options)
    assert status.rows_imported == 30 and status.columns == ["time", "host", "usage"]
    _store, catalog = ports
    schema = catalog.get_schema("db", "cpu")
    assert schema is not None and schema.tags == ("host",) and schema.columns["usage"] == "float64"
    bad = b"time,v\n2024-01-01T00:00:00Z,1\nnot a time,2\n"
    with pytest.raises(BadRequest):
        run(importer(ports), bad, ImportOptions(ImportFormat.CSV, "db", "other"), "bad")
    with pytest.raises(BadRequest, match="time column 'time' not found"):
        run(importer(ports), b"a,b\n1,2\n", ImportOptions(ImportFormat.CSV, "db", "other"), "bad2")


def test_parquet_in_row_batches_with_narrow_types(ports, small_chunks) -> None:  # type: ignore[no-untyped-def]
    table = pa.table(
        {
            "ts": pa.array([1_700_000_000_000 + i for i in range(25)], pa.timestamp("ms", tz="UTC")),
            "host": pa.array([f"h{i % 2}" for i in range(25)]).dictionary_encode(),
            "n": pa.array(list(range(25)), pa.int16()),
            "x": pa.array([i / 2 for i in range(25)], pa.float32()),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=10)
    options = ImportOptions(ImportFormat.PARQUET, "db", "pq", time_column="ts", tag_columns=("host",))
    status = run(importer(ports), sink.getvalue(), options)
    assert status.rows_imported == 25 and status.hours == 1
    with pytest.raises(BadRequest, match="not a Parquet file"):
        run(importer(ports), b"time,v\n1,2\n", options, "csv-as-parquet")


def test_compressed_files_are_read_as_streams_and_bombs_stop_at_the_limit(ports) -> None:  # type: ignore[no-untyped-def]
    data = lines(20)
    assert run(importer(ports), gzip.compress(data), LP, "gz").rows_imported == 20
    assert run(importer(ports), zstandard.ZstdCompressor().compress(data), LP, "zst").rows_imported == 20
    bomb = gzip.compress(b"cpu v=1 1700000000\n" * 2_000_000)  # 38 MB from about 100 KB
    with pytest.raises(PayloadTooLarge, match="import limit of 1000000 bytes"):
        run(importer(ports, max_bytes=1_000_000), bomb, LP, "bomb")
    with pytest.raises(BadRequest, match="corrupt or truncated"):
        run(importer(ports), gzip.compress(data)[:-10], LP, "cut")
    # zstd's decompressor reads a cut stream to its end silently: the frames are followed to tell.
    frames = zstandard.ZstdCompressor().compress(data[:300]) + zstandard.ZstdCompressor().compress(data[300:])
    assert run(importer(ports), frames, LP, "frames").rows_imported == 20
    for cut in (1, 4, len(frames) // 2):
        with pytest.raises(BadRequest, match="corrupt or truncated"):
            run(importer(ports), frames[:-cut], LP, f"zst-cut-{cut}")
    assert count(ports) == 60


def test_a_string_spanning_lines_across_a_chunk_end_is_read_whole(ports, small_chunks) -> None:  # type: ignore[no-untyped-def]
    for before in range(0, 12):
        data = lines(before) + b'log,host=a msg="first\n' + b"x" * 80 + b'\nthird" 1700000100\n' + lines(5, 200)
        status = run(importer(ports), data, LP, f"span-{before}")
        assert status.rows_imported == before + 6, before
    store, catalog = ports
    assert visible_rows(catalog, store, "db", "log").column("msg").to_pylist()[0] == "first\n" + "x" * 80 + "\nthird"


def test_a_line_longer_than_the_limit_is_refused(ports, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1024)
    monkeypatch.setattr(chunks, "MAX_LINE_BYTES", 4096)
    data = lines(3) + b"cpu,host=a v=" + b"1" * 10_000 + b" 1700000000\n"
    with pytest.raises(BadRequest, match="line 4: longer than 4096 bytes"):
        run(importer(ports), data, LP)
    assert count(ports) == 0


def test_chunk_write_ids_follow_the_database_import_and_chunk() -> None:
    assert chunk_write_id("db", "a", 0) == chunk_write_id("db", "a", 0)
    assert len({chunk_write_id("db", "a", 0), chunk_write_id("db", "a", 1), chunk_write_id("db2", "a", 0)}) == 3


def test_options_are_checked_as_arc_checks_them() -> None:
    params = {"measurement": "cpu", "time_format": "epoch_ms", "tag_columns": "host, dc"}
    options = ImportOptions.parse("csv", "db", params.get)
    assert options.tag_columns == ("host", "dc") and options.time_format == "epoch_ms"
    with pytest.raises(BadRequest, match="measurement query parameter is required"):
        ImportOptions.parse("parquet", "db", {}.get)
    with pytest.raises(BadRequest, match="database is required"):
        ImportOptions.parse("lp", None, {}.get)
    with pytest.raises(BadRequest, match="invalid time_format"):
        ImportOptions.parse("csv", "db", {"measurement": "m", "time_format": "rfc"}.get)
    with pytest.raises(BadRequest, match="delimiter"):
        ImportOptions.parse("csv", "db", {"measurement": "m", "delimiter": ";;"}.get)


def test_uploads_take_the_file_field_of_a_form_in_any_pieces() -> None:
    from arcs.write.uploads import FileBody

    payload = os.urandom(5000) + b"\r\n--boundary-like\r\n"
    form = (
        b'--XyZ\r\nContent-Disposition: form-data; name="note"\r\n\r\nhello\r\n'
        b'--XyZ\r\nContent-Disposition: form-data; name="file"; filename="a.lp"\r\n'
        b"Content-Type: application/octet-stream\r\n\r\n" + payload + b"\r\n--XyZ--\r\n"
    )
    for step in (1, 7, 1000, len(form)):
        got = bytearray()
        body = FileBody("multipart/form-data; boundary=XyZ", got.extend, 1 << 20)
        for i in range(0, len(form), step):
            body.write(form[i : i + step])
        body.finish()
        assert bytes(got) == payload and body.size == len(payload)
    body = FileBody("multipart/form-data; boundary=XyZ", bytearray().extend, 1 << 20)
    body.write(form[: len(form) // 2])
    with pytest.raises(BadRequest, match="truncated"):
        body.finish()
    body = FileBody("multipart/form-data; boundary=XyZ", bytearray().extend, 100)
    with pytest.raises(PayloadTooLarge):
        body.write(form)
    with pytest.raises(BadRequest, match="boundary"):
        FileBody("multipart/form-data", bytearray().extend, 100)
    second = b'--XyZ\r\nContent-Disposition: form-data; name="file"; filename="b.lp"\r\n\r\nb v=1 1\r\n--XyZ--\r\n'
    twice = FileBody("multipart/form-data; boundary=XyZ", bytearray().extend, 1 << 20)
    with pytest.raises(BadRequest, match="more than one 'file' field"):
        twice.write(form[: -len(b"--XyZ--\r\n")] + second)
    empty = FileBody("text/plain", bytearray().extend, 100)
    with pytest.raises(BadRequest, match="file is empty"):
        empty.finish()
