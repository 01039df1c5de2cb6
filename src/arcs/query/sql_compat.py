"""Functions of other SQL dialects that clients and benchmarks send, defined on every connection.

ClickBench's queries call ClickHouse's ``toDateTime`` on ``EventTime``, stored as Unix seconds in
``hits.parquet``; DuckDB's own ClickBench view defines the same macro. Defining it in the engine
lets those queries run unchanged through the query path.
"""

from __future__ import annotations

import duckdb

MACROS = (
    # Unix seconds -> TIMESTAMP, as in ClickBench's DuckDB view (epoch_ms keeps the UTC wall clock).
    "CREATE MACRO toDateTime(t) AS epoch_ms(t * 1000)",
)


def define_macros(conn: duckdb.DuckDBPyConnection) -> None:
    for statement in MACROS:
        conn.execute(statement)
