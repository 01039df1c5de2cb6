"""The query use case: SQL over measurements -> an Arrow table and its run time (``arcs.query.results`` sends them)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pyarrow as pa

from arcs import metrics, tracing
from arcs.auth.tokens import Principal
from arcs.errors import ArcsError, BadRequest, NotFound, QueryTimeout
from arcs.layout import floor_hour, tier_start
from arcs.names import check_database, check_measurement
from arcs.ports import DataCatalog, FileRecord, ObjectStore
from arcs.query.catalog_answers import counted_rows
from arcs.query.engine import Engine
from arcs.query.exact_rewrites import apply_exact_rewrites
from arcs.query.pruning import TimeConstants, TimeRange, time_range
from arcs.query.result_cache import ResultCache, cache_key
from arcs.query.rewriter import TableRef, quote_identifier, rewrite_tables
from arcs.query.sandbox import check_read_only
from arcs.query.show import answer_show
from arcs.query.slow_queries import QueryOutcome, log_if_slow
from arcs.query.sql_time import utc_wall_clock
from arcs.query.sql_tree import check_sql_size
from arcs.write import points


@dataclass(frozen=True, slots=True)
class QueryResult:
    table: pa.Table
    execution_time_ms: float


@dataclass(frozen=True, slots=True)
class PreparedQuery:
    checked_sql: str  # what the sandbox judged (the caller's SQL after exact rewrites)
    sql: str  # what DuckDB runs: measurements replaced by scans of their files
    files: list[FileRecord] = field(default_factory=list)  # every file those scans read
    answer: pa.Table | None = None  # the result, when the catalog's file records hold it


class QueryService:
    def __init__(
        self,
        catalog: DataCatalog,
        store: ObjectStore,
        engine: Engine,
        max_rows: int,
        cache: ResultCache | None = None,
        max_result_bytes: int | None = None,
        slow_query_ms: float = 0,
    ) -> None:
        self.catalog = catalog
        #: A query taking longer is logged (``arcs.query.slow_queries``); 0: none is.
        self.slow_query_ms = slow_query_ms
        self.store = store
        self.engine = engine
        self.max_rows = max_rows
        self.cache = cache
        #: A result larger than this (Arrow bytes, as DuckDB streams it) is refused, not built.
        self.max_result_bytes = max_result_bytes

    def run(self, sql: object, database: str, principal: Principal) -> QueryResult:
        """Run ``sql``, measured (``arcs.metrics``), traced (``arcs.tracing``) and, past
        ``slow_query_ms``, logged (``query.slow_queries``)."""
        with tracing.subsegment("## query") as annotate:
            started = time.perf_counter()
            scanned: list[FileRecord] = []
            result: QueryResult | None = None
            error: BaseException | None = None
            try:
                result = self._run(sql, database, principal, started, scanned)
                return result
            except BaseException as exc:
                error = exc
                raise
            finally:
                status = metrics.status_of(error)
                elapsed_s = time.perf_counter() - started
                bytes_read = sum(f.size for f in scanned)
                metrics.record(
                    {metrics.QUERIES: 1, metrics.QUERY_DURATION: elapsed_s, metrics.QUERY_BYTES_SCANNED: bytes_read},
                    status=status,
                )
                rows = result.table.num_rows if result is not None else 0
                outcome = QueryOutcome(
                    sql if isinstance(sql, str) else "",
                    database,
                    principal,
                    status,
                    elapsed_s * 1000,
                    len(scanned),
                    bytes_read,
                    rows,
                )
                log_if_slow(outcome, self.slow_query_ms)
                measurements = {f.measurement for f in scanned}
                annotate(
                    database=database,
                    measurement=next(iter(measurements)) if len(measurements) == 1 else None,
                    status=status,
                    files=len(scanned),
                    bytes_read=bytes_read,
                    rows=rows,
                )

    def _run(
        self, sql: object, database: str, principal: Principal, started: float, scanned: list[FileRecord]
    ) -> QueryResult:
        """The query; ``scanned`` gets the files DuckDB reads (none for an answer from the catalog or cache)."""
        if not isinstance(sql, str) or not sql.strip():
            raise BadRequest("'sql' must be a non-empty string")
        check_sql_size(sql)
        check_database(database)
        shown = answer_show(sql, database, principal, self.catalog, self.store)
        if shown is not None:
            return QueryResult(shown, (time.perf_counter() - started) * 1000)
        # Scopes are checked and the files listed here, cache or not: a hit is never older than the catalog.
        prepared = self._prepare(sql, database, principal)
        if prepared.answer is not None:
            return QueryResult(prepared.answer, (time.perf_counter() - started) * 1000)
        key = None
        if self.cache is not None and self.cache.repeatable(self.engine, prepared.checked_sql):
            key = cache_key(prepared.sql, database, prepared.files, self.max_rows)
            cached = self.cache.get(key)
            if cached is not None:
                return QueryResult(cached, (time.perf_counter() - started) * 1000)
        scanned += prepared.files
        with tracing.subsegment("## duckdb"):
            table = _utc_named(
                self.engine.query_arrow(
                    prepared.sql,
                    max_rows=self.max_rows,
                    max_bytes=self.max_result_bytes,
                    timeout_s=self._time_left(started),
                )
            )
        if self.cache is not None and key is not None:
            self.cache.put(key, table)
        return QueryResult(table, (time.perf_counter() - started) * 1000)

    def _time_left(self, started: float) -> float | None:
        """What is left of the query's time budget once its SQL is read and mapped (None: no budget)."""
        budget = self.engine.query_timeout_s
        if not budget:
            return None
        left = budget - (time.perf_counter() - started)
        if left <= 0:
            raise QueryTimeout(f"the query took longer than {budget:g} s to prepare and was stopped")
        return left

    def plan(self, sql: str, database: str, principal: Principal) -> str:
        """DuckDB's physical plan for ``sql`` as it would run (for tests and operators, not the API)."""
        check_database(database)
        explained = self.engine.query_arrow("EXPLAIN " + self._prepare(sql, database, principal).sql)
        return "\n".join(str(value) for value in explained.column(explained.num_columns - 1).to_pylist())

    def _prepare(self, sql: str, database: str, principal: Principal) -> PreparedQuery:
        """The SQL DuckDB runs: exact rewrites, the sandbox's check, then tables mapped to their files."""
        # Rewrite first, so the sandbox judges exactly the SQL that will run.
        checked = utc_wall_clock(apply_exact_rewrites(sql))
        query = check_read_only(checked)
        files: list[FileRecord] = []
        tags: list[str] = []
        constants = TimeConstants(self.evaluate_time)
        mapped = rewrite_tables(query, lambda ref: self._scan(ref, database, principal, files, constants, tags))
        answer = counted_rows(query.statement, files, tags) if len(query.references) == 1 else None
        return PreparedQuery(checked, mapped, files, answer)

    def _scan(
        self,
        ref: TableRef,
        default_database: str,
        principal: Principal,
        used: list[FileRecord],
        constants: TimeConstants,
        tags: list[str],
    ) -> str:
        database = check_database(ref.database) if ref.database is not None else default_database
        measurement = check_measurement(ref.measurement)
        principal.require_database(database)
        schema = self.catalog.get_schema(database, measurement)
        if schema is None:
            raise NotFound(f"measurement {measurement!r} not found in database {database!r}")
        files = self._files(database, measurement, time_range(ref.where, ref.qualifiers, constants))
        used += files
        tags += schema.tags
        if not files:
            columns = ", ".join(
                f"CAST(NULL AS {_duckdb_type(kind)}) AS {quote_identifier(name)}"
                for name, kind in schema.columns.items()
            )
            return f"(SELECT {columns} WHERE false)"
        return points.scan(files, schema.tags, list(schema.columns), self.store.url)

    def _files(self, database: str, measurement: str, bounds: TimeRange) -> list[FileRecord]:
        """The measurement's files that can hold rows in ``bounds``: partitions first (from the start
        of the month, where a day or month file's record sits), then min/max."""
        first = tier_start(bounds.lower) if bounds.lower is not None else None
        last = floor_hour(bounds.upper) if bounds.upper is not None else None
        if first is not None and last is not None and first > last:
            return []
        files = self.catalog.list_files(database, measurement, first, last)
        low = _micros(bounds.lower) if bounds.lower is not None else None
        high = _micros(bounds.upper) if bounds.upper is not None else None
        return [f for f in files if (low is None or f.max_time_us >= low) and (high is None or f.min_time_us <= high)]

    def evaluate_time(self, expression: str) -> datetime | None:
        """A constant time expression's value, computed by DuckDB (None if it is not one).

        A string literal in RFC 3339's shape (what dashboards send) is read here instead: the same
        instant DuckDB's cast gives, without a round trip through DuckDB for each bound."""
        literal = _utc_literal(expression)
        if literal is not None:
            return literal
        try:
            table = self.engine.query_arrow(f"SELECT epoch_us(CAST(({expression}) AS TIMESTAMPTZ)) AS v")
        except ArcsError:
            return None
        value = table.column(0)[0].as_py() if table.num_rows == 1 else None
        return None if value is None else _EPOCH + timedelta(microseconds=value)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: A quoted date, or date and time to the microsecond, in UTC (no zone, Z or +00:00).
