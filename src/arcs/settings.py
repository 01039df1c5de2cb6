"""One frozen settings object, built once from the environment."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from arcs import envvars
from arcs.errors import ArcsError
from arcs.http.streaming import STREAM_BODY_MAX_BYTES
from arcs.names import check_column, check_measurement
from arcs.write.paths import LAMBDA_SYNC_PAYLOAD_BYTES

Backend = Literal["local", "aws"]


class ConfigError(ArcsError):
    """The deployment is misconfigured; never the caller's fault."""


CompactionSort = Literal["time", "tags"]

#: API Gateway REST's payload limit, and the standalone server's body limit: no Lambda invoke sits
#: between its HTTP front and the write path, so nothing smaller binds there.
API_GATEWAY_PAYLOAD_BYTES = 10 * 1024 * 1024
#: What a REST proxy event holds besides its body: the headers twice (``headers`` and
#: ``multiValueHeaders``) and the query parameters twice, within API Gateway's 10,240 bytes for the
#: request line and headers, so at most ~41 KiB even if every character needs escaping; the request
#: context with the authorizer's (at most ~7 KiB for a token of 100 scopes); the keys of the envelope.
PROXY_EVENT_RESERVE_BYTES = 64 * 1024
#: The largest write body that reaches a function on AWS: with binary media types ``*/*`` the event
#: carries it base64-encoded (4 bytes per 3), and that plus the rest of the event must fit one
#: synchronous invoke. 4,669,440 bytes (4.45 MiB); larger bodies are answered 413 before any function.
AWS_MAX_REQUEST_BYTES = (LAMBDA_SYNC_PAYLOAD_BYTES - PROXY_EVENT_RESERVE_BYTES) // 4 * 3
#: How the API on AWS answers a write declaring more (the authorizer denies it; the stack's
#: ``ACCESS_DENIED`` gateway response, and the emulated gateway, say this with a 413).
AWS_TOO_LARGE_MESSAGE = (
    f"request body too large: a write through API Gateway takes at most {AWS_MAX_REQUEST_BYTES} bytes "
    "(Lambda is invoked with at most 6 MB, and the body travels base64-encoded); a larger file is "
    "imported through POST /api/v1/import/uploads"
)


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """When a partition is compacted, into what, and within which limits (docs/compaction.md)."""

    interval_s: float = 300.0
    min_age_s: float = 3600.0
    min_files: int = 10
    target_file_bytes: int = 512 * 1024 * 1024
    max_files: int = 1000
    max_input_bytes: int = 8 * 1024 * 1024 * 1024
    memory_limit: str | None = None
    threads: int | None = None
    grace_s: float = 300.0
    lease_s: float = 900.0
    sort: CompactionSort = "time"
    time_budget_s: float = 0.0
    zstd_level: int = 3
    function_name: str = ""
    #: The tiers a run compacts into: hours, then whole days (and months) merged into day (month) files.
    tiers: tuple[str, ...] = ("hour", "day")
    day_min_age_s: float = 7200.0
    day_min_files: int = 2
    month_min_age_s: float = 86400.0
    month_min_files: int = 2
    #: Per measurement, the columns its compacted files are sorted by before time (``ARCS_SORT_KEYS``).
    sort_keys: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def sort_keys_of(self, measurement: str) -> tuple[str, ...] | None:
        """The configured sort keys of ``measurement`` (time not included), None if it has none."""
        return dict(self.sort_keys).get(measurement)

    @classmethod
    def from_env(cls, env: Mapping[str, str], number: Callable[[str, float], float]) -> CompactionSettings:
        base = cls()
        sort = env.get(envvars.COMPACTION_SORT) or base.sort
        if sort not in ("time", "tags"):
            raise ConfigError(f"{envvars.COMPACTION_SORT} must be 'time' or 'tags', got {sort!r}")
        threads = env.get(envvars.COMPACTION_THREADS)
        made = cls(
            interval_s=number(envvars.COMPACTION_INTERVAL_S, base.interval_s),
            min_age_s=number(envvars.COMPACTION_MIN_AGE_S, base.min_age_s),
            min_files=int(number(envvars.COMPACTION_MIN_FILES, base.min_files)),
            target_file_bytes=int(number(envvars.COMPACTION_TARGET_FILE_MB, base.target_file_bytes / _MB) * _MB),
            max_files=int(number(envvars.COMPACTION_MAX_FILES, base.max_files)),
            max_input_bytes=int(number(envvars.COMPACTION_MAX_INPUT_MB, base.max_input_bytes / _MB) * _MB),
            memory_limit=env.get(envvars.COMPACTION_MEMORY_LIMIT) or None,
            threads=int(threads) if threads else None,
            grace_s=number(envvars.COMPACTION_GRACE_S, base.grace_s),
            lease_s=number(envvars.COMPACTION_LEASE_S, base.lease_s),
            sort=sort,  # type: ignore[arg-type]
            time_budget_s=number(envvars.COMPACTION_TIME_BUDGET_S, base.time_budget_s),
            function_name=env.get(envvars.TASKS_FUNCTION, ""),
            tiers=parse_tiers(env.get(envvars.COMPACTION_TIERS) or ",".join(base.tiers)),
            day_min_age_s=number(envvars.COMPACTION_DAY_MIN_AGE_S, base.day_min_age_s),
            day_min_files=int(number(envvars.COMPACTION_DAY_MIN_FILES, base.day_min_files)),
            month_min_age_s=number(envvars.COMPACTION_MONTH_MIN_AGE_S, base.month_min_age_s),
            month_min_files=int(number(envvars.COMPACTION_MONTH_MIN_FILES, base.month_min_files)),
            sort_keys=parse_sort_keys(env.get(envvars.SORT_KEYS, "")),
        )
        if made.day_min_files < 2:
            raise ConfigError(f"{envvars.COMPACTION_DAY_MIN_FILES} must be 2 or more")
        if made.month_min_files < 2:
            raise ConfigError(f"{envvars.COMPACTION_MONTH_MIN_FILES} must be 2 or more")
        if made.min_files < 2 or made.max_files < made.min_files:
            raise ConfigError(
                f"{envvars.COMPACTION_MIN_FILES} must be 2 or more and at most {envvars.COMPACTION_MAX_FILES}"
            )
        if made.max_files > MAX_FILES_PER_JOB:
            raise ConfigError(f"{envvars.COMPACTION_MAX_FILES} must be at most {MAX_FILES_PER_JOB}")
        return made


