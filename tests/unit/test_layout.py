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
