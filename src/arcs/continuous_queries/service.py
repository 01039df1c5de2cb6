"""Continuous queries: definitions kept in the catalog, windows run on a schedule or on request.

A scheduled run of a window is four steps (docs/continuous-queries.md has the argument):

1. run the query over ``[start, end)`` through ``QueryService``, as a read-only principal of the
   query's database;
2. queue the result as one write whose id is made of (query id, start, end): every run of that
   window queues the same id, and ingest stores an id once (docs/ingest.md);
3. advance the query's progress mark from ``start`` to ``end`` (compare-and-set), only now that
   the write is durable in the queue;
4. record the execution.

A crash anywhere re-runs the window from step 1 with the same write id, so its rows are stored
exactly once; a second runner racing the first loses step 3 and stops.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from arcs import metrics
from arcs.auth.tokens import Principal
from arcs.continuous_queries.definitions import (
    US_PER_S,
    Definition,
    micros,
    rfc3339,
    substitute,
    window_after,
    window_start,
    write_id,
)
from arcs.errors import ArcsError, BadRequest, Conflict, NotFound
from arcs.names import TIME_COLUMN, check_column
from arcs.ports import ContinuousQuery, ContinuousQueryCatalog, CQExecution, CQExecutionKind
from arcs.query.sandbox import check_read_only
from arcs.query.sql_tree import check_sql_size
from arcs.write.batch import TIME_TYPE, MeasurementRows

if TYPE_CHECKING:
    from arcs.query.service import QueryService
    from arcs.write.edge import WriteService

logger = logging.getLogger(__name__)

FaultHook = Callable[[str], None]
#: A window used only to check that a new definition's query parses.
_SAMPLE_WINDOW = (1_700_000_000 * US_PER_S, 1_700_003_600 * US_PER_S)


def _no_fault(step: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class WindowResult:
    """What one run of a query over one range produced (and, unless a dry run, queued)."""

    query: ContinuousQuery
    execution_id: str
    start_us: int
    end_us: int
    sql: str
    rows: pa.Table  # the rows as the destination stores them
    write_id: str | None  # None: a dry run, or nothing to write
    duration_ms: float


@dataclass
class RunSummary:
    """What one ``run_due`` did, for logs and the scheduled function's answer."""

    windows: int = 0
    rows: int = 0
    failed: dict[int, str] = field(default_factory=dict)  # query id -> why its next window failed

    def to_json(self) -> dict[str, object]:
        return {"windows": self.windows, "rows": self.rows, "failed": {str(k): v for k, v in self.failed.items()}}


def principal_of(query: ContinuousQuery) -> Principal:
    """Who a continuous query runs as: a reader of its own database, nothing more."""
    return Principal(f"cq-{query.query_id}", f"continuous query {query.name}", frozenset({"read"}), (query.database,))


