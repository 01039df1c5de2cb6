"""The reading side of the write queue (``ports.QueueDelivery``), one contract for both sides: the
spool the standalone server drains, and the SQS batch Lambda's event source hands the ingest
function. Each delivers the writes queued, and settles an ingest's outcome as its queue must:
stored writes are gone, failed ones come back, poison ones go to the dead letters."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from arcs.adapters.aws.objects import S3Store
from arcs.adapters.aws.queue import SqsDelivery, SqsWriteQueue
from arcs.adapters.local.queue import Spool, SpoolDelivery
from arcs.emulation.poller import failed_ids, sqs_event
from arcs.write.ingest import IngestResult

if TYPE_CHECKING:
    from tests.conftest import AwsEnv

pytestmark = pytest.mark.functional

ENVELOPES = {"w-1": b"first", "w-2": b"second \xff", "w-3": b"third"}


class SpoolSide:
    def __init__(self, root: Path) -> None:
        self.spool = Spool(root)

    def deliver(self) -> SpoolDelivery:
        for write_id, envelope in ENVELOPES.items():
            self.spool.enqueue(write_id, envelope)
        return SpoolDelivery(self.spool, self.spool.take(10))

    def delivered_again(self, delivery: Any) -> set[str]:
        return {entry.write_id for entry in self.spool.take(10)}


class SqsSide:
    def __init__(self, aws: AwsEnv) -> None:
        self.aws = aws
        self.store = S3Store(aws.s3, aws.bucket)
        self.ids: dict[str, str] = {}

    def deliver(self, extra: list[dict[str, Any]] | None = None) -> SqsDelivery:
        queue = SqsWriteQueue(self.aws.sqs, self.aws.queue_url, self.store, self.aws.prefix, 1024)
        for write_id, envelope in ENVELOPES.items():
            queue.enqueue(write_id, envelope)
        messages: list[Any] = []
        while len(messages) < len(ENVELOPES):
            answer = self.aws.sqs.receive_message(QueueUrl=self.aws.queue_url, MaxNumberOfMessages=10)
            messages += answer.get("Messages", [])
        event = sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:writes", "us-east-1")
        return SqsDelivery(event["Records"] + (extra or []), self.store)

    def delivered_again(self, delivery: Any) -> set[str]:
        # What Lambda's event source makes of the function's answer: these messages come back.
        handles = {record["messageId"] for record in delivery.records}
        return {self.ids[h] for h in failed_ids(delivery.response(), list(handles))}


@pytest.fixture(params=["spool", "sqs"])
def side(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "spool":
        return SpoolSide(tmp_path / "spool")
    return SqsSide(request.getfixturevalue("aws"))


def test_a_delivery_hands_over_every_write_queued_with_its_body(side: Any) -> None:
    delivery = side.deliver()
    writes = delivery.writes()
    assert {w.write_id: w.load() for w in writes} == ENVELOPES
    assert len({w.handle for w in writes}) == len(writes)


def test_settling_drops_the_stored_and_keeps_the_failed_for_another_delivery(side: Any) -> None:
    delivery = side.deliver()
    handles = {w.write_id: w.handle for w in delivery.writes()}
    if isinstance(side, SqsSide):
        side.ids = {handle: write_id for write_id, handle in handles.items()}
    result = IngestResult(
        committed=[handles["w-1"]], failed={handles["w-2"]: "a store fault"}, poison={handles["w-3"]: "undecodable"}
    )
    delivery.settle(result)
    again = side.delivered_again(delivery)
    assert "w-1" not in again and "w-2" in again
    if isinstance(side, SpoolSide):
        assert again == {"w-2"}  # the poison went to the dead-letter folder at once
    else:
        assert again == {"w-2", "w-3"}  # SQS moves it to the dead-letter queue past maxReceiveCount


def test_a_record_that_cannot_be_read_is_failed_back_alone(aws: AwsEnv) -> None:
    side = SqsSide(aws)
    broken = {"messageId": "m-broken", "body": "not a queued write", "eventSource": "aws:sqs", "attributes": {}}
    delivery = side.deliver([broken])
    writes = delivery.writes()
    assert {w.write_id for w in writes} == set(ENVELOPES)
    delivery.settle(IngestResult(committed=[w.handle for w in writes]))
    assert delivery.response() == {"batchItemFailures": [{"itemIdentifier": "m-broken"}]}
