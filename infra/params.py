"""The stack's deploy-time parameters (CDK context), each checked at synthesis against what AWS accepts.

A value AWS would refuse (a memory outside 128-10,240 MB, an SQS batch above 10 without a
batching window, ...) stops ``cdk synth`` with a message naming the key, what it takes and what
it got, instead of failing half-way through a deployment. ``PARAMETERS`` is the one list: the app
reads it, and docs/deploy.md's parameter table is checked against it (tests/infra).

Defaults deploy in a new account: AWS gives new accounts reduced Lambda memory and concurrency
quotas (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html), so no function
asks for more than 3,008 MB and none reserves concurrency unless told to.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from layers.build import ARCHITECTURES, DEFAULT_ARCH

from arcs.http.streaming import QUERY_BUDGET_S
from arcs.settings import ConfigError, parse_sort_keys, parse_tiers

#: The stack's functions, as the ``<function>_memory_mb`` and ``<function>_reserved_concurrency`` keys name them.
FUNCTIONS = ("edge", "ingest", "query", "authorizer", "tasks", "bootstrap")
#: Fits a new account's memory quota (3,008 MB); raise it with ``-c <function>_memory_mb=``.
DEFAULT_MEMORY_MB: dict[str, int] = {
    "edge": 2048,  # decodes a write of up to 100 MiB decompressed (infra/ingest.py)
    "ingest": 2048,
    "query": 3008,
    "authorizer": 1024,  # the token hash is CPU-bound: memory buys CPU
    "tasks": 3008,
    "bootstrap": 1024,
}
#: Lambda: 128 MB to 10,240 MB, in 1 MB steps.
MEMORY_RANGE_MB = (128, 10_240)
#: The write path decodes a whole request in memory: up to 20 million cells (a sparse body) take
#: about 330 MiB at the edge, then again at ingest. Less memory could fail, for good, a write the
#: edge already acknowledged.
MIN_WRITE_MEMORY_MB = {"edge": 1024, "ingest": 1024}
#: Lambda's /tmp: 512 MB (free) to 10,240 MB.
EPHEMERAL_RANGE_MB = (512, 10_240)
DEFAULT_QUERY_EPHEMERAL_MB = 4096
#: SQS event source (standard queue): 1 to 10,000 messages, a window of 0 to 300 s, and a batch
#: above 10 only with a window of at least 1 s
#: (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-parameters.html).
BATCH_SIZE_RANGE = (1, 10_000)
BATCH_WINDOW_RANGE_S = (0, 300)
UNWINDOWED_MAX_BATCH = 10
DEFAULT_BATCH_SIZE = 1000
DEFAULT_BATCH_WINDOW_S = 5
#: Lambda's longest run is 15 minutes.
TIMEOUT_RANGE_S = (1, 900)
DEFAULT_INGEST_TIMEOUT_S = 180
#: A query computes before the first byte of its streamed answer, and API Gateway closes a stream
#: idle for 5 minutes: at most 295 s (arcs.http.streaming).
QUERY_TIMEOUT_RANGE_S = (1, QUERY_BUDGET_S)
#: A compaction run stops starting jobs 5 minutes before its timeout and gives itself at least a minute.
TASKS_TIMEOUT_RANGE_S = (360, 900)
DEFAULT_TASKS_TIMEOUT_S = 900
#: AWS recommends at least 5 for a function an SQS event source invokes: fewer throttles the
#: pollers, and every throttled receive counts towards the dead-letter queue's receive count.
MIN_SQS_RESERVED_CONCURRENCY = 5
#: The oldest queued write's age that raises an alarm: ingest normally takes seconds; SQS keeps 14 days.
OLDEST_WRITE_RANGE_S = (60, 14 * 24 * 3600)
DEFAULT_OLDEST_WRITE_S = 900
#: Far above any account's quota: a typo, not a choice (AWS refuses more than the account has anyway).
MAX_RESERVED_CONCURRENCY = 100_000

_STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,127}$")  # CloudFormation's stack name rule
_PREFIX = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._/-]{0,199})?$")  # S3 keys' safe characters
_GLUE_DATABASE = re.compile(r"^[a-z0-9_]{1,255}$")  # what Athena accepts unquoted
# An S3 Express zone id: use1-az4, apne1-az1, or a Local Zone's usw2-lax1-az1.
_ZONE_ID = re.compile(r"^[a-z]{2,6}[0-9]+(-[a-z]+[0-9]+)?-az[0-9]+$")
_ARCHITECTURE = re.compile("^(" + "|".join(ARCHITECTURES) + ")$")
_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]+$")
_TOPIC_ARN = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}$")
_OWN_KEY = re.compile(r"^[a-z][a-z0-9_]*$")  # CDK's own context keys use ':', '@' or '-'
#: Keys of earlier versions, by the key that replaced them: a deployment's old cdk.json is refused
#: with the new name rather than silently ignored.
RENAMED = {
    "compact_memory_mb": "tasks_memory_mb",
    "compact_reserved_concurrency": "tasks_reserved_concurrency",
    "compact_timeout_s": "tasks_timeout_s",
}


class ParameterError(ValueError):
    """A context value the stack (or AWS) would not accept."""


@dataclass(frozen=True)
class Parameter:
    key: str
    meaning: str
    #: As docs/deploy.md's table shows it.
    default_text: str


def _memory_parameters() -> list[Parameter]:
    return [
        Parameter(
            f"{name}_memory_mb",
            f"the {name} function's memory ({MIN_WRITE_MEMORY_MB.get(name, MEMORY_RANGE_MB[0]):,}-10,240 MB)",
            f"`{DEFAULT_MEMORY_MB[name]}`",
        )
        for name in FUNCTIONS
    ]


def _concurrency_parameters() -> list[Parameter]:
    return [
        Parameter(f"{name}_reserved_concurrency", f"reserved concurrency of the {name} function", "unset")
        for name in FUNCTIONS
    ]


PARAMETERS: tuple[Parameter, ...] = (
    Parameter("stack_name", "the stack's name", "`ArcServerless`"),
    Parameter("prefix", "key prefix of everything in the bucket", "none"),
    Parameter("architecture", "`arm64` or `x86_64` (build the layers for it)", f"`{DEFAULT_ARCH}`"),
    Parameter("layers_dir", "where `make layers` wrote them", "`layers/build`"),
    *_memory_parameters(),
    *_concurrency_parameters(),
    Parameter("query_ephemeral_storage_mb", "the query function's `/tmp` (DuckDB spills there)", "`4096`"),
    Parameter("query_image", "`true`: the query function runs the container image", "`false`"),
    Parameter("ingest_batch_size", "SQS messages per ingest invocation (1-10,000)", f"`{DEFAULT_BATCH_SIZE}`"),
    Parameter("ingest_batch_window_s", "how long SQS gathers a batch (0-300 s)", f"`{DEFAULT_BATCH_WINDOW_S}`"),
    Parameter("ingest_timeout_s", "the ingest function's timeout (1-900 s)", f"`{DEFAULT_INGEST_TIMEOUT_S}`"),
    Parameter("query_timeout_s", "how long a query may compute (1-295 s)", f"`{QUERY_BUDGET_S}`"),
    Parameter("tasks_timeout_s", "the tasks function's timeout (360-900 s)", f"`{DEFAULT_TASKS_TIMEOUT_S}`"),
    Parameter("glue_database", "the Glue database for Athena", "the stack name, lower case"),
    Parameter("athena_tables", 'JSON `{"db.measurement": {"column": "type"}}`', "none"),
    Parameter("express_zone", "AZ id (`use1-az4`) of an S3 Express One Zone directory bucket", "none"),
    Parameter("alarm_email", "an e-mail address the alarms notify (through a topic the stack creates)", "none"),
    Parameter("alarm_topic_arn", "an SNS topic the alarms notify instead", "none"),
    Parameter(
        "alarm_oldest_write_s",
        "the oldest queued write's age that raises an alarm (60-1,209,600 s)",
        f"`{DEFAULT_OLDEST_WRITE_S}`",
    ),
    Parameter(
        "compaction_tiers",
        "`ARCS_COMPACTION_TIERS` of every function: `hour,day`, `hour,day,month`, `hour,month` or `hour`",
        "`hour,day`",
    ),
    Parameter("sort_keys", "`ARCS_SORT_KEYS` of every function, e.g. `cpu:host;hits:CounterID,UserID`", "none"),
)
KEYS = frozenset(p.key for p in PARAMETERS)


@dataclass(frozen=True)
class Parameters:
    """The validated values (``read``)."""

    stack_name: str = "ArcServerless"
    prefix: str = ""
    architecture: str = DEFAULT_ARCH
    layers_dir: str | None = None
    memory_mb: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_MEMORY_MB))
    #: Only the functions given one; the others share the account's unreserved concurrency.
    reserved_concurrency: Mapping[str, int] = field(default_factory=dict)
    query_ephemeral_storage_mb: int = DEFAULT_QUERY_EPHEMERAL_MB
    query_image: bool = False
    ingest_batch_size: int = DEFAULT_BATCH_SIZE
    ingest_batch_window_s: int = DEFAULT_BATCH_WINDOW_S
    ingest_timeout_s: int = DEFAULT_INGEST_TIMEOUT_S
    query_timeout_s: int = QUERY_BUDGET_S
    tasks_timeout_s: int = DEFAULT_TASKS_TIMEOUT_S
    glue_database: str | None = None
    athena_tables: Mapping[str, Mapping[str, str]] | None = None
    express_zone: str | None = None
    alarm_email: str | None = None
    alarm_topic_arn: str | None = None
    alarm_oldest_write_s: int = DEFAULT_OLDEST_WRITE_S
    #: As the functions' environment takes them (checked with the functions' own parsers).
    compaction_tiers: str | None = None
    sort_keys: str | None = None


def _setting(parse: Callable[[str], object]) -> Callable[[str, Any], str]:
    """A value the functions read from their environment, refused here as they would refuse it."""

    def check(key: str, value: Any) -> str:
        try:
            parse(str(value))
        except ConfigError as exc:
            raise ParameterError(f"{key}: {exc.message}") from None
        return str(value)

    return check


def _integer(key: str, value: Any, low: int, high: int, unit: str = "") -> int:
    whole = isinstance(value, float) and value.is_integer()
    digits = isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]+\s*", value) is not None
    if isinstance(value, bool) or not (isinstance(value, int) or whole or digits):
        raise ParameterError(f"{key} must be a whole number, got {value!r}")
    number = int(value)
    if not low <= number <= high:
        raise ParameterError(f"{key} must be {low} to {high}{unit}, got {number}")
    return number


def _ranged(low: int, high: int, unit: str = "") -> Callable[[str, Any], int]:
    return lambda key, value: _integer(key, value, low, high, unit)


def _pattern(pattern: re.Pattern[str], what: str) -> Callable[[str, Any], str]:
    return lambda key, value: _matching(key, value, pattern, what)


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ParameterError(f"{key} must be true or false, got {value!r}")


def _matching(key: str, value: Any, pattern: re.Pattern[str], what: str) -> str:
    if not isinstance(value, str) or not pattern.match(value):
        raise ParameterError(f"{key} must be {what}, got {value!r}")
    return value


def _athena_tables(value: Any) -> dict[str, dict[str, str]]:
    # On the command line every context value is a string; in cdk.json it may already be JSON.
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ParameterError(f"athena_tables must be JSON ({exc.msg} at character {exc.pos})") from None
    shape = 'an object {"db.measurement": {"column": "type", ...}, ...}'
    if not isinstance(value, dict):
        raise ParameterError(f"athena_tables must be {shape}, got {type(value).__name__}")
    for table, columns in value.items():
        if not isinstance(columns, dict) or not all(isinstance(t, str) for t in columns.values()):
            raise ParameterError(f"athena_tables: {table!r} must map column names to type names, got {columns!r}")
    return value


def _unknown_keys(context: Mapping[str, Any]) -> None:
    for key in sorted(context):
        if key in RENAMED:
            raise ParameterError(f"parameter {key!r} is now {RENAMED[key]!r} (docs/deploy.md lists them)")
        # A key that is one of ours but for its case or separators (query-memory-mb, queryMemoryMb).
        folded = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).replace("-", "_").lower()
        if key not in KEYS and (_OWN_KEY.match(key) or folded in KEYS):
            close = [folded] if folded in KEYS else difflib.get_close_matches(key, sorted(KEYS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ParameterError(f"unknown parameter {key!r}{hint} (docs/deploy.md lists them)")


def read(context: Mapping[str, Any]) -> Parameters:
    """The parameters in ``context`` (every key the app was given), validated; absent or empty ones
    take their defaults."""
    _unknown_keys(context)

    def take(key: str, parse: Callable[[str, Any], Any], default: Any) -> Any:
        value = context.get(key)
        return default if value is None or value == "" else parse(key, value)

    memory = {
        name: take(
            f"{name}_memory_mb",
            _ranged(MIN_WRITE_MEMORY_MB.get(name, MEMORY_RANGE_MB[0]), MEMORY_RANGE_MB[1], " MB"),
            DEFAULT_MEMORY_MB[name],
        )
        for name in FUNCTIONS
    }
    reserved: dict[str, int] = {}
    for name in FUNCTIONS:
        floor = MIN_SQS_RESERVED_CONCURRENCY if name == "ingest" else 1
        count = take(f"{name}_reserved_concurrency", _ranged(floor, MAX_RESERVED_CONCURRENCY), None)
        if count is not None:
            reserved[name] = count
    batch_size = take("ingest_batch_size", _ranged(*BATCH_SIZE_RANGE), DEFAULT_BATCH_SIZE)
    window = take("ingest_batch_window_s", _ranged(*BATCH_WINDOW_RANGE_S, " s"), DEFAULT_BATCH_WINDOW_S)
    if batch_size > UNWINDOWED_MAX_BATCH and window < 1:
        raise ParameterError(
            f"ingest_batch_size {batch_size} needs ingest_batch_window_s of at least 1 s: Lambda takes an SQS "
            f"batch above {UNWINDOWED_MAX_BATCH} messages only with a batching window (got {window} s)"
        )
    email = take("alarm_email", _pattern(_EMAIL, "an e-mail address"), None)
    topic = take(
        "alarm_topic_arn", _pattern(_TOPIC_ARN, "an SNS topic ARN (arn:aws:sns:<region>:<account>:<name>)"), None
    )
    if email and topic:
        raise ParameterError("give alarm_email or alarm_topic_arn, not both (subscribe the address to your topic)")
    architecture = take("architecture", _pattern(_ARCHITECTURE, f"one of {sorted(ARCHITECTURES)}"), DEFAULT_ARCH)
    prefix = take("prefix", lambda key, value: str(value).strip("/"), "")
    _matching("prefix", prefix, _PREFIX, "letters, digits and . _ - / (200 at most; a letter or digit first)")
    return Parameters(
        stack_name=take(
            "stack_name",
            _pattern(_STACK_NAME, "a letter, then letters, digits and '-' (128 at most)"),
            Parameters.stack_name,
        ),
        prefix=prefix,
        architecture=architecture,
        layers_dir=take("layers_dir", lambda key, value: str(value), None),
        memory_mb=memory,
        reserved_concurrency=reserved,
        query_ephemeral_storage_mb=take(
            "query_ephemeral_storage_mb", _ranged(*EPHEMERAL_RANGE_MB, " MB"), DEFAULT_QUERY_EPHEMERAL_MB
        ),
        query_image=take("query_image", _boolean, False),
        ingest_batch_size=batch_size,
        ingest_batch_window_s=window,
        ingest_timeout_s=take("ingest_timeout_s", _ranged(*TIMEOUT_RANGE_S, " s"), DEFAULT_INGEST_TIMEOUT_S),
        query_timeout_s=take("query_timeout_s", _ranged(*QUERY_TIMEOUT_RANGE_S, " s"), QUERY_BUDGET_S),
        tasks_timeout_s=take("tasks_timeout_s", _ranged(*TASKS_TIMEOUT_RANGE_S, " s"), DEFAULT_TASKS_TIMEOUT_S),
        glue_database=take(
            "glue_database", _pattern(_GLUE_DATABASE, "lower-case letters, digits and '_' (255 at most)"), None
        ),
        athena_tables=take("athena_tables", lambda key, value: _athena_tables(value), None),
        express_zone=take("express_zone", _pattern(_ZONE_ID, "an availability zone id such as 'use1-az4'"), None),
        alarm_email=email,
        alarm_topic_arn=topic,
        alarm_oldest_write_s=take("alarm_oldest_write_s", _ranged(*OLDEST_WRITE_RANGE_S, " s"), DEFAULT_OLDEST_WRITE_S),
        compaction_tiers=take("compaction_tiers", _setting(parse_tiers), None),
        sort_keys=take("sort_keys", _setting(parse_sort_keys), None),
    )
