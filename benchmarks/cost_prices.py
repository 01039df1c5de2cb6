"""AWS's published prices (us-east-1) and the arithmetic that turns measured usage into dollars.

The cost benchmark (``benchmarks.cost``) measures usage; this module prices it, so the arithmetic is
tested on its own (tests/unit/test_cost_prices.py). Free tiers are left out: the figures are what
the usage costs past them. Each price names the page it comes from; docs/cost.md gives the date.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

PRICES_DATE = "2026-11-28"
GB = 1024**3
SQS_CHUNK_BYTES = 64 * 1024
FIREHOSE_RECORD_UNIT_BYTES = 5 * 1024
MB = 1024**2
ATHENA_MIN_BYTES = 10 * MB
MONTH_S = 30 * 24 * 3600


@dataclass(frozen=True, slots=True)
class Price:
    dollars: float
    per: str
    source: str


_LAMBDA = "https://aws.amazon.com/lambda/pricing/"
_APIGW = "https://aws.amazon.com/api-gateway/pricing/"
_SQS = "https://aws.amazon.com/sqs/pricing/"
_S3 = "https://aws.amazon.com/s3/pricing/"
_DDB = "https://aws.amazon.com/dynamodb/pricing/on-demand/"
_CW = "https://aws.amazon.com/cloudwatch/pricing/"
_SECRETS = "https://aws.amazon.com/secrets-manager/pricing/"
_FIREHOSE = "https://aws.amazon.com/firehose/pricing/"
_ATHENA = "https://aws.amazon.com/athena/pricing/"

PRICES: dict[str, Price] = {
    "lambda_gb_s": Price(0.0000133334, "GB-second, Arm, first 7.5 billion GB-s a month", _LAMBDA),
    "lambda_request": Price(0.20 / 1e6, "request", _LAMBDA),
    "apigw_request": Price(3.50 / 1e6, "REST API request, first 333 million a month", _APIGW),
    "sqs_request": Price(0.40 / 1e6, "standard queue request, each 64 KB chunk of a payload", _SQS),
    "s3_put": Price(0.005 / 1000, "S3 Standard PUT, COPY, POST or LIST request", _S3),
    "s3_get": Price(0.0004 / 1000, "S3 Standard GET, HEAD or other request", _S3),
    "s3_gb_month": Price(0.023, "GB-month of S3 Standard, first 50 TB", _S3),
    "ddb_write_unit": Price(0.625 / 1e6, "on-demand write request unit", _DDB),
    "ddb_read_unit": Price(0.125 / 1e6, "on-demand read request unit", _DDB),
    "cw_alarm_month": Price(0.10, "standard-resolution alarm metric a month", _CW),
    "cw_dashboard_month": Price(3.00, "dashboard a month (past the account's first three)", _CW),
    "secret_month": Price(0.40, "secret a month", _SECRETS),
    "firehose_gb": Price(0.029, "GB ingested by Direct PUT, each record rounded up to 5 KB", _FIREHOSE),
    "firehose_parquet_gb": Price(0.018, "GB converted to Parquet, each record rounded up to 5 KB", _FIREHOSE),
    "athena_tb": Price(5.00, "TB scanned, rounded up to the MB, at least 10 MB a query", _ATHENA),
}


def price(name: str) -> float:
    return PRICES[name].dollars


@dataclass(slots=True)
class Usage:
    """What a workload used, in the units AWS bills. ``billed_s`` and ``invocations`` are by the
    memory (MB) of the function that ran; S3 by request class (``put``: PUT/COPY/POST/LIST,
    ``get``: GET/HEAD and the rest; DELETE is free)."""

    billed_s: dict[int, float] = field(default_factory=dict)
    invocations: int = 0
    api_requests: int = 0
    sqs_requests: int = 0
    s3_put: int = 0
    s3_get: int = 0
    ddb_read_units: float = 0.0
    ddb_write_units: float = 0.0

    def add_invocation(self, memory_mb: int, billed_s: float) -> None:
        self.billed_s[memory_mb] = self.billed_s.get(memory_mb, 0.0) + billed_s
        self.invocations += 1

    def __add__(self, other: Usage) -> Usage:
        billed = dict(self.billed_s)
        for memory, seconds in other.billed_s.items():
            billed[memory] = billed.get(memory, 0.0) + seconds
        return Usage(
            billed,
            self.invocations + other.invocations,
            self.api_requests + other.api_requests,
            self.sqs_requests + other.sqs_requests,
            self.s3_put + other.s3_put,
            self.s3_get + other.s3_get,
            self.ddb_read_units + other.ddb_read_units,
            self.ddb_write_units + other.ddb_write_units,
        )

    def scaled(self, factor: float) -> Usage:
        return Usage(
            {memory: seconds * factor for memory, seconds in self.billed_s.items()},
            round(self.invocations * factor),
            round(self.api_requests * factor),
            round(self.sqs_requests * factor),
            round(self.s3_put * factor),
            round(self.s3_get * factor),
            self.ddb_read_units * factor,
            self.ddb_write_units * factor,
        )


def gb_seconds(billed_s: Mapping[int, float]) -> float:
    """Lambda bills configured memory times duration, memory in GB of 1,024 MB."""
    return sum(memory_mb / 1024 * seconds for memory_mb, seconds in billed_s.items())


def dollars(usage: Usage) -> dict[str, float]:
    """The bill of ``usage`` by service."""
    return {
        "lambda": gb_seconds(usage.billed_s) * price("lambda_gb_s") + usage.invocations * price("lambda_request"),
        "api_gateway": usage.api_requests * price("apigw_request"),
        "sqs": usage.sqs_requests * price("sqs_request"),
        "s3": usage.s3_put * price("s3_put") + usage.s3_get * price("s3_get"),
        "dynamodb": usage.ddb_read_units * price("ddb_read_unit") + usage.ddb_write_units * price("ddb_write_unit"),
    }


def total(usage: Usage) -> float:
    return sum(dollars(usage).values())


def sqs_chunks(payload_bytes: int) -> int:
    """SQS bills each 64 KB chunk of a request's payload as one request."""
    return max(1, math.ceil(payload_bytes / SQS_CHUNK_BYTES))


def storage_month(stored_bytes: float) -> float:
    return stored_bytes / GB * price("s3_gb_month")


def firehose_ingest(records: int, record_bytes: float) -> float:
    """Firehose Direct PUT with conversion to Parquet: both bill the GB ingested, each record
    rounded up to the next 5 KB."""
    billed_bytes = records * math.ceil(record_bytes / FIREHOSE_RECORD_UNIT_BYTES) * FIREHOSE_RECORD_UNIT_BYTES
    return billed_bytes / GB * (price("firehose_gb") + price("firehose_parquet_gb"))


def athena_query(scanned_bytes: float) -> float:
    """Athena bills the bytes scanned rounded up to the next MB, at least 10 MB a query, at $5 per
    TB (2^40 bytes)."""
    billed = max(math.ceil(scanned_bytes / MB) * MB, ATHENA_MIN_BYTES)
    return billed / 1024**4 * price("athena_tb")


def monthly_runs(every_s: float) -> float:
    """Invocations a month of a schedule that fires every ``every_s`` seconds (a 30-day month)."""
    return MONTH_S / every_s


def idle_fixed_month(alarms: int, dashboards: int, secrets: int) -> float:
    """What the stack's alarms, dashboard and secrets cost a month whatever the traffic."""
    return alarms * price("cw_alarm_month") + dashboards * price("cw_dashboard_month") + secrets * price("secret_month")
