"""Retention rules derived from continuous queries, at run time (docs/continuous-queries.md).

Nothing is stored: each retention run reads the active definitions and their progress marks and
derives the rules afresh, so they never drift from the definitions.

- ``retention_days`` keeps the destination as a retention policy of the destination measurement
  would, with the default buffer: its hour partitions ending by ``now - retention_days - 7 d`` go.
- ``delete_source_after_days`` removes source partitions ending by ``now - N days``, but never one
  that an active query reading the source has not processed yet: the cutoff is also at most each
  such query's mark, aligned down to an hour. A query that has not processed a window since its
  creation holds the whole source back.

Several queries setting a field for the same measurement: the longest period applies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from arcs import layout
from arcs.continuous_queries.definitions import micros, substitute
from arcs.errors import BadRequest
from arcs.lifecycle.cutoffs import DEFAULT_BUFFER_DAYS, days_cutoff
from arcs.ports import ContinuousQuery, ContinuousQueryStore
from arcs.query.rewriter import table_references

RuleField = Literal["retention_days", "delete_source_after_days"]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class DerivedRule:
    """Remove ``measurement``'s hour partitions ending at or before ``limit`` (None: none may go)."""

    field: RuleField
    database: str
    measurement: str
    query_ids: tuple[int, ...]  # the queries whose ``field`` made the rule
    limit: datetime | None
    limited_by: str  # what put the limit where it is, for the run's report


def derived_rules(catalog: ContinuousQueryStore, now: datetime) -> list[DerivedRule]:
    """Every rule the active continuous queries imply at ``now``."""
    queries = catalog.list_continuous_queries()
    sources = _source_measurements(queries)
    # Marks only of the queries that can hold a source back: the others need no read.
    marks = {
        query.query_id: catalog.get_cq_progress(query.query_id)
        for query in queries
        if query.is_active and any(reads(query, *source) for source in sources)
    }
    return destination_rules(queries, now) + source_rules(queries, marks, now)


def destination_rules(queries: Sequence[ContinuousQuery], now: datetime) -> list[DerivedRule]:
    """``retention_days`` of the active queries, one rule per destination measurement."""
    days: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for query in queries:
        if query.is_active and query.retention_days is not None:
            key = (query.database, query.destination_measurement)
            days.setdefault(key, []).append((query.query_id, query.retention_days))
    rules: list[DerivedRule] = []
    for (database, measurement), setters in sorted(days.items()):
        longest = max(d for _, d in setters)
        rules.append(
            DerivedRule(
                "retention_days",
                database,
                measurement,
                tuple(sorted(q for q, _ in setters)),
                days_cutoff(now, longest, DEFAULT_BUFFER_DAYS),
                f"retention_days {longest} + buffer_days {DEFAULT_BUFFER_DAYS}",
            )
        )
    return rules


def source_rules(
    queries: Sequence[ContinuousQuery], marks: Mapping[int, int | None], now: datetime
) -> list[DerivedRule]:
    """``delete_source_after_days`` of the active queries, one rule per source measurement, each
    clamped to what every active query reading that source has processed (``marks``, by id)."""
    rules: list[DerivedRule] = []
    for database, measurement in sorted(_source_measurements(queries)):
        setters = [
            query
            for query in queries
            if query.is_active
            and query.delete_source_after_days is not None
            and (query.database, query.source_measurement) == (database, measurement)
        ]
        longest = max(query.delete_source_after_days or 0 for query in setters)
        limit: datetime | None = now - timedelta(days=longest)
        limited_by = f"delete_source_after_days {longest}"
        for reader in sorted((q for q in queries if q.is_active and reads(q, database, measurement)), key=_id):
            processed = processed_until(reader, marks.get(reader.query_id))
            if processed is None:
                limit, limited_by = None, f"continuous query {reader.query_id} has not processed a window yet"
                break
            if limit is not None and processed < limit:
                limit, limited_by = processed, f"processed mark of continuous query {reader.query_id}"
        ids = tuple(sorted(query.query_id for query in setters))
        rules.append(DerivedRule("delete_source_after_days", database, measurement, ids, limit, limited_by))
    return rules


def processed_until(query: ContinuousQuery, mark_us: int | None) -> datetime | None:
    """The hour boundary before which the schedule is done with ``query``'s source; None while its
    mark has not moved past its creation (it has processed nothing) or it has no mark (deleted)."""
    if mark_us is None or mark_us <= micros(query.created_at):
        return None
    return layout.floor_hour(_EPOCH + timedelta(microseconds=mark_us))


def reads(query: ContinuousQuery, database: str, measurement: str) -> bool:
    """Whether ``query`` reads ``measurement``: its source, or any table its SQL names (a join)."""
    if query.database != database:
        return False
    if query.source_measurement == measurement:
        return True
    try:
        refs = table_references(substitute(query.query, 0, 0))
    except BadRequest:
        return True  # SQL it cannot read: assume it reads everything rather than delete under it
    return any(ref.measurement == measurement and ref.database in (None, database) for ref in refs)


def _source_measurements(queries: Iterable[ContinuousQuery]) -> set[tuple[str, str]]:
    return {
        (query.database, query.source_measurement)
        for query in queries
        if query.is_active and query.delete_source_after_days is not None
    }


def _id(query: ContinuousQuery) -> int:
    return query.query_id
