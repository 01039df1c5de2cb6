"""Continuous query definitions: what a client may send, intervals and their windows, and the one
substitution made in a query's text (``{start_time}`` / ``{end_time}``).

Windows are aligned to the interval counted from the Unix epoch, so ``1h`` windows start on the
hour and ``1d`` windows at 00:00 UTC; a window is ``[start, end)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from arcs.errors import BadRequest
from arcs.names import check_database, check_measurement
from arcs.ports import ContinuousQuery
from arcs.query.sql_tree import check_sql_size

NAME_RULE = re.compile(r"[a-zA-Z][a-zA-Z0-9_-]{0,127}")
INTERVAL_RULE = re.compile(r"([1-9][0-9]{0,6})([smhd])")
INTERVAL_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_INTERVAL_S = 366 * 86400
MAX_DESCRIPTION_CHARS = 1024
MAX_TAG_COLUMNS = 64
MAX_DAYS = 100 * 366
START_TIME = "start_time"
END_TIME = "end_time"
# A placeholder may be written bare or inside quotes ('{start_time}'); either way it becomes one
# typed literal. Nothing else in the query's text is ever touched.
_PLACEHOLDER = re.compile(r"'\{(start_time|end_time)\}'|\{(start_time|end_time)\}")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
US_PER_S = 1_000_000

REQUIRED_FIELDS = ("name", "database", "source_measurement", "destination_measurement", "query", "interval")
OPTIONAL_FIELDS = ("description", "tag_columns", "retention_days", "delete_source_after_days", "is_active")
FIELDS = REQUIRED_FIELDS + OPTIONAL_FIELDS


def parse_interval(value: object) -> int:
    """``"5m"`` -> 300 (seconds): a whole number and one of s, m, h, d; from 1 s to 366 days."""
    match = INTERVAL_RULE.fullmatch(value) if isinstance(value, str) else None
    seconds = int(match[1]) * INTERVAL_UNITS_S[match[2]] if match else 0
    if not 0 < seconds <= MAX_INTERVAL_S:
        raise BadRequest(
            f"invalid interval {_show(value)}: use a whole number and a unit (s, m, h, d), like '1m', '5m', '1h' "
            "or '1d', of at most 366 days"
        )
    return seconds


def window_start(time_us: int, interval_s: int) -> int:
    """The start of the aligned window holding ``time_us``."""
    return time_us - time_us % (interval_s * US_PER_S)


def window_after(start_us: int, interval_s: int) -> tuple[int, int]:
    """The window that begins at ``start_us``: up to the next boundary (a whole window when aligned)."""
    return start_us, window_start(start_us, interval_s) + interval_s * US_PER_S


def rfc3339(time_us: int) -> str:
    moment = _EPOCH + timedelta(microseconds=time_us)
    text = moment.isoformat(timespec="microseconds" if time_us % US_PER_S else "seconds")
    return text.replace("+00:00", "Z")


def micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def parse_time(value: object, field: str) -> int:
    """An RFC3339 timestamp (a time without a zone is UTC) -> epoch microseconds."""
    if not isinstance(value, str) or not value:
        raise BadRequest(f"'{field}' is required: an RFC3339 timestamp like '2024-01-01T00:00:00Z'")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise BadRequest(
            f"'{field}' is not an RFC3339 timestamp: {_show(value)} (like '2024-01-01T00:00:00Z')"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return micros(moment)


def substitute(query: str, start_us: int, end_us: int) -> str:
    """The query with its placeholders replaced by ``TIMESTAMPTZ '<RFC3339>'`` literals."""
    values = {START_TIME: _literal(start_us), END_TIME: _literal(end_us)}
    return _PLACEHOLDER.sub(lambda match: values[match[1] or match[2]], query)


def _literal(time_us: int) -> str:
    return f"TIMESTAMPTZ '{rfc3339(time_us)}'"


def write_id(query_id: int, start_us: int, end_us: int, execution_id: str | None = None) -> str:
    """The write id of a window's result: the same for every run of a scheduled window, so the
    ingest protocol stores it once (docs/ingest.md); a manual execute adds its own execution id."""
    base = f"cq-{query_id}-{start_us}-{end_us}"
    return base if execution_id is None else f"{base}-{execution_id}"


@dataclass(frozen=True, slots=True)
class Definition:
    """A continuous query as a request describes it, checked field by field (not yet against SQL)."""

    query: ContinuousQuery

    @classmethod
    def for_create(cls, document: Mapping[str, object], query_id: int, now: datetime) -> Definition:
        missing = [name for name in REQUIRED_FIELDS if document.get(name) is None]
        if missing:
            raise BadRequest(f"missing required field(s): {', '.join(missing)}")
        return cls(_checked(document, query_id, now, now))

    @classmethod
    def for_update(cls, current: ContinuousQuery, document: Mapping[str, object], now: datetime) -> Definition:
        """The stored definition with the fields ``document`` gives replaced (PUT and PATCH alike)."""
        if "database" in document and document["database"] != current.database:
            raise BadRequest("a continuous query's database cannot change: create one in the other database")
        merged = {**definition_fields(current), **document}
        return cls(replace(_checked(merged, current.query_id, current.created_at, now), version=current.version))


def definition_fields(query: ContinuousQuery) -> dict[str, object]:
    """The definition's fields, as a client sends them (docs/continuous-queries.md "The definition")."""
    return {
        "name": query.name,
        "description": query.description,
        "database": query.database,
        "source_measurement": query.source_measurement,
        "destination_measurement": query.destination_measurement,
        "query": query.query,
        "interval": query.interval,
        "tag_columns": list(query.tag_columns),
        "retention_days": query.retention_days,
        "delete_source_after_days": query.delete_source_after_days,
        "is_active": query.is_active,
    }


