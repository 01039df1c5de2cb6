"""The measurements every runtime takes, defined once: names, kinds, units, labels and help.

The core records them through ``record``; where they go depends on the runtime, which installs a
recorder once (``use``): the standalone server keeps them in a Prometheus registry and serves them
at ``/metrics`` (``PrometheusRecorder``); the Lambda functions, and ``arcs local`` that runs them,
print each as a CloudWatch embedded-metric (EMF) line through Powertools Metrics (``EmfRecorder``).
Without a recorder nothing is kept.

Names are the same everywhere: Prometheus appends ``_total`` to a counter's name, as its text format
requires; CloudWatch shows the name as defined here. Labels (EMF dimensions) carry only bounded,
non-secret values: a wire format, an HTTP status, a task or an outcome; never a database, a
measurement or a token, since ``/metrics`` answers without a token (docs/operations.md).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = [
    "MEASURES",
    "EmfRecorder",
    "Kind",
    "Measure",
    "PrometheusRecorder",
    "Recorder",
    "Values",
    "record",
    "status_of",
    "use",
]


class Kind(Enum):
    COUNTER = "counter"  # a running total: each record adds its value
    GAUGE = "gauge"  # a level: each record sets it
    HISTOGRAM = "histogram"  # a distribution: each record is one observation


@dataclass(frozen=True)
class Measure:
    name: str
    kind: Kind
    #: CloudWatch's unit (``Count``, ``Bytes``, ``Seconds``); Prometheus names carry theirs.
    unit: str
    help: str
    labels: tuple[str, ...] = ()


_W = ("format", "status")
WRITE_REQUESTS = Measure(
    "arcs_write_requests", Kind.COUNTER, "Count", "Write requests, by wire format and HTTP status.", _W
)
WRITE_ROWS = Measure(
    "arcs_write_rows", Kind.COUNTER, "Count", "Rows accepted into the queue, by wire format.", ("format",)
)
WRITE_BYTES = Measure(
    "arcs_write_bytes", Kind.COUNTER, "Bytes", "Write request bodies as sent, by wire format and HTTP status.", _W
)
QUEUE_DEPTH = Measure(
    "arcs_queue_depth", Kind.GAUGE, "Count", "Writes queued and not yet ingested (standalone: the spool)."
)
QUEUE_OLDEST_AGE = Measure(
    "arcs_queue_oldest_age_seconds",
    Kind.GAUGE,
    "Seconds",
    "Age of the oldest write not yet ingested (standalone: the spool).",
)
WRITE_TO_QUERYABLE = Measure(
    "arcs_write_to_queryable_seconds",
    Kind.HISTOGRAM,
    "Seconds",
    "From a write being queued to its rows being committed to storage.",
)
INGEST_BATCHES = Measure("arcs_ingest_batches", Kind.COUNTER, "Count", "Batches of queued writes the ingest step took.")
INGEST_WRITES = Measure(
    "arcs_ingest_writes", Kind.COUNTER, "Count", "Queued writes the ingest step handled, by outcome.", ("outcome",)
)
INGEST_FILES = Measure("arcs_ingest_files", Kind.COUNTER, "Count", "Parquet files the ingest step committed.")
QUERIES = Measure("arcs_queries", Kind.COUNTER, "Count", "SQL queries, by HTTP status.", ("status",))
QUERY_DURATION = Measure(
    "arcs_query_duration_seconds", Kind.HISTOGRAM, "Seconds", "SQL query run time, by HTTP status.", ("status",)
)
QUERY_BYTES_SCANNED = Measure(
    "arcs_query_scanned_bytes",
    Kind.COUNTER,
    "Bytes",
    "Bytes of the Parquet files queries read, by HTTP status.",
    ("status",),
)
RESULTS_HANDED_OFF = Measure(
    "arcs_query_results_handed_off",
    Kind.COUNTER,
    "Count",
    "Query results too large to answer inline, sent through storage.",
)
COMPACTION_RUNS = Measure("arcs_compaction_runs", Kind.COUNTER, "Count", "Compaction runs, by status.", ("status",))
COMPACTION_JOBS = Measure("arcs_compaction_jobs", Kind.COUNTER, "Count", "Partitions compacted.")
COMPACTION_WAITING = Measure(
    "arcs_compaction_partitions_waiting",
    Kind.GAUGE,
    "Count",
    "Partitions due for compaction, as the last run found them.",
)
COMPACTION_FILES_PER_PARTITION = Measure(
    "arcs_compaction_files_per_partition_max",
    Kind.GAUGE,
    "Count",
    "Files of the fullest partition due for compaction, as the last run found them.",
)
RETENTION_RUNS = Measure("arcs_retention_runs", Kind.COUNTER, "Count", "Retention runs, by status.", ("status",))
CQ_RUNS = Measure("arcs_continuous_query_runs", Kind.COUNTER, "Count", "Continuous-query runs, by status.", ("status",))
CQ_FAILURES = Measure(
    "arcs_continuous_query_failures", Kind.COUNTER, "Count", "Continuous queries whose window failed in a run."
)
AUTH_FAILURES = Measure(
    "arcs_auth_failures",
    Kind.COUNTER,
    "Count",
    "Tokens refused (unknown, revoked or expired), or not checked while the caller is locked out (429).",
)

MEASURES: tuple[Measure, ...] = (
    WRITE_REQUESTS,
    WRITE_ROWS,
    WRITE_BYTES,
    QUEUE_DEPTH,
    QUEUE_OLDEST_AGE,
    WRITE_TO_QUERYABLE,
    INGEST_BATCHES,
    INGEST_WRITES,
    INGEST_FILES,
    QUERIES,
    QUERY_DURATION,
    QUERY_BYTES_SCANNED,
    RESULTS_HANDED_OFF,
    COMPACTION_RUNS,
    COMPACTION_JOBS,
    COMPACTION_WAITING,
    COMPACTION_FILES_PER_PARTITION,
    RETENTION_RUNS,
    CQ_RUNS,
    CQ_FAILURES,
    AUTH_FAILURES,
)


#: One value, or several observations of a histogram taken together (one EMF line holds them all).
Values = float | Sequence[float]


def _each(value: Values) -> Sequence[float]:
    return (value,) if isinstance(value, int | float) else value


class Recorder(Protocol):
    def record(self, values: Mapping[Measure, Values], labels: Mapping[str, str]) -> None:
        """Record ``values`` (measures sharing ``labels``) as one observation."""


class _Nothing:
    def record(self, values: Mapping[Measure, Values], labels: Mapping[str, str]) -> None:
        return None


_recorder: Recorder = _Nothing()


def use(recorder: Recorder) -> None:
    """Where this process's measurements go from now on (one recorder per process)."""
    global _recorder
    _recorder = recorder


