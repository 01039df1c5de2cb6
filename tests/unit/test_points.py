"""One point per series and time: ingest's merge, and which files a query reads through a merge."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from arcs import layout
from arcs.ports import FileRecord
from arcs.write.points import may_repeat, merge_points, scan

HOUR = datetime(2024, 3, 1, 5, tzinfo=UTC)
COMMIT = "0" * 13 + "1" * 19


def record(name: str, low: int, high: int, hour: datetime = HOUR) -> FileRecord:
    key = f"db/cpu/2024/03/01/{hour.hour:02d}/{name}"
    return FileRecord("db", "cpu", hour, key, 1, 1, low, high, name[:32])


def test_merge_points_merges_a_points_rows_field_by_field_and_keeps_time_order() -> None:
    table = pa.table(
        {
            "time": pa.array([1, 2, 2, 2, 3], pa.timestamp("us", tz="UTC")),
            "host": pa.array(["a", "a", "b", "a", None]).dictionary_encode(),
            "usage": [1.0, 2.0, 3.0, None, 5.0],
            "idle": [None, None, None, 7.0, 8.0],
        }
    )
    merged = merge_points(table, ["host"])
    assert merged.schema == table.schema
    rows = [(r["time"].microsecond, r["host"], r["usage"], r["idle"]) for r in merged.to_pylist()]
    assert sorted(rows, key=lambda r: (r[0], r[1] or "")) == rows
    assert sorted(rows, key=lambda r: (r[0], r[1] or "")) == [
        (1, "a", 1.0, None),
        (2, "a", 2.0, 7.0),
        (2, "b", 3.0, None),
        (3, None, 5.0, 8.0),
    ]


def test_merge_points_leaves_tables_without_repeats_or_tags_alone() -> None:
    distinct = pa.table({"time": pa.array([1, 1, 2], pa.int64()), "host": ["a", "b", "a"], "v": [1, 2, 3]})
    assert merge_points(distinct, ["host"]) is distinct
    assert merge_points(distinct, []) is distinct


def test_only_files_of_different_units_whose_times_meet_are_merged() -> None:
    one = record(f"{COMMIT}-0000.parquet", 0, 10)
    meets_one = record(f"{'0' * 12}2{'2' * 19}-0000.parquet", 10, 20)
    apart = record(f"{'0' * 12}3{'3' * 19}-0000.parquet", 21, 30)
    other_month = record(f"{'0' * 12}4{'4' * 19}-0000.parquet", 0, 10, HOUR.replace(month=HOUR.month % 12 + 1))
    assert may_repeat([one, apart, other_month]) == []
    assert {f.key for f in may_repeat([apart, meets_one, one, other_month])} == {one.key, meets_one.key}
    # The outputs of one compaction job hold each point once between them; a delete's rewrite does not.
    job = layout.sequence_id()
    merged = [record(layout.compacted_filename(one.key, job, n), 0, 10) for n in range(2)]
    assert may_repeat(merged) == []
    rewritten = [record(layout.compacted_filename(one.key, job, n, merged=False), 0, 10) for n in range(2)]
    assert len(may_repeat(rewritten)) == 2


def test_a_day_file_and_a_later_write_into_one_of_its_hours_are_merged_on_read() -> None:
    # A day file's record sits at its day's first hour, a late write's at its own hour: the same
    # point can be in both, so the two are read through the merge; the day's outputs are one unit.
    day = HOUR.replace(hour=0)
    job = layout.sequence_id()
    day_files = [
        FileRecord(
            "db",
            "cpu",
            day,
            f"db/cpu/2024/03/01/{layout.compacted_filename(COMMIT + '-0000.parquet', job, n, tier='day')}",
            1,
            1,
            0,
            100,
            job,
        )
        for n in range(2)
    ]
    assert all(layout.key_tier(f.key) == "day" for f in day_files)
    assert may_repeat(day_files) == []
    late = record(f"{'0' * 12}5{'5' * 19}-0000.parquet", 50, 60)  # hour 05
    assert {f.key for f in may_repeat([*day_files, late])} == {late.key, *(f.key for f in day_files)}


def test_scan_merges_only_what_may_repeat() -> None:
    one = record(f"{COMMIT}-0000.parquet", 0, 10)
    two = record(f"{'0' * 12}2{'2' * 19}-0000.parquet", 5, 20)
    apart = record(f"{'0' * 12}3{'3' * 19}-0000.parquet", 21, 30)
    plain = scan([one, apart], ["host"], ["time", "host", "v"], str)
    assert plain.startswith("read_parquet(") and "arg_max" not in plain
    assert "arg_max" not in scan([one, two], [], ["time", "v"], str)  # no tags: every row is kept
    assert "arg_max" not in scan([one, two], ["host"], ["time", "host", "file_index"], str)
    merged = scan([one, two, apart], ["host"], ["time", "host", "v"], str)
    assert "arg_max" in merged and "UNION ALL BY NAME" in merged