class ContinuousQueries:
    def __init__(
        self,
        catalog: ContinuousQueryCatalog,
        queries: QueryService,
        writes: WriteService,
        delay_s: float = 60.0,
        max_windows: int = 60,
        fault: FaultHook = _no_fault,
    ) -> None:
        self.catalog = catalog
        self.queries = queries
        self.writes = writes
        self.delay_us = int(delay_s * US_PER_S)
        self.max_windows = max_windows
        # Tests stop a run between any two steps through this hook.
        self._fault = fault

    # --- definitions -----------------------------------------------------------------------------
    def create(self, document: dict[str, object], now: datetime) -> ContinuousQuery:
        query = Definition.for_create(document, 0, now).query
        self._check_sql(query)
        # The schedule starts with the window holding the moment of creation; older data is a
        # manual execute's (a backfill).
        stored = self.catalog.create_continuous_query(query, window_start(micros(now), query.interval_s))
        if stored is None:
            raise Conflict(f"a continuous query named {query.name!r} already exists in database {query.database!r}")
        return stored

    def update(self, query_id: int, document: dict[str, object], now: datetime) -> ContinuousQuery:
        current = self.get(query_id)
        query = Definition.for_update(current, document, now).query
        self._check_sql(query)
        if query.name != current.name and any(
            other.name == query.name for other in self.catalog.list_continuous_queries(query.database)
        ):
            raise Conflict(f"a continuous query named {query.name!r} already exists in database {query.database!r}")
        if query.is_active and not current.is_active:
            # An inactive period is not caught up: the schedule resumes at the current window
            # (manual executes cover the gap). Moved first: while inactive, no run reads it.
            self.catalog.set_cq_progress(query_id, None, window_start(micros(now), query.interval_s))
        if not self.catalog.update_continuous_query(query, current.version):
            raise Conflict(f"continuous query {query_id} changed meanwhile (or its new name was taken); retry")
        return self.get(query_id)

    def get(self, query_id: int) -> ContinuousQuery:
        query = self.catalog.get_continuous_query(query_id)
        if query is None:
            raise NotFound(f"continuous query {query_id} not found")
        return query

    def delete(self, query_id: int) -> None:
        if not self.catalog.delete_continuous_query(query_id):
            raise NotFound(f"continuous query {query_id} not found")

    def _check_sql(self, query: ContinuousQuery) -> None:
        """The query, its placeholders substituted, is one read-only SELECT of its own database."""
        sql = substitute(query.query, *_SAMPLE_WINDOW)
        check_sql_size(sql)  # as every window's SQL will be: its placeholders become longer literals
        refs = check_read_only(sql).references
        for ref in refs:
            if ref.database is not None and ref.database != query.database:
                raise BadRequest(
                    f"'query' reads {ref.database}.{ref.measurement}: a continuous query reads only its own "
                    f"database ({query.database!r})"
                )
        if not any(ref.measurement == query.source_measurement for ref in refs):
            raise BadRequest(f"'query' does not read its source_measurement {query.source_measurement!r}")

    # --- running ---------------------------------------------------------------------------------
    def run_window(
        self,
        query: ContinuousQuery,
        start_us: int,
        end_us: int,
        *,
        manual_id: str | None = None,
        dry_run: bool = False,
    ) -> WindowResult:
        """Steps 1 and 2: the query over ``[start_us, end_us)``, its result queued as one write.

        ``manual_id``: a manual execute's id, which its write id includes (a scheduled window's does not).
        """
        started = time.perf_counter()
        execution_id = manual_id or uuid.uuid4().hex
        sql = substitute(query.query, start_us, end_us)
        if self.catalog.get_schema(query.database, query.source_measurement) is None:
            rows = pa.table({TIME_COLUMN: pa.array([], TIME_TYPE)})  # no source yet: nothing to aggregate
        else:
            result = self.queries.run(sql, query.database, principal_of(query))
            rows = destination_rows(result.table, query.tag_columns)
        self._fault("queried")
        queued = None
        if not dry_run and rows.num_rows:
            queued = write_id(query.query_id, start_us, end_us, manual_id)
            part = MeasurementRows(query.destination_measurement, rows, query.tag_columns)
            self.writes.enqueue_rows(queued, query.database, [part])
            self._fault("enqueued")
        elapsed = (time.perf_counter() - started) * 1000
        return WindowResult(query, execution_id, start_us, end_us, sql, rows, queued, elapsed)

    def execute(
        self, query_id: int, start_us: int, end_us: int, dry_run: bool, execution_id: str | None = None
    ) -> WindowResult:
        """A manual execute over ``[start_us, end_us)``: its rows are added to the destination.

        Each execute adds, unless it repeats an earlier one's ``execution_id`` (the client's choice,
        for retrying a request whose answer was lost): then its write id is the same, and ingest
        stores the rows once.
        """
        query = self.get(query_id)
        if start_us >= end_us:
            raise BadRequest(f"start_time {rfc3339(start_us)} must be before end_time {rfc3339(end_us)}")
        started_at = datetime.now(UTC)
        if not dry_run:
            self._check_manual_range(query, end_us, started_at)
        try:
            manual_id = execution_id or uuid.uuid4().hex
            result = self.run_window(query, start_us, end_us, manual_id=manual_id, dry_run=dry_run)
        except ArcsError as exc:
            if not dry_run:
                self._record(query, "manual", start_us, end_us, started_at, None, exc)
            raise
        if not dry_run:
            self._record(query, "manual", start_us, end_us, started_at, result, None)
            self._fault("recorded")
        return result

    def _check_manual_range(self, query: ContinuousQuery, end_us: int, now: datetime) -> None:
        """A manual execute writes only windows the schedule never will: those before the mark of
        an active query; for an inactive one, those before the current window, where a later
        activation puts the mark."""
        if query.is_active:
            limit = self.catalog.get_cq_progress(query.query_id)
            if limit is not None and end_us > limit:
                raise BadRequest(
                    f"the schedule processes this query from {rfc3339(limit)} on: a manual execute must end by "
                    "then (or be a dry run), or the schedule would write those windows a second time"
                )
            return
        limit = window_start(micros(now), query.interval_s)
        if end_us > limit:
            raise BadRequest(
                f"a manual execute must end by the start of the current window, {rfc3339(limit)} (or be a dry "
                "run): were the query activated, the schedule would write later windows a second time"
            )

    def run_due(self, now: datetime) -> RunSummary:
        """Every active query's closed windows since its mark, at most ``max_windows`` each."""
        summary = RunSummary()
        for query in self.catalog.list_continuous_queries():
            if not query.is_active:
                continue
            try:
                self._catch_up(query, micros(now), summary)
            except Exception as exc:
                # One query's trouble (say, its mark could not be read) does not hold up the others.
                logger.exception("continuous query %s could not run", query.query_id)
                summary.failed[query.query_id] = str(exc)
        if summary.windows or summary.failed:
            logger.info("continuous queries: %s", summary.to_json())
        metrics.record({metrics.CQ_RUNS: 1}, status="failed" if summary.failed else "ok")
        if summary.failed:
            metrics.record({metrics.CQ_FAILURES: len(summary.failed)})
        return summary

    def _catch_up(self, query: ContinuousQuery, now_us: int, summary: RunSummary) -> None:
        mark = self.catalog.get_cq_progress(query.query_id)
        for _ in range(self.max_windows):
            if mark is None:
                return  # deleted meanwhile
            start_us, end_us = window_after(mark, query.interval_s)
            # Only closed windows, and only once late rows have had ``delay`` to arrive.
            if end_us > now_us - self.delay_us:
                return
            started_at = datetime.now(UTC)
            try:
                result = self.run_window(query, start_us, end_us)
            except Exception as exc:
                # The mark stays: the next run tries this window again, with the same write id.
                logger.warning("continuous query %s, window %s: %s", query.query_id, rfc3339(start_us), exc)
                summary.failed[query.query_id] = str(exc)
                self._record(query, "scheduled", start_us, end_us, started_at, None, exc)
                return
            if not self.catalog.set_cq_progress(query.query_id, start_us, end_us):
                return  # another runner advanced it (its write has the same id) or it was deleted
            self._fault("advanced")
            self._record(query, "scheduled", start_us, end_us, started_at, result, None)
            self._fault("recorded")
            summary.windows += 1
            summary.rows += result.rows.num_rows
            mark = end_us

    def _record(
        self,
        query: ContinuousQuery,
        kind: CQExecutionKind,
        start_us: int,
        end_us: int,
        started_at: datetime,
        result: WindowResult | None,
        error: Exception | None,
    ) -> None:
        execution = CQExecution(
            execution_id=result.execution_id if result else uuid.uuid4().hex,
            query_id=query.query_id,
            kind=kind,
            start_us=start_us,
            end_us=end_us,
            status="failed" if error else "succeeded",
            rows=result.rows.num_rows if result and result.write_id else 0,
            write_id=result.write_id if result else None,
            started_at=started_at,
            duration_ms=result.duration_ms if result else (datetime.now(UTC) - started_at).total_seconds() * 1000,
            error="" if error is None else (error.message if isinstance(error, ArcsError) else str(error))[:1000],
        )
        try:
            self.catalog.put_cq_execution(execution)
        except ArcsError:
            # The history is for people; the data and the mark are already right.
            logger.warning("could not record execution %s of continuous query %s", execution.execution_id, query.name)


