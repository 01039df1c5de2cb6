"""The storage layout, in one place.

Data files live at ``{prefix}/{database}/{measurement}/{YYYY}/{MM}/{DD}/{HH}/{file}.parquet``,
Arc's own layout. Everything that is not a data file lives under ``{prefix}/_arcs/``: database
names must start with a letter, so no data glob can ever reach it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from arcs.names import check_database, check_measurement

SYSTEM_DIR = "_arcs"
#: Results too big for a Lambda response, waiting for their download (a lifecycle rule expires them).
RESULTS_DIR = "results"
_KEY_RE = re.compile(
    r"(?P<db>[^/]+)/(?P<m>[^/]+)/(?P<y>\d{4})/(?P<mo>\d{2})/(?P<d>\d{2})/(?P<h>\d{2})/(?P<f>[^/]+\.parquet)"
)


@dataclass(frozen=True, slots=True)
class DataKey:
    database: str
    measurement: str
    hour: datetime  # UTC, truncated to the hour
    filename: str


def floor_hour(ts: datetime) -> datetime:
    return ts.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def hour_from_micros(micros: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros - micros % 3_600_000_000)


def hour_dir(hour: datetime) -> str:
    return hour.strftime("%Y/%m/%d/%H")


def _join(prefix: str, rest: str) -> str:
    prefix = prefix.strip("/")
    return f"{prefix}/{rest}" if prefix else rest


def data_key(prefix: str, database: str, measurement: str, hour: datetime, filename: str) -> str:
    check_database(database)
    check_measurement(measurement)
    if "/" in filename or not filename.endswith(".parquet"):
        raise ValueError(f"bad data file name {filename!r}")
    return _join(prefix, f"{database}/{measurement}/{hour_dir(floor_hour(hour))}/{filename}")


def measurement_prefix(prefix: str, database: str, measurement: str) -> str:
    return _join(prefix, f"{database}/{measurement}/")


def parse_data_key(prefix: str, key: str) -> DataKey:
    stripped = prefix.strip("/")
    rest = key[len(stripped) + 1 :] if stripped and key.startswith(stripped + "/") else key
    match = _KEY_RE.fullmatch(rest)
    if match is None:
        raise ValueError(f"not a data key: {key!r}")
    hour = datetime(int(match["y"]), int(match["mo"]), int(match["d"]), int(match["h"]), tzinfo=UTC)
    return DataKey(match["db"], match["m"], hour, match["f"])


def system_key(prefix: str, *parts: str) -> str:
    """A key outside every data prefix (claim checks, manifests, quarantine)."""
    return _join(prefix, "/".join((SYSTEM_DIR, *parts)))


def result_key(prefix: str, result_id: str, extension: str) -> str:
    """Where a handed-off query result waits for its download: ``{prefix}/_arcs/results/{id}.{extension}``."""
    if not result_id.isalnum() or not extension.isalnum():
        raise ValueError(f"bad result name {result_id!r}.{extension!r}")
    return system_key(prefix, RESULTS_DIR, f"{result_id}.{extension}")
