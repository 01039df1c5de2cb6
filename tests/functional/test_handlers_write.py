"""The write path's handlers: the edge queues a write, ingest turns queued writes into Parquet,
claim checks, and exact counts under SQS's at-least-once delivery.

The world each test gets (``fn``): tests/functional/conftest.py and lambdas.py.
"""

from __future__ import annotations

import base64
import copy
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arcs import layout
from arcs.http.api import lambda_app
from arcs.runtime import lambda_runtime
from tests.functional.lambdas import HOUR_NS, PREFIX, T0_NS, Lambda, context, lp, name

pytestmark = [
    pytest.mark.functional,
]


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