def record(values: Mapping[Measure, Values], **labels: str) -> None:
    """Record ``values``; each measure takes the labels it declares from ``labels``. Never raises:
    a measurement that cannot be kept must not fail the request it measures."""
    try:
        _recorder.record(values, labels)
    except Exception:  # pragma: no cover - a recorder's own fault
        import logging

        logging.getLogger(__name__).exception("a measurement could not be recorded")


def status_of(exc: BaseException | None, ok: int = 200) -> str:
    """The HTTP status a request ends with: ``ok``, the domain error's, or 500."""
    if exc is None:
        return str(ok)
    from arcs.errors import ArcsError

    return str(exc.status) if isinstance(exc, ArcsError) else "500"


class PrometheusRecorder:
    """The measurements as Prometheus metrics in a registry of their own (the standalone server)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry: CollectorRegistry = CollectorRegistry()
        kinds: dict[Kind, Any] = {Kind.COUNTER: Counter, Kind.GAUGE: Gauge, Kind.HISTOGRAM: Histogram}
        # Each series once looked up: the client's own lookup takes a lock and builds a key each time.
        self._series: dict[tuple[Measure, tuple[str, ...]], Any] = {}
        self._metrics = {m: kinds[m.kind](m.name, m.help, m.labels, registry=self.registry) for m in MEASURES}

    def record(self, values: Mapping[Measure, Values], labels: Mapping[str, str]) -> None:
        for measure, value in values.items():
            key = (measure, tuple(labels[name] for name in measure.labels))
            metric = self._series.get(key)
            if metric is None:
                metric = self._metrics[measure]
                metric = self._series[key] = metric.labels(*key[1]) if measure.labels else metric
            for each in _each(value):
                if measure.kind is Kind.COUNTER:
                    metric.inc(each)
                elif measure.kind is Kind.GAUGE:
                    metric.set(each)
                else:
                    metric.observe(each)

    def render(self) -> tuple[bytes, str]:
        """The text exposition of every metric, and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class EmfRecorder:
    """Each observation as one CloudWatch embedded-metric line, printed through Powertools Metrics.

    One line per observation, because EMF gives every metric of a line the same dimensions and
    each observation has its own. Lambda answers one event at a time per container, but ``arcs
    local`` runs its functions on threads of one process, and Powertools keeps the metrics being
    gathered in shared state: a lock keeps each line whole.
    """

    def __init__(self, namespace: str) -> None:
        from aws_lambda_powertools import Metrics

        self.metrics = Metrics(namespace=namespace)
        self._lock = threading.Lock()

    def record(self, values: Mapping[Measure, Values], labels: Mapping[str, str]) -> None:
        from aws_lambda_powertools.metrics import MetricUnit

        with self._lock:
            dimensions = {name for measure in values for name in measure.labels}
            for name in sorted(dimensions):
                self.metrics.add_dimension(name, labels[name])
            for measure, value in values.items():
                for each in _each(value):
                    self.metrics.add_metric(measure.name, MetricUnit(measure.unit), each)
            self.metrics.flush_metrics()
