"""``SELECT count(*) FROM m`` is answered from the catalog's file records: DuckDB's answer, no file opened."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from arcs.auth.tokens import Principal
from arcs.query.engine import Engine
from arcs.query.service import QueryService
from arcs.write.batch import TIME_TYPE, MeasurementRows, WriteBatch
from arcs.write.ingest import Ingestor
from arcs.write.schema import SchemaRegistry
from tests.helpers import BASE_US, local_ports, queued

ADMIN = Principal("t", "t", frozenset({"admin"}), ())


def _write(tmp_path: Path, measurement: str, tags: tuple[str, ...], batches: list[list[int]]) -> QueryService:
    store, catalog = local_ports(tmp_path)
    ingestor = Ingestor(catalog, store)
    for number, offsets in enumerate(batches):
        columns: dict[str, Any] = {"time": pa.array([BASE_US + o for o in offsets], pa.int64()).cast(TIME_TYPE)}
        columns.update({tag: ["a"] * len(offsets) for tag in tags})
        columns["v"] = [float(o) for o in offsets]
        batch = WriteBatch(f"b{number}", "db", (MeasurementRows(measurement, pa.table(columns), tags),))
        SchemaRegistry(catalog).apply("db", list(batch.parts))
        ingestor.ingest([queued(batch)])
    engine = Engine([str(tmp_path / "storage") + "/"], tmp_path / "work")
    return QueryService(catalog, store, engine, 1_000_000)


def _spy(service: QueryService, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    sent: list[str] = []
    query = service.engine.query_arrow

    def spy(sql: str, *args: Any, **kwargs: Any) -> pa.Table:
        sent.append(sql)
        return query(sql, *args, **kwargs)

    monkeypatch.setattr(service.engine, "query_arrow", spy)
    return sent


@pytest.mark.parametrize(
    ("sql", "name"),
    [
        ("SELECT count(*) FROM cpu", "count_star()"),
        ("select COUNT(*) from db.cpu", "count_star()"),
        ("SELECT count() AS n FROM cpu", "n"),
    ],
)
def test_count_star_is_the_sum_of_the_file_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sql: str, name: str
) -> None:
    # Three ingests in three hours: three files, no point in two of them.
    service = _write(tmp_path, "cpu", ("host",), [[0, 1, 2], [3_600_000_000, 3_600_000_001], [7_200_000_000]])
    sent = _spy(service, monkeypatch)
    result = service.run(sql, "db", ADMIN).table
    assert not sent, "DuckDB was asked"
    assert result.column_names == [name]
    assert result.schema.field(0).type == pa.int64()
    assert result.to_pylist() == [{name: 6}]
    monkeypatch.undo()
    # DuckDB's own answer over the same scan: the same value and name.
    plain = service.engine.query_arrow(service._prepare(sql, "db", ADMIN).sql)
    assert plain.column_names == [name] and plain.column(0).to_pylist() == [6]


def test_points_written_twice_are_counted_once_by_duckdb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    service = _write(tmp_path, "cpu", ("host",), [[0, 1, 2], [1, 2, 3]])  # times 1 and 2 written twice
    sent = _spy(service, monkeypatch)
    assert service.run("SELECT count(*) FROM cpu", "db", ADMIN).table.to_pylist() == [{"count_star()": 4}]
    assert sent


def test_without_tags_every_row_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    service = _write(tmp_path, "log", (), [[0, 1, 2], [1, 2, 3]])
    sent = _spy(service, monkeypatch)
    assert service.run("SELECT count(*) FROM log", "db", ADMIN).table.to_pylist() == [{"count_star()": 6}]
    assert not sent


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(*) FROM cpu WHERE v > 0",
        "SELECT count(*) FROM cpu GROUP BY host",
        "SELECT count(*) FROM cpu LIMIT 0",
        "SELECT count(v) FROM cpu",
        "SELECT count(DISTINCT v) FROM cpu",
        "SELECT count(*) FILTER (WHERE v > 1) FROM cpu",
        "SELECT count(*) + 0 FROM cpu",
        "SELECT count(*), 1 FROM cpu",
        "SELECT count(*) FROM cpu HAVING count(*) > 100",
        "SELECT count(*) FROM cpu USING SAMPLE 1",
        "SELECT count(*) FROM cpu, cpu AS c2",
        "WITH c AS (SELECT 1) SELECT count(*) FROM cpu",
    ],
)
def test_any_other_query_is_duckdbs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sql: str) -> None:
    service = _write(tmp_path, "cpu", ("host",), [[0, 1, 2], [3_600_000_000]])
    sent = _spy(service, monkeypatch)
    service.run(sql, "db", ADMIN)
    assert sent
