"""InfluxDB 1.x beside ``arcs serve``: the same line-protocol points, the same clients, the same dashboards.

    uv run python -m benchmarks.influx_peer [--points 5000000] [--clients 4] [--runs 5]   (make bench-influx)

Starts ``influxd`` (Debian's ``influxdb`` package, 1.6.7 here; its own temporary directories and
ports, authentication off) and ``arcs serve`` (a temporary data directory) side by side, then:

1. generates the points once: ``cpu`` with tags ``host`` (100) and ``region`` (5), fields
   ``usage_user``, ``usage_system`` (floats) and ``procs`` (integer), one point a second across the
   hosts over 58 days from 2026-06-01 (a Monday and a month's first day, so week and month buckets
   start on the data's first point); fewer points spread the same 58 days;
2. writes them from ``--clients`` HTTP clients in bodies of ``--batch`` lines to InfluxDB's
   ``/write`` and then to ours (the same 1.x endpoint, the token as the password), one server at a
   time so they do not share the two cores, and waits until each answers ``count`` with every
   point: ingest rows/s to the last acknowledgement and to queryable, and per CPU second of the
   server process;
3. triggers our compaction through its route and waits until the run is done and no partition is
   a candidate, as a user's data would be compacted before the dashboards ask;
4. runs each dashboard query of a standard set, InfluxQL on InfluxDB and SQL on ours (JSON over
   HTTP, as Grafana's datasources ask), one untimed try then ``--runs`` timed ones, and compares the
   answers (floats within 1e-9 relative): a day of hourly means per host, 30 days of daily max per
   region, last value per host over a day, Grafana's ``$__timeGroup`` forms (``time_bucket``,
   ``date_trunc``, and the epoch arithmetic of Grafana's PostgreSQL macro), calendar buckets (day,
   Monday weeks, months: InfluxQL has no month, so that row has no InfluxDB figure);
5. runs the calendar buckets in DuckDB alone over the very files our catalog lists, ``time`` as
   stored (``TIMESTAMP_NS``) and cast to a plain ``TIMESTAMP``: what the bucketing costs without
   our request path, on the type the issue compared against.

Prints a table of medians and ratios (InfluxDB / ours: above 1 we are faster). Figures are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import functools
import math
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from benchmarks.influx_peer_servers import servers, write_all
from benchmarks.influx_peer_workload import CALENDAR, DAYS, HOSTS, bodies, dashboards

Rows = list[tuple[object, ...]]


def _seconds(value: object) -> object:
    """A bucket's time as Unix seconds (RFC 3339 text from our JSON, a number from InfluxDB's)."""
    if isinstance(value, str) and len(value) >= 20 and value[4] == "-" and value[10] == "T":
        whole, _, rest = value.rstrip("Z").partition(".")
        moment = datetime.fromisoformat(whole).replace(tzinfo=UTC)
        return int(moment.timestamp()) + (float("0." + rest) if rest else 0)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def from_influx(series: list[dict[str, Any]]) -> Rows:
    """InfluxDB's series as rows: the tag's value (when grouped by one), time, the value."""
    rows: Rows = []
    for item in series:
        tags = list(dict(item.get("tags") or {}).values())
        for values in item["values"]:
            rows.append((*tags, *(_seconds(value) for value in values)))
    return sorted(rows, key=_sort_key)


def from_arcs(answer: dict[str, Any]) -> Rows:
    data: list[list[object]] = answer["data"]
    return sorted((tuple(_seconds(value) for value in row) for row in data), key=_sort_key)


def _sort_key(row: tuple[object, ...]) -> tuple[str, ...]:
    return tuple(f"{value:020.3f}" if isinstance(value, int | float) else str(value) for value in row)


def same(left: Rows, right: Rows) -> str | None:
    """None when equal (floats within 1e-9 relative), else what differs first."""
    if len(left) != len(right):
        return f"{len(left)} rows against {len(right)}"
    for a, b in zip(left, right, strict=True):
        if len(a) != len(b):
            return f"row {a} against {b}"
        for x, y in zip(a, b, strict=True):
            if isinstance(x, int | float) and isinstance(y, int | float):
                if not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9):
                    return f"row {a} against {b}"
            elif x != y:
                return f"row {a} against {b}"
    return None


def _unix(value: object) -> object:
    """DuckDB's naive datetimes (UTC wall clocks) as Unix seconds, as the other answers give them."""
    return int(value.replace(tzinfo=UTC).timestamp()) if isinstance(value, datetime) else value


def timed(run: Callable[[], Any], runs: int) -> tuple[float, Any]:
    first = run()  # untimed: caches warm, as on a dashboard's refresh
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times), first


