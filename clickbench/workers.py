"""One try of one query in a fresh process, as the embedded engines' ClickBench entries run it.

    python -m clickbench.workers SYSTEM RESULT_PATH < query.sql     (cwd: the system's data folder)

Set-up (the view, the connection) is outside the timer, as DuckDB's ``.timer``, datafusion-cli's
``Elapsed`` and chDB's ``timeit`` leave process start out. The timer covers running the query and
taking its whole result; the result goes to RESULT_PATH as an Arrow IPC file, the seconds to the
last line of stdout as JSON.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

Runner = Callable[[str], tuple[pa.Table, float]]

#: What ClickBench's duckdb-parquet query script sets besides the view.
DUCKDB_SETTINGS = ("SET parquet_metadata_cache = true",)


def _duckdb(view_sql: str) -> Runner:
    import duckdb

    con = duckdb.connect(":memory:")
    for statement in DUCKDB_SETTINGS:
        con.execute(statement)
    for statement in view_sql.split(";"):
        if statement.strip():
            con.execute(statement)

    def run(sql: str) -> tuple[pa.Table, float]:
        started = time.perf_counter()
        table = con.execute(sql).to_arrow_table()
        return table, time.perf_counter() - started

    return run


def _chdb() -> Runner:
    import chdb

    # chdb and chdb-core both install chdb/__init__.py; whichever lands last is typed or not.
    conn = chdb.connect()  # type: ignore[no-untyped-call, unused-ignore]

    def run(sql: str) -> tuple[pa.Table, float]:
        started = time.perf_counter()
        result = conn.query(sql, "Arrow")
        data = result.bytes()
        elapsed = time.perf_counter() - started
        return pa.ipc.open_file(pa.BufferReader(data)).read_all(), elapsed

    return run


def _datafusion() -> Runner:
    import datafusion

    from clickbench.dialects import DATAFUSION_CREATE

    ctx = datafusion.SessionContext()
    for statement in DATAFUSION_CREATE:
        ctx.sql(statement.format(location="hits.parquet")).collect()

    def run(sql: str) -> tuple[pa.Table, float]:
        started = time.perf_counter()
        frame = ctx.sql(sql)
        batches = frame.collect()
        elapsed = time.perf_counter() - started
        schema = batches[0].schema if batches else frame.schema()
        return pa.Table.from_batches(batches, schema=schema), elapsed

    return run


def runner(system: str, view_sql: str) -> Runner:
    if system in ("duckdb-parquet", "duckdb-parquet-partitioned"):
        return _duckdb(view_sql)
    if system == "chdb-parquet-partitioned":
        return _chdb()
    if system == "datafusion":
        return _datafusion()
    raise ValueError(f"unknown system {system!r}")


def main() -> None:
    system, result_path = sys.argv[1], Path(sys.argv[2])
    view_sql = sys.argv[3] if len(sys.argv) > 3 else ""
    sql = sys.stdin.read()
    table, elapsed = runner(system, view_sql)(sql)
    with pa.OSFile(str(result_path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    print(json.dumps({"seconds": elapsed}), flush=True)


if __name__ == "__main__":
    main()
