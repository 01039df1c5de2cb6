"""The smoke's steps through the functions: every write route, every other route, an import posted
whole and one uploaded, and each task of the tasks function.
"""

from __future__ import annotations

import io
import os
import urllib.parse
import urllib.request
from typing import Any

from .calls import Api, Context, Handler, Recording, sqs_event
from .routes import IMPORT_TASK, SCHEDULED_TASKS

DATABASE = "smoke"
T0_S = 1_700_000_000
LINES = f"cpu,host=a usage=1.5 {T0_S}\ncpu,host=b usage=2.5 {T0_S + 1}\n".encode()


def write_everything(api: Api, ingest: Handler, sqs: Any) -> None:
    """Each write route once, ingested in two batches: two files of ``cpu`` in one hour."""
    queue_url = os.environ["ARCS_QUEUE_URL"]
    named = {"x-arc-database": DATABASE, "Content-Type": "text/plain"}
    api.call("POST", "/api/v1/write/line-protocol", body=LINES, headers=named, query={"precision": "s"}, status=204)
    ingested = ingest(sqs_event(sqs, queue_url), Context("ingest"))
    assert ingested == {"batchItemFailures": []}, ingested

    lines = f"cpu,host=c usage=3.5 {T0_S + 2}\n".encode()
    v1 = {"db": DATABASE, "precision": "s"}
    api.call("POST", "/write", body=lines, query=v1, headers={"Content-Type": "text/plain"}, status=204)
    v2 = {"bucket": DATABASE, "precision": "s"}
    api.call("POST", "/api/v2/write", body=lines, query=v2, headers={"Content-Type": "text/plain"}, status=204)
    columns = {"m": "mem", "tags": ["host"], "columns": {"time": [T0_S * 1000], "host": ["a"], "used": [1.0]}}
    api.call("POST", "/api/v1/write/json", body=columns, headers={"x-arc-database": DATABASE}, status=204)
    import msgpack

    packed = msgpack.packb({**columns, "m": "swap"})
    api.call(
        "POST",
        "/api/v1/write/msgpack",
        body=packed,
        headers={"x-arc-database": DATABASE, "Content-Type": "application/msgpack"},
        status=204,
    )
    ingested = ingest(sqs_event(sqs, queue_url), Context("ingest"))
    assert ingested == {"batchItemFailures": []}, ingested