def _checked(document: Mapping[str, object], query_id: int, created_at: datetime, now: datetime) -> ContinuousQuery:
    unknown = sorted(str(name) for name in document if name not in FIELDS)
    if unknown:
        raise BadRequest(f"unknown field(s): {', '.join(unknown)}; the fields are {', '.join(FIELDS)}")
    name = document["name"]
    if not isinstance(name, str) or not NAME_RULE.fullmatch(name):
        raise BadRequest(f"invalid name {_show(name)}: must match ^[a-zA-Z][a-zA-Z0-9_-]{{0,127}}$")
    source = check_measurement(document["source_measurement"])
    destination = check_measurement(document["destination_measurement"])
    if source == destination:
        raise BadRequest(
            "source_measurement and destination_measurement must differ: a query writing into what it reads "
            "would read its own results"
        )
    return ContinuousQuery(
        query_id=query_id,
        name=name,
        description=_description(document.get("description")),
        database=check_database(document["database"]),
        source_measurement=source,
        destination_measurement=destination,
        query=_query_text(document["query"]),
        interval=str(document["interval"]),
        interval_s=parse_interval(document["interval"]),
        tag_columns=_tag_columns(document.get("tag_columns")),
        retention_days=_days(document.get("retention_days"), "retention_days"),
        delete_source_after_days=_days(document.get("delete_source_after_days"), "delete_source_after_days"),
        is_active=_flag(document.get("is_active", True), "is_active"),
        created_at=created_at,
        updated_at=now,
    )


def _query_text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadRequest("'query' must be a non-empty SQL string")
    check_sql_size(value)
    found = {match[1] or match[2] for match in _PLACEHOLDER.finditer(value)}
    missing = [f"{{{name}}}" for name in (START_TIME, END_TIME) if name not in found]
    if missing:
        raise BadRequest(
            f"'query' must contain {{start_time}} and {{end_time}} (it lacks {' and '.join(missing)}): they bound "
            "each run to its window, e.g. WHERE time >= {start_time} AND time < {end_time}"
        )
    return value


def _description(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_DESCRIPTION_CHARS:
        raise BadRequest(f"'description' must be a string of at most {MAX_DESCRIPTION_CHARS} characters")
    return value


def _tag_columns(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_TAG_COLUMNS:
        raise BadRequest(f"'tag_columns' must be a list of at most {MAX_TAG_COLUMNS} column names")
    for column in value:
        if not isinstance(column, str) or not column or column == "time":
            raise BadRequest(f"'tag_columns': {_show(column)} is not a column name that can be a tag")
    return tuple(dict.fromkeys(value))


def _days(value: object, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_DAYS:
        raise BadRequest(f"'{field}' must be a whole number of days from 1 to {MAX_DAYS}, or null")
    return value


def _flag(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise BadRequest(f"'{field}' must be true or false")
    return value


def _show(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
