"""The functions print the core measures as CloudWatch embedded metrics.

The world each test gets (``fn``): tests/functional/conftest.py and lambdas.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from arcs.runtime import lambda_runtime
from tests.functional.lambdas import T0_NS, Lambda, context, lp, name

pytestmark = [
    pytest.mark.functional,
]


# --- embedded metrics -------------------------------------------------------------------------------
def emf(captured: str) -> dict[str, tuple[dict[str, Any], list[float]]]:
    """Each metric name the handlers printed as an embedded-metric line: its line, and every value."""
    found: dict[str, tuple[dict[str, Any], list[float]]] = {}
    for text in captured.splitlines():
        if not text.startswith('{"_aws"'):
            continue
        line = json.loads(text)
        for metric in line["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
            _first, values = found.setdefault(metric["Name"], (line, []))
            values.extend(line[metric["Name"]])
    return found


def test_the_functions_print_the_core_measures_as_embedded_metrics(
    fn: Lambda, capsys: pytest.CaptureFixture[str]
) -> None:
    from arcs import metrics

    m = name("cpu")
    capsys.readouterr()
    for n in range(3):  # three batches: three files of one hour, to compact
        fn.write(lp(m, 4, start_ns=T0_NS + n * 10**6))
        assert fn.ingest(fn.receive(1)) == []
    assert fn.count(m) == 12
    report = fn.handlers.tasks({"source": "aws.events"}, context("arcs-tasks"))
    assert report["jobs"]
    fn.handlers.tasks({"task": "retention"}, context("arcs-tasks"))
    fn.handlers.tasks({"task": "continuous_queries"}, context("arcs-tasks"))
    found = emf(capsys.readouterr().out)

    namespace = function_environment_namespace()
    by_name = {measure.name: measure for measure in metrics.MEASURES}
    for metric_name, (line, _values) in found.items():
        directive = line["_aws"]["CloudWatchMetrics"][0]
        measure = by_name[metric_name]
        assert directive["Namespace"] == namespace
        assert {"Name": metric_name, "Unit": measure.unit} in directive["Metrics"]
        assert directive["Dimensions"] == ([sorted(measure.labels)] if measure.labels else [[]])
    write_line, requests = found["arcs_write_requests"]
    assert (write_line["format"], write_line["status"], requests) == ("line-protocol", "204", [1.0, 1.0, 1.0])
    assert found["arcs_write_rows"][1] == [4.0, 4.0, 4.0]
    assert found["arcs_ingest_batches"][1] == [1.0, 1.0, 1.0]
    assert found["arcs_ingest_files"][1][0] >= 1
    # Measured from each SQS message's SentTimestamp.
    waited = found["arcs_write_to_queryable_seconds"][1]
    assert len(waited) == 3 and all(0 <= w < 120 for w in waited)
    assert found["arcs_queries"][0]["status"] == "200"
    assert found["arcs_compaction_runs"][0]["status"] == "ok"
    assert found["arcs_compaction_jobs"][1][0] == len(report["jobs"])
    assert found["arcs_compaction_partitions_waiting"][1][0] >= 1
    assert found["arcs_compaction_files_per_partition_max"][1][0] >= 3
    assert found["arcs_retention_runs"][0]["status"] == "ok"
    assert found["arcs_continuous_query_runs"][0]["status"] == "ok"


def function_environment_namespace() -> str:
    """The namespace the functions' settings give their embedded metrics."""
    return lambda_runtime().settings.metrics_namespace
