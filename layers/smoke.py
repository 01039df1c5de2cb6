"""The built layers, alone, run every function and every route: the smoke test's inside.

Run by :mod:`layers.check` in a clean interpreter (``python3.12 -I -S``: no site-packages, no
user site, no PYTHONPATH) whose ``sys.path`` is the standard library plus the layers' ``python/``
directories, like ``/opt/python`` in Lambda. Only the standard library and the layers may be
imported here. Against a moto server (``AWS_ENDPOINT_URL``) it runs each handler of
``functions/`` as Lambda would call it:

- bootstrap: a CloudFormation ``Create`` reads the token from Secrets Manager, creates the admin
  token and answers at the ``ResponseURL`` (a local HTTP server here);
- authorizer: that token becomes the caller's identity for every route below;
- edge: each write route queues its body to SQS; ingest turns the queued writes into Parquet;
  a line-protocol file posted to the import route (a multipart form, as Arc's clients send it)
  is checked whole and its chunks queued as writes, which ingest stores;
- query: every other route of the HTTP API (:data:`ROUTES` lists them all, and a unit test checks
  the list against the routers), DuckDB's httpfs coming from the duckdb layer (autoinstall off,
  an empty home: nothing can be downloaded). The compaction trigger's asynchronous ``Invoke`` of
  the tasks function (``ARCS_TASKS_FUNCTION``) goes to the server's Lambda API, which takes
  it without running code; the server's recorder keeps the request;
- tasks: each task of the schedules (compaction, continuous queries, retention), and the
  payload of that recorded ``Invoke`` as its event;
- an upload: the query function signs a ``PUT`` of a file to the bucket (the server's S3 API
  takes it); completing it invokes the tasks function as the trigger does, and the recorded
  event, run by the tasks handler (task ``import``), stores the file; the import's status and
  a query show its rows;
- the query function as the stack runs it, streaming: the core layer's wrapper
  (``AWS_LAMBDA_EXEC_WRAPPER``) started as Lambda starts it, with the interpreter, on a Runtime
  API over HTTP (``arcs.emulation.runtime_api``); its answers to queries (JSON, Arrow), to
  another route and to a failing query must come back in Lambda's streaming mode, in chunks, in
  API Gateway's streamed format.

Usage: ``smoke.py FUNCTIONS_DIR LAYER_PYTHON_DIR...``; prints ``smoke ok: ...`` and exits 0.
"""

from __future__ import annotations

import base64
import http.server
import importlib.util
import io
import json
import os
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATABASE = "smoke"
T0_S = 1_700_000_000
LINES = f"cpu,host=a usage=1.5 {T0_S}\ncpu,host=b usage=2.5 {T0_S + 1}\n".encode()

