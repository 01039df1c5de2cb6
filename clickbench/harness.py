"""The ClickBench comparison on this machine: our query path against its peers on the same data.

    uv run python -m clickbench.harness --rows 10000000        (or: make clickbench ROWS=...)

Generates ClickBench-shaped hits data (cached per size under --work-dir), loads it into our
storage layout, then runs the 43 queries of ``queries.sql`` on every system: a cold try (page
cache dropped, our server restarted) and two hot ones. Every result is checked against
duckdb-parquet's (rules in ``clickbench.compare``). Prints the per-query table, totals, ratios to
the baseline and ClickBench's relative scores, and writes ClickBench JSON per system, the table
and a chart to ``--out``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from clickbench import report
from clickbench.compare import compare, without_limit
from clickbench.dataset import Dataset, prepare
from clickbench.generate import scale_query
from clickbench.systems import ALL, BASELINE, System, drop_page_cache

QUERIES = Path(__file__).resolve().parent / "queries.sql"
DEFAULT_WORK = Path("/tmp/arcs-clickbench")
#: Answers of a peer that differ from DuckDB's for a reason of the peer's own, shown but not failing.
KNOWN_DIFFERENCES = {
    ("chdb-parquet-partitioned", 4): "ClickHouse's avg of an Int64 column sums in Int64, which overflows on UserID",
}


def queries() -> list[str]:
    return [line.strip() for line in QUERIES.read_text(encoding="utf-8").splitlines() if line.strip()]


def _machine() -> str:
    return f"{platform.node() or 'this machine'} ({len(os.sched_getaffinity(0))} cores)"


@dataclass(frozen=True, slots=True)
class Outcome:
    system: System
    tries: list[report.Tries]
    results: list[pa.Table | None]
    lukewarm: bool
    errors: list[str]


def _full_result(con: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    return con.execute(without_limit(sql)).to_arrow_table()


def run_system(
    system: System, sqls: Sequence[str], tries: int, progress: object | None
) -> tuple[list[report.Tries], list[pa.Table | None], bool, list[str]]:
    """All queries on one system: per query a cold try, then hot ones; results of the first try."""
    all_tries: list[report.Tries] = []
    results: list[pa.Table | None] = []
    errors: list[str] = []
    lukewarm = False
    system.start()
    try:
        for number, sql in enumerate(sqls, 1):
            times: report.Tries = []
            first: pa.Table | None = None
            for attempt in range(tries):
                if attempt == 0:
                    system.cold()
                    lukewarm |= not drop_page_cache()
                try:
                    table, seconds = system.run(system.sql(sql))
                except Exception as exc:
                    errors.append(f"Q{number} try {attempt + 1}: {exc}")
                    times.append(None)
                else:
                    times.append(seconds)
                    first = table if first is None else first
                if progress is not None:
                    progress.update(1)  # type: ignore[attr-defined]
            all_tries.append(times)
            results.append(first)
    finally:
        system.stop()
    return all_tries, results, lukewarm, errors


def run_systems(
    chosen: Sequence[type[System]], dataset: Dataset, sqls: Sequence[str], tries: int, *, progress: bool
) -> dict[str, Outcome]:
    """Every chosen system on the data, one after the other, by name (a progress bar if asked)."""
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(chosen) * len(sqls) * tries, unit="try", desc="ClickBench")
    outcomes: dict[str, Outcome] = {}
    for kind in chosen:
        system = kind(dataset)
        if bar is not None:
            bar.set_description(system.name)
        outcomes[system.name] = Outcome(system, *run_system(system, sqls, tries, bar))
    if bar is not None:
        bar.close()
    return outcomes


def check_answers(
    outcomes: dict[str, Outcome], dataset: Dataset, numbers: Sequence[int], sqls: Sequence[str]
) -> tuple[dict[str, list[int]], list[str], list[str]]:
    """Every system's answers against the baseline's: the queries that differ by system, the notes
    (errors and differences), and the known differences (shown, not failing)."""
    base_results = outcomes[BASELINE].results
    baseline_con = duckdb.connect(":memory:")
    view = (QUERIES.parent / "create_duckdb_view.sql").read_text(encoding="utf-8")
    for statement in view.replace("'hits.parquet'", f"'{dataset.single}'").split(";"):
        if statement.strip():
            baseline_con.execute(statement)
    mismatches: dict[str, list[int]] = {}
    notes: list[str] = []
    known: list[str] = []
    for name, outcome in outcomes.items():
        system = outcome.system
        notes += [f"{name}: {error}" for error in outcome.errors]
        if name == BASELINE:
            continue
        for index, (number, sql) in enumerate(zip(numbers, sqls, strict=True)):
            expected, actual = base_results[index], outcome.results[index]
            if expected is None or actual is None:
                continue
            verdict = compare(
                sql,
                expected,
                actual,
                functools.partial(_full_result, baseline_con, sql),
                system.own_columns,
            )
            own = [c for c in actual.column_names if c not in system.own_columns or c in expected.column_names]
            if name.startswith("arcs") and own != expected.column_names:
                verdict = type(verdict)(False, f"column names {actual.column_names} != {expected.column_names}")
            if not verdict.equal and (name, number) in KNOWN_DIFFERENCES:
                known.append(f"{name}: Q{number} differs from {BASELINE} (known: {KNOWN_DIFFERENCES[name, number]})")
            elif not verdict.equal:
                mismatches.setdefault(name, []).append(number)
                notes.append(f"{name}: Q{number} differs from {BASELINE}: {verdict.reason}")
    return mismatches, notes, known


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clickbench.harness", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--work-dir", type=Path, default=DEFAULT_WORK, help="generated data, kept per size")
    parser.add_argument("--out", type=Path, help="results folder (default clickbench/results/<host>-<date>-<rows>)")
    parser.add_argument("--tries", type=int, default=3, help="1 cold + N-1 hot")
    parser.add_argument("--systems", default=",".join(s.name for s in ALL), help="comma-separated")
    parser.add_argument("--queries", default="", help="e.g. 1,5,29 (default: all 43)")
    parser.add_argument("--no-chart", action="store_true")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    date = dt.datetime.now(dt.UTC).date().isoformat()
    names = args.systems.split(",")
    # "arcs" is our path on both layouts: loaded through the write API (arcs-api) and placed (arcs).
    chosen = [s for s in ALL if s.name in names or ("arcs" in names and s.name.startswith("arcs-"))]
    if BASELINE not in [s.name for s in chosen]:
        parser.error(f"{BASELINE} is the baseline every result is checked against; include it")
    numbers = [int(n) for n in args.queries.split(",")] if args.queries else list(range(1, 44))
    sqls = [scale_query(queries()[n - 1], args.rows) for n in numbers]

    print(f"ClickBench-shaped data: {args.rows:,} rows (work dir {args.work_dir})", flush=True)
    load_started = time.perf_counter()
    dataset = prepare(args.rows, args.work_dir)
    print(f"  ready in {time.perf_counter() - load_started:.0f} s", flush=True)

    outcomes = run_systems(chosen, dataset, sqls, args.tries, progress=not args.no_progress)
    mismatches, notes, known = check_answers(outcomes, dataset, numbers, sqls)
    results = [
        report.SystemResult(
            name, o.system.title, o.system.tags, o.tries, o.system.load_time, o.system.data_size, o.lukewarm
        )
        for name, o in outcomes.items()
    ]
    title = f"ClickBench-shaped hits, {args.rows:,} rows, {_machine()}, {date}"
    text = report.table(results, BASELINE, mismatches, numbers)
    print()
    print(title)
    print(text)
    for note in notes + known:
        print("  " + note)

    out = args.out or Path(__file__).resolve().parent / "results" / f"{platform.node() or 'local'}-{date}-{args.rows}"
    out.mkdir(parents=True, exist_ok=True)
    for result in results:
        report.write_json(result, out, _machine(), date)
    (out / "comparison.md").write_text(
        f"# {title}\n\nCommand: `python -m clickbench.harness --rows {args.rows}`\n\n{text}\n"
        + "".join(f"- {note}\n" for note in notes + known),
        encoding="utf-8",
    )
    if not args.no_chart:
        report.chart(results, out / "comparison.png", title)
    print(f"\nresults in {out}")
    return 1 if mismatches or notes else 0


if __name__ == "__main__":
    raise SystemExit(main())
