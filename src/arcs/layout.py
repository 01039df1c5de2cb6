"""The storage layout, in one place.

Data files live at ``{prefix}/{database}/{measurement}/{YYYY}/{MM}/{DD}/{HH}/{file}.parquet``,
Arc's own layout; files compaction merged a whole day into sit in the day's directory,
``{prefix}/{database}/{measurement}/{YYYY}/{MM}/{DD}/{file}.parquet``, and a whole month's in the
month's, ``{prefix}/{database}/{measurement}/{YYYY}/{MM}/{file}.parquet`` (docs/compaction.md, "Tiers").
Everything that is not a data file lives under ``{prefix}/_arcs/``: database
names must start with a letter, so no data glob can ever reach it.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from arcs.names import check_database, check_measurement

SYSTEM_DIR = "_arcs"
#: Results too big for a Lambda response, waiting for their download (a lifecycle rule expires them).
RESULTS_DIR = "results"
QUARANTINE_DIR = "quarantine"
IMPORTS_DIR = "imports"
#: Hex digits at the start of a data file's name that order it among its partition's files.
SEQUENCE_LENGTH = 32
_KEY_RE = re.compile(
    r"(?P<db>[^/]+)/(?P<m>[^/]+)/(?P<y>\d{4})/(?P<mo>\d{2})(?:/(?P<d>\d{2})(?:/(?P<h>\d{2}))?)?/(?P<f>[^/]+\.parquet)"
)
#: What a data file spans: an hour partition's file, or a file compaction merged a whole day or month into.
Tier = Literal["hour", "day", "month"]
TIERS: tuple[Tier, ...] = ("hour", "day", "month")
DAY = timedelta(days=1)
#: How many directories below the measurement's a tier's files sit in (year, month, day, hour).
_TIER_DEPTH: dict[Tier, int] = {"hour": 4, "day": 3, "month": 2}


@dataclass(frozen=True, slots=True)
class DataKey:
    database: str
    measurement: str
    hour: datetime  # UTC, truncated to the hour (a day or month file: its span's first hour)
    filename: str
    tier: Tier = "hour"


def tier_of(text: object) -> Tier:
    """A tier's name as stored (a job's journal), "hour" for anything else (journals of before tiers)."""
    return "day" if text == "day" else "month" if text == "month" else "hour"


def floor_hour(ts: datetime) -> datetime:
    return ts.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def floor_day(ts: datetime) -> datetime:
    return ts.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def floor_month(ts: datetime) -> datetime:
    return floor_day(ts).replace(day=1)


def tier_floor(ts: datetime, tier: Tier) -> datetime:
    """The first hour of the ``tier`` span (hour, day or month) that holds ``ts``."""
    return floor_hour(ts) if tier == "hour" else floor_day(ts) if tier == "day" else floor_month(ts)


def tier_end(start: datetime, tier: Tier) -> datetime:
    """Where the ``tier`` span that starts at ``start`` ends (the next one's start)."""
    if tier == "hour":
        return start + timedelta(hours=1)
    if tier == "day":
        return start + DAY
    return floor_month(start.replace(day=28) + timedelta(days=4))


def tier_start(ts: datetime) -> datetime:
    """Where a listing by time must start to find every file that can hold ``ts``: a day or month
    file's record sits at its span's first hour, so a range lists from its month's start."""
    return floor_month(ts)


def key_tier(key: str) -> Tier:
    """What a data key's file spans, from its directories: an hour file's parent is
    ``{YYYY}/{MM}/{DD}/{HH}``, a day file's ``{YYYY}/{MM}/{DD}``, a month file's ``{YYYY}/{MM}``
    (database and measurement names start with a letter, so no number is ever one of them)."""
    parts = key.split("/")[-5:-1]
    depth = 0
    for part in reversed(parts):
        if not part.isdigit():
            break
        depth += 1
    return "month" if depth == 2 else "day" if depth == 3 else "hour"


def hour_from_micros(micros: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros - micros % 3_600_000_000)


def hour_from_nanos(nanos: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(hours=nanos // 3_600_000_000_000)


def hour_dir(hour: datetime) -> str:
    return hour.strftime("%Y/%m/%d/%H")


def _join(prefix: str, rest: str) -> str:
    prefix = prefix.strip("/")
    return f"{prefix}/{rest}" if prefix else rest


def tier_dir(ts: datetime, tier: Tier) -> str:
    """The directory of the ``tier`` span holding ``ts``: ``YYYY/MM/DD/HH``, ``YYYY/MM/DD`` or ``YYYY/MM``."""
    return tier_floor(ts, tier).strftime("/".join(("%Y", "%m", "%d", "%H")[: _TIER_DEPTH[tier]]))


def data_key(prefix: str, database: str, measurement: str, hour: datetime, filename: str, tier: Tier = "hour") -> str:
    check_database(database)
    check_measurement(measurement)
    if "/" in filename or not filename.endswith(".parquet"):
        raise ValueError(f"bad data file name {filename!r}")
    return _join(prefix, f"{database}/{measurement}/{tier_dir(hour, tier)}/{filename}")


def measurement_prefix(prefix: str, database: str, measurement: str) -> str:
    return _join(prefix, f"{database}/{measurement}/")


def parse_data_key(prefix: str, key: str) -> DataKey:
    stripped = prefix.strip("/")
    rest = key[len(stripped) + 1 :] if stripped and key.startswith(stripped + "/") else key
    match = _KEY_RE.fullmatch(rest)
    if match is None:
        raise ValueError(f"not a data key: {key!r}")
    tier: Tier = "month" if match["d"] is None else "day" if match["h"] is None else "hour"
    hour = datetime(int(match["y"]), int(match["mo"]), int(match["d"] or 1), int(match["h"] or 0), tzinfo=UTC)
    return DataKey(match["db"], match["m"], hour, match["f"], tier)


def system_prefix(prefix: str) -> str:
    """The key prefix of everything that is not a data file: ``{prefix}/_arcs/``."""
    return _join(prefix, f"{SYSTEM_DIR}/")


def system_key(prefix: str, *parts: str) -> str:
    """A key outside every data prefix (claim checks, manifests, quarantine)."""
    return _join(prefix, "/".join((SYSTEM_DIR, *parts)))


def result_key(prefix: str, result_id: str, extension: str) -> str:
    """Where a handed-off query result waits for its download: ``{prefix}/_arcs/results/{id}.{extension}``."""
    if not result_id.isalnum() or not extension.isalnum():
        raise ValueError(f"bad result name {result_id!r}.{extension!r}")
    return system_key(prefix, RESULTS_DIR, f"{result_id}.{extension}")


_sequence_lock = threading.Lock()
_last_sequence_us = 0


def sequence_id() -> str:
    """A new id that sorts after every id this process made before, and after ids other processes
    made earlier by more than their clocks' difference: 13 hex digits of microseconds since 1970
    (strictly increasing here), then 19 random ones; 32 hex digits, like a UUID's.

    Ingest names its commits (and so its files) with these, so file names order the writes.
    """
    global _last_sequence_us
    with _sequence_lock:
        _last_sequence_us = max(time.time_ns() // 1000, _last_sequence_us + 1)
        micros = _last_sequence_us
    return f"{micros:013x}{secrets.token_hex(10)[:19]}"


def sequence_time(name: str) -> datetime | None:
    """When the sequence id that starts ``name`` was made (None if it does not start with one)."""
    try:
        micros = int(name[:13], 16)
    except ValueError:
        return None
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)


_INGEST_NAME = re.compile(r"(?P<commit>[0-9a-f]{32})-\d{4}\.parquet")


def ingest_commit_of(name: str) -> str | None:
    """The ingest attempt that wrote a data file named ``{commit id}-{nnnn}.parquet``, else None."""
    match = _INGEST_NAME.fullmatch(name)
    return None if match is None else match["commit"]


def file_order(key: str) -> str:
    """How a data file sorts among its partition's files: later files hold later writes."""
    return key.rsplit("/", 1)[-1]


def compacted_filename(latest_input_key: str, job_id: str, index: int, merged: bool = True, tier: Tier = "hour") -> str:
    """A compaction output's name: it sorts with the latest write it holds (its inputs' last).

    Every file written after the job picked its inputs has a later sequence, so it still sorts
    after the output, and rows written later keep winning when the output is compacted again.
    ``merged`` (a compaction's merge: its outputs hold each point once between them) is ``-c``,
    ``-d`` for a day's merge, ``-m`` for a month's; a rewrite of retention or delete, each output the rest of one
    input, is ``-r``.
    """
    sequence = file_order(latest_input_key)[:SEQUENCE_LENGTH].removesuffix(".parquet")
    marker = _MERGE_MARKERS[tier] if merged else "r"
    return f"{sequence}-{marker}{job_id}-{index:04d}.parquet"


_MERGE_MARKERS: dict[Tier, str] = {"hour": "c", "day": "d", "month": "m"}
_MERGED_NAME = re.compile(r"[0-9a-f]+-[cdm](?P<job>[0-9a-f]+)-\d{4}\.parquet")


def compaction_job_of(name: str) -> str | None:
    """The compaction job whose merge wrote a data file (see ``compacted_filename``), else None."""
    match = _MERGED_NAME.fullmatch(name)
    return None if match is None else match["job"]


def hour_prefix(prefix: str, database: str, measurement: str, hour: datetime) -> str:
    """The key prefix of one hour partition's data files."""
    return _join(prefix, f"{database}/{measurement}/{hour_dir(floor_hour(hour))}/")


def tier_prefix(prefix: str, database: str, measurement: str, ts: datetime, tier: Tier) -> str:
    """The key prefix of one day's or month's data files: its own and, below them, its days' and hours'."""
    return _join(prefix, f"{database}/{measurement}/{tier_dir(ts, tier)}/")


def quarantine_key(prefix: str, key: str) -> str:
    """Where a corrupt data file goes: under the system directory, out of every data glob."""
    stripped = prefix.strip("/")
    rest = key[len(stripped) + 1 :] if stripped and key.startswith(stripped + "/") else key
    return system_key(prefix, QUARANTINE_DIR, rest)