#: Every route of the HTTP API, by the function API Gateway sends it to; the smoke calls each.
WRITE_ROUTES = frozenset(
    {
        ("POST", "/api/v1/write/line-protocol"),
        ("POST", "/api/v1/write/json"),
        ("POST", "/api/v1/write/msgpack"),
        ("POST", "/write"),
        ("POST", "/api/v2/write"),
        ("POST", "/api/v1/import/<kind>"),
    }
)
QUERY_ROUTES = frozenset(
    {
        ("GET", "/health"),
        ("HEAD", "/health"),
        ("GET", "/ready"),
        ("HEAD", "/ready"),
        ("GET", "/ping"),
        ("HEAD", "/ping"),
        ("POST", "/api/v1/query"),
        ("POST", "/api/v1/query/arrow"),
        ("POST", "/api/v1/query/msgpack"),
        ("POST", "/api/v1/query/estimate"),
        ("GET", "/api/v1/openapi.json"),
        ("GET", "/api/v1/query/<measurement>"),
        ("GET", "/api/v1/auth/verify"),
        ("POST", "/api/v1/auth/tokens"),
        ("GET", "/api/v1/auth/tokens"),
        ("GET", "/api/v1/auth/tokens/<token_id>"),
        ("PATCH", "/api/v1/auth/tokens/<token_id>"),
        ("DELETE", "/api/v1/auth/tokens/<token_id>"),
        ("POST", "/api/v1/auth/tokens/<token_id>/rotate"),
        ("POST", "/api/v1/auth/tokens/<token_id>/revoke"),
        ("GET", "/api/v1/databases"),
        ("POST", "/api/v1/databases"),
        ("GET", "/api/v1/databases/<name>"),
        ("GET", "/api/v1/databases/<name>/measurements"),
        ("DELETE", "/api/v1/databases/<name>"),
        ("GET", "/api/v1/measurements"),
        ("GET", "/api/v1/compaction/status"),
        ("GET", "/api/v1/compaction/stats"),
        ("GET", "/api/v1/compaction/candidates"),
        ("GET", "/api/v1/compaction/jobs"),
        ("GET", "/api/v1/compaction/history"),
        ("POST", "/api/v1/compaction/trigger"),
        ("GET", "/api/v1/continuous_queries"),
        ("POST", "/api/v1/continuous_queries"),
        ("GET", "/api/v1/continuous_queries/<query_id>"),
        ("PUT", "/api/v1/continuous_queries/<query_id>"),
        ("PATCH", "/api/v1/continuous_queries/<query_id>"),
        ("DELETE", "/api/v1/continuous_queries/<query_id>"),
        ("POST", "/api/v1/continuous_queries/<query_id>/execute"),
        ("GET", "/api/v1/continuous_queries/<query_id>/executions"),
        ("GET", "/api/v1/retention"),
        ("POST", "/api/v1/retention"),
        ("GET", "/api/v1/retention/<policy_id>"),
        ("PUT", "/api/v1/retention/<policy_id>"),
        ("PATCH", "/api/v1/retention/<policy_id>"),
        ("DELETE", "/api/v1/retention/<policy_id>"),
        ("POST", "/api/v1/retention/<policy_id>/execute"),
        ("POST", "/api/v1/retention/run"),
        ("GET", "/api/v1/retention/<policy_id>/executions"),
        ("POST", "/api/v1/delete"),
        ("GET", "/api/v1/delete/config"),
        ("GET", "/api/v1/import/status/<ident>"),
        ("GET", "/api/v1/import/stats"),
        ("POST", "/api/v1/import/uploads"),
        ("POST", "/api/v1/import/uploads/<ident>/complete"),
    }
)
ROUTES = WRITE_ROUTES | QUERY_ROUTES
#: The tasks function's tasks: the schedules' constant inputs, and the trigger route's event.
SCHEDULED_TASKS = ("compaction", "continuous_queries", "retention")
#: The tasks function's task an upload's completion invokes it with.
IMPORT_TASK = "import"


class Context:
    """The fields of Lambda's context object the handlers (Powertools Logger) read."""

    def __init__(self, name: str) -> None:
        self.function_name = name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 1024
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{name}"
        self.aws_request_id = f"smoke-{name}"
        self.log_group_name = f"/aws/lambda/{name}"
        self.log_stream_name = "smoke"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


Handler = Callable[[dict[str, Any], Context], Any]


def load(functions: Path, folder: str, file: str = "handler.py") -> Handler:
    spec = importlib.util.spec_from_file_location(f"smoke_{folder}_{Path(file).stem}", functions / folder / file)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    handler: Handler = module.handler
    return handler


def http_event(
    method: str, path: str, body: bytes, caller: dict[str, Any], headers: dict[str, str], query: dict[str, str]
) -> dict[str, Any]:
    """An API Gateway REST proxy event as the stack's ``/{proxy+}`` resource delivers it."""
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": query or None,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} or None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "path": "/prod" + path,
            "accountId": "123456789012",
            "stage": "prod",
            "requestId": "smoke",
            "identity": {"sourceIp": "127.0.0.1"},
            "authorizer": caller,
        },
        "body": base64.b64encode(body).decode(),
        "isBase64Encoded": True,
    }


class Api:
    """Calls routes through the function API Gateway sends them to; records which it called."""

    def __init__(self, edge: Handler, query: Handler, caller: dict[str, Any]) -> None:
        self.edge, self.query, self.caller = edge, query, caller
        self.called: set[tuple[str, str]] = set()

    def call(
        self,
        method: str,
        route: str,
        path: str | None = None,
        *,
        body: bytes | dict[str, Any] | None = None,
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        status: int = 200,
    ) -> Any:
        assert (method, route) in ROUTES, (method, route)
        self.called.add((method, route))
        raw = json.dumps(body).encode() if isinstance(body, dict) else body or b""
        headers = {"Content-Type": "application/json", **(headers or {})}
        event = http_event(method, path or route, raw, self.caller, headers, query or {})
        function = self.edge if (method, route) in WRITE_ROUTES else self.query
        answer = function(event, Context("edge" if function is self.edge else "query"))
        assert answer["statusCode"] == status, (method, path or route, answer)
        text = answer.get("body") or ""
        payload = base64.b64decode(text) if answer.get("isBase64Encoded") else text.encode()
        types = {**(answer.get("multiValueHeaders") or {}), **(answer.get("headers") or {})}
        kind = next((v for k, v in types.items() if k.lower() == "content-type"), "")
        if "application/json" in str(kind) and payload:
            return json.loads(payload)
        return payload