def destination_rows(table: pa.Table, tag_columns: tuple[str, ...]) -> pa.Table:
    """A query's result as the destination stores it: ``time`` as TIMESTAMP (us, UTC), every other
    column int64, float64, string, bool or timestamp; the tag columns strings. Else a 400 naming it."""
    names = table.column_names
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise BadRequest(f"the query's result names column(s) {', '.join(map(repr, duplicates))} more than once")
    if TIME_COLUMN not in names:
        raise BadRequest(f"the query's result has no 'time' column (columns: {', '.join(names)}); alias one AS time")
    columns: dict[str, pa.ChunkedArray] = {}
    for name in names:
        check_column(name, "the continuous query's result")
        columns[name] = _stored(name, table.column(name))
    time_column = columns[TIME_COLUMN]
    if time_column.type != TIME_TYPE:
        raise BadRequest(f"the query's 'time' column is {table.column(TIME_COLUMN).type}, not a timestamp")
    if time_column.null_count:
        raise BadRequest("the query's 'time' column has NULL values")
    for tag in tag_columns:
        if tag not in columns:
            raise BadRequest(f"tag column {tag!r} is not in the query's result (columns: {', '.join(names)})")
        if columns[tag].type != pa.string():
            raise BadRequest(f"tag column {tag!r} is {columns[tag].type} in the query's result; tags are strings")
    return pa.table(columns)


def _stored(name: str, column: pa.ChunkedArray) -> pa.ChunkedArray:
    """``column`` cast to the storage type its values fit."""
    kind = column.type
    if pa.types.is_dictionary(kind):
        return _stored(name, column.cast(kind.value_type))
    try:
        if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
            # Arrow reads a timestamp without a zone as UTC, as the database does everywhere.
            return pc.cast(column, TIME_TYPE, safe=False)
        if pa.types.is_integer(kind):
            return column.cast(pa.int64())
        if pa.types.is_floating(kind):
            return column.cast(pa.float64())
        if pa.types.is_decimal(kind):
            # sum() of integers is a DECIMAL(38,0) in DuckDB: keep it whole while it fits.
            if kind.scale == 0:
                try:
                    return column.cast(pa.int64())
                except pa.ArrowInvalid:
                    pass
            return column.cast(pa.float64())
        if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
            return column.cast(pa.string())
        if pa.types.is_boolean(kind):
            return column
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise BadRequest(f"column {name!r} of the query's result cannot be stored: {exc}") from exc
    raise BadRequest(
        f"column {name!r} of the query's result is {kind}; a measurement stores integers, floats, strings, "
        "booleans and timestamps"
    )
