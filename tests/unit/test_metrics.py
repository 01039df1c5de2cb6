"""The measurements, defined once: what each runtime's recorder makes of them."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from arcs import metrics


def test_names_are_unique_and_labels_bounded() -> None:
    names = [m.name for m in metrics.MEASURES]
    assert len(names) == len(set(names))
    assert all(name.startswith("arcs_") for name in names)
    # /metrics needs no token: no label may name a database or a token.
    allowed = {"format", "status", "outcome"}
    assert {label for m in metrics.MEASURES for label in m.labels} <= allowed


def test_prometheus_text_parses_with_the_values_recorded() -> None:
    recorder = metrics.PrometheusRecorder()
    recorder.record({metrics.WRITE_REQUESTS: 1, metrics.WRITE_BYTES: 120}, {"format": "json", "status": "204"})
    recorder.record({metrics.WRITE_REQUESTS: 1, metrics.WRITE_BYTES: 80}, {"format": "json", "status": "204"})
    recorder.record({metrics.QUEUE_DEPTH: 3}, {})
    recorder.record({metrics.WRITE_TO_QUERYABLE: [0.2, 0.4]}, {})
    body, content_type = recorder.render()
    assert content_type.startswith("text/plain")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }
    labels = (("format", "json"), ("status", "204"))
    assert samples[("arcs_write_requests_total", labels)] == 2
    assert samples[("arcs_write_bytes_total", labels)] == 200
    assert samples[("arcs_queue_depth", ())] == 3
    assert samples[("arcs_write_to_queryable_seconds_count", ())] == 2
    assert samples[("arcs_write_to_queryable_seconds_sum", ())] == pytest.approx(0.6)


def test_each_emf_line_carries_its_own_dimensions(capsys: pytest.CaptureFixture[str]) -> None:
    recorder = metrics.EmfRecorder("ArcsTest")
    recorder.record({metrics.QUERIES: 1, metrics.QUERY_DURATION: 0.25}, {"status": "200"})
    recorder.record({metrics.QUERIES: 1}, {"status": "400"})
    recorder.record({metrics.WRITE_TO_QUERYABLE: [1.5, 2.5]}, {})
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 3
    first = lines[0]["_aws"]["CloudWatchMetrics"][0]
    assert first["Namespace"] == "ArcsTest"
    assert first["Dimensions"] == [["status"]]
    assert first["Metrics"] == [
        {"Name": "arcs_queries", "Unit": "Count"},
        {"Name": "arcs_query_duration_seconds", "Unit": "Seconds"},
    ]
    assert (lines[0]["status"], lines[0]["arcs_queries"], lines[0]["arcs_query_duration_seconds"]) == (
        "200",
        [1.0],
        [0.25],
    )
    assert (lines[1]["status"], lines[1]["arcs_queries"]) == ("400", [1.0])
    assert lines[2]["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [[]]
    assert lines[2]["arcs_write_to_queryable_seconds"] == [1.5, 2.5]


def test_status_of() -> None:
    from arcs.errors import NotFound

    assert metrics.status_of(None) == "200"
    assert metrics.status_of(None, ok=204) == "204"
    assert metrics.status_of(NotFound("x")) == "404"
    assert metrics.status_of(RuntimeError("x")) == "500"