@dataclass(frozen=True)
class Invocation:
    function: str
    headers: dict[str, str]
    event: dict[str, Any]


class Recording:
    """The requests made of the moto server meanwhile, as its recorder kept them."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.entries: list[dict[str, Any]] = []

    def _moto_api(self, action: str, method: str = "POST") -> bytes:
        request = urllib.request.Request(f"{self.endpoint}/moto-api/recorder/{action}", method=method)  # noqa: S310
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - the local test server
            body: bytes = answer.read()
            return body

    def __enter__(self) -> Recording:
        self._moto_api("reset-recording")
        self._moto_api("start-recording")
        return self

    def __exit__(self, *exc: object) -> None:
        self._moto_api("stop-recording")
        lines = self._moto_api("download-recording", "GET").decode().splitlines()
        self.entries = [json.loads(line) for line in lines if line.strip()]

    def invocations(self) -> list[Invocation]:
        """Lambda ``Invoke`` requests: ``POST /2015-03-31/functions/{name}/invocations``."""
        found = []
        for entry in self.entries:
            path = urllib.parse.urlsplit(entry["url"]).path.split("/")
            if entry["method"] == "POST" and path[1:3] == ["2015-03-31", "functions"] and path[-1] == "invocations":
                body = base64.b64decode(entry["body"]) if entry["body_encoded"] else entry["body"].encode()
                found.append(Invocation(urllib.parse.unquote(path[3]), entry["headers"], json.loads(body)))
        return found


class _CloudFormation(http.server.BaseHTTPRequestHandler):
    """The presigned ``ResponseURL`` the bootstrap function answers CloudFormation at."""

    answers: list[dict[str, Any]] = []

    def do_PUT(self) -> None:
        self.answers.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def bootstrap(handler: Handler) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _CloudFormation)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        event = {
            "RequestType": "Create",
            "ResponseURL": f"http://127.0.0.1:{server.server_address[1]}/cloudformation",
            "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/smoke/1",
            "RequestId": "smoke",
            "LogicalResourceId": "Bootstrap",
            "ResourceType": "Custom::ArcsBootstrap",
            "ResourceProperties": {"SecretArn": os.environ["SMOKE_ADMIN_SECRET_ARN"]},
        }
        handler(event, Context("bootstrap"))
    finally:
        server.shutdown()
    [answer] = _CloudFormation.answers
    assert (answer["Status"], answer["Data"]) == ("SUCCESS", {"Created": "true"}), answer


def sqs_event(sqs: Any, queue_url: str) -> dict[str, Any]:
    """Everything queued, as the SQS event source hands a batch to the ingest function."""
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    records = []
    while batch := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]).get(
        "Messages", []
    ):
        records += [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": "us-east-1",
            }
            for m in batch
        ]
    return {"Records": records}


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


def stream_queries(functions: Path, layer_dirs: list[str], caller: dict[str, Any]) -> int:
    """The query function through its streaming runtime, started by the core layer's wrapper as
    Lambda starts it; returns how many answers streamed."""
    from arcs.emulation.runtime_api import RuntimeApiServer
    from arcs.http.streaming import read_prelude

    [wrapper] = [Path(d) / "arcs" / "lambda_streaming_runtime" for d in layer_dirs if (Path(d) / "arcs").is_dir()]
    assert os.access(wrapper, os.X_OK), wrapper
    sql = {"sql": "SELECT host, usage FROM cpu WHERE host IN ('a', 'b') ORDER BY host", "database": DATABASE}
    json_type = {"Content-Type": "application/json"}
    requests = [
        http_event("POST", "/api/v1/query", json.dumps(sql).encode(), caller, json_type, {}),
        http_event("POST", "/api/v1/query/arrow", json.dumps(sql).encode(), caller, json_type, {}),
        http_event("GET", "/api/v1/databases", b"", caller, {}, {}),
        http_event(
            "POST",
            "/api/v1/query",
            json.dumps({**sql, "sql": "SELECT nothing FROM cpu"}).encode(),
            caller,
            json_type,
            {},
        ),
    ]
    with RuntimeApiServer() as api:
        ids = [api.invoke(event) for event in requests]
        env = {
            **os.environ,
            "AWS_LAMBDA_RUNTIME_API": api.address,
            "_HANDLER": "handler.stream_handler",
            "LAMBDA_TASK_ROOT": str(functions / "query"),
            "AWS_LAMBDA_FUNCTION_NAME": "query",
            "PYTHONPATH": os.pathsep.join(layer_dirs),  # where Lambda has /opt/python
        }
        # Lambda runs the wrapper with the runtime's own command: the interpreter, then its arguments.
        runtime = subprocess.Popen([str(wrapper), sys.executable, "/var/runtime/bootstrap.py"], env=env)
        try:
            answers = [api.wait(request_id, timeout_s=120) for request_id in ids]
        finally:
            runtime.kill()
            runtime.wait()
    for posted in answers:
        assert posted.kind == "response", posted
        assert posted.headers["Lambda-Runtime-Function-Response-Mode"] == "streaming", posted.headers
        assert posted.headers["Transfer-Encoding"] == "chunked", posted.headers
        assert not posted.trailers, posted
    (status, headers, body), (a_status, a_headers, arrow), (d_status, _, listed), (e_status, _, error) = [
        read_prelude(iter([posted.body])) for posted in answers
    ]
    assert (status, headers["Content-Type"]) == (200, "application/json"), (status, headers)
    assert json.loads(body)["data"] == [["a", 1.5], ["b", 2.5]], body
    assert answers[0].chunks >= 3  # the metadata, then the document's pieces as they were written
    import pyarrow.ipc

    assert (a_status, a_headers["Content-Type"]) == (200, "application/vnd.apache.arrow.stream"), a_headers
    assert pyarrow.ipc.open_stream(io.BytesIO(arrow)).read_all().num_rows == 2
    assert d_status == 200, listed
    assert DATABASE in {d["name"] for d in json.loads(listed)["databases"]}, listed
    assert e_status == 400, error
    assert json.loads(error)["success"] is False, error
    return len(answers)


def main() -> None:
    functions = Path(sys.argv[1])
    layer_dirs = [str(Path(p).resolve()) for p in sys.argv[2:]]
    assert not [p for p in sys.path if "site-packages" in p], sys.path
    sys.path[1:1] = layer_dirs

    import boto3
    import duckdb
    import pyarrow.parquet as pq

    for module in (boto3, duckdb, pq):
        assert any(str(module.__file__).startswith(d) for d in layer_dirs), module.__file__

    authorize = load(functions, "authorizer")
    edge = load(functions, "ingest", "edge.py")
    ingest = load(functions, "ingest")
    query = load(functions, "query")
    tasks = load(functions, "compact")

    bootstrap(load(functions, "bootstrap"))
    token = os.environ["SMOKE_ADMIN_TOKEN"]
    allowed = authorize(
        {
            "type": "REQUEST",
            "methodArn": "arn:aws:execute-api:us-east-1:123456789012:smoke/prod/POST/api/v1/write/line-protocol",
            "headers": {"Authorization": f"Bearer {token}"},
            "queryStringParameters": {},
        },
        Context("authorizer"),
    )
    caller = {**allowed["context"], "principalId": allowed["principalId"]}
    api = Api(edge, query, caller)

    endpoint = os.environ["AWS_ENDPOINT_URL"]
    sqs = boto3.client("sqs", endpoint_url=endpoint)
    write_everything(api, ingest, sqs)
    s3 = boto3.client("s3", endpoint_url=endpoint)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=os.environ["ARCS_BUCKET"]).get("Contents", [])]
    parquet = [k for k in keys if k.endswith(".parquet")]
    cpu = [k for k in parquet if "/cpu/" in k]
    assert len(cpu) == 2, keys
    body = s3.get_object(Bucket=os.environ["ARCS_BUCKET"], Key=cpu[0])["Body"].read()
    assert pq.read_table(io.BytesIO(body)).num_rows == 2

    trigger_event = query_everything(api)
    imported = import_everything(api, ingest, tasks, sqs)
    assert imported == 5, imported
    assert api.called == ROUTES, sorted(ROUTES - api.called)
    streamed = stream_queries(functions, layer_dirs, caller)
    ran = run_every_task(tasks, trigger_event)

    # httpfs was loaded from the duckdb layer's package, through the per-platform link in the work dir.
    links = list(Path(os.environ["ARCS_WORK_DIR"]).rglob("httpfs.duckdb_extension"))
    assert len(links) == 1, links
    assert any(str(links[0].resolve()).startswith(d) for d in layer_dirs), links[0].resolve()

    # The JSON above was written by the core layer's own native library (built for this architecture).
    from arcs import native

    assert native.library() is not None
    assert any(str(native.LIBRARY_PATH).startswith(d) for d in layer_dirs), native.LIBRARY_PATH
    print(
        f"smoke ok: python {sys.version.split()[0]}, duckdb {duckdb.__version__}, {len(api.called)} routes, "
        f"{streamed} answers streamed by the query function's runtime, "
        f"tasks {', '.join(ran)}, the trigger's event and an upload's import ({imported} rows imported), "
        "bootstrap, native library loaded"
    )


if __name__ == "__main__":
    main()