_TIER_CHOICES = (("hour",), ("hour", "day"), ("hour", "day", "month"), ("hour", "month"))


def parse_tiers(text: str) -> tuple[str, ...]:
    tiers = tuple(part.strip() for part in text.split(",") if part.strip())
    if tiers not in _TIER_CHOICES:
        choices = ", ".join(repr(",".join(choice)) for choice in _TIER_CHOICES)
        raise ConfigError(f"{envvars.COMPACTION_TIERS} must be one of {choices}, got {text!r}")
    return tiers


def parse_sort_keys(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``measurement:col1,col2;other:col3`` -> ((measurement, (col1, col2)), (other, (col3,))).

    Time is always the last key (added unless named); a measurement named twice, a bad measurement
    or column name, or a column named twice is a ConfigError."""
    found: dict[str, tuple[str, ...]] = {}
    for entry in text.split(";"):
        if not entry.strip():
            continue
        measurement, colon, columns = entry.partition(":")
        measurement = measurement.strip()
        keys = tuple(column.strip() for column in columns.split(","))
        if not colon or not all(keys):
            raise ConfigError(f"{envvars.SORT_KEYS}: {entry.strip()!r} must be 'measurement:column[,column...]'")
        try:
            check_measurement(measurement)
            for key in keys:
                check_column(key, measurement)
        except ArcsError as exc:
            raise ConfigError(f"{envvars.SORT_KEYS}: {exc.message}") from exc
        if measurement in found:
            raise ConfigError(f"{envvars.SORT_KEYS}: measurement {measurement!r} is named twice")
        if len(set(keys)) != len(keys):
            raise ConfigError(f"{envvars.SORT_KEYS}: {measurement!r} names a column twice")
        found[measurement] = keys
    return tuple(found.items())


_MB = 1024 * 1024
#: DuckDB's share of the process's memory unless ARCS_DUCKDB_MEMORY_LIMIT says otherwise: the rest
#: holds Python, the result as Arrow and as the JSON or Arrow stream answered.
DUCKDB_MEMORY_SHARE = 0.5
#: The largest result (Arrow bytes) by default: a 32nd of the memory, at most 256 MiB. Its JSON
#: text can be a few times larger, and is held twice while it is answered.
RESULT_MEMORY_SHARE = 1 / 32
MAX_DEFAULT_RESULT_BYTES = 256 * _MB
#: Set by Lambda in every function's environment: the function's memory, in MB.
LAMBDA_MEMORY_MB = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"


def memory_bytes(env: Mapping[str, str]) -> int:
    """The memory this process may use: a Lambda function's, else a container's limit, else the RAM."""
    lambda_mb = env.get(LAMBDA_MEMORY_MB, "")
    if lambda_mb.isdigit():
        return int(lambda_mb) * _MB
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        return physical
    return min(physical, int(limit)) if limit.isdigit() else physical


def default_duckdb_memory_limit(memory: int) -> str:
    """DuckDB's ``memory_limit`` for a process of ``memory`` bytes (what spills beyond goes to disk)."""
    return f"{int(memory * DUCKDB_MEMORY_SHARE) // _MB}MB"


def default_ingest_group_bytes(memory: int) -> int:
    """Decoded bytes one ingest attempt holds: an eighth of the memory (the tables, their sorted
    copy, the Parquet being encoded and the envelopes make several times that), within 64 MiB to
    1 GiB. A single write is never split: one larger than this is an attempt of its own."""
    return min(max(memory // 8, 64 * _MB), 1024 * _MB)


def default_max_result_bytes(memory: int) -> int:
    return min(int(memory * RESULT_MEMORY_SHARE), MAX_DEFAULT_RESULT_BYTES)


#: A job's commit record names its inputs in one catalog item (DynamoDB: 400 KB at most).
MAX_FILES_PER_JOB = 2000


@dataclass(frozen=True, slots=True)
class Settings:
    backend: Backend = "local"
    data_dir: Path = Path("./data")
    bucket: str = ""
    #: AWS: an S3 Express One Zone directory bucket for the data files (docs/express.md); "" = none.
    express_bucket: str = ""
    prefix: str = ""
    queue_url: str = ""
    # The DynamoDB tables (AWS); empty where a function is not given one.
    tokens_table: str = ""
    catalog_table: str = ""
    leases_table: str = ""
    aws_endpoint_url: str | None = None
    aws_dynamodb_endpoint_url: str | None = None  # None: aws_endpoint_url
    aws_region: str = "us-east-1"
    bootstrap_token: str | None = None
    token_cache_ttl_s: float = 60.0
    auth_failures_per_minute: int = 30
    # A write body's limit: API Gateway's payload limit on the standalone server; on AWS (backend
    # "aws") ``AWS_MAX_REQUEST_BYTES`` unless set. The decompressed cap protects against bombs.
    max_request_bytes: int = API_GATEWAY_PAYLOAD_BYTES
    max_decompressed_bytes: int = 100 * 1024 * 1024
    # A bulk import's file, as sent and decompressed (Arc's limit is 500 MB; imports stream, so
    # a larger one costs disk and time, not memory).
    import_max_bytes: int = 500 * 1024 * 1024
    # Queued writes above this size travel as a claim-check object (SQS messages cap at 1 MiB,
    # and base64 adds a third).
    claim_check_bytes: int = 700 * 1024
    row_group_rows: int = 122_880
    ingest_batch_messages: int = 100
    ingest_batch_window_s: float = 0.2
    ingest_group_bytes: int = 256 * 1024 * 1024  # from_env derives it from the memory
    ingest_file_writers: int | None = None  # None: by the store (runtime.ingest_file_writers)
    # The standalone server's file writers are worker processes (arcs.write.file_writers).
    ingest_file_processes: bool = True
    duckdb_threads: int | None = None
    duckdb_memory_limit: str | None = None
    # How much DuckDB may spill into its temp directory; None: DuckDB's default (90 % of the free disk).
    duckdb_max_temp_size: str | None = None
    work_dir: Path | None = None
    query_max_rows: int = 10_000_000
    # A result larger than this (Arrow bytes, while DuckDB streams it) is refused (400); from_env
    # derives it from the memory when ARCS_QUERY_MAX_RESULT_BYTES is unset. None: no limit.
    query_max_result_bytes: int | None = None
    # Locally; in Lambda the function's timeout minus a margin, so the caller gets the error, not a 504.
    query_timeout_s: float = 30.0
    queue_timeout_s: float = 10.0
    # A query running longer is logged as a slow query (arcs.query.slow_queries); 0 logs none.
    slow_query_ms: float = 1000.0
    # The CloudWatch namespace of the Lambda functions' embedded metrics (arcs.metrics).
    metrics_namespace: str = "ArcServerless"
    # The HTTP front of the standalone server and arcs local (API Gateway bounds its own).
    http_body_timeout_s: float = 60.0
    http_head_timeout_s: float = 10.0
    http_max_connections: int = 256
    # Lambda answers at most 6 MiB synchronously, body and envelope; a body costing more than this
    # in the proxy response (JSON-escaped, or base64 for Arrow) goes through storage instead.
    # 64 KiB stays free for the status, headers and the envelope's own JSON.
    query_inline_max_bytes: int = 6 * 1024 * 1024 - 64 * 1024
    # Streamed through API Gateway, a result may be as large as Lambda streams (200 MiB, less the
    # response's metadata); a larger one goes through storage.
    query_stream_max_bytes: int = STREAM_BODY_MAX_BYTES
    # Long enough to follow the redirect; S3 checks the expiry only when a download starts.
    query_result_url_expiry_s: int = 300
    result_cache: bool = False
    result_cache_ttl_s: float = 60.0
    result_cache_max_bytes: int = 256 * 1024 * 1024
    # Continuous queries (docs/continuous-queries.md).
    cq_timer_s: float = 60.0
    cq_delay_s: float = 60.0
    cq_max_windows: int = 60
    # Retention (docs/retention-and-delete.md): the standalone server's timer; 0 turns it off.
    retention_interval_s: float = 3600.0
    # Result-sized blocks stay mapped between queries (arcs.allocator); 0 keeps the C library's default.
    mmap_threshold_mb: int = 256
    compaction: CompactionSettings = field(default_factory=lambda: CompactionSettings())

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        base = cls()

        def text(name: str, default: str) -> str:
            return env.get(name, default)

        def number(name: str, default: float) -> float:
            raw = env.get(name)
            if raw is None or raw == "":
                return default
            try:
                return float(raw)
            except ValueError as exc:
                raise ConfigError(f"{name} must be a number, got {raw!r}") from exc

        backend = text(envvars.BACKEND, base.backend)
        if backend not in ("local", "aws"):
            raise ConfigError(f"{envvars.BACKEND} must be 'local' or 'aws', got {backend!r}")
        stream_max_bytes = int(number(envvars.QUERY_STREAM_MAX_BYTES, base.query_stream_max_bytes))
        if not 0 <= stream_max_bytes <= STREAM_BODY_MAX_BYTES:
            raise ConfigError(
                f"{envvars.QUERY_STREAM_MAX_BYTES} must be 0 to {STREAM_BODY_MAX_BYTES} (what Lambda streams, "
                f"less the response's metadata), got {stream_max_bytes}"
            )
        query_timeout_s = number(envvars.QUERY_TIMEOUT_S, base.query_timeout_s)
        if query_timeout_s < 0:
            raise ConfigError(f"{envvars.QUERY_TIMEOUT_S} must be 0 (no limit) or more, got {query_timeout_s:g}")
        slow_query_ms = number(envvars.SLOW_QUERY_MS, base.slow_query_ms)
        if slow_query_ms < 0:
            raise ConfigError(f"{envvars.SLOW_QUERY_MS} must be 0 (log none) or more, got {slow_query_ms:g}")
        cache = text(envvars.RESULT_CACHE, "false").strip().lower()
        if cache not in ("true", "false", "1", "0", ""):
            raise ConfigError(f"{envvars.RESULT_CACHE} must be 'true' or 'false', got {cache!r}")
        expiry_s = int(number(envvars.QUERY_RESULT_URL_EXPIRY_S, base.query_result_url_expiry_s))
        if not 1 <= expiry_s <= 7 * 24 * 3600:  # S3's longest presigned URL is 7 days
            raise ConfigError(f"{envvars.QUERY_RESULT_URL_EXPIRY_S} must be 1 to 604800 seconds, got {expiry_s}")
        mmap_threshold_mb = int(number(envvars.MMAP_THRESHOLD_MB, base.mmap_threshold_mb))
        if not 0 <= mmap_threshold_mb <= 2047:  # the allocator takes a C int of bytes
            raise ConfigError(f"{envvars.MMAP_THRESHOLD_MB} must be 0 to 2047, got {mmap_threshold_mb}")
        threads = env.get(envvars.DUCKDB_THREADS)
        work_dir = env.get(envvars.WORK_DIR)
        memory = memory_bytes(env)
        max_result_bytes = int(number(envvars.QUERY_MAX_RESULT_BYTES, default_max_result_bytes(memory)))
        ingest_group_bytes = int(number(envvars.INGEST_GROUP_BYTES, default_ingest_group_bytes(memory)))
        if ingest_group_bytes < 1:
            raise ConfigError(f"{envvars.INGEST_GROUP_BYTES} must be 1 or more, got {ingest_group_bytes}")
        ingest_file_writers = _file_writers(env.get(envvars.INGEST_FILE_WRITERS))
        if max_result_bytes < 1:
            raise ConfigError(f"{envvars.QUERY_MAX_RESULT_BYTES} must be 1 or more, got {max_result_bytes}")
        return cls(
            backend=backend,  # type: ignore[arg-type]
            data_dir=Path(text(envvars.DATA_DIR, str(base.data_dir))),
            bucket=text(envvars.BUCKET, ""),
            express_bucket=text(envvars.EXPRESS_BUCKET, "").strip(),
            prefix=text(envvars.PREFIX, "").strip("/"),
            queue_url=text(envvars.QUEUE_URL, ""),
            tokens_table=text(envvars.TOKENS_TABLE, ""),
            catalog_table=text(envvars.CATALOG_TABLE, ""),
            leases_table=text(envvars.LEASES_TABLE, ""),
            aws_endpoint_url=env.get(envvars.AWS_ENDPOINT_URL) or None,
            aws_dynamodb_endpoint_url=env.get(envvars.AWS_ENDPOINT_URL_DYNAMODB) or None,
            aws_region=env.get(envvars.AWS_REGION) or env.get("AWS_DEFAULT_REGION") or base.aws_region,
            bootstrap_token=env.get(envvars.BOOTSTRAP_TOKEN) or None,
            token_cache_ttl_s=number(envvars.TOKEN_CACHE_TTL_S, base.token_cache_ttl_s),
            auth_failures_per_minute=int(number(envvars.AUTH_FAILURES_PER_MINUTE, base.auth_failures_per_minute)),
            max_request_bytes=int(
                number(envvars.MAX_REQUEST_BYTES, AWS_MAX_REQUEST_BYTES if backend == "aws" else base.max_request_bytes)
            ),
            max_decompressed_bytes=int(number(envvars.MAX_DECOMPRESSED_BYTES, base.max_decompressed_bytes)),
            import_max_bytes=int(number(envvars.IMPORT_MAX_BYTES, base.import_max_bytes)),
            claim_check_bytes=int(number(envvars.CLAIM_CHECK_BYTES, base.claim_check_bytes)),
            row_group_rows=int(number(envvars.ROW_GROUP_ROWS, base.row_group_rows)),
            ingest_batch_messages=int(number(envvars.INGEST_BATCH_MESSAGES, base.ingest_batch_messages)),
            ingest_batch_window_s=number(envvars.INGEST_BATCH_WINDOW_S, base.ingest_batch_window_s),
            ingest_group_bytes=ingest_group_bytes,
            ingest_file_writers=ingest_file_writers,
            ingest_file_processes=_flag(envvars.INGEST_FILE_PROCESSES, env.get(envvars.INGEST_FILE_PROCESSES), True),
            duckdb_threads=int(threads) if threads else None,
            duckdb_memory_limit=env.get(envvars.DUCKDB_MEMORY_LIMIT) or default_duckdb_memory_limit(memory),
            duckdb_max_temp_size=env.get(envvars.DUCKDB_MAX_TEMP_SIZE) or None,
            work_dir=Path(work_dir) if work_dir else None,
            query_max_rows=int(number(envvars.QUERY_MAX_ROWS, base.query_max_rows)),
            query_max_result_bytes=max_result_bytes,
            query_timeout_s=query_timeout_s,
            queue_timeout_s=number(envvars.QUEUE_TIMEOUT_S, base.queue_timeout_s),
            slow_query_ms=slow_query_ms,
            metrics_namespace=text(envvars.METRICS_NAMESPACE, base.metrics_namespace).strip() or base.metrics_namespace,
            http_body_timeout_s=number(envvars.HTTP_BODY_TIMEOUT_S, base.http_body_timeout_s),
            http_head_timeout_s=number(envvars.HTTP_HEAD_TIMEOUT_S, base.http_head_timeout_s),
            http_max_connections=max(1, int(number(envvars.HTTP_MAX_CONNECTIONS, base.http_max_connections))),
            query_inline_max_bytes=int(number(envvars.QUERY_INLINE_MAX_BYTES, base.query_inline_max_bytes)),
            query_stream_max_bytes=stream_max_bytes,
            query_result_url_expiry_s=expiry_s,
            result_cache=cache in ("true", "1"),
            result_cache_ttl_s=number(envvars.RESULT_CACHE_TTL_S, base.result_cache_ttl_s),
            result_cache_max_bytes=int(number(envvars.RESULT_CACHE_MAX_BYTES, base.result_cache_max_bytes)),
            cq_timer_s=number(envvars.CQ_TIMER_S, base.cq_timer_s),
            cq_delay_s=number(envvars.CQ_DELAY_S, base.cq_delay_s),
            cq_max_windows=max(1, int(number(envvars.CQ_MAX_WINDOWS, base.cq_max_windows))),
            retention_interval_s=number(envvars.RETENTION_INTERVAL_S, base.retention_interval_s),
            mmap_threshold_mb=mmap_threshold_mb,
            compaction=CompactionSettings.from_env(env, number),
        )

    @property
    def data_bucket(self) -> str:
        """The bucket holding the data files: the directory bucket when there is one."""
        return self.express_bucket or self.bucket

    def with_(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]


def _file_writers(raw: str | None) -> int | None:
    """``ARCS_INGEST_FILE_WRITERS``: 1 to 64, or None when unset (the runtime chooses by its store)."""
    if not raw:
        return None
    if not raw.isdigit() or not 1 <= int(raw) <= 64:
        raise ConfigError(f"{envvars.INGEST_FILE_WRITERS} must be 1 to 64, got {raw!r}")
    return int(raw)


def _flag(name: str, raw: str | None, default: bool) -> bool:
    """A true/false setting (``1`` and ``0`` too); unset or empty: ``default``."""
    value = (raw or "").strip().lower()
    if not value:
        return default
    if value not in ("true", "false", "1", "0"):
        raise ConfigError(f"{name} must be 'true' or 'false', got {raw!r}")
    return value in ("true", "1")
