"""The rows planted so that every one of the 43 queries returns rows at any size, and the query
constants scaled to the size (``HAVING COUNT(*) > n``, ``OFFSET n``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from clickbench import distributions as dist

MOSCOW_OFFSET_S = 4 * 3600  # EventDate is the Moscow date (UTC+4) of EventTime (UTC)
PLANTED_USER_ID = 435090932899640449  # Q20
PLANTED_REFERER_HASH = 3594120000172545465  # Q41
PLANTED_URL_HASH = 2868770270353813622  # Q42
PLANTED_REFERER = "http://mysw.info/goods/list?counter=62&from=tracker"  # its RefererHash is planted
PLANTED_URL = "http://62.example.ru/catalog/index.html"  # its URLHash is planted
Q43_FIRST_DAY = 15900  # 2013-07-14


def scaled(count: int, rows: int) -> int:
    """A count of the full dataset (a threshold, an offset) at ``rows`` rows: proportional, at least 1."""
    return max(1, count * rows // dist.N_FULL)


_HAVING = re.compile(r"(HAVING\s+COUNT\(\*\)\s*>\s*)(\d+)", re.IGNORECASE)
_OFFSET = re.compile(r"(\bOFFSET\s+)(\d+)", re.IGNORECASE)


def scale_query(sql: str, rows: int) -> str:
    """``sql`` with its ``HAVING COUNT(*) > n`` and ``OFFSET n`` constants scaled to ``rows`` rows."""

    def scale(match: re.Match[str]) -> str:
        return match.group(1) + str(scaled(int(match.group(2)), rows))

    return _OFFSET.sub(scale, _HAVING.sub(scale, sql))


class Plants:
    """Values for the first rows of some columns (None: keep the generated value)."""

    def __init__(self) -> None:
        self.rows = 0
        self.values: dict[str, dict[int, object]] = {}

    def add(self, count: int, **columns: Sequence[object] | object) -> None:
        for name, value in columns.items():
            values = value if isinstance(value, list) else [value] * count
            target = self.values.setdefault(name, {})
            for offset, item in enumerate(values):
                target[self.rows + offset] = item
        self.rows += count

    def apply(self, columns: dict[str, pa.Array]) -> None:
        for name, planted in self.values.items():
            column = columns[name]
            head = pa.array([planted.get(i) for i in range(self.rows)], column.type)
            columns[name] = pa.concat_arrays([pc.coalesce(head, column.slice(0, self.rows)), column.slice(self.rows)])


def planted_rows(rows: int) -> Plants:
    """Rows that make Q20-Q24 and the OFFSET queries Q39-Q43 return rows (NOTES, scaled to ``rows``)."""
    plants = Plants()
    minutes = min(2 * 24 * 60, scaled(1000, rows) + 10)
    # Q39/Q40/Q43: counter 62, distinct link URLs, each in its own minute of 07-14..07-15 (Moscow).
    plants.add(
        minutes,
        CounterID=62,
        IsRefresh=0,
        DontCountHits=0,
        IsLink=1,
        IsDownload=0,
        URL=[f"http://62.example.ru/link/{i}.html" for i in range(minutes)],
        EventTime=[
            Q43_FIRST_DAY * 86400 - MOSCOW_OFFSET_S + 60 * (i * (2880 // minutes)) + i % 60 for i in range(minutes)
        ],
    )
    # Q41: one Referer (its hash planted), traffic sources -1 and 6, distinct URLs.
    count = scaled(100, rows) + 10
    plants.add(
        count,
        CounterID=62,
        IsRefresh=0,
        TraficSourceID=[6 if i % 2 else -1 for i in range(count)],
        Referer=PLANTED_REFERER,
        URL=[f"http://62.example.ru/from-mysw/{i}" for i in range(count)],
    )
    # Q42: one URL (its hash planted) seen in many distinct window sizes.
    count = scaled(10_000, rows) + 10
    plants.add(
        count,
        CounterID=62,
        IsRefresh=0,
        DontCountHits=0,
        URL=PLANTED_URL,
        WindowClientWidth=[320 + i % 1600 for i in range(count)],
        WindowClientHeight=[200 + i // 1600 for i in range(count)],
    )
    plants.add(4, UserID=PLANTED_USER_ID)  # Q20
    # Q21-Q24: 'google' URLs with search phrases; half with 'Google' titles and no '.google.' in the URL.
    count = max(10, round(15_911 * rows / dist.N_FULL))
    plants.add(
        count,
        URL=[
            f"https://google.com/url?sa=t&source=web&cd={i}" if i % 2 else f"http://www.google.ru/search?q={i}&lr=213"
            for i in range(count)
        ],
        Title=[f"Google — результаты поиска {i}" if i % 2 else f"Поиск {i}" for i in range(count)],
        SearchPhrase=[dist.TOP_PHRASES[i % len(dist.TOP_PHRASES)][0] for i in range(count)],
        SearchEngineID=[2 + i % 2 for i in range(count)],
    )
    return plants