def query_everything(api: Api) -> dict[str, Any]:
    """Every route of the query function, reading what :func:`write_everything` wrote; returns the
    event the compaction trigger sent the tasks function."""
    # On AWS the gateway answers the probes itself; the function serves them as the standalone server does.
    api.call("GET", "/health")
    api.call("GET", "/ready")
    for probe in ("/health", "/ready"):
        api.call("HEAD", probe)
    api.call("GET", "/ping", status=204)
    api.call("HEAD", "/ping", status=204)
    sql = {"sql": "SELECT host, usage FROM cpu WHERE host IN ('a', 'b') ORDER BY host", "database": DATABASE}
    result = api.call("POST", "/api/v1/query", body=sql)
    assert result["data"] == [["a", 1.5], ["b", 2.5]], result
    import pyarrow.ipc

    arrow = api.call("POST", "/api/v1/query/arrow", body=sql)
    assert pyarrow.ipc.open_stream(io.BytesIO(arrow)).read_all().num_rows == 2
    assert api.call("GET", "/api/v1/openapi.json")["openapi"].startswith("3.1")
    # The MessagePack answer, zstd-compressed as asked: the layers hold both libraries.
    import msgpack
    import zstandard

    packed = api.call("POST", "/api/v1/query/msgpack", body=sql, headers={"Accept-Encoding": "zstd"})
    document = msgpack.unpackb(zstandard.ZstdDecompressor().decompressobj().decompress(packed))
    assert document["data"] == [["a", "b"], [1.5, 2.5]], document
    assert api.call("POST", "/api/v1/query/estimate", body=sql)["success"] is True
    rows = api.call("GET", "/api/v1/query/<measurement>", "/api/v1/query/mem", query={"database": DATABASE})
    assert rows["row_count"] == 1, rows

    assert api.call("GET", "/api/v1/auth/verify")["valid"] is True
    tokens = "/api/v1/auth/tokens"
    made = api.call("POST", tokens, body={"name": "reader", "permissions": ["read"]}, status=201)
    one = f"{tokens}/{made['id']}"
    assert len(api.call("GET", tokens)["tokens"]) == 2
    api.call("GET", f"{tokens}/<token_id>", one)
    api.call("PATCH", f"{tokens}/<token_id>", one, body={"description": "smoke"})
    api.call("POST", f"{tokens}/<token_id>/rotate", f"{one}/rotate")
    api.call("POST", f"{tokens}/<token_id>/revoke", f"{one}/revoke")
    api.call("DELETE", f"{tokens}/<token_id>", one)

    databases = "/api/v1/databases"
    api.call("POST", databases, body={"name": "smoke_extra"}, status=201)
    listed = {d["name"] for d in api.call("GET", databases)["databases"]}
    assert {DATABASE, "smoke_extra"} <= listed, listed
    api.call("GET", f"{databases}/<name>", f"{databases}/{DATABASE}")
    measurements = api.call("GET", f"{databases}/<name>/measurements", f"{databases}/{DATABASE}/measurements")
    assert {m["name"] for m in measurements["measurements"]} == {"cpu", "mem", "swap"}, measurements
    api.call("GET", "/api/v1/measurements", query={"database": DATABASE})
    api.call("DELETE", f"{databases}/<name>", f"{databases}/smoke_extra", query={"confirm": "true"})

    for view in ("status", "stats", "candidates", "jobs", "history"):
        api.call("GET", f"/api/v1/compaction/{view}")
    # The trigger invokes the tasks function asynchronously: the Lambda API must take the request.
    with Recording(os.environ["AWS_ENDPOINT_URL"]) as recording:
        trigger = {"database": DATABASE, "measurement": "cpu"}
        started = api.call("POST", "/api/v1/compaction/trigger", body=trigger, status=202)
    assert started["success"] is True, started
    [invoked] = recording.invocations()
    assert invoked.function == os.environ["ARCS_TASKS_FUNCTION"], invoked
    assert invoked.headers.get("X-Amz-Invocation-Type") == "Event", invoked

    cqs = "/api/v1/continuous_queries"
    definition = {
        "name": "cpu_hourly",
        "database": DATABASE,
        "source_measurement": "cpu",
        "destination_measurement": "cpu_1h",
        "query": "SELECT time_bucket(INTERVAL '1 hour', time) AS time, host, avg(usage) AS usage FROM cpu "
        "WHERE time >= {start_time} AND time < {end_time} GROUP BY ALL",
        "interval": "1h",
        "tag_columns": ["host"],
    }
    cq = f"{cqs}/{api.call('POST', cqs, body=definition, status=201)['continuous_query']['id']}"
    api.call("GET", cqs)
    api.call("GET", f"{cqs}/<query_id>", cq)
    api.call("PUT", f"{cqs}/<query_id>", cq, body={"description": "hourly"})
    api.call("PATCH", f"{cqs}/<query_id>", cq, body={"interval": "1h"})
    window = {"start_time": "2023-11-14T22:00:00Z", "end_time": "2023-11-14T23:00:00Z"}
    executed = api.call("POST", f"{cqs}/<query_id>/execute", f"{cq}/execute", body=window)
    assert executed["success"] is True, executed
    api.call("GET", f"{cqs}/<query_id>/executions", f"{cq}/executions")
    api.call("DELETE", f"{cqs}/<query_id>", cq)

    retention = "/api/v1/retention"
    body = {"name": "year", "database": DATABASE, "measurement": "swap", "retention_days": 365, "buffer_days": 0}
    policy = f"{retention}/{api.call('POST', retention, body=body, status=201)['policy']['id']}"
    api.call("GET", retention, query={"database": DATABASE})
    api.call("GET", f"{retention}/<policy_id>", policy)
    api.call("PUT", f"{retention}/<policy_id>", policy, body={"retention_days": 400})
    api.call("PATCH", f"{retention}/<policy_id>", policy, body={"is_active": True})
    api.call("POST", f"{retention}/<policy_id>/execute", f"{policy}/execute", body={"dry_run": True})
    api.call("POST", f"{retention}/run", body={"dry_run": True})
    api.call("GET", f"{retention}/<policy_id>/executions", f"{policy}/executions")
    api.call("DELETE", f"{retention}/<policy_id>", policy)

    api.call("GET", "/api/v1/delete/config")
    request = {"database": DATABASE, "measurement": "cpu", "where": "host = 'c'", "dry_run": True}
    dry = api.call("POST", "/api/v1/delete", body=request)
    assert dry["deleted_count"] == 1, dry  # the two writes of the same point are one row
    return invoked.event


IMPORTS = "smoke_import"
IMPORTED = f"imported,host=a v=1i {T0_S}\nimported,host=b v=2i {T0_S + 1}\n".encode()
UPLOADED = f"uploaded,host=a v=3.5 {T0_S}\nuploaded,host=b v=4.5 {T0_S + 1}\nuploaded,host=c v=5.5 {T0_S + 2}\n"


