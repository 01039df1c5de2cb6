from __future__ import annotations

from datetime import UTC, datetime

import pytest

from arcs import layout


@pytest.mark.parametrize("prefix", ["", "arcs", "deep/prefix/"])
def test_data_key_round_trips(prefix: str) -> None:
    hour = datetime(2024, 2, 29, 23, 17, 5, tzinfo=UTC)
    key = layout.data_key(prefix, "metrics", "cpu-load_1", hour, "abc-0001.parquet")
    assert key.endswith("metrics/cpu-load_1/2024/02/29/23/abc-0001.parquet")
    parsed = layout.parse_data_key(prefix, key)
    assert parsed == layout.DataKey("metrics", "cpu-load_1", datetime(2024, 2, 29, 23, tzinfo=UTC), "abc-0001.parquet")


def test_system_keys_are_outside_every_data_prefix() -> None:
    key = layout.system_key("arcs", "claims", "x.bin")
    assert key == "arcs/_arcs/claims/x.bin"
    with pytest.raises(ValueError, match="not a data key"):
        layout.parse_data_key("arcs", key)
    # no valid database name can equal the system folder
    with pytest.raises(Exception, match="database"):
        layout.data_key("arcs", "_arcs", "cpu", datetime.now(UTC), "a.parquet")


@pytest.mark.parametrize("bad", ["../x.parquet", "a/b.parquet", "x.csv"])
def test_bad_file_names_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="bad data file name"):
        layout.data_key("", "db", "m", datetime.now(UTC), bad)


def test_hour_from_micros_floors_negative_times() -> None:
    assert layout.hour_from_micros(-1) == datetime(1969, 12, 31, 23, tzinfo=UTC)
    assert layout.hour_from_micros(3_600_000_000) == datetime(1970, 1, 1, 1, tzinfo=UTC)


def test_result_keys_are_system_keys_of_their_own_folder() -> None:
    key = layout.result_key("arcs", "0f3a9c", "arrows")
    assert key == "arcs/_arcs/results/0f3a9c.arrows"
    assert layout.result_key("", "0f3a9c", "json") == "_arcs/results/0f3a9c.json"
    for result_id, extension in (("../x", "json"), ("a/b", "json"), ("abc", "js/on"), ("", "json")):
        with pytest.raises(ValueError, match="bad result name"):
            layout.result_key("arcs", result_id, extension)


@pytest.mark.parametrize("prefix", ["", "arcs", "deep/prefix/"])
def test_a_day_file_sits_in_its_day_s_directory_and_parses_as_the_day(prefix: str) -> None:
    moment = datetime(2024, 2, 29, 23, 17, 5, tzinfo=UTC)
    name = layout.compacted_filename("x/0123456789abc" + "d" * 19 + "-0000.parquet", "feed", 1, tier="day")
    assert name == "0123456789abc" + "d" * 19 + "-dfeed-0001.parquet"
    key = layout.data_key(prefix, "metrics", "cpu", moment, name, "day")
    assert key.endswith(f"metrics/cpu/2024/02/29/{name}")
    parsed = layout.parse_data_key(prefix, key)
    assert parsed == layout.DataKey("metrics", "cpu", datetime(2024, 2, 29, tzinfo=UTC), name, "day")
    assert layout.key_tier(key) == "day"
    assert layout.compaction_job_of(name) == "feed"  # a day's outputs are one unit, like an hour job's
    hour_key = layout.data_key(prefix, "metrics", "cpu", moment, "a-0001.parquet")
    assert layout.key_tier(hour_key) == "hour"
    assert layout.parse_data_key(prefix, hour_key).tier == "hour"
    assert layout.tier_prefix(prefix, "metrics", "cpu", moment, "day").endswith("metrics/cpu/2024/02/29/")
    assert layout.tier_start(moment) == datetime(2024, 2, 1, tzinfo=UTC)  # where a month file is recorded


@pytest.mark.parametrize("prefix", ["", "arcs", "2024/01", "deep/prefix/"])
def test_a_month_file_sits_in_its_month_s_directory_and_parses_as_the_month(prefix: str) -> None:
    moment = datetime(2024, 2, 29, 23, 17, 5, tzinfo=UTC)
    name = layout.compacted_filename("x/0123456789abc" + "d" * 19 + "-0000.parquet", "feed", 2, tier="month")
    assert name == "0123456789abc" + "d" * 19 + "-mfeed-0002.parquet"
    key = layout.data_key(prefix, "metrics", "cpu", moment, name, "month")
    assert key.endswith(f"metrics/cpu/2024/02/{name}")
    parsed = layout.parse_data_key(prefix, key)
    assert parsed == layout.DataKey("metrics", "cpu", datetime(2024, 2, 1, tzinfo=UTC), name, "month")
    assert layout.key_tier(key) == "month"
    assert layout.compaction_job_of(name) == "feed"
    assert layout.tier_prefix(prefix, "metrics", "cpu", moment, "month").endswith("metrics/cpu/2024/02/")
    assert layout.tier_end(datetime(2024, 2, 1, tzinfo=UTC), "month") == datetime(2024, 3, 1, tzinfo=UTC)
    assert layout.tier_end(datetime(2024, 12, 1, tzinfo=UTC), "month") == datetime(2025, 1, 1, tzinfo=UTC)
    # Every tier's key under a numeric prefix still says its own tier.
    for tier in layout.TIERS:
        assert layout.key_tier(layout.data_key(prefix, "m1", "c2", moment, "f.parquet", tier)) == tier
