r"""Exact-rewrite benchmark: ClickBench Q29's URL-domain regex vs its exact CASE form, in DuckDB.

    uv run python -m benchmarks.exact_rewrites [--rows 1000000] [--repeat 5]

Builds ``--rows`` synthetic Referer-like strings in DuckDB (about 15 % empty; http/https,
with and without www.; the Q29 domains; paths of 30 to 300 bytes; a few uppercase schemes,
hosts without a slash and newlines), then times, best of ``--repeat``:
  * the expression alone, ``SELECT sum(strlen(<expr>))``, on 1 thread and on all threads,
    for the regex, our exact rewrite and Arc's published (inexact) rewrite;
  * the whole of Q29 (its HAVING threshold scaled to the row count), regex vs exact rewrite.
It also counts the rows where each rewrite differs from the regex (the exact one must show 0).
Figures are printed, never asserted: tests check correctness, this checks speed.
"""

from __future__ import annotations

import argparse
import os
import time

import duckdb

from arcs.query.exact_rewrites import URL_DOMAIN_PATTERN, apply_exact_rewrites, url_domain_case

REGEX = f"regexp_replace(Referer, {URL_DOMAIN_PATTERN}, '\\1')"
# Arc's own rewrite of the regex, prefix by prefix: right for matching strings, not for the others.
ARC = (
    "CASE WHEN Referer LIKE 'https://www.%' THEN split_part(substr(Referer, 13), '/', 1)"
    " WHEN Referer LIKE 'https://%' THEN split_part(substr(Referer, 9), '/', 1)"
    " WHEN Referer LIKE 'http://www.%' THEN split_part(substr(Referer, 12), '/', 1)"
    " WHEN Referer LIKE 'http://%' THEN split_part(substr(Referer, 8), '/', 1)"
    " ELSE Referer END"
)
EXACT = url_domain_case("Referer")
Q29 = (
    f"SELECT REGEXP_REPLACE(Referer, {URL_DOMAIN_PATTERN}, '\\1') AS k, AVG(STRLEN(Referer)) AS l, COUNT(*) AS c, "
    "MIN(Referer) FROM hits WHERE Referer <> '' GROUP BY k HAVING COUNT(*) > {threshold} ORDER BY l DESC LIMIT 25"
)


def build(connection: duckdb.DuckDBPyConnection, rows: int) -> None:
    connection.execute("SELECT setseed(0.29)")
    connection.execute(
        f"""
        CREATE OR REPLACE TABLE hits AS
        SELECT CASE
            WHEN r < 0.15 THEN ''
            WHEN r < 0.151 THEN 'HTTP://' || domain || '/' || path
            WHEN r < 0.153 THEN scheme || www || domain
            WHEN r < 0.154 THEN scheme || www || domain || '/' || path || chr(10) || 'x'
            ELSE scheme || www || domain || '/' || path
        END AS Referer
        FROM (
            SELECT random() AS r,
                (['http://', 'https://', 'http://'])[1 + floor(random() * 3)::INT] AS scheme,
                CASE WHEN random() < 0.4 THEN 'www.' ELSE '' END AS www,
                (['go.mail.ru', 'go.mail.ru', 'go.mail.ru', 'google.ru', 'bonprix.ru', 'e96.ru', 'mysw.info',
                  'yandex.ru', 'kinopoisk.ru', 'auto.ru', 'avito.ru', 'vk.com'])[1 + floor(random() * 12)::INT]
                  AS domain,
                left(repeat(md5(i::VARCHAR) || '/?q=' || md5((i * 7)::VARCHAR), 5), 30 + floor(random() * 270)::INT)
                  AS path
            FROM range({rows}) AS t(i)
        )
        """
    )


def best_of(connection: duckdb.DuckDBPyConnection, sql: str, repeat: int) -> tuple[float, float, list[object]]:
    """Best wall and best CPU seconds over ``repeat`` runs, and the last result."""
    wall = cpu = float("inf")
    result: list[object] = []
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        result = list(connection.execute(sql).fetchall())
        wall = min(wall, time.perf_counter() - started)
        cpu = min(cpu, time.process_time() - started_cpu)
    return wall, cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    connection = duckdb.connect(":memory:")
    build(connection, args.rows)
    stats = connection.execute("SELECT count(*), avg(strlen(Referer)), count(*) FILTER (Referer = '') FROM hits")
    count, mean_length, empty = stats.fetchone() or (0, 0.0, 0)
    print(f"DuckDB {duckdb.__version__}, {os.cpu_count()} CPUs; {count:,} Referer strings, mean {mean_length:.0f} B,")
    print(f"{empty / max(count, 1):.0%} empty\n")

    differences = connection.execute(
        f"SELECT count(*) FILTER ({EXACT} IS DISTINCT FROM {REGEX}), "
        f"count(*) FILTER (({ARC}) IS DISTINCT FROM {REGEX}) FROM hits"
    ).fetchone() or (None, None)
    print(f"rows differing from the regex: exact rewrite {differences[0]:,}, Arc's rewrite {differences[1]:,}\n")

    print("expression alone: SELECT sum(strlen(<expr>)) FROM hits       best wall    best CPU   vs regex")
    threads = os.cpu_count() or 1
    for thread_count in sorted({1, threads}):
        connection.execute(f"SET threads = {thread_count}")
        timings = {
            name: best_of(connection, f"SELECT sum(strlen({expression})) FROM hits", args.repeat)
            for name, expression in (("regex", REGEX), ("exact rewrite", EXACT), ("Arc's rewrite", ARC))
        }
        regex_wall = timings["regex"][0]
        for name, (wall, cpu, _) in timings.items():
            label = f"  {thread_count} thread{'s' if thread_count > 1 else ''}, {name}"
            print(f"{label:<58}{wall * 1000:>9.1f} ms {cpu * 1000:>8.1f} ms {regex_wall / wall:>8.2f}x")

    threshold = max(1, args.rows // 1000)
    q29 = Q29.format(threshold=threshold)
    print(f"\nClickBench Q29 (HAVING COUNT(*) > {threshold:,})                       best wall    best CPU   vs regex")
    for thread_count in sorted({1, threads}):
        connection.execute(f"SET threads = {thread_count}")
        regex_wall, regex_cpu, regex_rows = best_of(connection, q29, args.repeat)
        wall, cpu, rows = best_of(connection, apply_exact_rewrites(q29), args.repeat)
        label = f"  {thread_count} thread{'s' if thread_count > 1 else ''}"
        print(f"{label + ', regex':<58}{regex_wall * 1000:>9.1f} ms {regex_cpu * 1000:>8.1f} ms {1:>8.2f}x")
        print(f"{label + ', exact rewrite':<58}{wall * 1000:>9.1f} ms {cpu * 1000:>8.1f} ms {regex_wall / wall:>8.2f}x")
        print(f"{'':<4}same {len(rows)} result rows as the regex: {rows == regex_rows}")


if __name__ == "__main__":
    main()
