"""Arc's own Python SDK (``arc-tsdb-client``, as published) works unchanged against every runtime.

Every public method of ``ArcClient`` and of ``AsyncArcClient``, against the standalone server and
``arcs local`` (the session's ``server`` fixture), with what each returns checked: the SDK parses
our answers into its pydantic models, so a field of the wrong name or type fails here.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from arc_client import ArcClient, AsyncArcClient
from arc_client.exceptions import ArcAuthenticationError, ArcNotFoundError

from tests.e2e.servers import TOKEN, Client, ServerProcess

pytestmark = pytest.mark.e2e

T0_US = 1_700_000_000_000_000  # 2023-11-14T22:13:20Z
T0 = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=T0_US)
CQ_SQL = (
    "SELECT time_bucket(INTERVAL '1 hour', time) AS time, host, avg(usage) AS usage, count(*) AS n "
    "FROM cpu WHERE time >= {start_time} AND time < {end_time} GROUP BY ALL"
)


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def stamp(offset_us: int = 0) -> str:
    """A stored time as JSON answers it (nanoseconds: nine fraction digits)."""
    return (T0 + timedelta(microseconds=offset_us)).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")


def address(server: ServerProcess) -> dict[str, Any]:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    return {"host": host, "port": int(port)}


@pytest.fixture
def database() -> str:
    return unique("sdk")


@pytest.fixture
def sdk(server: ServerProcess, database: str) -> Iterator[ArcClient]:
    with ArcClient(**address(server), token=TOKEN, database=database) as client:
        yield client


def async_client(server: ServerProcess, database: str, token: str = TOKEN) -> AsyncArcClient:
    return AsyncArcClient(**address(server), token=token, database=database)


def rows(client: Client, sql: str, database: str) -> list[list[Any]]:
    return client.rows(sql, database)


# --- writes of each kind --------------------------------------------------------------------------


def check_written(client: Client, database: str) -> None:
    """What ``write_everything`` wrote, read back."""
    assert client.wait_count("cpu", 2, database) == 2
    assert rows(client, "SELECT time, host, usage FROM cpu ORDER BY time", database) == [
        [stamp(), "a", 1.5],
        [stamp(1), "b", 2.5],
    ]
    assert client.wait_count("rec", 1, database) == 1
    assert rows(client, "SELECT time, h, v FROM rec", database) == [[stamp(), "x", 1.0]]
    for measurement in ("dfp", "dfl", "dfa"):
        assert client.wait_count(measurement, 2, database) == 2
        assert rows(client, f"SELECT time, host, v FROM {measurement} ORDER BY time", database) == [
            [stamp(), "a", 1.0],
            [stamp(1), "b", 2.0],
        ]
    assert client.wait_count("lp", 2, database) == 2
    assert rows(client, "SELECT time, host, v FROM lp ORDER BY time", database) == [
        [stamp(), "a", 1.0],
        [stamp(1), "b", 2.0],
    ]
    assert client.wait_count("pt", 1, database) == 1
    assert rows(client, "SELECT time, h, v FROM pt", database) == [[stamp(), "a", 1.0]]
    assert client.wait_count("buf", 3, database) == 3
    assert rows(client, "SELECT time, v FROM buf ORDER BY time", database) == [
        [stamp(), 1.0],
        [stamp(1), 2.0],
        [stamp(2), 3.0],
    ]


def frames() -> list[tuple[str, Any]]:
    columns = {"time": [T0_US, T0_US + 1], "host": ["a", "b"], "v": [1.0, 2.0]}
    return [("dfp", pd.DataFrame(columns)), ("dfl", pl.DataFrame(columns)), ("dfa", pa.table(columns))]


LINES = ["lp,host=a v=1 1700000000000000000", "lp,host=b v=2 1700000000000001000"]


def test_writes_of_each_kind(server: ServerProcess, client: Client, sdk: ArcClient, database: str) -> None:
    write = sdk.write
    write.write_columnar("cpu", {"time": [T0_US, T0_US + 1], "host": ["a", "b"], "usage": [1.5, 2.5]})
    write.write_records([{"measurement": "rec", "timestamp": T0_US, "fields": {"v": 1.0}, "tags": {"h": "x"}}])
    for measurement, frame in frames():
        write.write_dataframe(frame, measurement, tag_columns=["host"])
    write.write_line_protocol(LINES[0])
    write.write_line_protocol([LINES[1]], compress=False)
    write.write_point("pt", {"v": 1.0}, {"h": "a"}, T0_US)
    with write.buffered(batch_size=2, flush_interval=60) as buffer:
        buffer.write({"measurement": "buf", "timestamp": T0_US, "fields": {"v": 1.0}})
        assert buffer.pending_count == 1 and buffer.pending_measurements == {"buf": 1}
        buffer.write({"measurement": "buf", "timestamp": T0_US + 1, "fields": {"v": 2.0}})  # a full batch: sent
        buffer.write_columnar("buf", {"time": [T0_US + 2], "v": [3.0]})
        assert buffer.pending_count == 1
        buffer.flush()
        assert buffer.pending_count == 0
    check_written(client, database)


def test_async_writes_of_each_kind(server: ServerProcess, client: Client, database: str) -> None:
    async def write_everything() -> None:
        async with async_client(server, database) as sdk:
            write = sdk.write
            await write.write_columnar("cpu", {"time": [T0_US, T0_US + 1], "host": ["a", "b"], "usage": [1.5, 2.5]})
            records = [{"measurement": "rec", "timestamp": T0_US, "fields": {"v": 1.0}, "tags": {"h": "x"}}]
            await write.write_records(records)
            for measurement, frame in frames():
                await write.write_dataframe(frame, measurement, tag_columns=["host"])
            await write.write_line_protocol(LINES[0])
            await write.write_line_protocol([LINES[1]], compress=False)
            await write.write_point("pt", {"v": 1.0}, {"h": "a"}, T0_US)
            async with write.buffered(batch_size=2, flush_interval=60) as buffer:
                await buffer.write({"measurement": "buf", "timestamp": T0_US, "fields": {"v": 1.0}})
                await buffer.write({"measurement": "buf", "timestamp": T0_US + 1, "fields": {"v": 2.0}})
                await buffer.write_columnar("buf", {"time": [T0_US + 2], "v": [3.0]})
                assert buffer.pending_count == 1
                await buffer.flush()
                assert buffer.pending_count == 0

    asyncio.run(write_everything())
    check_written(client, database)


# --- queries and listings -------------------------------------------------------------------------


@pytest.fixture
def loaded(client: Client, sdk: ArcClient, database: str) -> str:
    sdk.write.write_columnar(
        "cpu", {"time": [T0_US, T0_US + 1, T0_US + 2], "host": ["a", "b", "a"], "usage": [1.5, 2.5, 3.5]}
    )
    sdk.write.write_columnar("mem", {"time": [T0_US], "host": ["a"], "used": [7]})
    assert client.wait_count("cpu", 3, database) == 3 and client.wait_count("mem", 1, database) == 1
    return database


SQL = "SELECT time, host, usage FROM cpu ORDER BY time"


def check_answers(answers: dict[str, Any], database: str) -> None:
    """The answers of every query method, sync or async, to the same data (``loaded``)."""
    result = answers["query"]
    assert result.success is True and result.columns == ["time", "host", "usage"] and result.row_count == 3
    assert result.data == [[stamp(), "a", 1.5], [stamp(1), "b", 2.5], [stamp(2), "a", 3.5]]
    assert result.execution_time_ms >= 0
    table = answers["query_arrow"]
    assert isinstance(table, pa.Table) and table.column_names == ["time", "host", "usage"]
    assert pa.types.is_timestamp(table.schema.field("time").type)
    assert table.column("host").to_pylist() == ["a", "b", "a"] and table.column("usage").to_pylist() == [1.5, 2.5, 3.5]
    frame = answers["query_pandas"]
    assert isinstance(frame, pd.DataFrame) and list(frame["usage"]) == [1.5, 2.5, 3.5]
    assert frame["time"].iloc[0] == pd.Timestamp(T0_US * 1000, unit="ns", tz="UTC")  # an instant, as in JSON
    polars_frame = answers["query_polars"]
    assert isinstance(polars_frame, pl.DataFrame) and polars_frame["host"].to_list() == ["a", "b", "a"]
    estimate = answers["estimate"]
    assert estimate.success is True and estimate.estimated_rows == 3 and estimate.warning_level == "none"
    for listing in (answers["list_measurements"], answers["list_measurements_of"]):
        ours = [m for m in listing if m.database == database]
        assert [m.measurement for m in ours] == ["cpu", "mem"]
        assert all(m.file_count >= 1 and m.total_size_mb > 0 and m.storage_path for m in ours)
    assert {m.database for m in answers["list_measurements_of"]} == {database}
    assert database in answers["list_databases"]
    tables = answers["show_tables"]
    assert tables.success is True and [row[:2] for row in tables.data] == [[database, "cpu"], [database, "mem"]]
    assert answers["health"].status == "pass" and answers["ready"] is True  # InfluxDB's word, which its clients need


def test_queries_and_listings(sdk: ArcClient, loaded: str) -> None:
    query = sdk.query
    answers = {
        "query": query.query(SQL),
        "query_arrow": query.query_arrow(SQL),
        "query_pandas": query.query_pandas(SQL),
        "query_polars": query.query_polars(SQL),
        "estimate": query.estimate("SELECT * FROM cpu"),
        "list_measurements": query.list_measurements(),
        "list_measurements_of": query.list_measurements(loaded),
        "list_databases": query.list_databases(),
        "show_tables": query.show_tables(loaded),
        "health": sdk.health(),
        "ready": sdk.ready(),
    }
    check_answers(answers, loaded)
    # The database given per call, instead of the client's.
    with ArcClient(**address_of(sdk), token=TOKEN, database="elsewhere") as other:
        assert other.query.query(SQL, database=loaded).row_count == 3
        assert other.query.query_arrow(SQL, database=loaded).num_rows == 3


def address_of(sdk: ArcClient) -> dict[str, Any]:
    return {"host": sdk.config.host, "port": sdk.config.port}


def test_async_queries_and_listings(server: ServerProcess, loaded: str) -> None:
    async def ask() -> dict[str, Any]:
        async with async_client(server, loaded) as sdk:
            query = sdk.query
            return {
                "query": await query.query(SQL),
                "query_arrow": await query.query_arrow(SQL),
                "query_pandas": await query.query_pandas(SQL),
                "query_polars": await query.query_polars(SQL),
                "estimate": await query.estimate("SELECT * FROM cpu"),
                "list_measurements": await query.list_measurements(),
                "list_measurements_of": await query.list_measurements(loaded),
                "list_databases": await query.list_databases(),
                "show_tables": await query.show_tables(loaded),
                "health": await sdk.health(),
                "ready": await sdk.ready(),
            }

    check_answers(asyncio.run(ask()), loaded)


# --- tokens ---------------------------------------------------------------------------------------


def test_tokens(server: ServerProcess, sdk: ArcClient, database: str) -> None:
    verified = sdk.auth.verify()
    assert verified.valid is True and verified.permissions == ["admin"]
    assert verified.token_info is not None and isinstance(verified.token_info.id, int)
    name = unique("sdk-tok-")
    created = sdk.auth.create_token(name, "made by the SDK", ["read"])
    assert created.success is True and created.token
    [token] = [t for t in sdk.auth.list_tokens() if t.name == name]
    assert (token.description, token.permissions, token.enabled) == ("made by the SDK", ["read"], True)
    assert sdk.auth.get_token(token.id) == token
    sdk.auth.update_token(token.id, description="changed", permissions=["read", "write"])
    assert (sdk.auth.get_token(token.id).description, sdk.auth.get_token(token.id).permissions) == (
        "changed",
        ["read", "write"],
    )
    with ArcClient(**address(server), token=created.token, database=database) as holder:
        seen = holder.auth.verify()
        assert seen.valid is True and seen.token_info is not None and seen.token_info.id == token.id
    rotated = sdk.auth.rotate_token(token.id)
    assert rotated != created.token
    with ArcClient(**address(server), token=rotated, database=database) as holder:
        assert holder.auth.verify().valid is True
    sdk.auth.revoke_token(token.id)
    assert sdk.auth.get_token(token.id).enabled is False
    sdk.auth.delete_token(token.id)
    with pytest.raises(ArcNotFoundError):
        sdk.auth.get_token(token.id)
    with ArcClient(**address(server), token="not-a-token", database=database) as stranger:
        assert stranger.auth.verify().valid is False
        with pytest.raises(ArcAuthenticationError):
            stranger.auth.list_tokens()


def test_async_tokens(server: ServerProcess, database: str) -> None:
    name = unique("sdk-tok-")

    async def manage() -> None:
        async with async_client(server, database) as sdk:
            verified = await sdk.auth.verify()
            assert verified.valid is True and verified.token_info is not None
            created = await sdk.auth.create_token(name, permissions=["read"])
            assert created.success is True and created.token
            [token] = [t for t in await sdk.auth.list_tokens() if t.name == name]
            assert token.permissions == ["read"] and (await sdk.auth.get_token(token.id)) == token
            await sdk.auth.update_token(token.id, description="changed")
            assert (await sdk.auth.get_token(token.id)).description == "changed"
            rotated = await sdk.auth.rotate_token(token.id)
            async with async_client(server, database, rotated) as holder:
                assert (await holder.auth.verify()).valid is True
            await sdk.auth.revoke_token(token.id)
            assert (await sdk.auth.get_token(token.id)).enabled is False
            await sdk.auth.delete_token(token.id)
            with pytest.raises(ArcNotFoundError):
                await sdk.auth.get_token(token.id)

    asyncio.run(manage())


# --- retention, continuous queries, delete ----------------------------------------------------------


def check_retention(client: Client, database: str, run: Any) -> None:
    """``run(step, ...)`` calls one retention method, sync or async, and returns its answer."""
    created = run("create", unique("rp"), database, 30, measurement="cpu", buffer_days=1)
    assert (created.database, created.measurement, created.retention_days, created.buffer_days) == (
        database,
        "cpu",
        30,
        1,
    )
    assert created.id in [p.id for p in run("list")]
    assert run("get", created.id) == created and created.last_execution_time is None
    updated = run("update", created.id, retention_days=60)
    assert (updated.id, updated.retention_days) == (created.id, 60)
    dry = run("execute", created.id, dry_run=True)
    assert (dry.policy_id, dry.policy_name, dry.dry_run, dry.deleted_count) == (created.id, created.name, True, 3)
    assert dry.cutoff_date and client.wait_count("cpu", 3, database) == 3  # a dry run removes nothing
    done = run("execute", created.id, dry_run=False, confirm=True)
    assert (done.dry_run, done.deleted_count, done.files_deleted) == (False, 3, 1)
    assert rows(client, "SELECT count(*) FROM cpu", database) == [[0]]
    latest = run("get", created.id)
    assert (latest.last_execution_status, latest.last_deleted_count) == ("succeeded", 3) and latest.last_execution_time
    executions = run("get_executions", created.id)
    assert [(e.policy_id, e.status, e.deleted_count) for e in executions] == [
        (created.id, "succeeded", 3),
        (created.id, "dry_run", 3),
    ]
    assert len({e.id for e in executions}) == 2
    run("delete", created.id)
    with pytest.raises(ArcNotFoundError):
        run("get", created.id)


def test_retention(client: Client, sdk: ArcClient, loaded: str) -> None:
    check_retention(client, loaded, lambda step, *args, **kwargs: getattr(sdk.retention, step)(*args, **kwargs))


def test_async_retention(server: ServerProcess, client: Client, loaded: str) -> None:
    with AsyncRunner(async_client(server, loaded)) as runner:
        check_retention(client, loaded, lambda step, *a, **k: runner.run(getattr(runner.sdk.retention, step)(*a, **k)))


class AsyncRunner:
    """One event loop for a sequence of async SDK calls, made from synchronous checks."""

    def __init__(self, sdk: AsyncArcClient) -> None:
        self.sdk = sdk
        self.loop = asyncio.new_event_loop()

    def run(self, awaitable: Any) -> Any:
        return self.loop.run_until_complete(awaitable)

    def __enter__(self) -> AsyncRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.run(self.sdk.close())
        self.loop.close()


def check_continuous_queries(client: Client, database: str, run: Any) -> None:
    name = unique("cq")
    created = run("create", name, database, "cpu", "cpu_1h", CQ_SQL, "1h", description="hourly")
    assert (created.name, created.database, created.query, created.interval) == (name, database, CQ_SQL, "1h")
    assert (created.source_measurement, created.destination_measurement, created.is_active) == ("cpu", "cpu_1h", True)
    assert [q.id for q in run("list", database=database)] == [created.id]
    assert run("get", created.id) == created
    updated = run("update", created.id, description="changed", is_active=False)
    assert (updated.id, updated.description, updated.is_active) == (created.id, "changed", False)
    start, end = "2023-11-14T00:00:00Z", "2023-11-15T00:00:00Z"
    dry = run("execute", created.id, start, end, dry_run=True)
    assert (dry.query_id, dry.query_name, dry.status, dry.dry_run, dry.records_written) == (
        created.id,
        name,
        "dry_run",
        True,
        0,
    )
    done = run("execute", created.id, datetime(2023, 11, 14, tzinfo=UTC), datetime(2023, 11, 15, tzinfo=UTC))
    assert (done.status, done.records_written, done.destination_measurement) == ("succeeded", 2, "cpu_1h")
    assert client.wait_count("cpu_1h", 2, database) == 2
    assert rows(client, "SELECT host, usage, n FROM cpu_1h ORDER BY host", database) == [["a", 2.5, 2], ["b", 2.5, 1]]
    executions = run("get_executions", created.id)  # a dry run is not recorded
    assert [(e.query_id, e.execution_id, e.status, e.records_written) for e in executions] == [
        (created.id, done.execution_id, "succeeded", 2),
    ]
    assert (executions[0].start_time, executions[0].end_time) == (start, end) and executions[0].id > 0
    run("delete", created.id)
    assert run("list", database=database) == []
    with pytest.raises(Exception, match="not found"):
        run("get", created.id)


def test_continuous_queries(client: Client, sdk: ArcClient, loaded: str) -> None:
    cqs = sdk.continuous_queries
    check_continuous_queries(client, loaded, lambda step, *args, **kwargs: getattr(cqs, step)(*args, **kwargs))


def test_async_continuous_queries(server: ServerProcess, client: Client, loaded: str) -> None:
    with AsyncRunner(async_client(server, loaded)) as runner:
        cqs = runner.sdk.continuous_queries
        check_continuous_queries(client, loaded, lambda step, *a, **k: runner.run(getattr(cqs, step)(*a, **k)))


def check_delete(client: Client, database: str, run: Any) -> None:
    config = run("get_config")
    assert config.enabled is True and config.confirmation_threshold == 10_000
    assert config.implementation == "rewrite-based" and set(config.performance_impact) == {
        "writes",
        "queries",
        "deletes",
    }
    dry = run("delete", database, "cpu", "host = 'a'", dry_run=True)
    assert (dry.success, dry.dry_run, dry.deleted_count, dry.affected_files) == (True, True, 2, 1)
    assert len(dry.files_processed) == 1 and dry.files_processed[0].endswith(".parquet")
    assert client.wait_count("cpu", 3, database) == 3  # a dry run removes nothing
    done = run("delete", database, "cpu", "host = 'a'", dry_run=False, confirm=True)
    assert (done.success, done.dry_run, done.deleted_count, done.files_processed) == (
        True,
        False,
        2,
        dry.files_processed,
    )
    assert rows(client, "SELECT host, usage FROM cpu", database) == [["b", 2.5]]


def test_delete(client: Client, sdk: ArcClient, loaded: str) -> None:
    check_delete(client, loaded, lambda step, *args, **kwargs: getattr(sdk.delete, step)(*args, **kwargs))


def test_async_delete(server: ServerProcess, client: Client, loaded: str) -> None:
    with AsyncRunner(async_client(server, loaded)) as runner:
        check_delete(client, loaded, lambda step, *a, **k: runner.run(getattr(runner.sdk.delete, step)(*a, **k)))
