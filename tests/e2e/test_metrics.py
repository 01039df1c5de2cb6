"""The measurements over real HTTP: the standalone server's ``/metrics`` (Prometheus' text format,
parsed with the Prometheus client's parser) moves with writes, queries, a refused token and a
compaction run; ``arcs local`` prints the same names as CloudWatch embedded-metric lines from its
Lambda handlers; slow queries leave one JSON line naming the caller, never its token."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from arcs import metrics
from tests.e2e.servers import TOKEN, Client, ServerProcess, local, standalone

pytestmark = pytest.mark.e2e

T0_NS = 1_700_000_000 * 10**9  # an hour long past: compactable at once
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = standalone(
        tmp_path / "data",
        ARCS_INGEST_BATCH_WINDOW_S="0",
        ARCS_INGEST_BATCH_MESSAGES="1",  # one file per write: small files to compact
        ARCS_COMPACTION_MIN_AGE_S="0",
        ARCS_COMPACTION_MIN_FILES="4",
        ARCS_COMPACTION_GRACE_S="0",
        ARCS_SLOW_QUERY_MS="0.001",  # every query that reads files is slow here
    ).start()
    yield process
    process.stop()


def scrape(url: str) -> Samples:
    response = httpx.get(f"{url}/metrics", timeout=30)  # no token: a scraper holds no secret
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def eventually(check: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.1)


def write_lines(client: Client, measurement: str, batches: int) -> None:
    for n in range(batches):
        body = "\n".join(f"{measurement},host=h{i} v={n * 10 + i}i {T0_NS + (n * 10 + i) * 1000}" for i in range(10))
        assert client.write("/api/v1/write/line-protocol", body.encode()).status_code == 204


def test_metrics_move_with_real_traffic(server: ServerProcess) -> None:
    client = Client(server.url)
    before = scrape(server.url)
    # Every measure is exposed from the first scrape, with its help and type.
    families = {f.name: f for f in text_string_to_metric_families(httpx.get(f"{server.url}/metrics").text)}
    for measure in metrics.MEASURES:
        assert measure.name in families, measure.name
        assert families[measure.name].type == measure.kind.value

    write_lines(client, "cpu", 5)
    assert client.write("/api/v1/write/line-protocol", b"cpu,host=a v=").status_code == 400
    assert client.wait_count("cpu", 50) == 50
    assert client.query("SELECT sum(v) FROM cpu").status_code == 200
    assert client.query("SELECT * FROM nowhere").status_code == 404
    assert httpx.get(f"{server.url}/api/v1/auth/verify", headers={"Authorization": "Bearer wrong"}).status_code == 401

    after = scrape(server.url)
    lp = {"format": "line-protocol"}
    assert (
        value(after, "arcs_write_requests_total", **lp, status="204")
        - value(before, "arcs_write_requests_total", **lp, status="204")
        == 5
    )
    assert value(after, "arcs_write_requests_total", **lp, status="400") == 1
    assert value(after, "arcs_write_rows_total", **lp) == 50
    assert value(after, "arcs_write_bytes_total", **lp, status="204") > 50 * 20
    assert value(after, "arcs_ingest_batches_total") >= 5
    assert value(after, "arcs_ingest_writes_total", outcome="committed") == 5
    assert value(after, "arcs_ingest_files_total") == 5
    assert value(after, "arcs_write_to_queryable_seconds_count") == 5
    assert 0 < value(after, "arcs_write_to_queryable_seconds_sum") < 30
    assert value(after, "arcs_queries_total", status="200") >= 1
    assert value(after, "arcs_queries_total", status="404") == 1
    assert value(after, "arcs_query_duration_seconds_count", status="200") >= 1
    assert value(after, "arcs_query_scanned_bytes_total", status="200") > 0
    assert value(after, "arcs_auth_failures_total") == 1
    assert value(after, "arcs_queue_depth") == 0
    assert value(after, "arcs_compaction_runs_total", status="ok") == 0

    # A compaction run: the backlog it found, its job.
    assert client.http.post("/api/v1/compaction/trigger", json={}).status_code == 202
    eventually(lambda: value(scrape(server.url), "arcs_compaction_runs_total", status="ok") == 1)
    compacted = scrape(server.url)
    assert value(compacted, "arcs_compaction_partitions_waiting") == 1
    assert value(compacted, "arcs_compaction_files_per_partition_max") == 5
    assert value(compacted, "arcs_compaction_jobs_total") == 1

    # No label names a database or carries a token.
    text = httpx.get(f"{server.url}/metrics").text
    assert TOKEN not in text and "wrong" not in text
    assert not any(label in ("database", "db", "token") for _name, labels in after for label, _v in labels)
    client.http.close()


def slow_lines(output: list[str]) -> list[dict[str, Any]]:
    lines = []
    for line in output:
        if '"event":"slow_query"' in line:
            lines.append(json.loads(line[line.index("{") :]))
    return lines


def test_a_slow_query_is_logged_with_its_caller_never_its_token(server: ServerProcess) -> None:
    client = Client(server.url)
    write_lines(client, "mem", 2)
    assert client.wait_count("mem", 20) == 20
    sql = "SELECT host, sum(v)   AS total\nFROM mem GROUP BY host ORDER BY host " + "-- padding " * 100
    assert client.query(sql).status_code == 200
    eventually(lambda: any("sum(v)" in line["sql"] for line in slow_lines(server.output)))
    line = next(line for line in slow_lines(server.output) if "sum(v)" in line["sql"])
    assert line["token_name"] and line["token_id"]
    assert (line["database"], line["status"], line["files"], line["rows"]) == ("default", "200", 2, 10)
    assert line["bytes_read"] > 0 and line["elapsed_ms"] >= line["threshold_ms"]
    assert line["sql"].startswith("SELECT host, sum(v) AS total FROM mem") and len(line["sql"]) <= 300
    assert not any(TOKEN in entry for entry in server.output)
    client.http.close()


def emf_lines(output: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output if line.startswith('{"_aws"')]


def test_arcs_local_emits_the_same_names_as_embedded_metrics() -> None:
    process = local(ARCS_METRICS_NAMESPACE="ArcsE2E", ARCS_SLOW_QUERY_MS="0").start()
    try:
        client = Client(process.url)
        write_lines(client, "disk", 2)
        assert client.wait_count("disk", 20) == 20
        assert client.query("SELECT max(v) FROM disk").status_code == 200
        assert (
            httpx.get(f"{process.url}/api/v1/auth/verify", headers={"Authorization": "Bearer nope"}).status_code == 401
        )
        # /metrics is the standalone server's: on AWS (and so here) the metrics go to CloudWatch.
        assert httpx.get(f"{process.url}/metrics").status_code in (401, 403, 404)

        def emitted() -> dict[str, dict[str, Any]]:
            found: dict[str, dict[str, Any]] = {}
            for line in emf_lines(process.output):
                directive = line["_aws"]["CloudWatchMetrics"][0]
                for metric in directive["Metrics"]:
                    found.setdefault(
                        metric["Name"],
                        {
                            "unit": metric["Unit"],
                            "dimensions": directive["Dimensions"],
                            "namespace": directive["Namespace"],
                            "line": line,
                        },
                    )
            return found

        names = {
            "arcs_write_requests",
            "arcs_write_rows",
            "arcs_ingest_batches",
            "arcs_write_to_queryable_seconds",
            "arcs_queries",
            "arcs_query_duration_seconds",
            "arcs_auth_failures",
        }
        eventually(lambda: names <= emitted().keys())
        found = emitted()
        by_name = {m.name: m for m in metrics.MEASURES}
        for name in names:
            assert found[name]["unit"] == by_name[name].unit
            assert found[name]["namespace"] == "ArcsE2E"
            assert found[name]["dimensions"] == ([sorted(by_name[name].labels)] if by_name[name].labels else [[]])
        write = found["arcs_write_requests"]["line"]
        assert (write["format"], write["status"], write["arcs_write_requests"]) == ("line-protocol", "204", [1.0])
        assert found["arcs_queries"]["line"]["status"] == "200"
        assert not any(TOKEN in line for line in process.output)
        client.http.close()
    finally:
        process.stop()
