"""Continuous queries on both catalogs and queues (SQLite + spool, DynamoDB + SQS on moto):
windows run exactly once through crashes between every pair of steps, retries and racing runners;
dry runs write nothing; manual executes add, and only where the schedule will not."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from arcs import layout
from arcs.adapters.aws.queue import queued_write_from_sqs
from arcs.adapters.aws.wiring import aws_runtime_parts
from arcs.auth.tokens import Principal
from arcs.continuous_queries.definitions import micros, substitute
from arcs.continuous_queries.service import ContinuousQueries
from arcs.emulation import FakeLambdaContext, load_handler
from arcs.errors import BadRequest, PayloadTooLarge
from arcs.http.server import IngestLoop
from arcs.lifecycle.compaction.compactor import Compactor
from arcs.query.sql_tree import MAX_SQL_BYTES
from arcs.runtime import Runtime, local_runtime
from arcs.settings import CompactionSettings, Settings
from arcs.write.batch import TIME_TYPE, MeasurementRows
from tests.helpers import LOCAL_AND_SLOW_AWS

if TYPE_CHECKING:
    from tests.conftest import AwsEnv

pytestmark = pytest.mark.functional

DB = "metrics"
T0 = datetime(2024, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
ADMIN = Principal("test", "test", frozenset({"admin"}), ())
QUERY = (
    "SELECT time_bucket(INTERVAL '10 minutes', time) AS time, host, avg(usage) AS usage, count(*) AS n, "
    "sum(procs) AS procs FROM cpu WHERE time >= {start_time} AND time < {end_time} GROUP BY ALL"
)

STEPS = ["queried", "enqueued", "advanced", "recorded"]


class Crash(BaseException):
    """Like the process dying: no ``except Exception`` in the code under test catches it."""


@dataclass
class World:
    name: str
    runtime: Runtime
    drain: Callable[[], None]  # ingest everything queued, as the ingest function would
    queued: Callable[[], int]  # writes waiting in the queue

    def service(self, fault: Callable[[str], None] | None = None, **options: Any) -> ContinuousQueries:
        runtime = self.runtime
        return ContinuousQueries(
            runtime.catalog,
            runtime.queries,
            runtime.writes,
            delay_s=options.get("delay_s", 0),
            max_windows=options.get("max_windows", 60),
            **({"fault": fault} if fault else {}),
        )

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        table = self.runtime.queries.run(sql, DB, ADMIN).table
        return list(zip(*(column.to_pylist() for column in table.columns), strict=True))


def _local_world(tmp_path: Path) -> Iterator[World]:
    runtime = local_runtime(Settings(data_dir=tmp_path / "data"))
    loop = IngestLoop(runtime)

    def drain() -> None:
        for _ in range(20):
            entries = runtime.spool.take(1000)
            if not entries:
                return
            loop.drain_once(entries)
        raise AssertionError("the spool does not drain")

    yield World("local", runtime, drain, lambda: len(runtime.spool.take(1000)))
    runtime.engine.close()
    runtime.sqlite.close()


def _aws_world(aws: AwsEnv, tmp_path: Path) -> Iterator[World]:
    settings = aws.settings(work_dir=tmp_path / "work")
    parts = aws_runtime_parts(settings, aws.session)
    runtime = Runtime(
        settings, parts.store, parts.catalog, parts.tokens, parts.queue, parts.allowed_roots, parts.s3_access
    )
    ingestor = runtime.ingestor()

    def receive(visibility_s: int) -> list[Any]:
        response = aws.sqs.receive_message(
            QueueUrl=aws.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0, VisibilityTimeout=visibility_s
        )
        return list(response.get("Messages", []))

    def drain() -> None:
        for _ in range(20):
            messages = receive(30)
            if not messages:
                return
            writes = [queued_write_from_sqs(m["MessageId"], m["Body"], runtime.store) for m in messages]
            result = ingestor.ingest(writes)
            assert not result.failed and not result.poison
            for message in messages:
                aws.sqs.delete_message(QueueUrl=aws.queue_url, ReceiptHandle=message["ReceiptHandle"])
        raise AssertionError("the queue does not drain")

    yield World("aws", runtime, drain, lambda: len(receive(0)))
    runtime.engine.close()


@pytest.fixture(params=["local", "aws"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    if request.param == "local":
        yield from _local_world(tmp_path)
    else:
        yield from _aws_world(request.getfixturevalue("aws"), tmp_path)


def write_source(world: World, start: datetime, minutes: int, hosts: tuple[str, ...] = ("a", "b")) -> None:
    """One point per minute per host from ``start``: usage = minute index, procs = 1."""
    times = [micros(start + timedelta(minutes=m)) for m in range(minutes) for _host in hosts]
    table = pa.table(
        {
            "time": pa.array(times, pa.int64()).cast(pa.timestamp("us", tz="UTC")).cast(TIME_TYPE),
            "host": pa.array([host for _m in range(minutes) for host in hosts]),
            "usage": pa.array([float(m) for m in range(minutes) for _host in hosts]),
            "procs": pa.array([1] * len(times), pa.int64()),
        }
    )
    world.runtime.writes.enqueue_rows(uuid.uuid4().hex, DB, [MeasurementRows("cpu", table, ("host",))])


def create(world: World, **changes: object) -> int:
    document: dict[str, object] = {
        "name": "cpu_10m",
        "database": DB,
        "source_measurement": "cpu",
        "destination_measurement": "cpu_10m",
        "query": QUERY,
        "interval": "1h",
        "tag_columns": ["host"],
        **changes,
    }
    return world.service().create(document, T0 + timedelta(minutes=5)).query_id


def destination(world: World) -> list[tuple[Any, ...]]:
    return world.rows("SELECT epoch_us(time), host, n, procs FROM cpu_10m ORDER BY 1, 2")


def expected_buckets(hours: int, per_bucket: int = 10) -> list[tuple[int, str, int, int]]:
    starts = [micros(T0 + timedelta(minutes=10 * b)) for b in range(6 * hours)]
    return [(start, host, per_bucket, per_bucket) for start in starts for host in ("a", "b")]


def test_scheduled_windows_aggregate_exactly_and_advance(world: World) -> None:
    query_id = create(world)
    write_source(world, T0, 180)
    world.drain()
    # Windows close at T0+1h, +2h, +3h; with a 10-minute delay only the first two are due.
    summary = world.service(delay_s=600).run_due(T0 + 3 * HOUR)
    assert (summary.windows, summary.rows, summary.failed) == (2, 24, {})
    assert world.runtime.catalog.get_cq_progress(query_id) == micros(T0 + 2 * HOUR)
    world.drain()
    assert destination(world) == expected_buckets(2)
    assert world.service(delay_s=600).run_due(T0 + 3 * HOUR).windows == 0  # nothing new is due
    world.service(delay_s=600).run_due(T0 + 3 * HOUR + timedelta(minutes=10))
    world.drain()
    assert destination(world) == expected_buckets(3)
    executions = world.runtime.catalog.list_cq_executions(query_id)
    assert [(e.kind, e.status, e.rows, e.start_us) for e in executions] == [
        ("scheduled", "succeeded", 12, micros(T0 + h * HOUR)) for h in (2, 1, 0)
    ]
    assert executions[0].write_id == f"cq-{query_id}-{micros(T0 + 2 * HOUR)}-{micros(T0 + 3 * HOUR)}"
    averages = world.rows("SELECT host, usage FROM cpu_10m WHERE time = TIMESTAMPTZ '2024-03-01T00:10:00Z' ORDER BY 1")
    assert averages == [("a", 14.5), ("b", 14.5)]  # minutes 10..19
    schema = world.runtime.catalog.get_schema(DB, "cpu_10m")
    assert schema is not None and schema.tags == ("host",)
    assert schema.columns == {"time": "timestamp", "host": "string", "usage": "float64", "n": "int64", "procs": "int64"}


def test_catch_up_is_bounded_per_run(world: World) -> None:
    query_id = create(world)
    write_source(world, T0, 180)
    world.drain()
    service = world.service(max_windows=2)
    assert service.run_due(T0 + 10 * HOUR).windows == 2
    assert service.run_due(T0 + 10 * HOUR).windows == 2
    assert world.runtime.catalog.get_cq_progress(query_id) == micros(T0 + 4 * HOUR)
    world.drain()
    assert destination(world) == expected_buckets(3)  # the fourth hour had no data: no rows, no write


@pytest.mark.parametrize("world", LOCAL_AND_SLOW_AWS, indirect=True)
@pytest.mark.parametrize("step", STEPS)
def test_a_crash_between_any_two_steps_stores_every_window_once(world: World, step: str) -> None:
    query_id = create(world)
    write_source(world, T0, 180)
    world.drain()
    seen: list[str] = []

    def crash_in_second_window(current: str) -> None:
        seen.append(current)
        if current == step and seen.count(step) == 2:
            raise Crash(step)

    with pytest.raises(Crash):
        world.service(fault=crash_in_second_window).run_due(T0 + 3 * HOUR)
    # During: the first window whole, the second whole if its write was queued, nothing partial.
    world.drain()
    assert destination(world) == expected_buckets(1 if step == "queried" else 2)
    advanced = step in ("advanced", "recorded")
    assert world.runtime.catalog.get_cq_progress(query_id) == micros(T0 + (2 if advanced else 1) * HOUR)

    world.service().run_due(T0 + 3 * HOUR)  # the next scheduled run recovers
    world.drain()
    assert destination(world) == expected_buckets(3)
    assert world.runtime.catalog.get_cq_progress(query_id) == micros(T0 + 3 * HOUR)
    recorded = [e.start_us for e in world.runtime.catalog.list_cq_executions(query_id) if e.status == "succeeded"]
    # A crash after advancing and before recording loses that window's history entry, not its rows.
    lost = [micros(T0 + HOUR)] if step == "advanced" else []
    assert sorted(recorded) == [micros(T0 + h * HOUR) for h in range(3) if micros(T0 + h * HOUR) not in lost]


def test_a_retried_window_with_new_late_rows_is_still_stored_once(world: World) -> None:
    query_id = create(world)
    write_source(world, T0, 60)
    world.drain()

    def crash(current: str) -> None:
        if current == "enqueued":
            raise Crash(current)

    with pytest.raises(Crash):
        world.service(fault=crash).run_due(T0 + HOUR)
    write_source(world, T0 + timedelta(minutes=60 - 1), 1, hosts=("c",))  # late: arrives before the retry
    world.drain()
    world.service().run_due(T0 + HOUR)
    world.drain()
    # The retry saw host c but queued the same write id: ingest had stored the first result and
    # dropped the second. (Rows arriving after their window ran are not re-aggregated.)
    assert destination(world) == expected_buckets(1)
    assert world.runtime.catalog.get_cq_progress(query_id) == micros(T0 + HOUR)


def test_a_runner_that_loses_the_race_stops_and_writes_nothing_twice(world: World) -> None:
    query_id = create(world)
    write_source(world, T0, 120)
    world.drain()
    catalog = world.runtime.catalog
    other = world.service()

    def race(current: str) -> None:
        # Another runner does this window (same write id) and the next while this one is queueing.
        if current == "enqueued" and catalog.get_cq_progress(query_id) == micros(T0):
            other.run_due(T0 + 2 * HOUR)

    summary = world.service(fault=race).run_due(T0 + 2 * HOUR)
    assert summary.windows == 0
    world.drain()
    assert destination(world) == expected_buckets(2)
    assert len(catalog.list_cq_executions(query_id)) == 2


def test_a_failing_window_is_recorded_and_retried_without_advancing(world: World) -> None:
    query_id = create(world, tag_columns=["nope"])
    write_source(world, T0, 60)
    world.drain()
    summary = world.service().run_due(T0 + HOUR)
    assert summary.windows == 0 and "tag column 'nope'" in summary.failed[query_id]
    assert world.runtime.catalog.get_cq_progress(query_id) == micros(T0)
    (execution,) = world.runtime.catalog.list_cq_executions(query_id)
    assert execution.status == "failed" and "tag column 'nope'" in execution.error
    assert world.queued() == 0


def test_a_missing_source_is_an_empty_window(world: World) -> None:
    query_id = create(world)
    assert world.service().run_due(T0 + 2 * HOUR).windows == 2
    assert world.runtime.catalog.get_cq_progress(query_id) == micros(T0 + 2 * HOUR)
    assert world.queued() == 0
    assert [e.rows for e in world.runtime.catalog.list_cq_executions(query_id)] == [0, 0]


def test_a_dry_run_writes_nothing_and_returns_the_rows(world: World) -> None:
    query_id = create(world)
    write_source(world, T0 - 2 * HOUR, 120)  # before creation: history
    world.drain()
    result = world.service().execute(query_id, micros(T0 - 2 * HOUR), micros(T0), dry_run=True)
    assert result.write_id is None and result.rows.num_rows == 24
    assert sorted(result.rows.column("n").to_pylist()) == [10] * 24
    assert world.queued() == 0
    assert world.runtime.catalog.list_cq_executions(query_id) == []
    # Dry runs may look anywhere, even at windows the schedule has not run.
    assert world.service().execute(query_id, micros(T0), micros(T0 + HOUR), dry_run=True).write_id is None


@pytest.mark.parametrize("tier", ["day", "month"])
def test_a_window_in_the_middle_of_a_day_or_month_merged_into_one_file_aggregates_exactly(
    world: World, tmp_path: Path, tier: str
) -> None:
    query_id = create(world)
    write_source(world, T0 - 5 * HOUR, 180)  # three hours of the day before T0
    if tier == "month":
        write_source(world, T0 - 240 * HOUR, 60)  # and an hour ten days earlier, in the same month
    world.drain()
    runtime = world.runtime
    tiers = ("hour", "day") if tier == "day" else ("hour", "day", "month")
    config = CompactionSettings(min_age_s=0, min_files=2, day_min_age_s=0, month_min_age_s=0, grace_s=0, tiers=tiers)
    Compactor(runtime.catalog, runtime.store, runtime.settings.prefix, config, tmp_path / "compaction").run()
    assert [layout.key_tier(f.key) for f in runtime.catalog.list_files(DB, "cpu")] == [tier]
    result = world.service().execute(query_id, micros(T0 - 4 * HOUR), micros(T0 - 3 * HOUR), dry_run=True)
    assert sorted(result.rows.column("n").to_pylist()) == [10] * 12


def test_manual_execute_backfills_and_adds(world: World) -> None:
    query_id = create(world)
    write_source(world, T0 - HOUR, 60)
    world.drain()
    service = world.service()
    first = service.execute(query_id, micros(T0 - HOUR), micros(T0), dry_run=False)
    assert first.write_id is not None and first.write_id.startswith(f"cq-{query_id}-")
    world.drain()
    assert len(destination(world)) == 12
    # A second execute of the same range writes its rows again: the same points (tags and time),
    # so each is stored once, its fields the later values (docs/compaction.md).
    service.execute(query_id, micros(T0 - HOUR), micros(T0), dry_run=False)
    world.drain()
    assert len(destination(world)) == 12
    executions = world.runtime.catalog.list_cq_executions(query_id)
    assert [(e.kind, e.rows) for e in executions] == [("manual", 12), ("manual", 12)]
    # A retry that repeats its execution id (its answer was lost) is stored once.
    for _attempt in range(2):
        again = service.execute(query_id, micros(T0 - HOUR), micros(T0), dry_run=False, execution_id="backfill-1")
        assert again.write_id == f"cq-{query_id}-{micros(T0 - HOUR)}-{micros(T0)}-backfill-1"
    world.drain()
    # Three writes stored (a file each), not four: the retry's second delivery stored nothing.
    assert len(destination(world)) == 12
    assert len(world.runtime.catalog.list_files(DB, "cpu_10m")) == 3
    # Windows from the mark on are the schedule's.
    with pytest.raises(BadRequest, match="schedule processes this query from 2024-03-01T00:00:00Z"):
        service.execute(query_id, micros(T0 - HOUR), micros(T0 + HOUR), dry_run=False)


def test_an_inactive_query_is_not_scheduled_and_resumes_at_the_current_window(world: World) -> None:
    query_id = create(world, is_active=False)
    write_source(world, T0, 180)
    world.drain()
    service = world.service()
    assert service.run_due(T0 + 3 * HOUR).windows == 0
    # Manual executes of an inactive query may cover any range: no schedule will repeat it.
    service.execute(query_id, micros(T0), micros(T0 + 2 * HOUR), dry_run=False)
    # Not into the current window, though: activation puts the schedule's mark at its start.
    now = datetime.now(UTC)
    with pytest.raises(BadRequest, match="end by the start of the current window"):
        service.execute(query_id, micros(T0), micros(now + HOUR), dry_run=False)
    service.update(query_id, {"is_active": True}, T0 + 2 * HOUR + timedelta(minutes=30))
    assert world.runtime.catalog.get_cq_progress(query_id) == micros(T0 + 2 * HOUR)
    service.run_due(T0 + 3 * HOUR)
    world.drain()
    assert destination(world) == expected_buckets(3)


def test_definitions_are_checked_against_the_sql(world: World) -> None:
    service = world.service()
    base = {
        "name": "q",
        "database": DB,
        "source_measurement": "cpu",
        "destination_measurement": "out",
        "interval": "5m",
    }
    bad = {
        "SELECT * FROM other.cpu WHERE time >= {start_time} AND time < {end_time}": "reads only its own database",
        "SELECT * FROM mem WHERE time >= {start_time} AND time < {end_time}": "does not read its source_measurement",
        "DELETE FROM cpu WHERE time >= {start_time} AND time < {end_time}": "",
        "SELECT * FROM cpu WHERE time >= {start_time} AND time < {end_time} AND": "",
        "SELECT * FROM read_csv('/etc/passwd') WHERE {start_time} < {end_time}": "",
    }
    for sql, message in bad.items():
        with pytest.raises(BadRequest, match=message or None):
            service.create({**base, "query": sql}, T0)
    # Within the SQL limit as written, beyond it once each placeholder is a timestamp literal: every
    # window's query would be refused, so the definition is.
    placeholders = " OR ".join(["time >= {start_time} AND time < {end_time}"] * 1100)
    grown = f"SELECT * FROM cpu WHERE {placeholders}"
    assert len(grown) <= MAX_SQL_BYTES < len(substitute(grown, 0, 0))
    for sql in (grown, "SELECT * FROM cpu WHERE time >= {start_time} AND time < {end_time} -- " + "x" * MAX_SQL_BYTES):
        with pytest.raises(PayloadTooLarge, match="longer than 65536 bytes"):
            service.create({**base, "query": sql}, T0)
    assert world.runtime.catalog.list_continuous_queries() == []


def test_the_scheduled_function_refuses_a_task_it_does_not_know() -> None:
    handler = load_handler("compact")
    context = FakeLambdaContext("arcs-cq", 1024, "arn:aws:lambda:us-east-1:123456789012:function:arcs-cq", 1e12)
    with pytest.raises(ValueError, match="unknown task 'vacuum'"):
        handler({"task": "vacuum"}, context)


def test_retention_rules_follow_the_processed_mark_and_dry_runs_count_exactly(world: World) -> None:
    """``delete_source_after_days`` stops at the mark; ``retention_days`` keeps the buffer; both
    through the retention run, on either catalog."""
    from arcs.lifecycle.retention import Retention

    create(world, retention_days=1, delete_source_after_days=1)
    write_source(world, T0, 6 * 60)  # six hour partitions, two hosts
    world.drain()
    world.service(delay_s=600).run_due(T0 + 3 * HOUR)  # the mark moves to T0 + 2 h
    world.drain()
    runtime = world.runtime
    # A week and a day later: the destination's cutoff (1 d + the 7-day buffer) falls inside its
    # second hour; the source's time cutoff is long past every hour, so the mark decides.
    later = Retention(runtime.catalog, runtime.compactor, now=lambda: T0 + timedelta(days=8, minutes=90))
    dry = later.run_due(dry_run=True)
    counted = {(d.rule.field, d.removal.partitions, d.removal.rows) for d in dry.derived}
    assert counted == {("retention_days", 1, 12), ("delete_source_after_days", 2, 240)}
    assert world.rows("SELECT count(*) FROM cpu") == [(720,)]  # a dry run changes nothing
    ran = later.run_due()
    assert ran.complete and [d.rule.limit for d in ran.derived] == [T0 + timedelta(minutes=90), T0 + 2 * HOUR]
    # Stored times are the UTC wall clock, without a zone.
    assert world.rows("SELECT count(*), min(time)::TIMESTAMP FROM cpu") == [(480, (T0 + 2 * HOUR).replace(tzinfo=None))]
    assert destination(world) == expected_buckets(2)[12:]  # the second hour's buckets
    world.service(delay_s=600).run_due(T0 + 7 * HOUR)  # every hour processed: all of it may go
    world.drain()
    later.run_due()
    assert world.rows("SELECT count(*) FROM cpu") == [(0,)]