_UTC_LITERAL = re.compile(r"'(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?))?(?:Z|\+00(?::?00)?)?'")


def _utc_literal(expression: str) -> datetime | None:
    """The instant of a literal ``_UTC_LITERAL`` matches (connections run in UTC); None otherwise."""
    match = _UTC_LITERAL.fullmatch(expression)
    if match is None:
        return None
    day, clock = match.groups()
    try:
        return datetime.fromisoformat(f"{day}T{clock or '00:00:00'}").replace(tzinfo=UTC)
    except ValueError:
        return None  # not a real date (February 30th): DuckDB says what it makes of it


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def _utc_named(table: pa.Table) -> pa.Table:
    """DuckDB names the zone 'Etc/UTC'; clients expect the plain 'UTC'."""
    fields = [
        field.with_type(pa.timestamp(field.type.unit, tz="UTC"))
        if pa.types.is_timestamp(field.type) and field.type.tz in ("Etc/UTC", "UTC")
        else field
        for field in table.schema
    ]
    schema = pa.schema(fields, metadata=table.schema.metadata)
    return table if schema.equals(table.schema) else table.cast(schema)


def _duckdb_type(kind: str) -> str:
    return {
        "int64": "BIGINT",
        "float64": "DOUBLE",
        "string": "VARCHAR",
        "bool": "BOOLEAN",
        "timestamp": "TIMESTAMP_NS",
    }.get(kind, "VARCHAR")
