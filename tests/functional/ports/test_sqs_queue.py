"""The write queue on SQS: inline bodies and claim checks, and how a queued body is read back."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from arcs.adapters.aws.objects import S3Store
from arcs.adapters.aws.queue import SqsWriteQueue, read_queued_body
from arcs.adapters.local.objects import DirectoryStore
from arcs.errors import BadRequest, NotFound
from arcs.layout import parse_data_key, system_key

if TYPE_CHECKING:
    from tests.conftest import AwsEnv

pytestmark = pytest.mark.functional


def receive_bodies(aws: AwsEnv) -> list[str]:
    response = aws.sqs.receive_message(QueueUrl=aws.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    return [message["Body"] for message in response.get("Messages", [])]


def make_queue(aws: AwsEnv, claim_check_bytes: int) -> tuple[SqsWriteQueue, S3Store]:
    store = S3Store(aws.s3, aws.bucket)
    return SqsWriteQueue(aws.sqs, aws.queue_url, store, aws.prefix, claim_check_bytes), store


def test_small_envelope_travels_inline(aws: AwsEnv) -> None:
    queue, store = make_queue(aws, claim_check_bytes=1024)
    envelope = b"\x00\x01 small envelope \xff"
    queue.enqueue("w-small", envelope)
    (body,) = receive_bodies(aws)
    assert json.loads(body) == {"id": "w-small", "inline": base64.b64encode(envelope).decode()}
    write_id, load, claim = read_queued_body(body, store)
    assert (write_id, load(), claim) == ("w-small", envelope, None)
    assert list(store.list("")) == []


def test_default_claim_threshold_fits_in_one_message(aws: AwsEnv) -> None:
    # 700 KiB is the default threshold; base64 makes it ~933 KiB, under the queue's 1 MiB.
    queue, store = make_queue(aws, claim_check_bytes=700 * 1024)
    envelope = os.urandom(700 * 1024)
    queue.enqueue("w-edge", envelope)
    (body,) = receive_bodies(aws)
    _write_id, load, claim = read_queued_body(body, store)
    assert claim is None
    assert load() == envelope


def test_big_envelope_goes_through_a_claim_check(aws: AwsEnv) -> None:
    queue, store = make_queue(aws, claim_check_bytes=1024)
    envelope = os.urandom(4096)
    queue.enqueue("w-big", envelope)
    (body,) = receive_bodies(aws)
    key = system_key(aws.prefix, "claims", "w-big.bin")
    assert json.loads(body) == {"id": "w-big", "claim": key}
    assert store.get(key) == envelope
    assert [info.key for info in store.list("")] == [key]
    with pytest.raises(ValueError, match="not a data key"):
        parse_data_key(aws.prefix, key)  # no data glob can reach it
    write_id, load, claim = read_queued_body(body, store)
    assert (write_id, load(), claim) == ("w-big", envelope, key)


def test_envelope_too_big_for_sqs_is_claimed_whatever_the_threshold(aws: AwsEnv) -> None:
    queue, store = make_queue(aws, claim_check_bytes=10 * 1024 * 1024)
    envelope = os.urandom(900 * 1024)
    queue.enqueue("w-huge", envelope)
    (body,) = receive_bodies(aws)
    _write_id, load, claim = read_queued_body(body, store)
    assert claim is not None
    assert load() == envelope


def test_missing_claim_object_is_not_found(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    body = json.dumps({"id": "w1", "claim": system_key("arcs", "claims", "w1.bin")})
    _write_id, load, _claim = read_queued_body(body, store)
    with pytest.raises(NotFound):
        load()


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[1, 2]",
        '{"inline": "AAAA"}',
        '{"id": "", "inline": "AAAA"}',
        '{"id": 7, "inline": "AAAA"}',
        '{"id": "w"}',
        '{"id": "w", "inline": "AAAA", "claim": "arcs/_arcs/claims/w.bin"}',
        '{"id": "w", "inline": "***"}',
        '{"id": "w", "inline": 5}',
        '{"id": "w", "claim": "arcs/db/cpu/2024/03/01/00/x.parquet"}',
        '{"id": "w", "claim": "arcs/_arcs/claims/../../db/x.bin"}',
        '{"id": "w", "claim": ["arcs/_arcs/claims/w.bin"]}',
    ],
)
def test_malformed_queued_body_is_bad_request(body: str, tmp_path: Path) -> None:
    with pytest.raises(BadRequest):
        read_queued_body(body, DirectoryStore(tmp_path))
