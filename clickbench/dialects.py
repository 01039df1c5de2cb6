"""The 43 queries in the SQL each peer's ClickBench entry runs, made from ``queries.sql``.

The entries ship their own copies; ours are derived mechanically from the one ``queries.sql`` so
that every system answers the same question:

- chDB (chdb-parquet-partitioned) reads ``file('hits_*.parquet', Parquet)``; EventDate is raw days
  there, so it is read through ``toDate`` (the entry does this in its date filters; we do it
  everywhere, so MIN(EventDate) is a date as in DuckDB). ``toDateTime`` is ClickHouse's own.
- DataFusion (datafusion) folds unquoted identifiers to lower case, so the column names are
  quoted; its view (``create.sql``) turns EventDate into a DATE; ``toDateTime(x)`` is
  ``to_timestamp_seconds(x)``.

DuckDB's ``STRLEN`` (bytes; Q28, Q29) is ClickHouse's ``length`` and DataFusion's ``octet_length``
(DataFusion's ``length`` counts characters).
"""

from __future__ import annotations

import re

from clickbench.generate import hits_schema

_COLUMNS = [field.name for field in hits_schema()]
_IDENTIFIER = re.compile(r"'(?:[^']|'')*'|\b(" + "|".join(sorted(_COLUMNS, key=len, reverse=True)) + r")\b")

_STRLEN = re.compile(r"\bSTRLEN\(", re.IGNORECASE)

#: datafusion/create.sql of the entry: the raw table and a view with EventDate as a DATE.
DATAFUSION_CREATE = (
    "CREATE EXTERNAL TABLE hits_raw STORED AS PARQUET LOCATION '{location}' OPTIONS ('binary_as_string' 'true')",
    'CREATE VIEW hits AS SELECT * EXCEPT ("EventDate"), CAST(CAST("EventDate" AS INTEGER) AS DATE) AS "EventDate" '
    "FROM hits_raw",
)


def to_datafusion(sql: str) -> str:
    def quote(match: re.Match[str]) -> str:
        return f'"{match.group(1)}"' if match.group(1) else match.group(0)

    sql = re.sub(r"\btoDateTime\(", "to_timestamp_seconds(", _IDENTIFIER.sub(quote, sql))
    return _STRLEN.sub("octet_length(", sql)


def to_chdb(sql: str, files: str = "hits_*.parquet") -> str:
    def date(match: re.Match[str]) -> str:
        return "toDate(EventDate)" if match.group(1) == "EventDate" else match.group(0)

    sql = _IDENTIFIER.sub(date, sql)
    sql = re.sub(r"\bFROM hits\b", f"FROM file('{files}', Parquet)", sql)
    return _STRLEN.sub("length(", sql)
