"""The InfluxDB peer benchmark's workload: the ``cpu`` points, as line-protocol bodies, and the
dashboard queries, InfluxQL and SQL side by side (``benchmarks/influx_peer.py``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

HOSTS = 100
REGIONS = ("us-east", "us-west", "eu-central", "eu-west", "ap-south")
START = datetime(2026, 6, 1, tzinfo=UTC)
DAYS = 58


# --- the points -------------------------------------------------------------------------------


def bodies(points: int, batch: int, seed: int = 7) -> list[bytes]:
    """The points as line protocol (seconds), in bodies of ``batch`` lines, in time order."""
    rng = random.Random(seed)
    start = int(START.timestamp())
    step = DAYS * 86_400 / points
    out: list[bytes] = []
    lines: list[str] = []
    for index in range(points):
        host = index % HOSTS
        lines.append(
            f"cpu,host=host{host:03d},region={REGIONS[host % len(REGIONS)]} "
            f"usage_user={rng.random() * 100!r},usage_system={rng.random() * 50!r},procs={rng.randrange(500)}i "
            f"{start + int(index * step)}"
        )
        if len(lines) == batch:
            out.append("\n".join(lines).encode())
            lines = []
    if lines:
        out.append("\n".join(lines).encode())
    return out


# --- the dashboards ---------------------------------------------------------------------------


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Dashboard:
    name: str
    sql: str
    influxql: str | None  # None: InfluxQL cannot ask it (months)


def dashboards() -> list[Dashboard]:
    end = START + timedelta(days=DAYS)
    day, month = end - timedelta(days=1), end - timedelta(days=30)
    week, six = end - timedelta(days=7), end - timedelta(hours=6)

    def between(since: datetime, until: datetime = end) -> tuple[str, str]:
        return (
            f"time >= '{_iso(since)}' AND time < '{_iso(until)}'",
            f"time >= '{_iso(since)}' AND time < '{_iso(until)}'",
        )

    d_sql, d_iql = between(day)
    m_sql, m_iql = between(month)
    w_sql, w_iql = between(week)
    s_sql, s_iql = between(six)
    a_sql, a_iql = between(START)
    return [
        Dashboard(
            "1 day, hourly mean per host",
            f"SELECT host, time_bucket(INTERVAL 1 HOUR, time) AS time, avg(usage_user) AS mean FROM cpu "
            f"WHERE {d_sql} GROUP BY 1, 2 ORDER BY 1, 2",
            f"SELECT mean(usage_user) FROM cpu WHERE {d_iql} GROUP BY time(1h), host fill(none)",
        ),
        Dashboard(
            "30 days, daily max per region",
            f"SELECT region, time_bucket(INTERVAL 1 DAY, time) AS time, max(usage_user) AS max FROM cpu "
            f"WHERE {m_sql} GROUP BY 1, 2 ORDER BY 1, 2",
            f"SELECT max(usage_user) FROM cpu WHERE {m_iql} GROUP BY time(1d), region fill(none)",
        ),
        Dashboard(
            "last value per host (1 day)",
            f"SELECT host, max(time) AS time, arg_max(usage_user, time) AS last FROM cpu WHERE {d_sql} "
            f"GROUP BY host ORDER BY host",
            f"SELECT last(usage_user) FROM cpu WHERE {d_iql} GROUP BY host",
        ),
        Dashboard(
            "6 h, $__timeGroup 1m mean per region (time_bucket)",
            f"SELECT region, time_bucket(INTERVAL '1 minute', time) AS time, avg(usage_system) AS mean FROM cpu "
            f"WHERE {s_sql} GROUP BY 1, 2 ORDER BY 1, 2",
            f"SELECT mean(usage_system) FROM cpu WHERE {s_iql} GROUP BY time(1m), region fill(none)",
        ),
        Dashboard(
            "7 days, $__timeGroup 1h mean per region (date_trunc)",
            f"SELECT region, date_trunc('hour', time) AS time, avg(usage_user) AS mean FROM cpu "
            f"WHERE {w_sql} GROUP BY 1, 2 ORDER BY 1, 2",
            f"SELECT mean(usage_user) FROM cpu WHERE {w_iql} GROUP BY time(1h), region fill(none)",
        ),
        Dashboard(
            "7 days, $__timeGroup 5m max (PostgreSQL's epoch form)",
            f"SELECT floor(extract(epoch FROM time) / 300) * 300 AS time, max(usage_user) AS max FROM cpu "
            f"WHERE {w_sql} GROUP BY 1 ORDER BY 1",
            f"SELECT max(usage_user) FROM cpu WHERE {w_iql} GROUP BY time(5m) fill(none)",
        ),
        Dashboard(
            "58 days, day buckets: max per region",
            f"SELECT region, date_trunc('day', time) AS time, max(usage_user) AS max FROM cpu "
            f"WHERE {a_sql} GROUP BY 1, 2 ORDER BY 1, 2",
            f"SELECT max(usage_user) FROM cpu WHERE {a_iql} GROUP BY time(1d), region fill(none)",
        ),
        Dashboard(
            "58 days, week buckets (Monday): max per region",
            f"SELECT region, date_trunc('week', time) AS time, max(usage_user) AS max FROM cpu "
            f"WHERE {a_sql} GROUP BY 1, 2 ORDER BY 1, 2",
            # InfluxDB's weeks count from the epoch, a Thursday: four days on is a Monday.
            f"SELECT max(usage_user) FROM cpu WHERE {a_iql} GROUP BY time(1w, 4d), region fill(none)",
        ),
        Dashboard(
            "58 days, month buckets: max per region",
            f"SELECT region, time_bucket(INTERVAL 1 MONTH, time) AS time, max(usage_user) AS max FROM cpu "
            f"WHERE {a_sql} GROUP BY 1, 2 ORDER BY 1, 2",
            None,
        ),
    ]


#: The dashboards DuckDB also runs alone, on the stored files, for the calendar-bucket comparison.
CALENDAR = ("30 days, daily max per region", "58 days, day buckets", "58 days, week buckets", "58 days, month buckets")
