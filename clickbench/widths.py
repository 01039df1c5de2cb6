"""Why some queries lose to duckdb-parquet: the integer widths, measured with DuckDB alone.

    uv run python -m clickbench.widths --rows 10000000 [--queries 9,24,30,31,33] [--tries 5]

Runs after the harness has made the dataset (``clickbench.dataset``). DuckDB alone, in this
process, one connection with the same settings for all, runs each query hot (best of
``--tries``, after one untimed run) over three copies of the same rows:

- ``baseline``: ``hits.parquet`` through ClickBench's ``create_duckdb_view.sql``, as the
  duckdb-parquet entry reads it (16- and 32-bit integers, as ClickBench's schema has them);
- ``stored``: the files our path serves, in our storage types (integers are int64);
- ``narrowed``: the stored files written again with every integer column cast back to its width
  in ``hits.parquet``, and nothing else changed (same rows, order, codec and row groups).

``stored`` and ``narrowed`` run the very same SQL with the engine's macros. Where ``narrowed``
keeps up with the baseline and ``stored`` does not, the storage types are what costs.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import duckdb

from arcs.query.rewriter import quote_identifier, quote_literal
from arcs.query.sql_compat import define_macros
from clickbench.dataset import Dataset
from clickbench.generate import scale_query
from clickbench.harness import queries
from clickbench.systems import _duckdb_view

DEFAULT_QUERIES = "9,24,25,28,30,31,33"
_INTEGER_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "UTINYINT", "USMALLINT", "UINTEGER")


def _files_sql(files: list[Path]) -> str:
    return "[" + ", ".join(quote_literal(str(file)) for file in files) + "]"


def _original_widths(con: duckdb.DuckDBPyConnection, single: Path) -> dict[str, str]:
    """The integer columns ``hits.parquet`` holds narrower than int64, with their types."""
    described = con.execute(f"DESCRIBE SELECT * FROM read_parquet({quote_literal(str(single))})").fetchall()
    return {
        str(name): str(kind)
        for name, kind, *_ in described
        # EventDate is days there and a timestamp in our storage: a representation, not a width
        if str(kind).upper() in _INTEGER_TYPES and name != "EventDate"
    }


def _narrow(con: duckdb.DuckDBPyConnection, stored: list[Path], widths: dict[str, str], target: Path) -> Path:
    columns = con.execute(f"DESCRIBE SELECT * FROM read_parquet({_files_sql(stored)})").fetchall()
    items = []
    for name, *_ in columns:
        quoted = quote_identifier(str(name))
        kind = widths.get(str(name))
        items.append(f"CAST({quoted} AS {kind}) AS {quoted}" if kind else quoted)
    codec = con.execute(
        f"SELECT compression FROM parquet_metadata({quote_literal(str(stored[0]))})"
        " WHERE path_in_schema = 'URL' LIMIT 1"
    ).fetchone()
    con.execute("SET preserve_insertion_order = true")  # the rows in their order, as stored
    con.execute(
        f"COPY (SELECT {', '.join(items)} FROM read_parquet({_files_sql(stored)}, file_row_number := false))"
        f" TO {quote_literal(str(target))}"
        f" (FORMAT parquet, COMPRESSION {codec[0] if codec else 'snappy'}, ROW_GROUP_SIZE 122880)"
    )
    con.execute("SET preserve_insertion_order = false")
    return target


def _best(con: duckdb.DuckDBPyConnection, sql: str, tries: int) -> float:
    con.execute(sql).to_arrow_table()
    best = float("inf")
    for _ in range(tries):
        started = time.perf_counter()
        con.execute(sql).to_arrow_table()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "arcs-clickbench")
    parser.add_argument("--queries", default=DEFAULT_QUERIES, help="1-based numbers in queries.sql")
    parser.add_argument("--tries", type=int, default=5)
    args = parser.parse_args()
    dataset = Dataset(args.rows, args.work_dir / str(args.rows))
    if not dataset.ready:
        raise SystemExit(f"no dataset of {args.rows:,} rows under {args.work_dir}: run the harness first")
    stored = sorted(dataset.arcs_data.joinpath("storage").rglob("*.parquet"))
    con = duckdb.connect(config={"preserve_insertion_order": False})
    con.execute("SET GLOBAL parquet_metadata_cache = true; SET GLOBAL TimeZone = 'UTC'")
    define_macros(con)
    widths = _original_widths(con, dataset.single)
    narrowed = _narrow(con, stored, widths, dataset.root / "narrowed.parquet")
    # One view named hits at a time; the engine's macros already define the view's toDateTime.
    baseline_view = next(s for s in _duckdb_view(str(dataset.single)).split(";") if "CREATE VIEW" in s)
    views = {
        "baseline": baseline_view.replace("CREATE VIEW", "CREATE OR REPLACE VIEW"),
        "stored": f"CREATE OR REPLACE VIEW hits AS SELECT * FROM read_parquet({_files_sql(stored)})",
        "narrowed": f"CREATE OR REPLACE VIEW hits AS SELECT * FROM read_parquet({quote_literal(str(narrowed))})",
    }
    numbers = [int(n) for n in args.queries.split(",")]
    print(f"DuckDB {duckdb.__version__} alone, {args.rows:,} rows, hot, best of {args.tries}; seconds")
    print(f"{len(widths)} integer columns narrower than int64 in hits.parquet")
    print(f"{'query':>6} {'baseline':>9} {'stored':>9} {'narrowed':>9} {'stored/base':>12} {'narrowed/base':>14}")
    for number in numbers:
        sql = scale_query(queries()[number - 1], args.rows)
        seconds = {}
        for name, view in views.items():
            con.execute(view)
            seconds[name] = _best(con, sql, args.tries)
        base = seconds["baseline"]
        print(
            f"{'Q' + str(number):>6} {base:9.3f} {seconds['stored']:9.3f} {seconds['narrowed']:9.3f}"
            f" {seconds['stored'] / base:12.2f} {seconds['narrowed'] / base:14.2f}"
        )


if __name__ == "__main__":
    main()
