"""Continuous query definitions: intervals, aligned windows, the placeholder substitution, field
checks, and how a query's result becomes the destination's rows."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from arcs.continuous_queries.definitions import (
    Definition,
    micros,
    parse_interval,
    parse_time,
    rfc3339,
    substitute,
    window_after,
    window_start,
    write_id,
)
from arcs.continuous_queries.service import destination_rows, principal_of
from arcs.errors import BadRequest, Forbidden
from arcs.write.batch import TIME_TYPE

NOW = datetime(2024, 3, 1, 10, 17, 42, tzinfo=UTC)
S = 1_000_000


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1), ("90s", 90), ("1m", 60), ("5m", 300), ("1h", 3600), ("1d", 86400), ("366d", 31622400)],
)
def test_intervals(text: str, seconds: int) -> None:
    assert parse_interval(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "0m", "1", "m", "1w", "1.5h", "-1h", " 1h", "1H", "367d", "01m", 60, None, "1h30m"]
)
def test_bad_intervals_are_400(text: object) -> None:
    with pytest.raises(BadRequest, match="invalid interval"):
        parse_interval(text)


def test_windows_are_aligned_to_the_interval_from_the_epoch() -> None:
    now = micros(NOW)
    assert rfc3339(window_start(now, 3600)) == "2024-03-01T10:00:00Z"
    assert rfc3339(window_start(now, 300)) == "2024-03-01T10:15:00Z"
    assert rfc3339(window_start(now, 86400)) == "2024-03-01T00:00:00Z"
    start = micros(datetime(2024, 3, 1, 10, tzinfo=UTC))
    assert window_after(start, 3600) == (start, start + 3600 * S)
    # A mark between boundaries (the interval changed) runs a short window up to the next one.
    assert window_after(start + 20 * 60 * S, 3600) == (start + 20 * 60 * S, start + 3600 * S)
    before_epoch = micros(datetime(1969, 12, 31, 23, 30, tzinfo=UTC))
    assert rfc3339(window_start(before_epoch, 3600)) == "1969-12-31T23:00:00Z"


def test_rfc3339_and_parse_time_round_trip() -> None:
    assert rfc3339(micros(NOW)) == "2024-03-01T10:17:42Z"
    assert rfc3339(micros(NOW) + 5) == "2024-03-01T10:17:42.000005Z"
    assert parse_time("2024-03-01T10:17:42Z", "start_time") == micros(NOW)
    assert parse_time("2024-03-01T12:17:42+02:00", "start_time") == micros(NOW)
    assert parse_time("2024-03-01T10:17:42", "start_time") == micros(NOW)  # no zone: UTC
    for bad in ("", "yesterday", "2024-13-01T00:00:00Z", 1700000000, None):
        with pytest.raises(BadRequest, match="start_time"):
            parse_time(bad, "start_time")


def test_placeholders_become_typed_literals_and_nothing_else_changes() -> None:
    start, end = micros(NOW), micros(NOW + timedelta(hours=1))
    sql = "SELECT {'a': 1} AS s FROM cpu WHERE time >= {start_time} AND time < '{end_time}' -- {other}"
    assert substitute(sql, start, end) == (
        "SELECT {'a': 1} AS s FROM cpu WHERE time >= TIMESTAMPTZ '2024-03-01T10:17:42Z' "
        "AND time < TIMESTAMPTZ '2024-03-01T11:17:42Z' -- {other}"
    )


def test_write_ids_are_the_window_for_the_schedule_and_unique_for_a_manual_execute() -> None:
    assert write_id(7, 10, 20) == write_id(7, 10, 20) == "cq-7-10-20"
    assert write_id(7, 10, 20, "e1") != write_id(7, 10, 20, "e2")
    assert "/" not in write_id(7, -10, 20)


DOCUMENT: dict[str, Any] = {
    "name": "cpu_1h",
    "database": "metrics",
    "source_measurement": "cpu",
    "destination_measurement": "cpu_1h",
    "query": "SELECT * FROM cpu WHERE time >= {start_time} AND time < {end_time}",
    "interval": "1h",
}


def test_a_minimal_definition_takes_the_defaults() -> None:
    query = Definition.for_create(DOCUMENT, 0, NOW).query
    assert (query.interval_s, query.tag_columns, query.is_active, query.description) == (3600, (), True, "")
    assert (query.retention_days, query.delete_source_after_days, query.created_at) == (None, None, NOW)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": None}, "missing required field"),
        ({"query": None, "interval": None}, "query, interval"),
        ({"name": "has space"}, "invalid name"),
        ({"database": "system"}, "reserved"),
        ({"source_measurement": "1cpu"}, "invalid measurement"),
        ({"destination_measurement": "cpu"}, "must differ"),
        ({"query": "SELECT * FROM cpu WHERE time >= {start_time}"}, "lacks {end_time}"),
        ({"query": "SELECT * FROM cpu"}, "lacks {start_time} and {end_time}"),
        ({"query": "   "}, "non-empty"),
        ({"interval": "1w"}, "invalid interval"),
        ({"tag_columns": "host"}, "tag_columns"),
        ({"tag_columns": ["time"]}, "tag_columns"),
        ({"retention_days": 0}, "retention_days"),
        ({"delete_source_after_days": True}, "delete_source_after_days"),
        ({"is_active": "yes"}, "is_active"),
        ({"description": 5}, "description"),
        ({"colour": "red"}, "unknown field"),
    ],
)
def test_bad_definitions_are_400_naming_the_field(changes: dict[str, object], message: str) -> None:
    document = {**DOCUMENT, **changes}
    error = Forbidden if changes.get("database") == "system" else BadRequest
    with pytest.raises(error, match=message):
        Definition.for_create({k: v for k, v in document.items() if v is not None or k not in DOCUMENT}, 0, NOW)


def test_an_update_replaces_the_given_fields_and_keeps_the_rest() -> None:
    current = Definition.for_create({**DOCUMENT, "tag_columns": ["host"]}, 4, NOW).query
    later = NOW + timedelta(days=1)
    updated = Definition.for_update(current, {"interval": "5m", "is_active": False}, later).query
    assert (updated.query_id, updated.interval_s, updated.is_active, updated.tag_columns) == (4, 300, False, ("host",))
    assert (updated.created_at, updated.updated_at, updated.version) == (NOW, later, current.version)
    with pytest.raises(BadRequest, match="database cannot change"):
        Definition.for_update(current, {"database": "other"}, later)


def test_a_continuous_query_reads_as_a_reader_of_its_own_database_only() -> None:
    principal = principal_of(Definition.for_create(DOCUMENT, 3, NOW).query)
    assert principal.permissions == frozenset({"read"})
    assert principal.may_use("metrics") and not principal.may_use("other")


def test_result_columns_become_storage_types() -> None:
    table = pa.table(
        {
            "time": pa.array([datetime(2024, 3, 1, 10), datetime(2024, 3, 1, 11)], pa.timestamp("ns")),
            "host": pa.array(["a", "b"]).dictionary_encode(),
            "n": pa.array([1, 2], pa.int32()),
            "total": pa.array([Decimal(3), Decimal(4)], pa.decimal128(38, 0)),
            "huge": pa.array([Decimal(10) ** 30, Decimal(1)], pa.decimal128(38, 0)),
            "mean": pa.array([Decimal("1.5"), Decimal("2.5")], pa.decimal128(10, 2)),
            "ratio": pa.array([0.5, 0.25], pa.float32()),
            "ok": pa.array([True, None]),
            "day": pa.array([date(2024, 3, 1), date(2024, 3, 2)]),
            "label": pa.array(["x", "y"], pa.large_string()),
        }
    )
    rows = destination_rows(table, ("host",))
    assert rows.schema == pa.schema(
        [
            ("time", TIME_TYPE),
            ("host", pa.string()),
            ("n", pa.int64()),
            ("total", pa.int64()),
            ("huge", pa.float64()),
            ("mean", pa.float64()),
            ("ratio", pa.float64()),
            ("ok", pa.bool_()),
            ("day", TIME_TYPE),
            ("label", pa.string()),
        ]
    )
    assert rows.column("time").cast(pa.int64()).to_pylist() == [  # nanoseconds
        micros(datetime(2024, 3, 1, 10, tzinfo=UTC)) * 1000,
        micros(datetime(2024, 3, 1, 11, tzinfo=UTC)) * 1000,
    ]
    assert rows.column("total").to_pylist() == [3, 4]


@pytest.mark.parametrize(
    ("columns", "tags", "message"),
    [
        ({"t": [1]}, (), "no 'time' column"),
        ({"time": [1]}, (), "not a timestamp"),
        ({"time": pa.array([None, datetime(2024, 1, 1)], pa.timestamp("us"))}, (), "NULL"),
        ({"time": [datetime(2024, 1, 1)], "host": [1]}, ("host",), "tags are strings"),
        ({"time": [datetime(2024, 1, 1)]}, ("host",), "tag column 'host' is not in"),
        ({"time": [datetime(2024, 1, 1)], "xs": [[1, 2]]}, (), "column 'xs'"),
        ({"time": [datetime(2024, 1, 1)], "nothing": pa.nulls(1)}, (), "column 'nothing'"),
    ],
)
def test_results_a_measurement_cannot_store_are_400(
    columns: dict[str, Any], tags: tuple[str, ...], message: str
) -> None:
    with pytest.raises(BadRequest, match=message):
        destination_rows(pa.table(columns), tags)


def test_duplicate_result_columns_are_400() -> None:
    table = pa.Table.from_arrays([pa.array([datetime(2024, 1, 1)]), pa.array([1]), pa.array([2])], ["time", "v", "v"])
    with pytest.raises(BadRequest, match="more than once"):
        destination_rows(table, ())
