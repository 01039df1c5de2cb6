"""Retention's cutoff arithmetic and policy fields; delete's row matching."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest

from arcs.errors import BadRequest
from arcs.lifecycle.cutoffs import cutoff, expired, last_expired_hour
from arcs.lifecycle.deletion import matching_rows, without_rows
from arcs.lifecycle.retention import policy_from_document
from arcs.ports import RetentionPolicy

NOW = datetime(2026, 11, 22, 12, 30, tzinfo=UTC)


def policy(retention_days: int, buffer_days: int) -> RetentionPolicy:
    return RetentionPolicy(1, "p", "db", None, retention_days, buffer_days, True, NOW, NOW)


def test_cutoff_is_now_minus_retention_and_buffer_days() -> None:
    assert cutoff(policy(30, 7), NOW) == NOW - timedelta(days=37)
    assert cutoff(policy(1, 0), NOW) == datetime(2026, 11, 21, 12, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("hour", "limit", "gone"),
    [
        (datetime(2026, 1, 1, 10, tzinfo=UTC), datetime(2026, 1, 1, 11, tzinfo=UTC), True),  # ends at the cutoff
        (datetime(2026, 1, 1, 10, tzinfo=UTC), datetime(2026, 1, 1, 10, 59, 59, 999999, tzinfo=UTC), False),
        (datetime(2026, 1, 1, 10, tzinfo=UTC), datetime(2026, 1, 1, 10, 30, tzinfo=UTC), False),  # straddles it
        (datetime(2026, 1, 1, 9, tzinfo=UTC), datetime(2026, 1, 1, 10, 30, tzinfo=UTC), True),
    ],
)
def test_an_hour_goes_only_when_it_ends_at_or_before_the_cutoff(hour: datetime, limit: datetime, gone: bool) -> None:
    assert expired(hour, limit) is gone
    assert (hour <= last_expired_hour(limit)) is gone


def test_policy_fields_are_checked_and_updates_keep_absent_fields() -> None:
    made = policy_from_document({"name": " p ", "database": "db", "retention_days": 30}, NOW)
    assert (made.name, made.measurement, made.retention_days, made.buffer_days, made.is_active) == (
        "p",
        None,
        30,
        7,
        True,
    )
    changed = policy_from_document({"buffer_days": 0, "measurement": "cpu"}, NOW + timedelta(hours=1), made)
    assert (changed.retention_days, changed.buffer_days, changed.measurement) == (30, 0, "cpu")
    assert (changed.created_at, changed.updated_at) == (NOW, NOW + timedelta(hours=1))
    bad: list[dict[str, Any]] = [
        {"database": "db", "retention_days": 30},
        {"name": "p", "retention_days": 30},
        {"name": "p", "database": "1db", "retention_days": 30},
        {"name": "p", "database": "db", "measurement": "bad name", "retention_days": 30},
        {"name": "p", "database": "db", "retention_days": 0},
        {"name": "p", "database": "db", "retention_days": True},
        {"name": "p", "database": "db", "retention_days": "30"},
        {"name": "p", "database": "db", "retention_days": 3, "buffer_days": -1},
        {"name": "p", "database": "db", "retention_days": 3, "is_active": "yes"},
        {"name": "p", "database": "db", "retention_days": 3, "ttl": 1},
    ]
    for document in bad:
        with pytest.raises(BadRequest):
            policy_from_document(document, NOW)


def table() -> pa.Table:
    times = pa.array([3, 1, 2, 5], pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    return pa.table({"time": times, "host": ["a", None, "b", "a"], "v": [1.0, 2.0, None, 4.0]})


def test_rows_match_where_the_expression_is_true_and_null_does_not_match() -> None:
    rows = table()
    assert matching_rows(rows, "host = 'a'").to_pylist() == [0, 3]
    assert matching_rows(rows, "v > 1.5").to_pylist() == [1, 3]  # NULL v: not matched
    assert matching_rows(rows, "time >= TIMESTAMPTZ '1970-01-01 00:00:00.000002+00'").to_pylist() == [0, 2, 3]
    kept = without_rows(rows, matching_rows(rows, "host = 'a'"))
    assert kept.column("v").to_pylist() == [2.0, None]  # the rest, in their order
    assert without_rows(rows, matching_rows(rows, "false")).equals(rows)


def test_stored_nanosecond_times_compare_with_zoned_expressions() -> None:
    # Files of this version hold nanoseconds without a zone; DuckDB alone refuses to compare them
    # with a TIMESTAMPTZ such as now().
    times = pa.array([1_000, 1_001, 2_000], pa.int64()).cast(pa.timestamp("ns"))
    rows = pa.table({"time": times, "host": ["a", "a", "b"]})
    assert matching_rows(rows, "time < now() - INTERVAL 1 DAY").to_pylist() == [0, 1, 2]
    assert matching_rows(rows, "time > TIMESTAMPTZ '1970-01-01 00:00:00.000001+00'").to_pylist() == [1, 2]
    assert matching_rows(rows, "time = TIMESTAMP_NS '1970-01-01 00:00:00.000001001'").to_pylist() == [1]


def test_the_expression_sees_only_the_rows() -> None:
    for where in ["read_csv('/etc/passwd') IS NULL", "nonexistent = 1", "v +"]:
        with pytest.raises(BadRequest):
            matching_rows(table(), where)


def test_time_literals_mean_utc_whatever_the_machine_zone() -> None:
    # DuckDB takes its zone from TZ when a process first connects: a fresh process, as a server in New York.
    program = (
        "import pyarrow as pa; from arcs.lifecycle.deletion import matching_rows; "
        "t = pa.table({'time': pa.array([0, 3600000000], pa.int64()).cast(pa.timestamp('us', tz='UTC'))}); "
        "print(matching_rows(t, \"time < '1970-01-01 00:30:00'\").to_pylist())"
    )
    env = {**os.environ, "TZ": "America/New_York"}
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[0]"
