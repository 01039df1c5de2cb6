"""Names of the environment variables that configure every runtime (read by infra/ too)."""

BACKEND = "ARCS_BACKEND"  # "local" (directory, spool, SQLite) or "aws" (S3, SQS, DynamoDB)
DATA_DIR = "ARCS_DATA_DIR"
BUCKET = "ARCS_BUCKET"
PREFIX = "ARCS_PREFIX"
QUEUE_URL = "ARCS_QUEUE_URL"
# The three DynamoDB tables (docs/deploy.md); a function's environment names only those it uses.
TOKENS_TABLE = "ARCS_TOKENS_TABLE"
CATALOG_TABLE = "ARCS_CATALOG_TABLE"
LEASES_TABLE = "ARCS_LEASES_TABLE"
AWS_ENDPOINT_URL = "AWS_ENDPOINT_URL"
# The SDKs' service-specific endpoint: DynamoDB served elsewhere than AWS_ENDPOINT_URL says.
AWS_ENDPOINT_URL_DYNAMODB = "AWS_ENDPOINT_URL_DYNAMODB"
AWS_REGION = "AWS_REGION"
# Lambda starts the runtime through this executable (the query function's streams: arcs.http.runtime_api).
AWS_LAMBDA_EXEC_WRAPPER = "AWS_LAMBDA_EXEC_WRAPPER"
BOOTSTRAP_TOKEN = "ARCS_BOOTSTRAP_TOKEN"
TOKEN_CACHE_TTL_S = "ARCS_TOKEN_CACHE_TTL_S"
# Standalone server: failed authentications a client address may make per minute before 429s; 0 = no limit.
AUTH_FAILURES_PER_MINUTE = "ARCS_AUTH_FAILURES_PER_MINUTE"
MAX_REQUEST_BYTES = "ARCS_MAX_REQUEST_BYTES"
MAX_DECOMPRESSED_BYTES = "ARCS_MAX_DECOMPRESSED_BYTES"
IMPORT_MAX_BYTES = "ARCS_IMPORT_MAX_BYTES"
CLAIM_CHECK_BYTES = "ARCS_CLAIM_CHECK_BYTES"
ROW_GROUP_ROWS = "ARCS_ROW_GROUP_ROWS"
INGEST_BATCH_MESSAGES = "ARCS_INGEST_BATCH_MESSAGES"
INGEST_BATCH_WINDOW_S = "ARCS_INGEST_BATCH_WINDOW_S"
INGEST_GROUP_BYTES = "ARCS_INGEST_GROUP_BYTES"
INGEST_FILE_WRITERS = "ARCS_INGEST_FILE_WRITERS"
INGEST_FILE_PROCESSES = "ARCS_INGEST_FILE_PROCESSES"  # "false": the standalone server writes files on threads
DUCKDB_THREADS = "ARCS_DUCKDB_THREADS"
DUCKDB_MEMORY_LIMIT = "ARCS_DUCKDB_MEMORY_LIMIT"  # e.g. "2GB"; default half the memory (Lambda: the function's)
DUCKDB_MAX_TEMP_SIZE = "ARCS_DUCKDB_MAX_TEMP_SIZE"  # DuckDB's max_temp_directory_size (spill), e.g. "3GiB"
MMAP_THRESHOLD_MB = "ARCS_MMAP_THRESHOLD_MB"  # C allocator: blocks up to this stay on the heap; 0 = its default
ARROW_MEMORY_POOL = "ARROW_DEFAULT_MEMORY_POOL"  # Arrow's own; "system" in every runtime (arcs.allocator)
WORK_DIR = "ARCS_WORK_DIR"  # DuckDB home, temp and extension directory (/tmp in Lambda)
QUERY_MAX_ROWS = "ARCS_QUERY_MAX_ROWS"
QUERY_MAX_RESULT_BYTES = "ARCS_QUERY_MAX_RESULT_BYTES"  # larger results are refused; default 1/32 of memory, <= 256 MiB
QUERY_TIMEOUT_S = "ARCS_QUERY_TIMEOUT_S"  # a query running longer is interrupted (503); 0 = no limit
SLOW_QUERY_MS = "ARCS_SLOW_QUERY_MS"  # queries running longer are logged as slow queries; 0 = none
METRICS_NAMESPACE = "ARCS_METRICS_NAMESPACE"  # Lambda: CloudWatch namespace of the embedded metrics
QUEUE_TIMEOUT_S = "ARCS_QUEUE_TIMEOUT_S"  # how long a request waits for a free worker before a 503
HTTP_BODY_TIMEOUT_S = "ARCS_HTTP_BODY_TIMEOUT_S"  # standalone/local HTTP: a body must arrive within this (408)
HTTP_HEAD_TIMEOUT_S = "ARCS_HTTP_HEAD_TIMEOUT_S"  # standalone/local HTTP: a request head must arrive within this
HTTP_MAX_CONNECTIONS = "ARCS_HTTP_MAX_CONNECTIONS"  # standalone/local HTTP: connections beyond this get a 503
QUERY_INLINE_MAX_BYTES = "ARCS_QUERY_INLINE_MAX_BYTES"  # larger results are handed off through storage (AWS)
QUERY_STREAM_MAX_BYTES = "ARCS_QUERY_STREAM_MAX_BYTES"  # larger streamed results are handed off instead (AWS)
QUERY_RESULT_URL_EXPIRY_S = "ARCS_QUERY_RESULT_URL_EXPIRY_S"  # how long a handed-off result's URL works
RESULT_CACHE = "ARCS_RESULT_CACHE"  # "true" turns the query result cache on (off by default)
RESULT_CACHE_TTL_S = "ARCS_RESULT_CACHE_TTL_S"
RESULT_CACHE_MAX_BYTES = "ARCS_RESULT_CACHE_MAX_BYTES"
CQ_TIMER_S = "ARCS_CQ_TIMER_S"  # standalone server: how often continuous queries run (0: never)
CQ_DELAY_S = "ARCS_CQ_DELAY_S"  # a window runs once it closed this long ago (late data's grace)
CQ_MAX_WINDOWS = "ARCS_CQ_MAX_WINDOWS"  # windows one continuous query catches up per run
EXPRESS_BUCKET = "ARCS_EXPRESS_BUCKET"  # AWS: the optional S3 Express bucket of the data files (docs/express.md)
RETENTION_INTERVAL_S = "ARCS_RETENTION_INTERVAL_S"  # standalone server: how often retention policies run (0: never)
COMPACTION_INTERVAL_S = "ARCS_COMPACTION_INTERVAL_S"  # standalone server's compaction timer; 0 = off
COMPACTION_MIN_AGE_S = "ARCS_COMPACTION_MIN_AGE_S"  # a partition is compacted this long after its hour ends
COMPACTION_MIN_FILES = "ARCS_COMPACTION_MIN_FILES"  # ... and once it has at least this many files
COMPACTION_TARGET_FILE_MB = "ARCS_COMPACTION_TARGET_FILE_MB"
COMPACTION_MAX_FILES = "ARCS_COMPACTION_MAX_FILES"  # inputs of one job
COMPACTION_MAX_INPUT_MB = "ARCS_COMPACTION_MAX_INPUT_MB"  # input bytes of one job (local disk it needs)
COMPACTION_MEMORY_LIMIT = "ARCS_COMPACTION_MEMORY_LIMIT"  # DuckDB's, while merging; the rest spills
COMPACTION_THREADS = "ARCS_COMPACTION_THREADS"
COMPACTION_GRACE_S = "ARCS_COMPACTION_GRACE_S"  # replaced files are deleted this long after the swap
COMPACTION_LEASE_S = "ARCS_COMPACTION_LEASE_S"
COMPACTION_SORT = "ARCS_COMPACTION_SORT"  # "time" or "tags" (tags, then time)
COMPACTION_TIME_BUDGET_S = "ARCS_COMPACTION_TIME_BUDGET_S"  # a run starts no job after this; 0 = none
COMPACTION_TIERS = "ARCS_COMPACTION_TIERS"  # "hour,day" (the default), "hour,day,month", "hour,month" or "hour"
COMPACTION_DAY_MIN_AGE_S = "ARCS_COMPACTION_DAY_MIN_AGE_S"  # a day is merged this long after it ends
COMPACTION_DAY_MIN_FILES = "ARCS_COMPACTION_DAY_MIN_FILES"  # ... once it has at least this many files
COMPACTION_MONTH_MIN_AGE_S = "ARCS_COMPACTION_MONTH_MIN_AGE_S"  # a month is merged this long after it ends
COMPACTION_MONTH_MIN_FILES = "ARCS_COMPACTION_MONTH_MIN_FILES"  # ... once it has at least this many files
SORT_KEYS = "ARCS_SORT_KEYS"  # "m1:col1,col2;m2:col3": the columns files are sorted by, then time
TASKS_FUNCTION = "ARCS_TASKS_FUNCTION"  # AWS: the tasks function the trigger route invokes
NATIVE = "ARCS_NATIVE"  # "0": skip the C library of arcs.native (same results, slower)
# arcs local only: a file each emulated function invocation appends its CPU time and peak memory to.
LOCAL_INVOCATION_LOG = "ARCS_LOCAL_INVOCATION_LOG"
