"""The smoke from start to end: the layers on the path, the functions loaded, the steps in order,
and the query function through its streaming runtime.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .calls import Api, Context, bootstrap, http_event, load
from .routes import ROUTES
from .steps import DATABASE, import_everything, query_everything, run_every_task, write_everything


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
