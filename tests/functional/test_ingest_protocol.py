"""The ingest commit protocol: exact row counts under crashes, redelivery and regrouping."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arcs import layout
from arcs.write.decoders import columnar_lane
from arcs.write.ingest import Ingestor, QueuedWrite, decoded_bytes
from tests.helpers import BASE_US, HOUR_US, local_ports, make_batch, make_body_batch, queued, visible_rows

STEPS = ["markers-read", "claimed", "file-written", "files-written", "committed", "files-listed"]


class Crash(BaseException):
    """Like the process dying: no ``except Exception`` in the code under test catches it."""


def crash_at(step: str) -> Callable[[str], None]:
    def fault(current: str) -> None:
        if current == step:
            raise Crash(step)

    return fault


@pytest.fixture
def ports(tmp_path: Path):  # type: ignore[no-untyped-def]
    return local_ports(tmp_path)


def test_groups_by_hour_and_sorts_by_time(ports) -> None:  # type: ignore[no-untyped-def]
    store, catalog = ports
    first = make_batch("db", "cpu", [BASE_US + 5, BASE_US + HOUR_US + 1, BASE_US + 1])
    second = make_batch("db", "cpu", [BASE_US + 3], host="b")
    result = Ingestor(catalog, store).ingest([queued(first), queued(second)])
    assert sorted(result.committed) == sorted([first.write_id, second.write_id])
    files = catalog.list_files("db", "cpu")
    assert [f.rows for f in files] == [3, 1]
    assert [f.hour for f in files] == [layout.hour_from_micros(BASE_US), layout.hour_from_micros(BASE_US + HOUR_US)]
    for record in files:
        assert layout.parse_data_key("", record.key).hour == record.hour
    rows = visible_rows(catalog, store, "db", "cpu")
    times = [t // 1000 for t in rows.column("time").cast("int64").to_pylist()]  # stored in ns
    assert times == [BASE_US + 1, BASE_US + 3, BASE_US + 5, BASE_US + HOUR_US + 1]
    assert rows.column("host").to_pylist() == ["a", "b", "a", "a"]


def test_files_encode_tags_as_dictionaries_times_as_deltas_floats_split_and_keep_number_stats(ports) -> None:  # type: ignore[no-untyped-def]
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from arcs.write.batch import TIME_TYPE, MeasurementRows, WriteBatch

    store, catalog = ports
    table = pa.table(
        {
            "time": pa.array([BASE_US + i for i in range(50)], pa.int64())
            .cast(pa.timestamp("us", tz="UTC"))
            .cast(TIME_TYPE),
            "host": pa.array(["a", "b"] * 25),
            "note": pa.array([f"free text {i}" for i in range(50)]),
            "value": pa.array([i / 7 for i in range(50)]),
            "count": pa.array(range(50), pa.int64()),
            "ok": pa.array([i % 3 == 0 for i in range(50)]),
        }
    )
    batch = WriteBatch("encodings", "db", (MeasurementRows("cpu", table, ("host",)),))
    assert Ingestor(catalog, store).ingest([queued(batch)]).committed == ["encodings"]
    (record,) = catalog.list_files("db", "cpu")
    parquet = pq.ParquetFile(io.BytesIO(store.get(record.key)))
    group = parquet.metadata.row_group(0)
    encodings = {group.column(i).path_in_schema: set(group.column(i).encodings) for i in range(group.num_columns)}
    assert "RLE_DICTIONARY" in encodings["host"] and "RLE_DICTIONARY" not in encodings["note"]
    assert {"time", "count"} == {name for name, used in encodings.items() if "DELTA_BINARY_PACKED" in used}
    assert {"value"} == {name for name, used in encodings.items() if "BYTE_STREAM_SPLIT" in used}
    # Min/max for what queries prune by (and compaction reads: time's); none for strings.
    stats = {group.column(i).path_in_schema: group.column(i).statistics for i in range(group.num_columns)}
    assert {name for name, s in stats.items() if s is not None and s.has_min_max} == {"time", "value", "count", "ok"}
    assert stats["count"].min == 0 and stats["count"].max == 49
    assert visible_rows(catalog, store, "db", "cpu").equals(table)


def test_lane_bodies_are_written_with_tag_dictionaries_and_no_string_statistics(ports) -> None:  # type: ignore[no-untyped-def]
    import io

    import pyarrow.parquet as pq

    store, catalog = ports
    batch = make_body_batch("db", "cpu", [BASE_US + i for i in range(50)], host="web-1")
    assert Ingestor(catalog, store).ingest([queued(batch)]).committed == [batch.write_id]
    (record,) = catalog.list_files("db", "cpu")
    parquet = pq.ParquetFile(io.BytesIO(store.get(record.key)))
    assert str(parquet.schema_arrow.field("host").type) == "string"  # the file holds strings, as ever
    group = parquet.metadata.row_group(0)
    columns = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    assert "RLE_DICTIONARY" in columns["host"].encodings
    assert {name for name, c in columns.items() if c.statistics is not None and c.statistics.has_min_max} == {
        "time",
        "value",
    }
    assert visible_rows(catalog, store, "db", "cpu").column("host").to_pylist() == ["web-1"] * 50


def test_lane_bodies_and_tables_of_one_measurement_in_one_batch_store_every_row(ports) -> None:  # type: ignore[no-untyped-def]
    import io

    import pyarrow.parquet as pq

    store, catalog = ports
    # The lane's fill hands tags over as dictionaries, the general path as strings: one file of both.
    body = make_body_batch("db", "cpu", [BASE_US + i for i in range(5)], host="x")
    table = make_batch("db", "cpu", [BASE_US + 10 + i for i in range(3)], host="y")
    result = Ingestor(catalog, store).ingest([queued(body), queued(table)])
    assert sorted(result.committed) == sorted([body.write_id, table.write_id])
    rows = visible_rows(catalog, store, "db", "cpu")
    assert rows.column("host").to_pylist() == ["x"] * 5 + ["y"] * 3
    assert rows.column("time").cast("int64").to_pylist() == [(BASE_US + i) * 1000 for i in (0, 1, 2, 3, 4, 10, 11, 12)]
    (record,) = catalog.list_files("db", "cpu")
    metadata = pq.ParquetFile(io.BytesIO(store.get(record.key))).metadata.row_group(0)
    host = next(metadata.column(i) for i in range(metadata.num_columns) if metadata.column(i).path_in_schema == "host")
    assert host.encodings == ("PLAIN", "RLE", "RLE_DICTIONARY")  # one dictionary for both forms


def test_redelivery_after_success_is_acknowledged_and_not_stored_twice(ports) -> None:  # type: ignore[no-untyped-def]
    store, catalog = ports
    batch = make_batch("db", "cpu", [BASE_US, BASE_US + 1])
    Ingestor(catalog, store).ingest([queued(batch)])
    again = Ingestor(catalog, store).ingest([queued(batch), queued(batch, "dup-handle")])
    assert set(again.already_done) == {batch.write_id, "dup-handle"}
    assert visible_rows(catalog, store, "db", "cpu").num_rows == 2


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("redeliver", ["whole", "part-regrouped"])
@pytest.mark.parametrize("form", ["tables", "bodies"])
def test_crash_at_every_step_then_redelivery_leaves_exact_rows(ports, step: str, redeliver: str, form: str) -> None:  # type: ignore[no-untyped-def]
    store, catalog = ports
    # Tables (the general path's form) or MessagePack bodies as sent (the columnar lane's)
    make = make_batch if form == "tables" else make_body_batch
    a = make("db", "cpu", [BASE_US + i for i in range(10)])
    b = make("db", "cpu", [BASE_US + HOUR_US + i for i in range(7)], host="b")
    with pytest.raises(Crash):
        Ingestor(catalog, store, fault=crash_at(step)).ingest([queued(a), queued(b)])
    fresh = make("db", "cpu", [BASE_US + 100 + i for i in range(3)], host="c")
    # SQS may hand back the whole batch, or only part of it mixed with new messages.
    retry = [queued(a), queued(b)] if redeliver == "whole" else [queued(b), queued(fresh)]
    result = Ingestor(catalog, store).ingest(retry)
    assert not result.failed and not result.poison
    if redeliver == "part-regrouped":
        Ingestor(catalog, store).ingest([queued(a)])
        expected = 10 + 7 + 3
    else:
        expected = 17
    rows = visible_rows(catalog, store, "db", "cpu")
    assert rows.num_rows == expected
    # every row exactly once
    keys = pc.binary_join_element_wise(rows.column("host"), rows.column("time").cast("string"), "|")
    assert len(set(keys.to_pylist())) == expected


def test_slow_attempt_is_aborted_by_a_newer_one_and_cleans_up(ports) -> None:  # type: ignore[no-untyped-def]
    store, catalog = ports
    batch = make_batch("db", "cpu", [BASE_US + i for i in range(5)])
    newer_results = []

    def meanwhile(step: str) -> None:
        # While the first attempt is between its file writes and its commit, the visibility
        # timeout expires and a second consumer gets the same message.
        if step == "files-written" and not newer_results:
            newer_results.append(Ingestor(catalog, store).ingest([queued(batch, "second")]))

    slow = Ingestor(catalog, store, fault=meanwhile).ingest([queued(batch, "first")])
    assert newer_results[0].committed == ["second"]
    assert "first" in slow.failed
    assert visible_rows(catalog, store, "db", "cpu").num_rows == 5
    # the slow attempt removed its orphan file: only the committed file remains in storage
    keys = [info.key for info in store.list("db/cpu/")]
    assert keys == [f.key for f in catalog.list_files("db", "cpu")]
    # and a later redelivery of the slow attempt's message is recognized as done
    assert Ingestor(catalog, store).ingest([queued(batch, "third")]).already_done == ["third"]


def test_poison_message_is_reported_and_others_commit(ports) -> None:  # type: ignore[no-untyped-def]
    store, catalog = ports
    good = make_batch("db", "cpu", [BASE_US])
    poison = QueuedWrite("bad", "bad-id", lambda: b"\x00not an envelope")
    result = Ingestor(catalog, store).ingest([poison, queued(good)])
    assert list(result.poison) == ["bad"]
    assert result.committed == [good.write_id]
    assert visible_rows(catalog, store, "db", "cpu").num_rows == 1


def test_a_batch_handed_over_by_the_queue_is_stored_without_reading_the_message(ports) -> None:  # type: ignore[no-untyped-def]
    store, catalog = ports
    batch = make_batch("db", "cpu", [BASE_US + 2, BASE_US + 1])

    def unread() -> bytes:
        raise AssertionError("the message was read although its batch was at hand")

    result = Ingestor(catalog, store).ingest([QueuedWrite("h", batch.write_id, unread, batch=batch)])
    assert result.committed == ["h"]
    rows = visible_rows(catalog, store, "db", "cpu")
    assert rows.column("time").cast("int64").to_pylist() == [(BASE_US + 1) * 1000, (BASE_US + 2) * 1000]
    # Redelivered later (after a restart: no batch), it is recognized as done.
    again = Ingestor(catalog, store).ingest([queued(batch, "h2")])
    assert again.already_done == ["h2"] and visible_rows(catalog, store, "db", "cpu").num_rows == 2


def test_ingest_files_are_snappy_with_page_checksums(ports) -> None:  # type: ignore[no-untyped-def]
    import io

    import pyarrow.parquet as pq

    store, catalog = ports
    batch = make_batch("db", "cpu", [BASE_US, BASE_US + 1])
    Ingestor(catalog, store).ingest([queued(batch)])
    (record,) = catalog.list_files("db", "cpu")
    data = store.get(record.key)
    group = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0)
    assert {group.column(i).compression for i in range(group.num_columns)} == {"SNAPPY"}
    assert pq.read_table(io.BytesIO(data), page_checksum_verification=True).num_rows == 2


@pytest.mark.parametrize(
    "times",
    [
        [[BASE_US + 1, BASE_US + 2], [BASE_US + 2, BASE_US + 9]],  # in order, one hour
        [[BASE_US + 5, BASE_US + 6], [BASE_US + 1, BASE_US + 3]],  # each in order, not one after another
        [[BASE_US + 1, BASE_US + HOUR_US + 1], [BASE_US + 2 * HOUR_US, BASE_US + 2 * HOUR_US + 5]],  # hours apart
    ],
)
def test_parts_known_to_be_in_order_are_stored_as_if_checked(tmp_path: Path, times: list[list[int]]) -> None:
    assert _stored_with_and_without_ranges(tmp_path, times)


def _stored_with_and_without_ranges(root: Path, times: list[list[int]]) -> tuple[object, ...]:
    """What ingest stores for parts of ``times`` (each in order), told their ranges or not: the same."""
    from dataclasses import replace

    stored = []
    for known in (False, True):
        store, catalog = local_ports(root / str(known))
        # One host per part: the order of rows with equal times shows which part they came from.
        batches = [make_batch("db", "cpu", part_times, host=f"p{i}") for i, part_times in enumerate(times)]
        if known:  # what an in-process reader hands over with the rows
            batches = [
                replace(b, parts=(replace(b.parts[0], time_range=(t[0] * 1000, t[-1] * 1000)),))
                for b, t in zip(batches, times, strict=True)
            ]
        writes = [QueuedWrite(b.write_id, b.write_id, lambda: b"", batch=b) for b in batches]
        result = Ingestor(catalog, store).ingest(writes)
        assert len(result.committed) == len(batches)
        files = catalog.list_files("db", "cpu")
        rows = visible_rows(catalog, store, "db", "cpu")
        stored.append(([(f.hour, f.rows, f.min_time_us, f.max_time_us) for f in files], rows.schema, rows.to_pylist()))
    assert stored[0] == stored[1]
    return tuple(stored)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from([0, 1, 2, 3, 5, 8, HOUR_US - 1, HOUR_US, HOUR_US + 2]), min_size=1, max_size=4),
        min_size=1,
        max_size=6,
    )
)
def test_parts_arriving_out_of_order_are_stored_as_if_every_row_were_sorted(offsets: list[list[int]]) -> None:
    # As concurrent writers' requests arrive: each part in order, the parts interleaved, some
    # sharing a time with the next or overlapping it (those need the rows sorted).
    import tempfile

    times = [[BASE_US + offset for offset in sorted(part)] for part in offsets]
    with tempfile.TemporaryDirectory() as root:
        _stored_with_and_without_ranges(Path(root), times)


def test_interleaved_parts_that_follow_one_another_in_time_are_not_sorted_row_by_row(
    ports, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    import arcs.write.ingest

    def no_sort(*args: object, **kwargs: object) -> None:
        raise AssertionError("rows sorted one by one")

    monkeypatch.setattr(arcs.write.ingest.pc, "sort_indices", no_sort)
    store, catalog = ports
    times = [[BASE_US + 20, BASE_US + 29], [BASE_US + 0, BASE_US + 9], [BASE_US + 10, BASE_US + 19]]
    batches = [make_batch("db", "cpu", t, host=f"p{i}") for i, t in enumerate(times)]
    batches = [
        replace(b, parts=(replace(b.parts[0], time_range=(t[0], t[-1])),)) for b, t in zip(batches, times, strict=True)
    ]
    result = Ingestor(catalog, store).ingest(
        [QueuedWrite(b.write_id, b.write_id, lambda: b"", batch=b) for b in batches]
    )
    assert len(result.committed) == 3
    rows = visible_rows(catalog, store, "db", "cpu").to_pylist()
    assert [row["host"] for row in rows] == ["p1", "p1", "p2", "p2", "p0", "p0"]
    assert [row["time"] for row in rows] == sorted(row["time"] for row in rows)


def test_parts_of_other_columns_put_in_order_keep_the_columns_in_arrival_order(tmp_path: Path) -> None:
    import pyarrow as pa

    from arcs.write.batch import TIME_TYPE, MeasurementRows, WriteBatch

    def part(times: list[int], column: str, known: bool) -> WriteBatch:
        table = pa.table(
            {
                "time": pa.array(times, pa.int64()).cast(pa.timestamp("us", tz="UTC")).cast(TIME_TYPE),
                column: pa.array([1.5] * len(times)),
            }
        )
        rows = MeasurementRows("cpu", table, (), (times[0], times[-1]) if known else None)
        return WriteBatch(f"{column}-{known}", "db", (rows,))

    stored = []
    for known in (False, True):
        store, catalog = local_ports(tmp_path / str(known))
        # The later part in time arrives first: in order, "b" comes before "a".
        batches = [part([BASE_US + 5, BASE_US + 6], "a", known), part([BASE_US + 1, BASE_US + 2], "b", known)]
        writes = [QueuedWrite(b.write_id, b.write_id, lambda: b"", batch=b) for b in batches]
        assert len(Ingestor(catalog, store).ingest(writes).committed) == 2
        stored.append(visible_rows(catalog, store, "db", "cpu"))
    assert stored[0].column_names == stored[1].column_names == ["time", "a", "b"]
    assert stored[0].equals(stored[1])


def test_a_database_of_many_measurements_takes_its_share_and_the_rest_waits_in_order(tmp_path: Path) -> None:
    """The standalone server's ingest loop: one database's writes of many measurements are spread
    over attempts (its share each), while another database's write in the same batch is stored at
    once; what is deferred stays queued, untouched and without a failed attempt, and comes next."""
    from arcs.http.server import IngestLoop
    from arcs.runtime import INGEST_TABLES_PER_DATABASE, local_runtime
    from arcs.settings import Settings
    from arcs.write.decoders import WireFormat
    from arcs.write.edge import WriteRequest

    runtime = local_runtime(Settings(data_dir=tmp_path / "data"))
    share = INGEST_TABLES_PER_DATABASE
    t0 = 1_700_000_000_000_000_000

    def write(database: str, body: str) -> None:
        runtime.writes.accept(WriteRequest(WireFormat.LINE_PROTOCOL, body.encode(), database))

    for request in range(3):  # each a full share: one per attempt
        write("bulk", "\n".join(f"m{request}_{i} v={i}i {t0 + i}" for i in range(share)))
    write("bulk", f"m0_0 v=-1i {t0 + 10**9}")  # a later write of a measurement above: after it, always
    write("other", f"probe v=1i {t0}")
    loop = IngestLoop(runtime)
    first = runtime.spool.take(100)
    loop.drain_once(first)
    assert [s.measurement for s in runtime.catalog.list_schemas("other")] == ["probe"]
    assert len(runtime.catalog.list_files("other", "probe")) == 1  # stored in the first attempt
    stored = {
        f.measurement
        for s in runtime.catalog.list_schemas("bulk")
        for f in runtime.catalog.list_files("bulk", s.measurement)
    }
    assert len(stored) == share and all(name.startswith("m0_") for name in stored)
    pending = runtime.spool.take(100)
    assert [entry.handle for entry in pending] == [entry.handle for entry in first[1:4]]
    assert all(entry.attempts == 1 for entry in pending)  # deferred, not failed
    for _attempt in range(3):
        loop.drain_once(runtime.spool.take(100))
    assert runtime.spool.take(100) == []
    last = runtime.catalog.list_files("bulk", "m0_0")
    assert len(last) == 2 and last[0].commit_id < last[1].commit_id  # the later write, stored later


def test_a_batch_over_the_byte_bound_is_stored_in_groups_each_within_it(ports) -> None:  # type: ignore[no-untyped-def]
    store, catalog = ports
    batches = [make_batch("db", "cpu", [BASE_US + i * 10_000 + j for j in range(2_000)]) for i in range(10)]
    one = decoded_bytes(columnar_lane.scanned(batches[0]))
    bound = 3 * one + one // 2  # three writes fit, a fourth does not
    result = Ingestor(catalog, store, group_bytes=bound).ingest([queued(b) for b in batches])
    assert sorted(result.committed) == sorted(b.write_id for b in batches)
    assert not result.failed and not result.poison
    assert result.groups == 4  # 3 + 3 + 3 + 1
    assert result.largest_group_bytes <= bound
    assert len({f.commit_id for f in result.files}) == 4
    assert visible_rows(catalog, store, "db", "cpu").num_rows == 20_000


def test_a_write_larger_than_the_bound_is_a_group_of_its_own(ports) -> None:  # type: ignore[no-untyped-def]
    store, catalog = ports
    big = make_batch("db", "mem", [BASE_US + j for j in range(5_000)])
    small = make_batch("db", "mem", [BASE_US + 10_000 + j for j in range(10)])
    result = Ingestor(catalog, store, group_bytes=1).ingest([queued(small), queued(big), queued(small, "again")])
    assert result.groups == 2 and sorted(result.committed) == sorted([small.write_id, big.write_id])
    assert result.already_done == ["again"]
    assert visible_rows(catalog, store, "db", "mem").num_rows == 5_010


class _RendezvousStore:
    """A store whose writes wait for one another: it completes only if ``parties`` run at once."""

    def __init__(self, inner, parties: int) -> None:  # type: ignore[no-untyped-def]
        import threading

        self.inner = inner
        self.barrier = threading.Barrier(parties, timeout=10)

    def put_if_absent(self, key: str, data: bytes | memoryview) -> bool:
        self.barrier.wait()
        return bool(self.inner.put_if_absent(key, data))

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)


def test_the_files_of_one_attempt_are_written_side_by_side_and_all_before_the_commit(ports) -> None:  # type: ignore[no-untyped-def]
    store, catalog = ports
    # Four hours, four files: each waits at the rendezvous until the four are being written at once.
    batch = make_batch("db", "cpu", [BASE_US + hour * HOUR_US for hour in range(4)])
    committed_with: list[int] = []

    def fault(step: str) -> None:
        if step == "files-written":  # just before the commit record: every file must be there
            committed_with.append(sum(1 for f in store.root.rglob("*.parquet") if not f.name.startswith(".")))

    rendezvous = _RendezvousStore(store, 4)
    result = Ingestor(catalog, rendezvous, fault=fault, file_writers=4).ingest([queued(batch)])  # type: ignore[arg-type]
    assert result.committed == [batch.write_id] and committed_with == [4]
    assert [f.rows for f in catalog.list_files("db", "cpu")] == [1, 1, 1, 1]
    assert visible_rows(catalog, store, "db", "cpu").num_rows == 4


def test_a_file_that_fails_fails_its_attempt_once_the_others_are_done(ports) -> None:  # type: ignore[no-untyped-def]
    store, catalog = ports
    batch = make_batch("db", "cpu", [BASE_US + hour * HOUR_US for hour in range(6)])
    written = 0

    def fault(step: str) -> None:
        nonlocal written
        if step == "file-written":
            written += 1
            if written == 2:
                raise Crash(step)

    with pytest.raises(Crash):
        Ingestor(catalog, store, fault=fault, file_writers=3).ingest([queued(batch)])
    assert written == 6  # no file is still being written once the attempt has failed
    assert catalog.list_files("db", "cpu") == []
    assert not Ingestor(catalog, store).ingest([queued(batch)]).failed
    assert visible_rows(catalog, store, "db", "cpu").num_rows == 6


def test_an_ingestor_per_invocation_starts_no_new_writer_threads(ports, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The functions build an Ingestor per invocation: the writers are the process's, not each call's.
    store, catalog = ports
    started: list[str] = []
    start = threading.Thread.start

    def counting_start(thread: threading.Thread) -> None:
        started.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counting_start)
    for call in range(5):
        batch = make_batch("db", "cpu", [BASE_US + (call * 3 + hour) * HOUR_US for hour in range(3)])
        assert Ingestor(catalog, store, file_writers=3).ingest([queued(batch)]).committed == [batch.write_id]
    assert sum(1 for name in started if name.startswith("arcs-ingest-file")) <= 3
    assert visible_rows(catalog, store, "db", "cpu").num_rows == 15
