"""The built layers, alone, run the functions: the import smoke test's inside.

Run by :mod:`layers.check` in a clean interpreter (``python3.12 -I -S``: no site-packages, no
user site, no PYTHONPATH) whose ``sys.path`` is the standard library plus the layers' ``python/``
directories, like ``/opt/python`` in Lambda. Only the standard library and the layers may be
imported here. Against the S3, SQS and DynamoDB of a moto server (``AWS_ENDPOINT_URL``) it
loads every handler from ``functions/``, then: a token is verified by the authorizer, a line
protocol write goes through the edge into SQS, the ingest handler turns it into Parquet on S3,
and the query handler reads it back with DuckDB, whose httpfs must come from the duckdb layer
(autoinstall off, an empty home: nothing can be downloaded).

Usage: ``smoke.py FUNCTIONS_DIR LAYER_PYTHON_DIR...``; prints ``smoke ok: ...`` and exits 0.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

TOKEN = "smoke-admin-token-0123456789abcdef"  # noqa: S105 - a throwaway token on a throwaway moto server
LINES = b"cpu,host=a usage=1.5 1700000000\ncpu,host=b usage=2.5 1700000001\n"


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


def load(functions: Path, folder: str, file: str = "handler.py") -> Any:
    spec = importlib.util.spec_from_file_location(f"smoke_{folder}_{Path(file).stem}", functions / folder / file)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


def http_event(
    method: str, path: str, body: bytes, caller: dict[str, Any], headers: dict[str, str], query: dict[str, str]
) -> dict[str, Any]:
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


def main() -> None:
    functions = Path(sys.argv[1])
    layer_dirs = [str(Path(p).resolve()) for p in sys.argv[2:]]
    assert not [p for p in sys.path if "site-packages" in p], sys.path
    sys.path[1:1] = layer_dirs

    import boto3
    import duckdb
    import pyarrow.parquet as pq

    from arcs.runtime import lambda_runtime

    for module in (boto3, duckdb, pq):
        assert any(str(module.__file__).startswith(d) for d in layer_dirs), module.__file__

    authorize = load(functions, "authorizer")
    edge = load(functions, "ingest", "edge.py")
    ingest = load(functions, "ingest")
    query = load(functions, "query")
    load(functions, "bootstrap")
    if (functions / "compact" / "handler.py").is_file():
        load(functions, "compact")

    runtime = lambda_runtime()
    assert runtime.tokens.bootstrap(TOKEN) == TOKEN

    allowed = authorize(
        {
            "type": "REQUEST",
            "methodArn": "arn:aws:execute-api:us-east-1:123456789012:smoke/prod/POST/api/v1/write/line-protocol",
            "headers": {"Authorization": f"Bearer {TOKEN}"},
            "queryStringParameters": {},
        },
        Context("authorizer"),
    )
    caller = {**allowed["context"], "principalId": allowed["principalId"]}

    headers = {"Content-Type": "text/plain", "x-arc-database": "smoke"}
    written = edge(
        http_event("POST", "/api/v1/write/line-protocol", LINES, caller, headers, {"precision": "s"}),
        Context("edge"),
    )
    assert written["statusCode"] == 204, written

    sqs = boto3.client("sqs", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    queue_url = os.environ["ARCS_QUEUE_URL"]
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    records = [
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
        for m in messages
    ]
    ingested = ingest({"Records": records}, Context("ingest"))
    assert ingested == {"batchItemFailures": []}, ingested

    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=os.environ["ARCS_BUCKET"]).get("Contents", [])]
    parquet = [k for k in keys if k.endswith(".parquet")]
    assert len(parquet) == 1, keys
    body = s3.get_object(Bucket=os.environ["ARCS_BUCKET"], Key=parquet[0])["Body"].read()
    assert pq.read_table(io.BytesIO(body)).num_rows == 2

    sql = json.dumps({"sql": "SELECT host, usage FROM smoke.cpu ORDER BY host"}).encode()
    answered = query(
        http_event("POST", "/api/v1/query", sql, caller, {"Content-Type": "application/json"}, {}),
        Context("query"),
    )
    assert answered["statusCode"] == 200, answered
    result = json.loads(base64.b64decode(answered["body"]) if answered.get("isBase64Encoded") else answered["body"])
    assert result["data"] == [["a", 1.5], ["b", 2.5]], result

    # httpfs was loaded from the duckdb layer's package, through the per-platform link in the work dir.
    links = list(Path(os.environ["ARCS_WORK_DIR"]).rglob("httpfs.duckdb_extension"))
    assert len(links) == 1, links
    assert any(str(links[0].resolve()).startswith(d) for d in layer_dirs), links[0].resolve()

    # The JSON above was written by the core layer's own native library (built for this architecture).
    from arcs import native

    assert native.library() is not None
    assert any(str(native.LIBRARY_PATH).startswith(d) for d in layer_dirs), native.LIBRARY_PATH
    print(
        f"smoke ok: python {sys.version.split()[0]}, duckdb {duckdb.__version__}, {len(parquet)} parquet file(s),"
        " native library loaded"
    )


if __name__ == "__main__":
    main()
