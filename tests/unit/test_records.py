"""Catalog records as plain data: an hour's text is read once however many files name it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from arcs.adapters.records import hour_text, hour_value


def test_hour_text_and_value_round_trip() -> None:
    for hour in (
        datetime(2013, 7, 1, 5, tzinfo=UTC),
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(2262, 4, 11, tzinfo=UTC),
    ):
        assert hour_value(hour_text(hour)) == hour
        assert hour_value(hour_text(hour)).tzinfo is UTC


def test_bad_text_is_refused() -> None:
    for text in ("2013-07-01", "2013-07-01T25", "nonsense"):
        with pytest.raises(ValueError, match=r"does not match format|unconverted data"):
            hour_value(text)


def test_an_hour_named_by_many_files_is_parsed_once() -> None:
    hour_value.cache_clear()
    texts = [hour_text(datetime(2013, 7, 1, h % 24, tzinfo=UTC)) for h in range(4_400)]
    assert len({hour_value(text) for text in texts}) == 24
    info = hour_value.cache_info()
    assert (info.misses, info.hits) == (24, 4_400 - 24)
