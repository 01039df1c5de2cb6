"""The Lambda handlers in-process, with real event shapes, against the session's moto server.

The handlers are loaded from ``functions/`` exactly as ``arcs local`` loads them; the environment
is what the stack gives the functions (``arcs.emulation.local.function_environment``). SQS events
are built from messages really received from the queue, so redelivery here is SQS redelivery:
the same message ids with new receipt handles and a higher ``ApproximateReceiveCount``.
"""

from __future__ import annotations

import base64
import copy
import gzip
import io
import json
import string
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import msgpack
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from arcs import layout
from arcs.adapters.aws import AwsResources
from arcs.emulation import load_handler, sqs_event
from arcs.emulation.functions import LAMBDA_PAYLOAD_LIMIT, FakeLambdaContext, Handler
from arcs.emulation.local import function_environment
from arcs.http.api import lambda_app
from arcs.runtime import Runtime, lambda_runtime
from arcs.settings import AWS_MAX_REQUEST_BYTES
from tests.conftest import ACCESS_KEY, SECRET_KEY, AwsEnv

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef

pytestmark = [
    pytest.mark.functional,
]

EVENTS = Path(__file__).parent / "events"
PREFIX = "arcs"
T0_NS = 1_700_000_000 * 10**9  # 2023-11-14T22:13:20Z
HOUR_NS = 3600 * 10**9


@dataclass(frozen=True)
class Handlers:
    edge: Handler
    ingest: Handler
    query: Handler
    authorizer: Handler
    tasks: Handler


@pytest.fixture(scope="module")
def handlers() -> Handlers:
    # Loading runs only module-level code; the runtime is built on the first invocation.
    return Handlers(
        edge=load_handler("ingest", "edge.py"),
        ingest=load_handler("ingest"),
        query=load_handler("query"),
        authorizer=load_handler("authorizer"),
        tasks=load_handler("compact"),
    )


def context(name: str) -> FakeLambdaContext:
    return FakeLambdaContext(name, 1024, f"arn:aws:lambda:us-east-1:123456789012:function:{name}", 1e12)


