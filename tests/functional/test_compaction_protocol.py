"""Compaction: exact rows under crashes at every step, readers alongside, concurrent ingest and compactors.

Every test runs on both catalogs and stores: SQLite + a directory, and DynamoDB + S3 on moto.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from arcs import layout
from arcs.adapters.aws.catalog import DynamoCatalog
from arcs.adapters.aws.objects import S3Store
from arcs.adapters.local.catalog import SqliteCatalog
from arcs.adapters.local.objects import DirectoryStore
from arcs.adapters.local.sqlite_database import SqliteDatabase
from arcs.lifecycle.compaction.compactor import Compactor
from arcs.ports import Catalog, FileRecord, ObjectStore, Partition
from arcs.settings import CompactionSettings
from arcs.write.batch import TIME_TYPE, MeasurementRows, WriteBatch
from arcs.write.ingest import Ingestor
from tests.helpers import BASE_US, HOUR_US, LOCAL_AND_SLOW_AWS, queued

if TYPE_CHECKING:
    from tests.conftest import AwsEnv

pytestmark = pytest.mark.functional

HOUR = layout.hour_from_micros(BASE_US)
PARTITION = Partition("db", "cpu", HOUR)
STEPS = [
    "leased",
    "journaled",
    "inputs-read",
    "output-written",
    "outputs-written",
    "committed",
    "journaled-commit",
    "settled",
    "inputs-deleted",
]
Row = tuple[object, ...]


class Crash(BaseException):
    """Like the process dying: no ``except Exception`` in the code under test catches it."""


@dataclass
class Env:
    name: str
    store: ObjectStore
    catalog: Catalog
    prefix: str
    work_dir: Path

    def compactor(self, fault: Callable[[str], None] | None = None, **changes: object) -> Compactor:
        holder = changes.pop("holder", None)
        # The hour tier alone: the day tier's protocol is tests/functional/test_compaction_tiers.py's.
        config = CompactionSettings(min_age_s=0, min_files=3, grace_s=0, lease_s=0.05, tiers=("hour",))
        config = replace(config, **changes)  # type: ignore[arg-type]
        now = lambda: datetime.now(UTC) + timedelta(days=1)  # noqa: E731 - every test hour is old enough
        return Compactor(
            self.catalog,
            self.store,
            self.prefix,
            config,
            self.work_dir,
            fault=fault or (lambda _step: None),
            now=now,
            holder=None if holder is None else str(holder),
        )

    def ingest(self, *batches: WriteBatch) -> None:
        result = Ingestor(self.catalog, self.store, self.prefix).ingest([queued(b) for b in batches])
        assert len(result.committed) == len(batches)

    def rows(self, measurement: str = "cpu") -> list[Row]:
        """Every row a reader sees (the listed files, read back), sorted."""
        tables = [pq.read_table(io.BytesIO(self.store.get(f.key))) for f in self.catalog.list_files("db", measurement)]
        if not tables:
            return []
        table = pa.concat_tables(tables, promote_options="permissive")
        times = [t // 1000 for t in table.column("time").cast(pa.int64()).to_pylist()]  # ns -> the µs written
        return sorted(zip(times, table.column("host").to_pylist(), table.column("value").to_pylist(), strict=True))

    def data_keys(self) -> list[str]:
        return sorted(info.key for info in self.store.list(layout.measurement_prefix(self.prefix, "db", "cpu")))

    def listed(self) -> list[FileRecord]:
        return self.catalog.list_files("db", "cpu")


@pytest.fixture(params=["local", "aws"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    if request.param == "local":
        db = SqliteDatabase(tmp_path / "catalog.sqlite")
        yield Env("local", DirectoryStore(tmp_path / "storage"), SqliteCatalog(db), "", tmp_path / "work")
        db.close()
        return
    aws: AwsEnv = request.getfixturevalue("aws")
    catalog = DynamoCatalog(aws.dynamodb, aws.catalog_table, aws.leases_table)
    yield Env("aws", S3Store(aws.s3, aws.bucket), catalog, aws.prefix, tmp_path / "work")


def batch(times_us: list[int], hosts: list[str], values: list[float], measurement: str = "cpu") -> WriteBatch:
    table = pa.table(
        {
            "time": pa.array(times_us, pa.int64()).cast(pa.timestamp("us", tz="UTC")).cast(TIME_TYPE),
            "host": pa.array(hosts),
            "value": pa.array(values),
        }
    )
    return WriteBatch(f"w-{time.time_ns()}-{values[0]}", "db", (MeasurementRows(measurement, table, ("host",)),))


def fill(env: Env, files: int = 6) -> tuple[list[Row], list[Row]]:
    """``files`` ingests into one partition, with rows that repeat earlier (host, time) pairs.

    Returns what readers see before compaction (every row) and after (the last write of each pair).
    """
    written: list[Row] = []
    for n in range(files):
        times = [BASE_US + n * 10 + i for i in range(5)] + [BASE_US + 3, BASE_US + 4]  # two repeats per file
        hosts = ["a", "b", "a", "b", "a", "a", "b"]
        values = [float(n * 100 + i) for i in range(7)]
        env.ingest(batch(times, hosts, values))
        written += list(zip(times, hosts, values, strict=True))
    env.ingest(batch([BASE_US + 2 * HOUR_US], ["a"], [-1.0]))  # another hour, too few files to compact
    last: dict[tuple[object, object], Row] = {}
    for row in [*written, (BASE_US + 2 * HOUR_US, "a", -1.0)]:
        last[(row[0], row[1])] = row
    before = sorted([*written, (BASE_US + 2 * HOUR_US, "a", -1.0)])
    return before, sorted(last.values())


def crash_at(step: str, check: Callable[[], None] | None = None) -> Callable[[str], None]:
    def fault(current: str) -> None:
        if current == step:
            if check is not None:
                check()
            raise Crash(step)

    return fault


def assert_clean(env: Env) -> None:
    """Storage holds exactly the listed files, and no job is left unfinished."""
    assert env.data_keys() == sorted(f.key for f in env.listed())
    assert env.catalog.list_compaction_jobs(active=True) == []


# --- the normal path ---------------------------------------------------------------------------------


def test_compaction_merges_a_partition_into_one_sorted_zstd_file_with_duplicates_collapsed(env: Env) -> None:
    before, after = fill(env)
    assert env.rows() == before and len(before) > len(after)
    assert len(env.catalog.list_files("db", "cpu", HOUR, HOUR)) == 6
    report = env.compactor().run()
    assert [job.status for job in report.jobs] == ["settled"]
    (job,) = report.jobs
    assert (len(job.input_keys), len(job.output_keys), job.input_rows, job.output_rows) == (6, 1, 42, len(after) - 1)
    assert report.inputs_deleted == 6  # grace 0: the same run deletes the replaced objects
    assert env.rows() == after
    (output,) = env.catalog.list_files("db", "cpu", HOUR, HOUR)
    parquet = pq.ParquetFile(io.BytesIO(env.store.get(output.key)))
    assert parquet.metadata.row_group(0).column(0).compression == "ZSTD"
    table = parquet.read()
    assert table.schema.field("time").type == pa.timestamp("ns")
    times = table.column("time").cast(pa.int64())
    assert pc.all(pc.greater_equal(times.slice(1), times.slice(0, len(times) - 1))).as_py()
    assert (output.rows, output.min_time_us) == (table.num_rows, times[0].as_py() // 1000)
    assert output.max_time_us == times[-1].as_py() // 1000
    assert layout.parse_data_key(env.prefix, output.key).hour == HOUR
    assert_clean(env)
    assert [j.status for j in env.catalog.list_compaction_jobs()] == ["done"]
    # Nothing left to do: a second run changes nothing.
    assert env.compactor().run().jobs == []
    assert env.rows() == after


def test_the_last_write_wins_and_keeps_winning_after_recompaction(env: Env) -> None:
    _before, _after = fill(env, files=3)
    env.compactor().run()
    # Written after the compaction: a newer value for an existing (host, time), and a new row.
    env.ingest(batch([BASE_US + 3, BASE_US + 999], ["a", "a"], [7777.0, 8888.0]))
    env.ingest(batch([BASE_US + 998], ["b"], [1.0]))
    env.ingest(batch([BASE_US + 997], ["b"], [2.0]))
    env.compactor().run()
    rows = env.rows()
    assert [r for r in rows if r[:2] == (BASE_US + 3, "a")] == [(BASE_US + 3, "a", 7777.0)]
    assert len(env.catalog.list_files("db", "cpu", HOUR, HOUR)) == 1
    assert len({r[:2] for r in rows}) == len(rows)


def test_measurement_without_tags_keeps_every_row_and_sort_by_tags_is_an_option(env: Env) -> None:
    for n in range(3):
        table = pa.table(
            {
                "time": pa.array([BASE_US + 1, BASE_US + 1], pa.int64())
                .cast(pa.timestamp("us", tz="UTC"))
                .cast(TIME_TYPE),
                "v": [n, n],
            }
        )
        env.ingest(WriteBatch(f"w{n}", "db", (MeasurementRows("plain", table, ()),)))
    fill(env, files=3)
    env.compactor(sort="tags").run()
    assert len(env.catalog.list_files("db", "plain")) == 1
    plain = pq.read_table(io.BytesIO(env.store.get(env.catalog.list_files("db", "plain")[0].key)))
    assert sorted(plain.column("v").to_pylist()) == [0, 0, 1, 1, 2, 2]
    (output,) = env.catalog.list_files("db", "cpu", HOUR, HOUR)
    hosts = pq.read_table(io.BytesIO(env.store.get(output.key))).column("host").to_pylist()
    assert hosts == sorted(hosts)


def test_sort_keys_order_compacted_files_and_points_still_merge_by_tags_and_time(env: Env) -> None:
    for n in range(3):
        times = pa.array([BASE_US + 30 - n, BASE_US + 20 - n, BASE_US + 10 - n], pa.int64())
        table = pa.table(
            {
                "time": times.cast(pa.timestamp("us", tz="UTC")).cast(TIME_TYPE),
                "k": [3 - n, 1, 2],
                "v": [n, n, n],
            }
        )
        env.ingest(WriteBatch(f"w{n}", "db", (MeasurementRows("plain", table, ()),)))
    _before, after = fill(env, files=3)
    # "value" is a field of a measurement with tags: it cannot lead, so host, then time.
    keys = (("plain", ("k", "missing")), ("cpu", ("host", "value")))
    env.compactor(sort_keys=keys).run()
    (plain,) = env.catalog.list_files("db", "plain")
    table = pq.read_table(io.BytesIO(env.store.get(plain.key)))
    rows = list(zip(table.column("k").to_pylist(), table.column("time").cast(pa.int64()).to_pylist(), strict=True))
    assert rows == sorted(rows) and len(rows) == 9  # by k, then time; a key the files lack is skipped
    (output,) = env.catalog.list_files("db", "cpu", HOUR, HOUR)
    written = pq.read_table(io.BytesIO(env.store.get(output.key)))
    order = list(
        zip(written.column("host").to_pylist(), written.column("time").cast(pa.int64()).to_pylist(), strict=True)
    )
    assert order == sorted(order)
    assert env.rows() == after  # each point once, its fields the last written
    # The file's time range is still exact for pruning by the catalog, whatever the order inside.
    assert (plain.min_time_us, plain.max_time_us) == (BASE_US + 8, BASE_US + 30)


def test_too_young_or_too_few_files_are_not_candidates(env: Env) -> None:
    fill(env, files=3)
    assert [c.partition for c in env.compactor().candidates()] == [PARTITION]
    assert env.compactor(min_files=4).candidates() == []
    config = CompactionSettings(min_files=3, min_age_s=3600)

    def at(moment: datetime) -> Compactor:
        return Compactor(env.catalog, env.store, env.prefix, config, env.work_dir, now=lambda: moment)

    assert at(HOUR + timedelta(minutes=90)).candidates() == []  # the hour ended 30 minutes ago
    assert [c.partition for c in at(HOUR + timedelta(minutes=121)).candidates()] == [PARTITION]


# --- crashes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("env", LOCAL_AND_SLOW_AWS, indirect=True)
@pytest.mark.parametrize("step", STEPS)
def test_crash_at_every_step_then_a_new_run_leaves_exact_rows(env: Env, step: str) -> None:
    before, after = fill(env)

    def reader_sees_one_side() -> None:
        assert env.rows() in (before, after)

    with pytest.raises(Crash):
        env.compactor(fault=crash_at(step, reader_sees_one_side)).run()
    reader_sees_one_side()
    time.sleep(0.06)  # the dead job's lease runs out
    env.compactor().run()
    assert env.rows() == after
    env.compactor().run()  # the sweep of a job recovered in the previous run
    assert env.rows() == after
    assert_clean(env)


def test_a_reader_between_every_two_steps_sees_the_inputs_or_the_output(env: Env) -> None:
    before, after = fill(env)
    seen: dict[str, str] = {}

    def look(step: str) -> None:
        rows = env.rows()
        assert rows in (before, after), step
        seen[step] = "after" if rows == after else "before"

    env.compactor(fault=look).run()
    assert seen == {
        "leased": "before",
        "journaled": "before",
        "inputs-read": "before",
        "output-written": "before",
        "outputs-written": "before",
        "committed": "after",
        "journaled-commit": "after",
        "settled": "after",
        "inputs-deleted": "after",
    }


# --- concurrency ---------------------------------------------------------------------------------


def test_ingest_during_compaction_stays_visible(env: Env) -> None:
    before, after = fill(env)
    late = batch([BASE_US + 5000, BASE_US + 3], ["c", "a"], [1.5, 2.5])

    def meanwhile(step: str) -> None:
        if step == "outputs-written":
            env.ingest(late)

    env.compactor(fault=meanwhile).run()
    expected = {r[:2]: r for r in after}
    rows = env.rows()
    # The late file is newer than the output: both show until the next compaction collapses them.
    assert sorted(rows) == sorted([*after, (BASE_US + 5000, "c", 1.5), (BASE_US + 3, "a", 2.5)])
    env.compactor(min_files=2).run()
    expected[(BASE_US + 5000, "c")] = (BASE_US + 5000, "c", 1.5)
    expected[(BASE_US + 3, "a")] = (BASE_US + 3, "a", 2.5)
    assert env.rows() == sorted(expected.values())
    assert_clean(env)
    assert before  # the first fill was visible before all this


def test_two_compactors_never_work_on_one_partition(env: Env) -> None:
    _before, after = fill(env)
    other: list[object] = []

    def meanwhile(step: str) -> None:
        if step == "outputs-written":
            other.append(env.compactor(lease_s=60).compact(PARTITION))

    env.compactor(fault=meanwhile, lease_s=60).run()
    assert other == [None]  # the lease was held
    assert env.rows() == after
    assert_clean(env)


def test_a_compactor_whose_lease_ran_out_cannot_commit_over_another(env: Env) -> None:
    _before, after = fill(env)
    results = []

    def paused(step: str) -> None:
        # The first compactor stalls past its lease; a second one compacts the partition meanwhile.
        if step == "outputs-written" and not results:
            time.sleep(0.06)
            results.append(env.compactor().compact(PARTITION))

    (slow,) = env.compactor(fault=paused).run().jobs
    assert results[0] is not None and results[0].status == "settled"
    assert slow.status == "aborted"
    assert env.rows() == after
    env.compactor().run()
    assert_clean(env)


def test_recovery_fences_a_stalled_job_before_deleting_its_outputs(env: Env) -> None:
    before, after = fill(env)
    recovered: list[list[str]] = []

    def stalled(step: str) -> None:
        # While this job is stalled past its lease, a run's recovery finds it "running".
        if step == "outputs-written" and not recovered:
            time.sleep(0.06)
            recovered.append(env.compactor().recover())

    job = env.compactor(fault=stalled).compact(PARTITION)
    assert job is not None and recovered == [[job.job_id]]
    assert job.status == "aborted"  # its commit lost to the fence
    assert env.rows() == before  # nothing compacted yet: every original row is still there
    env.compactor().run()
    assert env.rows() == after
    assert_clean(env)


@pytest.mark.parametrize("step", ["journaled", "outputs-written", "committed"])
def test_a_restarted_holder_reclaims_its_leases_at_once_and_no_other_holder_may(env: Env, step: str) -> None:
    """A crash leaves its leases held for their whole term (15 minutes by default); the holder's
    next incarnation frees them at start and recovers at once, while another live holder can
    neither take them nor free them."""
    _before, after = fill(env)
    with pytest.raises(Crash):
        env.compactor(fault=crash_at(step), lease_s=900, holder="server-a").run()
    other = env.compactor(lease_s=900, holder="server-b")
    assert other.reclaim_leases() == []  # not its leases
    assert other.recover() == []  # still held by the dead job: only expiry or its holder frees it
    assert other.compact(PARTITION) is None
    restarted = env.compactor(lease_s=900, holder="server-a")
    assert restarted.reclaim_leases() == [PARTITION.name]
    assert len(restarted.recover_now()) == 1
    restarted.run()
    restarted.run()  # the sweep of the recovered job's inputs
    assert env.rows() == after
    assert_clean(env)


def test_a_live_holder_s_lease_is_never_reclaimed_by_another(env: Env) -> None:
    _before, after = fill(env)
    reclaimed: list[list[str]] = []

    def meanwhile(current: str) -> None:
        if current == "outputs-written" and not reclaimed:
            reclaimed.append(env.compactor(lease_s=900, holder="server-b").reclaim_leases())

    (job,) = env.compactor(fault=meanwhile, lease_s=900, holder="server-a").run().jobs
    assert reclaimed == [[]] and job.status == "settled"
    assert env.rows() == after


# --- bad inputs and big partitions --------------------------------------------------------------


def test_files_of_ingest_attempts_that_never_committed_are_deleted(env: Env) -> None:
    _before, after = fill(env)
    crashed = batch([BASE_US + 77], ["z"], [77.0])
    with pytest.raises(Crash):
        Ingestor(env.catalog, env.store, env.prefix, fault=crash_at("files-written")).ingest([queued(crashed)])
    orphans = set(env.data_keys()) - {f.key for f in env.listed()}
    assert len(orphans) == 1
    commit_id = layout.file_order(orphans.pop()).split("-")[0]
    env.compactor().run()
    assert env.rows() == after
    assert_clean(env)  # the orphan is gone
    record = env.catalog.get_commit(commit_id)
    assert record is not None and record.status == "aborted"  # fenced before it was deleted
    # The write itself is not lost: its redelivery finds its attempt aborted and stores it anew.
    env.ingest(crashed)
    assert (BASE_US + 77, "z", 77.0) in env.rows()


def damaged_pages(data: bytes) -> bytes:
    """The footer intact, the first column chunk's compressed pages overwritten in the middle."""
    damaged = bytearray(data)
    for i in range(len(data) // 8, len(data) // 8 + 64):
        damaged[i] ^= 0x5A
    return bytes(damaged)


@pytest.mark.parametrize("damage", ["not parquet", "damaged pages", "row count"])
def test_a_corrupt_input_is_quarantined_recorded_and_skipped(env: Env, damage: str) -> None:
    _before, after = fill(env)
    times = [BASE_US + 3_000_000 + i for i in range(20_000)]
    env.ingest(batch(times, ["q"] * 20_000, [float(i) for i in range(20_000)]))
    (record,) = [f for f in env.listed() if f.rows == 20_000]
    good = env.store.get(record.key)
    bad = {"not parquet": b"PAR1 this is not parquet PAR1", "damaged pages": damaged_pages(good), "row count": good}
    if damage == "row count":
        # A second copy of the file, whose record claims a row fewer than it holds.
        after = sorted([*after, *((t, "q", float(i)) for i, t in enumerate(times))])
        key = layout.data_key(env.prefix, "db", "cpu", HOUR, f"{layout.sequence_id()}-0000.parquet")
        env.store.put(key, good)
        record = replace(record, key=key, rows=19_999)
        env.catalog.put_files([record])
    else:
        env.store.put(record.key, bad[damage])
    (job,) = env.compactor().run().jobs
    assert job.status == "settled" and job.quarantined == (record.key,)
    assert env.rows() == after  # everything but the bad file, compacted
    target = layout.quarantine_key(env.prefix, record.key)
    assert env.store.get(target) == bad[damage]
    note = json.loads(env.store.get(target + ".json"))
    reason = {"not parquet": "Parquet", "damaged pages": "checksum", "row count": "19999"}[damage]
    assert note["key"] == record.key and reason in note["reason"]
    with pytest.raises(ValueError, match="not a data key"):
        layout.parse_data_key(env.prefix, target)
    assert_clean(env)


def test_a_partition_bigger_than_the_memory_limit_compacts_streamed_into_target_sized_files(env: Env) -> None:
    if env.name == "aws":
        pytest.skip("the merge is the same code on both backends; moto only makes it slower")
    rows_per_file, files, limit_mb = 250_000, 4, 24
    in_memory = 0
    for n in range(files):
        index = pa.array(range(rows_per_file), pa.int64())
        table = pa.table(
            {
                "time": pc.add(pc.multiply(pc.add(pc.multiply(index, files), n), 1000), BASE_US)
                .cast(pa.timestamp("us", tz="UTC"))
                .cast(TIME_TYPE),
                "host": pc.binary_join_element_wise("host", pc.cast(pc.bit_wise_and(index, 63), pa.string()), ""),
                "region": pc.binary_join_element_wise("region-", pc.cast(pc.bit_wise_and(index, 7), pa.string()), ""),
                # Mantissas with little to share: byte-stream-split floats of a counter compress
                # so well that the partition would fit one output file.
                "value": pc.sqrt(pc.cast(index, pa.float64())),
                "user": pc.sin(pc.cast(index, pa.float64())),
                "requests": pc.multiply(index, 3),
            }
        )
        in_memory += table.nbytes
        env.ingest(WriteBatch(f"big{n}", "db", (MeasurementRows("cpu", table, ("host", "region")),)))
    assert in_memory > 2 * limit_mb * 1024 * 1024  # the partition does not fit in the merge's memory
    config = {"memory_limit": f"{limit_mb}MB", "threads": 1, "target_file_bytes": 256 * 1024}
    (job,) = env.compactor(**config).run().jobs
    assert job.status == "settled", job.error
    outputs = env.catalog.list_files("db", "cpu", HOUR, HOUR)
    assert len(outputs) > 1 and sum(f.rows for f in outputs) == files * rows_per_file
    previous_max = -1
    for output in sorted(outputs, key=lambda f: f.key):
        parquet = pq.ParquetFile(io.BytesIO(env.store.get(output.key)))
        groups = [parquet.metadata.row_group(i).num_rows for i in range(parquet.metadata.num_row_groups)]
        assert max(groups) == 122_880 or len(groups) == 1
        first = parquet.metadata.row_group(0)
        encodings = {first.column(i).path_in_schema: first.column(i).encodings for i in range(first.num_columns)}
        # dictionaries for strings only; delta encoding for times and integers; split floats
        assert {"time", "requests"} == {name for name, used in encodings.items() if "DELTA_BINARY_PACKED" in used}
        assert {"value", "user"} == {name for name, used in encodings.items() if "BYTE_STREAM_SPLIT" in used}
        assert {"host", "region"} == {name for name, used in encodings.items() if "RLE_DICTIONARY" in used}
        assert output.min_time_us > previous_max  # the files follow each other in time
        previous_max = output.max_time_us


# --- files an earlier version wrote: microseconds, UTC ----------------------------------------------


def test_a_partition_of_older_microsecond_files_and_newer_nanosecond_ones_reads_and_compacts_alike(
    tmp_path: Path,
) -> None:
    from arcs.auth.tokens import Principal
    from arcs.runtime import local_runtime
    from arcs.settings import Settings

    settings = Settings(backend="local", data_dir=tmp_path / "data")
    compaction = replace(settings.compaction, min_age_s=0, grace_s=0, min_files=3)
    runtime = local_runtime(settings.with_(compaction=compaction))
    admin = Principal("t", "t", frozenset({"admin"}), ())
    # Ingest today: nanoseconds; host "a" at BASE + 1 µs written twice apart, fields apart.
    now_rows = [([BASE_US + 1, BASE_US + 2], ["a", "b"], [1.0, 2.0]), ([BASE_US + 1], ["a"], [None])]
    for times, hosts, values in now_rows:
        table = pa.table(
            {
                "time": pa.array([t * 1000 for t in times], pa.int64()).cast(TIME_TYPE),
                "host": hosts,
                "value": pa.array(values, pa.float64()),
                "extra": pa.array([7] * len(times), pa.int64()),
            }
        )
        batch = WriteBatch(f"w-{time.time_ns()}", "db", (MeasurementRows("cpu", table, ("host",)),))
        runtime.ingestor().ingest([queued(batch)])
    # A file as an earlier version wrote it (microseconds, zoned UTC), written before the others:
    # it repeats host "a" at BASE + 1 µs, and holds a point of its own at BASE + 3 µs.
    older = pa.table(
        {
            "time": pa.array([BASE_US + 1, BASE_US + 3], pa.timestamp("us", tz="UTC")),
            "host": ["a", "a"],
            "value": [9.0, 3.0],
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(older, sink)
    data = sink.getvalue().to_pybytes()
    hour = layout.hour_from_micros(BASE_US)
    key = layout.data_key(settings.prefix, "db", "cpu", hour, f"{'0' * 12}1{'0' * 19}-0000.parquet")
    runtime.store.put(key, data)
    commit = layout.file_order(key)[:32]
    runtime.catalog.put_files([FileRecord("db", "cpu", hour, key, 2, len(data), BASE_US + 1, BASE_US + 3, commit)])
    sql = "SELECT epoch_ns(time) AS t, host, value, extra FROM cpu ORDER BY t, host"
    expected = [
        ((BASE_US + 1) * 1000, "a", 1.0, 7),  # the older file's 9.0 was written first; the last null keeps 1.0
        ((BASE_US + 2) * 1000, "b", 2.0, 7),
        ((BASE_US + 3) * 1000, "a", 3.0, None),
    ]

    def rows() -> list[tuple[object, ...]]:
        return [tuple(row.values()) for row in runtime.queries.run(sql, "db", admin).table.to_pylist()]

    assert rows() == expected
    report = runtime.compactor.run()
    assert [job.status for job in report.jobs] == ["settled"]
    (output,) = runtime.catalog.list_files("db", "cpu")
    assert pq.read_schema(pa.BufferReader(runtime.store.get(output.key))).field("time").type == pa.timestamp("ns")
    assert rows() == expected