def duckdb_alone(files: list[str], sql: str, runs: int, plain: bool) -> tuple[float, Rows]:
    """``sql`` in DuckDB over ``files``: ``time`` as stored, or cast to a plain ``TIMESTAMP`` first."""
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET TimeZone = 'UTC'")
        listed = ", ".join("'" + path.replace("'", "''") + "'" for path in files)
        source = f"read_parquet([{listed}], union_by_name = true)"
        con.execute(f"CREATE TABLE stored AS SELECT * FROM {source}")
        column = "time::TIMESTAMP AS time" if plain else "time"
        con.execute(f"CREATE TABLE cpu AS SELECT * EXCLUDE (time), {column} FROM stored")
        con.execute("DROP TABLE stored")
        median, rows = timed(lambda: con.execute(sql).fetchall(), runs)
        return median, sorted((tuple(map(_unix, row)) for row in rows), key=_sort_key)
    finally:
        con.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.influx_peer", description=__doc__.split("\n")[0])
    parser.add_argument("--points", type=int, default=5_000_000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--batch", type=int, default=5000, help="lines per write request")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per query (after one untimed)")
    parser.add_argument("--keep", type=Path, help="keep both servers' data in this directory")
    args = parser.parse_args(argv)
    if shutil.which("influxd") is None:
        parser.error("influxd is not installed (apt-get install -y influxdb; make bench-influx does it)")

    print(f"generating {args.points:,} points ({HOSTS} hosts, {DAYS} days) ...", flush=True)
    payloads = bodies(args.points, args.batch)
    megabytes = sum(map(len, payloads)) / 1e6
    print(f"  {len(payloads)} bodies of {args.batch} lines, {megabytes:.0f} MB", flush=True)
    root = args.keep or Path(tempfile.mkdtemp(prefix="influx-peer-"))
    root.mkdir(parents=True, exist_ok=True)
    failures = 0
    try:
        with servers(root) as (influx, arcs):
            print(f"InfluxDB {influx.version()} on :{influx.port}, arcs serve on :{arcs.port}", flush=True)
            ingests = {}
            for server in (influx, arcs):
                ingests[server.name] = write_all(server, payloads, args.clients, args.points)
                i = ingests[server.name]
                print(
                    f"  {server.name}: acknowledged in {i.acknowledged_s:.1f} s, queryable in {i.queryable_s:.1f} s, "
                    f"{i.cpu_s:.1f} CPU s",
                    flush=True,
                )
            seconds, jobs = arcs.compact()
            files = arcs.files()
            print(f"  arcs compaction: {jobs} jobs in {seconds:.1f} s; cpu has {len(files)} files", flush=True)

            print(f"\nIngest, {args.points:,} points from {args.clients} clients in bodies of {args.batch} lines")
            print(f"{'':>14} {'acked rows/s':>14} {'queryable rows/s':>17} {'rows per CPU s':>15}")
            for name, i in ingests.items():
                print(
                    f"{name:>14} {args.points / i.acknowledged_s:>14,.0f} {args.points / i.queryable_s:>17,.0f} "
                    f"{args.points / i.cpu_s:>15,.0f}"
                )
            ratio = ingests["InfluxDB"].queryable_s / ingests["arcs"].queryable_s
            per_core = ingests["InfluxDB"].cpu_s / ingests["arcs"].cpu_s
            print(f"{'ours / theirs':>14} {'':>14} {ratio:>16.2f}x {per_core:>14.2f}x")

            print(f"\nDashboards: median of {args.runs} hot runs (ms); ratio = InfluxDB / ours (> 1: we are faster)")
            print(f"{'query':<54} {'InfluxDB':>9} {'ours':>9} {'ratio':>6}  answer")
            timings: dict[str, float] = {}
            for board in dashboards():
                ours, answer = timed(functools.partial(arcs.sql, board.sql), args.runs)
                timings[board.name] = ours
                ours_rows = from_arcs(answer)
                if board.influxql is None:
                    print(f"{board.name:<54} {'-':>9} {ours * 1000:>9.1f} {'-':>6}  {len(ours_rows)} rows")
                    continue
                theirs, series = timed(functools.partial(influx.influxql, board.influxql), args.runs)
                verdict = same(from_influx(series), ours_rows)
                failures += verdict is not None
                print(
                    f"{board.name:<54} {theirs * 1000:>9.1f} {ours * 1000:>9.1f} {theirs / ours:>6.2f}  "
                    + (f"equal, {len(ours_rows)} rows" if verdict is None else f"DIFFERS: {verdict}"),
                    flush=True,
                )

            print("\nCalendar buckets: DuckDB alone over the same files, in-memory (ms)")
            print(f"{'query':<54} {'stored':>9} {'TIMESTAMP':>9} {'ours':>9}  answer")
            for board in dashboards():
                if not board.name.startswith(CALENDAR):
                    continue
                stored, stored_rows = duckdb_alone(files, board.sql, args.runs, plain=False)
                plain, plain_rows = duckdb_alone(files, board.sql, args.runs, plain=True)
                verdict = same(stored_rows, plain_rows) or same(stored_rows, from_arcs(arcs.sql(board.sql)))
                failures += verdict is not None
                print(
                    f"{board.name:<54} {stored * 1000:>9.1f} {plain * 1000:>9.1f} {timings[board.name] * 1000:>9.1f}  "
                    + ("equal" if verdict is None else f"DIFFERS: {verdict}"),
                    flush=True,
                )
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
