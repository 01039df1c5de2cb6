"""Bounds written as RFC 3339 string literals are read without asking DuckDB, to the same instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from arcs.query.engine import Engine
from arcs.query.service import QueryService
from tests.helpers import local_ports

LITERALS = [
    "'2026-07-27T00:00:00Z'",
    "'2026-07-28'",
    "'2026-01-01 10:00:00.5+00:00'",
    "'2026-01-01 10:00:00.123456+0000'",
    "'2026-01-01T10:00:00+00'",
    "'1969-12-31T23:59:59.999999Z'",
    "'2024-02-29 23:00:00'",
    "'1677-09-22'",
]


@pytest.fixture
def service(tmp_path: Path) -> QueryService:
    store, catalog = local_ports(tmp_path)
    return QueryService(catalog, store, Engine([str(tmp_path / "storage") + "/"], tmp_path / "work"), 1000)


def _by_duckdb(service: QueryService, literal: str) -> datetime:
    table = service.engine.query_arrow(f"SELECT epoch_us(CAST(({literal}) AS TIMESTAMPTZ)) AS v")
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=table.column(0)[0].as_py())


@pytest.mark.parametrize("literal", LITERALS)
def test_a_literal_is_the_instant_duckdb_makes_of_it_without_a_query(
    service: QueryService, literal: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _by_duckdb(service, literal)
    monkeypatch.setattr(service.engine, "query_arrow", lambda *a, **k: pytest.fail("DuckDB was asked"))
    assert service.evaluate_time(literal) == expected


@pytest.mark.parametrize(
    "expression",
    ["'2026-02-30'", "'2026-01-01T10:00:00+01:00'", "'2026-01-01 10:00:00.1234567'", "'2026-01-01' ", "now()"],
)
def test_anything_else_is_still_duckdbs_to_judge(service: QueryService, expression: str) -> None:
    asked: list[str] = []
    query = service.engine.query_arrow

    def spy(sql: str, *args: object, **kwargs: object) -> object:
        asked.append(sql)
        return query(sql)

    service.engine.query_arrow = spy  # type: ignore[method-assign]
    value = service.evaluate_time(expression)
    assert asked
    if expression == "'2026-01-01T10:00:00+01:00'":
        assert value == datetime(2026, 1, 1, 9, tzinfo=UTC)
    if expression == "'2026-02-30'":
        assert value is None
