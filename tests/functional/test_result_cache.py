"""The result cache in the query use case: hits, and never a result of a file set that has since changed."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import msgpack
import pyarrow as pa
import pytest

from arcs.auth.tokens import Principal
from arcs.errors import Forbidden
from arcs.http.api import build_app
from arcs.http.gateway import _LambdaContext
from arcs.http.proxy import proxy_event
from arcs.ports import Catalog, ObjectStore
from arcs.query.engine import Engine
from arcs.query.result_cache import ResultCache
from arcs.query.service import QueryService
from arcs.runtime import local_runtime
from arcs.settings import Settings
from arcs.write.ingest import Ingestor
from arcs.write.schema import SchemaRegistry
from tests.helpers import BASE_US, HOUR_US, local_ports, make_batch, queued

ADMIN = Principal("admin", "admin", frozenset({"admin"}), ())
TTL_S = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class World:
    def __init__(self, root: Path) -> None:
        self.store: ObjectStore
        self.catalog: Catalog
        self.store, self.catalog = local_ports(root)
        self.clock = Clock()
        self.cache = ResultCache(64 * 1024 * 1024, TTL_S, clock=self.clock)
        engine = Engine([str(root / "storage") + "/"], root / "work")
        self.service = QueryService(self.catalog, self.store, engine, 1_000_000, self.cache)

    def write(self, database: str, measurement: str, hour: int, rows: int, host: str = "a") -> None:
        batch = make_batch(database, measurement, [BASE_US + hour * HOUR_US + i for i in range(rows)], host)
        SchemaRegistry(self.catalog).apply(database, list(batch.parts))
        Ingestor(self.catalog, self.store).ingest([queued(batch)])

    def rows(self, sql: str, database: str = "db", principal: Principal = ADMIN) -> list[tuple[object, ...]]:
        table = self.service.run(sql, database, principal).table
        return [tuple(row.values()) for row in table.to_pylist()]


@pytest.fixture
def world(tmp_path: Path) -> World:
    world = World(tmp_path)
    world.write("db", "cpu", 0, 5)
    return world


SQL = "SELECT host, count(*) AS n, sum(value) AS s FROM cpu GROUP BY host ORDER BY host"


def test_the_cache_is_off_unless_turned_on(tmp_path: Path) -> None:
    assert Settings().result_cache is False and Settings.from_env({}).result_cache is False
    assert local_runtime(Settings(data_dir=tmp_path / "off")).queries.cache is None
    settings = Settings.from_env(
        {"ARCS_RESULT_CACHE": "true", "ARCS_RESULT_CACHE_TTL_S": "5", "ARCS_RESULT_CACHE_MAX_BYTES": "1000"}
    )
    cache = local_runtime(settings.with_(data_dir=tmp_path / "on")).queries.cache
    assert cache is not None and (cache.ttl_s, cache.max_bytes) == (5.0, 1000)


def test_a_repeated_query_is_a_hit_with_the_same_result(world: World) -> None:
    first = world.service.run(SQL, "db", ADMIN).table
    second = world.service.run(SQL, "db", ADMIN).table
    assert (world.cache.hits, world.cache.misses) == (1, 1)
    assert second.equals(first) and second.to_pylist() == [{"host": "a", "n": 5, "s": 10.0}]


def test_a_committed_file_makes_the_next_query_miss_and_see_its_rows(world: World) -> None:
    assert world.rows(SQL) == [("a", 5, 10.0)]
    assert world.rows(SQL) == [("a", 5, 10.0)]
    world.write("db", "cpu", 0, 3, host="b")  # the same hour: a new file next to the first
    assert world.rows(SQL) == [("a", 5, 10.0), ("b", 3, 3.0)]
    world.write("db", "cpu", 7, 1, host="b")  # a later hour
    assert world.rows(SQL) == [("a", 5, 10.0), ("b", 4, 3.0)]
    assert (world.cache.hits, world.cache.misses) == (1, 3)


def test_a_time_bounded_query_misses_only_when_its_own_hours_change(world: World) -> None:
    bounded = "SELECT count(*) FROM cpu WHERE time < TIMESTAMP '2023-11-14 23:00:00'"
    assert world.rows(bounded) == [(5,)]
    world.write("db", "cpu", 30, 4)  # outside the range: pruned away, the same files are read
    assert world.rows(bounded) == [(5,)]
    assert world.cache.hits == 1
    world.write("db", "cpu", 0, 2, host="c")
    assert world.rows(bounded) == [(7,)]
    assert (world.cache.hits, world.cache.misses) == (1, 2)


def test_an_entry_older_than_the_ttl_is_not_served(world: World) -> None:
    world.rows(SQL)
    world.clock.now += TTL_S - 1
    world.rows(SQL)
    world.clock.now += 1
    world.rows(SQL)
    assert (world.cache.hits, world.cache.misses) == (1, 2)


def test_a_query_reading_the_clock_is_run_every_time(world: World) -> None:
    sql = "SELECT count(*) FROM cpu WHERE time < now()"
    assert world.rows(sql) == world.rows(sql) == [(5,)]
    assert (world.cache.hits, world.cache.misses, world.cache.size_bytes) == (0, 0, 0)


def test_scopes_are_checked_before_the_cache_is_asked(world: World) -> None:
    world.write("secret", "cpu", 0, 2)
    owner = Principal("owner", "owner", frozenset({"read"}), ("secret",))
    other = Principal("other", "other", frozenset({"read"}), ("db",))
    assert world.rows("SELECT count(value) FROM secret.cpu", "secret", owner) == [(2,)]
    # Both spellings run the same SQL on the same files: one entry.
    assert world.rows("SELECT count(value) FROM cpu", "secret", owner) == [(2,)]
    assert (world.cache.hits, world.cache.misses) == (1, 1)
    for sql, database in (("SELECT count(value) FROM secret.cpu", "db"), ("SELECT count(value) FROM cpu", "secret")):
        with pytest.raises(Forbidden, match="may not use database 'secret'"):
            world.rows(sql, database, other)
    assert (world.cache.hits, world.cache.misses) == (1, 1)
    # And the same SQL in the caller's own database reads the caller's own files.
    assert world.rows("SELECT count(value) FROM cpu", "db", other) == [(5,)]


def test_every_answer_format_shares_the_cache(tmp_path: Path) -> None:
    """JSON, Arrow and MessagePack answers of one query: one run, then hits whatever the format."""
    runtime = local_runtime(Settings(data_dir=tmp_path / "data", result_cache=True))
    store, catalog = runtime.store, runtime.catalog
    batch = make_batch("db", "cpu", [BASE_US + i for i in range(5)], "a")
    SchemaRegistry(catalog).apply("db", list(batch.parts))
    Ingestor(catalog, store).ingest([queued(batch)])
    app = build_app(runtime)
    body = json.dumps({"sql": "SELECT host, count(*) AS n FROM db.cpu GROUP BY host"}).encode()
    answers = {}
    for path in ("/api/v1/query", "/api/v1/query/arrow", "/api/v1/query/msgpack"):
        event = proxy_event("POST", path, "", {"content-type": "application/json"}, body, ADMIN.to_context())
        result = app.resolve(event, _LambdaContext())
        assert result["statusCode"] == 200, result
        raw = result["body"]
        answers[path] = base64.b64decode(raw) if result["isBase64Encoded"] else raw.encode()
    cache = runtime.queries.cache
    assert cache is not None and (cache.hits, cache.misses) == (2, 1)
    assert json.loads(answers["/api/v1/query"])["data"] == [["a", 5]]
    assert pa.ipc.open_stream(answers["/api/v1/query/arrow"]).read_all().to_pylist() == [{"host": "a", "n": 5}]
    assert msgpack.unpackb(answers["/api/v1/query/msgpack"])["data"] == [["a"], [5]]