@dataclass
class Lambda:
    """The functions' world for one test: fresh resources, environment, runtime and an admin token."""

    aws: AwsEnv
    handlers: Handlers
    queue_arn: str
    token: str
    caller: dict[str, str]  # what the authorizer put in requestContext.authorizer

    @property
    def runtime(self) -> Runtime:
        return lambda_runtime()

    # --- API Gateway -----------------------------------------------------------------------------
    def api_event(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        query: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        headers = headers or {}
        event: dict[str, Any] = json.loads((EVENTS / "apigw_rest_proxy.json").read_text())
        event.update(path=path, httpMethod=method, queryStringParameters=query)
        event["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()} if query else None
        event["headers"].update(headers)
        event["multiValueHeaders"].update({k: [v] for k, v in headers.items()})
        event["pathParameters"] = {"proxy": path.lstrip("/")}
        event["requestContext"].update(path=f"/prod{path}", httpMethod=method, requestId=str(uuid.uuid4()))
        event["requestContext"]["authorizer"].update(self.caller)
        event["body"] = base64.b64encode(body).decode() if body else None
        event["isBase64Encoded"] = bool(body)
        return event

    def write(self, lines: str, database: str | None = None) -> None:
        headers = {"x-arc-database": database} if database else {}
        event = self.api_event("POST", "/api/v1/write/line-protocol", lines.encode(), headers)
        response = self.handlers.edge(event, context("arcs-edge"))
        assert response["statusCode"] == 204, response

    def query(self, sql: str, arrow: bool = False) -> dict[str, Any]:
        path = "/api/v1/query/arrow" if arrow else "/api/v1/query"
        body = json.dumps({"sql": sql}).encode()
        response: dict[str, Any] = self.handlers.query(
            self.api_event("POST", path, body, {"Content-Type": "application/json"}), context("arcs-query")
        )
        return response

    def rows(self, sql: str) -> list[list[Any]]:
        response = self.query(sql)
        assert response["statusCode"] == 200, response
        data: list[list[Any]] = json.loads(response["body"])["data"]
        return data

    def count(self, measurement: str) -> int:
        response = self.query(f"SELECT count(*) FROM {measurement}")
        if response["statusCode"] == 404:  # nothing stored yet
            return 0
        assert response["statusCode"] == 200, response
        return int(json.loads(response["body"])["data"][0][0])

    # --- SQS -----------------------------------------------------------------------------------
    def receive(self, expected: int) -> list[MessageTypeDef]:
        messages: list[MessageTypeDef] = []
        for _ in range(20):
            response = self.aws.sqs.receive_message(
                QueueUrl=self.aws.queue_url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=0 if messages else 1,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            messages += response.get("Messages", [])
            if len(messages) >= expected:
                break
        assert len(messages) == expected, messages
        return messages

    def make_visible(self, messages: list[MessageTypeDef]) -> None:
        """What the visibility timeout running out does, without waiting for it."""
        for message in messages:
            self.aws.sqs.change_message_visibility(
                QueueUrl=self.aws.queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
            )

    def delete(self, messages: list[MessageTypeDef]) -> None:
        for message in messages:
            self.aws.sqs.delete_message(QueueUrl=self.aws.queue_url, ReceiptHandle=message["ReceiptHandle"])

    def ingest(self, messages: list[MessageTypeDef]) -> list[str]:
        """Invoke the ingest function on an event of these messages; the ids it reports as failed."""
        event = sqs_event(messages, self.queue_arn, self.aws.region)
        result = self.handlers.ingest(event, context("arcs-ingest"))
        return [item["itemIdentifier"] for item in result["batchItemFailures"]]


@pytest.fixture
def fn(aws: AwsEnv, handlers: Handlers, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Lambda]:
    queue_arn = aws.sqs.get_queue_attributes(QueueUrl=aws.queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    resources = AwsResources(
        bucket=aws.bucket,
        queue_url=aws.queue_url,
        queue_arn=queue_arn,
        dlq_url=aws.dlq_url,
        dlq_arn="",
        tokens_table=aws.tokens_table,
        catalog_table=aws.catalog_table,
        leases_table=aws.leases_table,
    )
    for name, value in function_environment(resources, aws.endpoint, aws.region, str(tmp_path / "work")).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ARCS_PREFIX", PREFIX)
    # Compaction in these tests: any past hour with 3 files, replaced objects deleted at once.
    for variable, value in (("MIN_AGE_S", "0"), ("MIN_FILES", "3"), ("GRACE_S", "0")):
        monkeypatch.setenv(f"ARCS_COMPACTION_{variable}", value)
    monkeypatch.setenv("ARCS_TASKS_FUNCTION", "arcs-tasks")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    for name in (
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "ARCS_CLAIM_CHECK_BYTES",
        "ARCS_BOOTSTRAP_TOKEN",
        "ARCS_QUERY_INLINE_MAX_BYTES",
        "ARCS_QUERY_MAX_ROWS",
    ):
        monkeypatch.delenv(name, raising=False)
    lambda_runtime.cache_clear()
    lambda_app.cache_clear()
    token = lambda_runtime().tokens.bootstrap(None)
    assert token is not None
    caller = lambda_runtime().tokens.verify(token).to_context()
    yield Lambda(aws, handlers, queue_arn, token, caller)
    lambda_runtime.cache_clear()
    lambda_app.cache_clear()


def lp(measurement: str, count: int, start_ns: int = T0_NS, host: str = "a") -> str:
    return "\n".join(f"{measurement},host={host} v={i}i {start_ns + i * 1000}" for i in range(count))


def name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


# --- the write edge ----------------------------------------------------------------------------
def test_write_event_answers_204_once_the_write_is_in_sqs(fn: Lambda) -> None:
    fn.write(lp(name("cpu"), 3))
    (message,) = fn.receive(1)
    body = json.loads(message["Body"])
    assert set(body) == {"id", "inline"}
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"


def test_write_event_without_authorizer_context_is_401(fn: Lambda) -> None:
    event = fn.api_event("POST", "/api/v1/write/line-protocol", b"m v=1")
    event["requestContext"]["authorizer"] = None
    response = fn.handlers.edge(event, context("arcs-edge"))
    assert response["statusCode"] == 401
    assert json.loads(response["body"])["success"] is False


# --- ingest ------------------------------------------------------------------------------------
def test_sqs_event_becomes_parquet_at_the_layout_and_file_records(fn: Lambda) -> None:
    m = name("cpu")
    fn.write(lp(m, 5) + "\n" + lp(m, 2, T0_NS + HOUR_NS, host="b"), database="metrics")
    fn.write(lp(m, 3, T0_NS + 10_000, host="c"), database="metrics")
    assert fn.ingest(fn.receive(2)) == []

    keys = sorted(
        o["Key"] for o in fn.aws.s3.list_objects_v2(Bucket=fn.aws.bucket, Prefix=f"{PREFIX}/metrics/")["Contents"]
    )
    assert len(keys) == 2  # one file per (database, measurement, hour) for the whole batch
    parsed = [layout.parse_data_key(PREFIX, key) for key in keys]
    assert [(p.database, p.measurement) for p in parsed] == [("metrics", m)] * 2
    assert [layout.hour_dir(p.hour) for p in parsed] == ["2023/11/14/22", "2023/11/14/23"]
    assert [key.split("/")[:7] for key in keys] == [
        [PREFIX, "metrics", m, "2023", "11", "14", "22"],
        [PREFIX, "metrics", m, "2023", "11", "14", "23"],
    ]
    files = fn.runtime.catalog.list_files("metrics", m)
    assert sorted(f.key for f in files) == keys
    assert sorted(f.rows for f in files) == [2, 8]
    first = pq.read_table(io.BytesIO(fn.aws.s3.get_object(Bucket=fn.aws.bucket, Key=keys[0])["Body"].read()))
    times = first.column("time").cast(pa.int64()).to_pylist()
    assert times == sorted(times) and first.schema.field("time").type == pa.timestamp("ns")


def test_query_handler_answers_json_and_arrow(fn: Lambda) -> None:
    m = name("mem")
    fn.write(f"{m},host=a free=10i,ratio=0.5 {T0_NS}\n{m},host=b free=11i {T0_NS + 7000}")
    assert fn.ingest(fn.receive(1)) == []
    assert fn.rows(f"SELECT time, host, free, ratio FROM {m} ORDER BY time") == [
        ["2023-11-14T22:13:20.000000000Z", "a", 10, 0.5],
        ["2023-11-14T22:13:20.000007000Z", "b", 11, None],
    ]
    response = fn.query(f"SELECT host, free FROM {m} ORDER BY time", arrow=True)
    assert response["statusCode"] == 200 and response["isBase64Encoded"] is True
    # Powertools' REST resolver answers with multiValueHeaders only.
    assert response["multiValueHeaders"]["Content-Type"] == ["application/vnd.apache.arrow.stream"]
    table = pa.ipc.open_stream(base64.b64decode(response["body"])).read_all()
    assert table.to_pydict() == {"host": ["a", "b"], "free": [10, 11]}


# --- the authorizer ----------------------------------------------------------------------------
def authorizer_event(**headers: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / "authorizer_request.json").read_text())
    event["headers"].update(headers)
    event["multiValueHeaders"].update({k: [v] for k, v in headers.items()})
    return event


def test_authorizer_allows_a_good_token_with_its_identity_as_context(fn: Lambda) -> None:
    result = fn.handlers.authorizer(authorizer_event(Authorization=f"Bearer {fn.token}"), context("arcs-authorizer"))
    (statement,) = result["policyDocument"]["Statement"]
    assert statement == {
        "Action": "execute-api:Invoke",
        "Effect": "Allow",
        "Resource": "arn:aws:execute-api:us-east-1:123456789012:abcdef1234/prod/*",
    }
    assert result["context"] == fn.caller and result["principalId"] == fn.caller["token_id"]
    assert "admin" in result["context"]["permissions"]
    json.dumps(result)  # API Gateway takes only JSON: context values must be plain strings


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer not-a-token"}, {"Authorization": "Basic !!!"}])
def test_authorizer_raises_unauthorized_for_a_bad_token(fn: Lambda, headers: dict[str, str]) -> None:
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        fn.handlers.authorizer(authorizer_event(**headers), context("arcs-authorizer"))


def _write_authorizer_event(path: str, method: str = "POST", **headers: str) -> dict[str, Any]:
    event = authorizer_event(**headers)
    event.update(resource=path, path=path, httpMethod=method)
    event["methodArn"] = f"arn:aws:execute-api:us-east-1:123456789012:abcdef1234/prod/{method}{path}"
    return event


@pytest.mark.parametrize("path", ["/api/v1/write/line-protocol", "/write", "/api/v2/write"])
def test_authorizer_denies_a_write_declaring_more_than_reaches_the_edge(fn: Lambda, path: str) -> None:
    """On AWS the body travels base64-encoded in a 6 MB invoke: the authorizer refuses what cannot fit,
    by its declared length, and the stack answers that Deny as a 413 (ACCESS_DENIED)."""
    limit = fn.runtime.settings.max_request_bytes
    assert limit == AWS_MAX_REQUEST_BYTES
    token = f"Bearer {fn.token}"
    over = _write_authorizer_event(path, **{"Authorization": token, "Content-Length": str(limit + 1)})
    result = fn.handlers.authorizer(over, context("arcs-authorizer"))
    [statement] = result["policyDocument"]["Statement"]
    # Only this request's method ARN: never a policy that could deny anything else.
    assert statement == {"Action": "execute-api:Invoke", "Effect": "Deny", "Resource": over["methodArn"]}
    assert result["context"] == {"error": f"body is {limit + 1} bytes; the limit is {limit}"}
    for fits in (
        _write_authorizer_event(path, **{"Authorization": token, "Content-Length": str(limit)}),
        _write_authorizer_event(path, **{"Authorization": token}),  # no declared length: the edge checks
        _write_authorizer_event("/api/v1/query", **{"Authorization": token, "content-length": str(limit + 1)}),
        _write_authorizer_event(path, "GET", **{"Authorization": token, "Content-Length": str(limit + 1)}),
    ):
        [statement] = fn.handlers.authorizer(fits, context("arcs-authorizer"))["policyDocument"]["Statement"]
        assert statement["Effect"] == "Allow", fits["path"]
    # A bad token is a 401 first, whatever the size.
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        fn.handlers.authorizer(_write_authorizer_event(path, **{"Content-Length": str(limit + 1)}), context("a"))


def test_authorizer_leaves_a_write_only_the_room_its_head_leaves_in_the_invoke(fn: Lambda) -> None:
    """Many short query parameters cost several event bytes each (twice, with their JSON around
    them): a write at the usual limit is then refused, and one the head leaves room for is not."""
    limit = fn.runtime.settings.max_request_bytes
    token = f"Bearer {fn.token}"
    crowded = _write_authorizer_event("/write", **{"Authorization": token, "Content-Length": str(limit)})
    letters = string.ascii_letters + string.digits
    keys = [a + b for a in letters for b in letters][:3300]  # "?ab&ac&...": 9,900 bytes of request line
    crowded["queryStringParameters"] = {"db": "metrics", **dict.fromkeys(keys, "")}
    crowded["multiValueQueryStringParameters"] = {k: [v] for k, v in crowded["queryStringParameters"].items()}
    denied = fn.handlers.authorizer(crowded, context("arcs-authorizer"))
    assert denied["policyDocument"]["Statement"][0]["Effect"] == "Deny"
    room = int(denied["context"]["error"].rsplit(" ", 1)[1])
    assert limit - 64 * 1024 < room < limit
    crowded["headers"]["Content-Length"] = str(room)
    crowded["multiValueHeaders"]["Content-Length"] = [str(room)]
    allowed = fn.handlers.authorizer(crowded, context("arcs-authorizer"))
    assert allowed["policyDocument"]["Statement"][0]["Effect"] == "Allow"


def test_the_edge_refuses_a_body_over_the_aws_limit_that_still_fits_the_invoke(fn: Lambda) -> None:
    """A chunked request declares no length; what reaches the edge over the limit is its own 413."""
    limit = fn.runtime.settings.max_request_bytes
    body = b"0" * (limit + 1)
    event = fn.api_event("POST", "/api/v1/write/line-protocol", body)
    assert len(json.dumps(event)) <= LAMBDA_PAYLOAD_LIMIT
    response = fn.handlers.edge(event, context("arcs-edge"))
    assert response["statusCode"] == 413
    assert json.loads(response["body"])["error"] == f"body is {limit + 1} bytes; the limit is {limit}"


# --- claim checks ------------------------------------------------------------------------------
def test_claim_check_write_round_trips_and_the_claim_object_goes(fn: Lambda, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCS_CLAIM_CHECK_BYTES", "64")
    lambda_runtime.cache_clear()
    lambda_app.cache_clear()
    m = name("big")
    fn.write(lp(m, 50))
    (message,) = fn.receive(1)
    claim = json.loads(message["Body"])["claim"]
    assert claim.startswith(f"{PREFIX}/_arcs/claims/")
    fn.aws.s3.head_object(Bucket=fn.aws.bucket, Key=claim)
    assert fn.ingest([message]) == []
    assert fn.count(m) == 50
    assert fn.rows(f"SELECT sum(v) FROM {m}") == [[sum(range(50))]]
    assert "Contents" not in fn.aws.s3.list_objects_v2(Bucket=fn.aws.bucket, Prefix=f"{PREFIX}/_arcs/claims/")


def test_a_batch_of_large_claim_checked_writes_is_stored_in_byte_bounded_groups(
    fn: Lambda, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight claim-checked writes of about 0.2 MB decoded each, one invocation, a 0.5 MB bound: the
    batch is stored whole, in several attempts each holding at most the bound, nothing failed."""
    monkeypatch.setenv("ARCS_CLAIM_CHECK_BYTES", "64")
    monkeypatch.setenv("ARCS_INGEST_GROUP_BYTES", str(512 * 1024))
    lambda_runtime.cache_clear()
    lambda_app.cache_clear()
    m = name("backfill")
    for i in range(8):
        fn.write(lp(m, 10_000, T0_NS + i * 10**10))
    messages = fn.receive(8)
    assert all("claim" in json.loads(message["Body"]) for message in messages)
    assert fn.ingest(messages) == []
    files = fn.runtime.catalog.list_files("default", m)
    attempts = {f.commit_id for f in files}
    assert 3 <= len(attempts) <= 8  # several groups: never the whole batch in memory at once
    assert fn.count(m) == 80_000
    assert fn.rows(f"SELECT count(DISTINCT time) FROM {m}") == [[80_000]]
    assert "Contents" not in fn.aws.s3.list_objects_v2(Bucket=fn.aws.bucket, Prefix=f"{PREFIX}/_arcs/claims/")
    # Redelivered whole (the poller died before deleting): every write is known, nothing doubles.
    assert fn.ingest(messages) == []
    assert fn.count(m) == 80_000


# --- at-least-once delivery ----------------------------------------------------------------------
def test_redelivered_event_whole_or_regrouped_leaves_exact_counts(fn: Lambda) -> None:
    m = name("dup")
    fn.write(lp(m, 10))
    fn.write(lp(m, 7, T0_NS + HOUR_NS, host="b"))
    first = fn.receive(2)
    assert fn.ingest(first) == []
    fn.delete(first)
    # The very same event again (Lambda retried the invocation).
    assert fn.ingest(first) == []
    assert fn.count(m) == 17
    # A regrouped part of it, plus a new message, as a later receive may hand them out.
    fn.write(lp(m, 3, T0_NS + 500_000, host="c"))
    (fresh,) = fn.receive(1)
    assert fn.ingest([copy.deepcopy(first[1]), fresh]) == []
    assert fn.count(m) == 20
    assert fn.rows(f"SELECT host, count(*) FROM {m} GROUP BY host ORDER BY host") == [["a", 10], ["b", 7], ["c", 3]]


def test_crash_between_parquet_write_and_delete_then_redelivery_leaves_exact_counts(fn: Lambda) -> None:
    m = name("crash")
    fn.write(lp(m, 4))
    fn.write(lp(m, 6, T0_NS + HOUR_NS, host="b"))
    batch = fn.receive(2)
    assert fn.ingest(batch) == []  # Parquet stored and committed... and the poller dies before deleting
    assert fn.count(m) == 10
    fn.make_visible(batch)
    fn.write(lp(m, 5, T0_NS + 2 * HOUR_NS, host="c"))
    again = fn.receive(3)  # both old messages (second receive) regrouped with a new one
    counts = sorted(message["Attributes"]["ApproximateReceiveCount"] for message in again)
    assert counts == ["1", "2", "2"]
    assert fn.ingest(again) == []
    fn.delete(again)
    assert fn.count(m) == 15
    assert fn.rows(f"SELECT host, count(*) FROM {m} GROUP BY host ORDER BY host") == [["a", 4], ["b", 6], ["c", 5]]


def test_poison_records_are_reported_while_the_rest_commit(fn: Lambda) -> None:
    m = name("poison")
    fn.write(lp(m, 4))
    fn.aws.sqs.send_message(QueueUrl=fn.aws.queue_url, MessageBody="this is not a queued write")
    garbage = base64.b64encode(b"\x00not an envelope").decode()
    fn.aws.sqs.send_message(QueueUrl=fn.aws.queue_url, MessageBody=json.dumps({"id": "w1", "inline": garbage}))
    fn.write(lp(m, 2, T0_NS + 9000, host="b"))
    batch = fn.receive(4)
    failed = fn.ingest(batch)
    poison = {message["MessageId"] for message in batch if "not" in message["Body"] or '"w1"' in message["Body"]}
    assert len(poison) == 2 and set(failed) == poison
    assert fn.count(m) == 6


# --- results larger than a Lambda response ------------------------------------------------------
def reload_with(monkeypatch: pytest.MonkeyPatch, **env: str) -> None:
    """A fresh container with ``env`` added to the function's environment."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    lambda_runtime.cache_clear()
    lambda_app.cache_clear()


def header(response: dict[str, Any], name: str) -> str:
    (value,) = response["multiValueHeaders"][name]
    return str(value)


def follow(response: dict[str, Any]) -> httpx.Response:
    """What a client does with a 303: GET the Location (here a presigned URL on the moto server)."""
    assert response["statusCode"] == 303, response
    fetched = httpx.get(header(response, "Location"))
    assert fetched.status_code == 200, fetched.text
    return fetched


def test_results_over_the_inline_limit_are_handed_off_whole_through_the_results_prefix(
    fn: Lambda, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = name("wide")
    fn.write("\n".join(f'{m},host=h{i % 7} v={i}i,s="row \\"{i}\\" é" {T0_NS + i * 1000}' for i in range(2000)))
    assert fn.ingest(fn.receive(1)) == []
    sql = f"SELECT time, host, v, s FROM {m} ORDER BY time"
    inline = json.loads(fn.query(sql)["body"])
    inline_table = pa.ipc.open_stream(base64.b64decode(fn.query(sql, arrow=True)["body"])).read_all()
    assert inline["row_count"] == 2000 and inline_table.num_rows == 2000

    reload_with(monkeypatch, ARCS_QUERY_INLINE_MAX_BYTES="20000")
    response = fn.query(sql)
    assert header(response, "Content-Type") == "application/json"
    assert header(response, "X-Arc-Result-Content-Type") == "application/json"
    explanation = json.loads(response["body"])
    assert explanation["success"] is True and explanation["result_url"] == header(response, "Location")
    assert "larger than a Lambda response holds" in explanation["message"] and explanation["expires_in_s"] == 300
    fetched = follow(response)
    assert fetched.headers["content-type"] == "application/json"
    document = fetched.json()
    assert len(fetched.content) == explanation["size_bytes"]
    assert (document["columns"], document["data"]) == (inline["columns"], inline["data"])

    response = fn.query(sql, arrow=True)
    assert header(response, "X-Arc-Result-Content-Type") == "application/vnd.apache.arrow.stream"
    assert float(header(response, "X-Arc-Execution-Time-Ms")) >= 0
    fetched = follow(response)
    assert fetched.headers["content-type"] == "application/vnd.apache.arrow.stream"
    assert pa.ipc.open_stream(fetched.content).read_all().equals(inline_table)

    stored = fn.aws.s3.list_objects_v2(Bucket=fn.aws.bucket, Prefix=f"{PREFIX}/_arcs/results/")["Contents"]
    assert sorted(key["Key"].rsplit(".", 1)[1] for key in stored) == ["arrows", "json"]
    # Small results still come inline.
    small = fn.query(f"SELECT count(*) AS n FROM {m}")
    assert small["statusCode"] == 200 and json.loads(small["body"])["data"] == [[2000]]


def test_what_a_body_costs_in_the_proxy_response_decides_not_its_length(fn: Lambda) -> None:
    """Under the default limit the whole Lambda response fits in 6 MiB; escaping can push a body over."""
    limit = fn.runtime.settings.query_inline_max_bytes
    # Each '"' is 2 characters in the JSON document and 4 once that document is a JSON string.
    quotes = fn.query(f"SELECT repeat('\"', {limit // 3}) AS s")
    assert quotes["statusCode"] == 303
    assert len(follow(quotes).content) < limit
    for arrow, text_bytes in ((False, limit - 1000), (True, limit * 3 // 4 - 1000)):
        fits = fn.query(f"SELECT repeat('x', {text_bytes}) AS s", arrow=arrow)
        assert fits["statusCode"] == 200
        assert len(json.dumps(fits)) <= LAMBDA_PAYLOAD_LIMIT
        over = fn.query(f"SELECT repeat('x', {text_bytes + 2000}) AS s", arrow=arrow)
        assert over["statusCode"] == 303


def test_a_compressed_answer_is_measured_against_the_limit_compressed(
    fn: Lambda, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lambda's limit holds the body as sent: a result too big plain fits once gzip or zstd shrinks it,
    base64 in the proxy response; one still too big compressed is handed off plain."""
    m = name("wide")
    fn.write("\n".join(f'{m},host=h{i % 7} v={i}i,s="row {i}" {T0_NS + i * 1000}' for i in range(2000)))
    assert fn.ingest(fn.receive(1)) == []
    sql = json.dumps({"sql": f"SELECT time, host, v, s FROM {m} ORDER BY time"}).encode()
    plain = json.loads(fn.query(f"SELECT time, host, v, s FROM {m} ORDER BY time")["body"])
    reload_with(monkeypatch, ARCS_QUERY_INLINE_MAX_BYTES="40000")

    def post(path: str, encoding: str) -> dict[str, Any]:
        headers = {"Content-Type": "application/json", "Accept-Encoding": encoding}
        response: dict[str, Any] = fn.handlers.query(fn.api_event("POST", path, sql, headers), context("arcs-query"))
        return response

    assert post("/api/v1/query", "identity")["statusCode"] == 303
    unzstd = zstandard.ZstdDecompressor().decompressobj
    for encoding, decode in (("gzip", gzip.decompress), ("zstd", lambda data: unzstd().decompress(data))):
        response = post("/api/v1/query", encoding)
        assert response["statusCode"] == 200 and response["isBase64Encoded"] is True
        assert header(response, "Content-Encoding") == encoding and header(response, "Vary") == "Accept-Encoding"
        assert json.loads(decode(base64.b64decode(response["body"])))["data"] == plain["data"]
        document = msgpack.unpackb(decode(base64.b64decode(post("/api/v1/query/msgpack", encoding)["body"])))
        assert document["row_count"] == 2000 and document["data"][2] == [row[2] for row in plain["data"]]

    reload_with(monkeypatch, ARCS_QUERY_INLINE_MAX_BYTES="2000")
    response = post("/api/v1/query/msgpack", "gzip")
    assert header(response, "X-Arc-Result-Content-Type") == "application/msgpack"
    assert "Content-Encoding" not in response["multiValueHeaders"]
    fetched = follow(response)
    assert msgpack.unpackb(fetched.content)["data"][2] == [row[2] for row in plain["data"]]


def test_a_result_over_the_row_cap_is_a_clear_400_never_a_truncation(
    fn: Lambda, monkeypatch: pytest.MonkeyPatch
) -> None:
    reload_with(monkeypatch, ARCS_QUERY_MAX_ROWS="1000")
    assert fn.rows("SELECT count(*) FROM range(1000)") == [[1000]]
    assert len(fn.rows("SELECT * FROM range(1000)")) == 1000
    for arrow in (False, True):
        response = fn.query("SELECT * FROM range(1001)", arrow=arrow)
        assert response["statusCode"] == 400
        error = json.loads(response["body"])["error"]
        assert error == "the result has more than 1000 rows; add a LIMIT or narrow the query"


# --- compaction ----------------------------------------------------------------------------------
def test_scheduled_event_compacts_and_queries_answer_the_same(fn: Lambda) -> None:
    m = name("cpu")
    for n in range(4):
        fn.write(lp(m, 5, T0_NS + n * 10**6, host=f"h{n}"))
        assert fn.ingest(fn.receive(1)) == []
    sql = f"SELECT time, host, v FROM {m} ORDER BY time, host"
    before = fn.rows(sql)
    assert len(fn.runtime.catalog.list_files("default", m)) == 4
    event = json.loads((EVENTS / "eventbridge_scheduled.json").read_text())
    report = fn.handlers.tasks(event, context("arcs-tasks"))
    (job,) = report["jobs"]
    assert (job["status"], job["files_compacted"], job["files_written"]) == ("settled", 4, 1)
    assert report["inputs_deleted"] == 4
    assert fn.rows(sql) == before
    (output,) = fn.runtime.catalog.list_files("default", m)
    assert output.rows == 20
    keys = [o["Key"] for o in fn.aws.s3.list_objects_v2(Bucket=fn.aws.bucket, Prefix=f"{PREFIX}/default/")["Contents"]]
    assert keys == [output.key]


def test_trigger_route_invokes_the_tasks_function_asynchronously(fn: Lambda) -> None:
    m = name("cpu")
    for n in range(3):
        fn.write(lp(m, 2, T0_NS + n * 10**6, host=f"h{n}"))
        assert fn.ingest(fn.receive(1)) == []
    invoked: list[tuple[str, dict[str, Any]]] = []
    fn.runtime._invoke = lambda function, payload: invoked.append((function, json.loads(payload)))
    body = json.dumps({"database": "default", "measurement": m}).encode()
    response = fn.handlers.query(fn.api_event("POST", "/api/v1/compaction/trigger", body), context("arcs-query"))
    assert response["statusCode"] == 202, response
    assert invoked == [("arcs-tasks", {"source": "arcs.trigger", "database": "default", "measurement": m})]
    # What Lambda does with the asynchronous invocation:
    report = fn.handlers.tasks(invoked[0][1], context("arcs-tasks"))
    assert [job["measurement"] for job in report["jobs"]] == [m]
    history = fn.handlers.query(fn.api_event("GET", "/api/v1/compaction/history"), context("arcs-query"))
    assert [job["status"] for job in json.loads(history["body"])["jobs"]] == ["done"]


def test_tasks_function_runs_retention_policies_on_its_retention_task(fn: Lambda) -> None:
    m = name("cpu")
    fn.write(lp(m, 3))  # 2023: long expired
    fn.write(lp(m, 2, start_ns=time.time_ns() - 10**9, host="now"))  # within any retention
    assert fn.ingest(fn.receive(2)) == []
    body = json.dumps({"name": m, "database": "default", "measurement": m, "retention_days": 1, "buffer_days": 0})
    created = fn.handlers.query(fn.api_event("POST", "/api/v1/retention", body.encode()), context("arcs-query"))
    assert created["statusCode"] == 201, created
    dry = fn.handlers.tasks({"task": "retention", "dry_run": True}, context("arcs-tasks"))
    assert (dry["dry_run"], dry["partitions_deleted"], dry["rows_deleted"]) == (True, 1, 3)
    assert fn.count(m) == 5  # a dry run only counts
    answer = fn.handlers.tasks({"task": "retention"}, context("arcs-tasks"))
    assert (answer["task"], answer["partitions_deleted"], answer["rows_deleted"]) == ("retention", 1, 3)
    assert fn.count(m) == 2
    policy_id = json.loads(created["body"])["policy"]["id"]
    path = f"/api/v1/retention/{policy_id}/executions"
    history = json.loads(fn.handlers.query(fn.api_event("GET", path), context("arcs-query"))["body"])
    assert [(e["kind"], e["dry_run"], e["deleted_count"]) for e in history["executions"]] == [
        ("scheduled", False, 3),
        ("scheduled", True, 3),
    ]


# --- bulk import ----------------------------------------------------------------------------------
def test_an_empty_upload_is_refused_at_completion_and_may_be_put_again(fn: Lambda) -> None:
    m = name("cpu")
    query = {"format": "lp", "import_id": "empty-1", "db": "default"}
    created = fn.handlers.query(fn.api_event("POST", "/api/v1/import/uploads", query=query), context("arcs-query"))
    url = json.loads(created["body"])["upload"]["url"]
    assert httpx.put(url, content=b"").status_code == 200
    invoked: list[dict[str, Any]] = []
    fn.runtime._invoke = lambda function, payload: invoked.append(json.loads(payload))
    path = "/api/v1/import/uploads/empty-1/complete"
    refused = fn.handlers.query(fn.api_event("POST", path, query={"db": "default"}), context("arcs-query"))
    assert refused["statusCode"] == 400, refused
    assert "empty" in json.loads(refused["body"])["error"]
    assert invoked == []
    status = fn.handlers.query(
        fn.api_event("GET", "/api/v1/import/status/empty-1", query={"db": "default"}), context("arcs-query")
    )
    assert json.loads(status["body"])["import"]["state"] == "awaiting_upload"
    # The file put again (the URL is valid for an hour) completes and is imported.
    assert httpx.put(url, content=(lp(m, 10) + "\n").encode()).status_code == 200
    done = fn.handlers.query(fn.api_event("POST", path, query={"db": "default"}), context("arcs-query"))
    assert done["statusCode"] == 202, done
    assert fn.handlers.tasks(invoked[0], context("arcs-tasks"))["state"] == "done"
    assert fn.count(m) == 10


def test_an_uploaded_import_cut_short_is_finished_by_lambdas_retry_and_stored_once(
    fn: Lambda, monkeypatch: pytest.MonkeyPatch
) -> None:
    from arcs.write import imports

    monkeypatch.setattr(imports, "CHUNK_BYTES", 4096)  # about 100 lines a chunk
    m = name("cpu")
    data = (lp(m, 2000) + "\n").encode()
    query = {"format": "lp", "import_id": "upload-1", "db": "default"}
    created = fn.handlers.query(fn.api_event("POST", "/api/v1/import/uploads", query=query), context("arcs-query"))
    assert created["statusCode"] == 200, created
    url = json.loads(created["body"])["upload"]["url"]
    assert httpx.put(url, content=data).status_code == 200
    invoked: list[dict[str, Any]] = []
    fn.runtime._invoke = lambda function, payload: invoked.append(json.loads(payload))
    path = "/api/v1/import/uploads/upload-1/complete"
    done = fn.handlers.query(fn.api_event("POST", path, query={"db": "default"}), context("arcs-query"))
    assert done["statusCode"] == 202, done
    assert invoked == [{"task": "import", "database": "default", "import_id": "upload-1"}]

    class Timeout(BaseException):
        """The function's timeout: the invocation ends where it is."""

    sink = imports.IngestSink.__call__
    calls = {"n": 0}

    def cut_short(self: imports.IngestSink, writes: list[Any]) -> None:
        calls["n"] += 1
        if calls["n"] == 5:
            raise Timeout
        sink(self, writes)

    monkeypatch.setattr(imports.IngestSink, "__call__", cut_short)
    fn.runtime.importer.group_bytes = 1  # every chunk an ingest attempt of its own
    with pytest.raises(Timeout):
        fn.handlers.tasks(invoked[0], context("arcs-tasks"))
    assert 0 < fn.count(m) < 2000
    # Lambda retries the event; a duplicate delivery of it changes nothing.
    assert fn.handlers.tasks(invoked[0], context("arcs-tasks"))["state"] == "done"
    assert fn.handlers.tasks(invoked[0], context("arcs-tasks"))["state"] == "done"
    assert fn.count(m) == 2000
    status = fn.handlers.query(
        fn.api_event("GET", "/api/v1/import/status/upload-1", query={"db": "default"}), context("arcs-query")
    )
    assert json.loads(status["body"])["import"]["rows_imported"] == 2000
    assert (
        fn.runtime.uploads is not None
        and fn.runtime.uploads.size(str(fn.runtime.import_ledger.upload_key("default", "upload-1"))) is None
    )


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