def multipart_file(data: bytes, name: str) -> tuple[bytes, str]:
    """A ``multipart/form-data`` body of one ``file`` field, as ``curl -F file=@name`` sends it."""
    boundary = "smoke-" + os.urandom(8).hex()
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    return head + data + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def import_everything(api: Api, ingest: Handler, tasks: Handler, sqs: Any) -> int:
    """A file posted whole to the edge, and a file uploaded to the bucket and imported by the
    tasks function; returns the rows they imported, as a query counts them."""
    named = {"x-arc-database": IMPORTS}
    body, form = multipart_file(IMPORTED, "export.lp")
    posted = api.call(
        "POST",
        "/api/v1/import/<kind>",
        "/api/v1/import/lp",
        body=body,
        headers={**named, "Content-Type": form},
        query={"precision": "s", "import_id": "smoke-lp"},
    )
    assert posted["result"]["import_id"] == "smoke-lp", posted
    # The edge stores nothing itself: its chunks are queued as writes, for ingest to store.
    ingested = ingest(sqs_event(sqs, os.environ["ARCS_QUEUE_URL"]), Context("ingest"))
    assert ingested == {"batchItemFailures": []}, ingested

    uploads = "/api/v1/import/uploads"
    asked = api.call("POST", uploads, headers=named, query={"format": "lp", "precision": "s", "import_id": "smoke-up"})
    # An explicit type: urllib's default (a form) is what a server may read as fields, not a file.
    put = urllib.request.Request(  # noqa: S310
        asked["upload"]["url"], data=UPLOADED.encode(), method="PUT", headers={"Content-Type": "text/plain"}
    )
    with urllib.request.urlopen(put, timeout=30) as answer:  # noqa: S310 - the local test server's presigned URL
        assert answer.status == 200, answer.status
    # Completing the upload invokes the tasks function asynchronously, as the trigger does.
    with Recording(os.environ["AWS_ENDPOINT_URL"]) as recording:
        done = api.call(
            "POST", f"{uploads}/<ident>/complete", f"{uploads}/smoke-up/complete", headers=named, status=202
        )
    assert (done["import"]["state"], done["import"]["bytes_total"]) == ("queued", len(UPLOADED)), done
    [invoked] = recording.invocations()
    assert invoked.function == os.environ["ARCS_TASKS_FUNCTION"], invoked
    assert invoked.headers.get("X-Amz-Invocation-Type") == "Event", invoked
    assert invoked.event == {"task": IMPORT_TASK, "database": IMPORTS, "import_id": "smoke-up"}, invoked
    ran = tasks(invoked.event, Context("tasks"))
    assert ran == {"task": IMPORT_TASK, "state": "done", "rows_imported": 3}, ran

    status = "/api/v1/import/status/<ident>"
    for ident, rows in (("smoke-lp", 2), ("smoke-up", 3)):
        shown = api.call("GET", status, f"/api/v1/import/status/{ident}", headers=named)["import"]
        assert (shown["state"], shown["rows_imported"]) == ("done", rows), shown
    stats = api.call("GET", "/api/v1/import/stats")["stats"]
    assert set(stats) == {"total_requests", "total_records", "total_errors"}, stats
    sql = {
        "sql": "SELECT (SELECT sum(v) FROM imported), (SELECT sum(v) FROM uploaded), "
        "(SELECT count(*) FROM imported) + (SELECT count(*) FROM uploaded)",
        "database": IMPORTS,
    }
    [[lp_sum, up_sum, count]] = api.call("POST", "/api/v1/query", body=sql)["data"]
    assert (lp_sum, up_sum) == (3, 13.5), (lp_sum, up_sum)
    return int(count)


def run_every_task(tasks: Handler, triggered_by: dict[str, Any]) -> list[str]:
    """The tasks function's tasks, as the schedules send them, and the event the trigger route sent."""
    ran = []
    for task in SCHEDULED_TASKS:
        answer = tasks({"task": task}, Context("tasks"))
        assert isinstance(answer, dict), answer
        if task == "compaction":  # the two files of cpu's hour, merged by DuckDB from the layer
            assert [(j["measurement"], j["files_compacted"]) for j in answer["jobs"]] == [("cpu", 2)], answer
        ran.append(task)
    assert triggered_by == {"source": "arcs.trigger", "database": DATABASE, "measurement": "cpu"}, triggered_by
    triggered = tasks(triggered_by, Context("tasks"))
    assert isinstance(triggered, dict), triggered
    return ran
