"""Pruned queries return exactly what a scan of every file returns, and read only what they need."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from arcs.auth.tokens import Principal
from arcs.query.engine import Engine
from arcs.query.service import QueryService
from arcs.write.ingest import Ingestor
from arcs.write.schema import SchemaRegistry
from tests.helpers import BASE_US, HOUR_US, local_ports, make_batch, queued

ADMIN = Principal("t", "t", frozenset({"admin"}), ())
HOURS = 48


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> QueryService:
    root: Path = tmp_path_factory.mktemp("pruning")
    store, catalog = local_ports(root)
    batches = [
        make_batch("db", "cpu", [BASE_US + h * HOUR_US + i * 600_000_000 for i in range(6)]) for h in range(HOURS)
    ]
    SchemaRegistry(catalog).apply("db", list(batches[0].parts))
    Ingestor(catalog, store).ingest([queued(b) for b in batches])
    return QueryService(catalog, store, Engine([str(root / "storage") + "/"], root / "work"), 1_000_000)


def at(micros: int) -> str:
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def count(service: QueryService, where: str) -> int:
    return int(service.run(f"SELECT count(*) FROM cpu WHERE {where}", "db", ADMIN).table.column(0)[0].as_py())


def test_random_ranges_match_the_full_scan(service: QueryService) -> None:
    rng = random.Random(7)
    for _ in range(25):
        lo = BASE_US + rng.randrange(-2 * HOUR_US, (HOURS + 2) * HOUR_US)
        hi = lo + rng.randrange(0, 6 * HOUR_US)
        ops = rng.choice([(">=", "<"), (">", "<="), (">=", "<=")])
        where = f"time {ops[0]} '{at(lo)}' AND time {ops[1]} '{at(hi)}'"
        # The same predicate, hidden from pruning (a function of time), scans every file.
        unpruned = f"epoch_us(time) {ops[0]} {lo} AND epoch_us(time) {ops[1]} {hi}"
        assert count(service, where) == count(service, unpruned), where


def test_a_one_hour_query_lists_one_hour_of_files(service: QueryService, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[object, ...]] = []
    original = service.catalog.list_files

    def spy(*args: object) -> object:
        calls.append(args)
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(service.catalog, "list_files", spy)
    start = BASE_US + 10 * HOUR_US
    assert count(service, f"time >= '{at(start)}' AND time < '{at(start + HOUR_US - 1)}'") == 6
    [(_db, _m, first, last)] = calls
    # One hour asked for, from its month's start (where a day's or month's file record sits), not
    # the whole measurement.
    hour = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=start)
    assert (first, last) == (hour.replace(day=1, hour=0), hour)


def test_a_range_without_data_just_works(service: QueryService) -> None:
    assert count(service, "time > '2100-01-01'") == 0
    assert count(service, "time > '2100-01-01' AND time < '1990-01-01'") == 0


# --- pruning reads only what DuckDB applies ---------------------------------------------------

DUCKDB_READINGS = [
    # DuckDB's block comments nest: the first WHERE is inside the comment, only "WHERE true" applies.
    ("nested comment", "SELECT * FROM cpu /* /* */ WHERE time > '2030-01-01' AND */ WHERE true", 4),
    # A column alias list renames the columns: "time" is the second one, the host tag.
    ("renamed columns", "SELECT * FROM cpu AS c(t0, time, u) WHERE time >= '2030-01-01'", 2),
]


@pytest.fixture(scope="module")
def four_rows(tmp_path_factory: pytest.TempPathFactory) -> tuple[QueryService, list[str]]:
    """Four rows of 2023 in real Parquet: two of host '1999-a', two of host '2031-b'."""
    root: Path = tmp_path_factory.mktemp("readings")
    store, catalog = local_ports(root)
    batches = [make_batch("db", "cpu", [BASE_US, BASE_US + 1], host) for host in ("1999-a", "2031-b")]
    SchemaRegistry(catalog).apply("db", list(batches[0].parts))
    Ingestor(catalog, store).ingest([queued(b) for b in batches])
    urls = [store.url(f.key) for f in catalog.list_files("db", "cpu")]
    return QueryService(catalog, store, Engine([str(root / "storage") + "/"], root / "work"), 1_000_000), urls


@pytest.mark.parametrize(("sql", "rows"), [c[1:] for c in DUCKDB_READINGS], ids=[c[0] for c in DUCKDB_READINGS])
def test_pruning_uses_only_predicates_duckdb_applies(
    four_rows: tuple[QueryService, list[str]], sql: str, rows: int
) -> None:
    service, urls = four_rows
    direct = duckdb.connect()
    direct.execute("SET TimeZone = 'UTC'")
    direct.execute(f"CREATE VIEW cpu AS SELECT * FROM read_parquet({urls!r}, union_by_name = true)")
    expected = direct.execute(f"SELECT count(*) FROM ({sql})").fetchall()[0][0]
    assert expected == rows
    assert service.run(sql, "db", ADMIN).table.num_rows == rows
