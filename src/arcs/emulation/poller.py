"""Lambda's SQS event source mapping: long-poll the queue, invoke the function, delete what it took.

Semantics kept from AWS: up to ``batch_size`` messages per invocation, gathered with receives of
at most 10 during a batching window (and never more than fit a 6 MB invocation); the event has
the real record shape; with ``ReportBatchItemFailures`` only the messages not listed in
``batchItemFailures`` are deleted, none when the function fails or names a message that is not in
the batch; the rest become visible again after the queue's visibility timeout. After
``maxReceiveCount`` receives, SQS itself moves a message to the dead-letter queue: the queue's
``RedrivePolicy`` does it on AWS, and moto 5.2 does it too, on the first receive after the last
allowed one (checked by ``tests/functional/test_emulation.py``), so the poller never moves messages.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from arcs.emulation.functions import LAMBDA_PAYLOAD_LIMIT, InvokeError, LambdaFunction

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueOutputTypeDef, MessageTypeDef

logger = logging.getLogger(__name__)

SQS_RECEIVE_MAX = 10
#: Room left in the 6 MB event for one more message (1 MiB at most) and the record wrappers.
_BATCH_BYTES = LAMBDA_PAYLOAD_LIMIT - 1024 * 1024 - 64 * 1024


def _message_attribute(value: MessageAttributeValueOutputTypeDef) -> dict[str, Any]:
    attribute: dict[str, Any] = {
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": value["DataType"],
    }
    if "StringValue" in value:
        attribute["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        attribute["binaryValue"] = base64.b64encode(value["BinaryValue"]).decode("ascii")
    return attribute


def sqs_record(message: MessageTypeDef, queue_arn: str, region: str) -> dict[str, Any]:
    """One record of the event Lambda builds from a received SQS message."""
    record: dict[str, Any] = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes", {})),
        "messageAttributes": {
            name: _message_attribute(value) for name, value in message.get("MessageAttributes", {}).items()
        },
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }
    if "MD5OfMessageAttributes" in message:
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    return record


def sqs_event(messages: Sequence[MessageTypeDef], queue_arn: str, region: str) -> dict[str, Any]:
    return {"Records": [sqs_record(message, queue_arn, region) for message in messages]}


def failed_ids(result: Any, batch: Sequence[str]) -> set[str]:
    """The messages to keep: Lambda's reading of a ``ReportBatchItemFailures`` response."""
    if not isinstance(result, Mapping) or not result.get("batchItemFailures"):
        return set()  # null, {}, or an empty list: the whole batch succeeded
    items = result["batchItemFailures"]
    ids = [item.get("itemIdentifier") if isinstance(item, Mapping) else None for item in items]
    if not all(isinstance(i, str) and i in batch for i in ids):
        logger.error("batchItemFailures names messages not in the batch: %r; the whole batch fails", ids)
        return set(batch)
    return {str(i) for i in ids}


class SqsPoller(threading.Thread):
    """One poller, one function container: batches are processed one at a time."""

    def __init__(
        self,
        sqs: SQSClient,
        queue_url: str,
        queue_arn: str,
        function: LambdaFunction,
        *,
        batch_size: int = 10,
        batching_window_s: float = 0.0,
        wait_s: int = 1,
        region: str = "us-east-1",
    ) -> None:
        super().__init__(name="arcs-sqs-poller", daemon=True)
        if not 1 <= batch_size <= 10_000:
            raise ValueError(f"batch size must be 1 to 10,000, got {batch_size}")
        if not 0 <= batching_window_s <= 300:
            raise ValueError(f"batching window must be 0 to 300 s, got {batching_window_s}")
        if batch_size > SQS_RECEIVE_MAX and batching_window_s < 1:
            # CreateEventSourceMapping refuses this: batches over 10 need a window of at least 1 s.
            raise ValueError(
                f"a batch size of {batch_size} needs a batching window of at least 1 s, got {batching_window_s} s"
            )
        self.sqs = sqs
        self.queue_url = queue_url
        self.queue_arn = queue_arn
        self.function = function
        self.batch_size = batch_size
        self.batching_window_s = batching_window_s
        # Lambda long-polls for 20 s; a short wait lets ``stop`` take effect within a second.
        self.wait_s = wait_s
        self.region = region
        self._stop_event = threading.Event()
        self.batches = 0  # invocations so far, for tests and logs

    def stop(self, timeout: float | None = None) -> None:
        """Finish the batch in hand, then stop; ``timeout`` bounds the wait for the thread."""
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout)

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self.poll_once()
            except (BotoCoreError, ClientError):
                if self._stop_event.is_set():
                    break
                logger.warning("polling %s failed; retrying", self.queue_url, exc_info=True)
                self._stop_event.wait(1.0)

    def _receive(self, count: int, wait_s: int) -> list[MessageTypeDef]:
        response = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=min(SQS_RECEIVE_MAX, count),
            WaitTimeSeconds=wait_s,
            # "AttributeNames" in older APIs: every system attribute, ApproximateReceiveCount included.
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        return list(response.get("Messages", []))

    def gather(self) -> list[MessageTypeDef]:
        """One batch: a long poll for the first messages, then more until full, 6 MB, or the window ends."""
        batch = self._receive(self.batch_size, self.wait_s)
        if not batch:
            return batch
        deadline = time.monotonic() + self.batching_window_s
        size = sum(len(m["Body"]) for m in batch)
        seen = {m["MessageId"] for m in batch}
        while len(batch) < self.batch_size and size < _BATCH_BYTES and not self._stop_event.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            # WaitTimeSeconds is whole seconds: short polls (and short naps) for the last second.
            more = self._receive(self.batch_size - len(batch), int(min(remaining, 20)))
            for message in more:
                if message["MessageId"] not in seen:  # a standard queue may hand one out twice
                    seen.add(message["MessageId"])
                    batch.append(message)
                    size += len(message["Body"])
            if not more:
                self._stop_event.wait(min(0.02, max(0.0, deadline - time.monotonic())))
        return batch

    def poll_once(self) -> int:
        """Gather a batch and process it; returns how many messages were deleted."""
        batch = self.gather()
        if not batch:
            return 0
        return self.process(batch)

    def process(self, batch: Sequence[MessageTypeDef]) -> int:
        ids = [m["MessageId"] for m in batch]
        self.batches += 1
        try:
            result = self.function.invoke(sqs_event(batch, self.queue_arn, self.region))
        except InvokeError as exc:
            logger.error("%s failed on a batch of %d; SQS will redeliver it: %s", self.function.name, len(ids), exc)
            return 0
        keep = failed_ids(result, ids)
        done = [m for m in batch if m["MessageId"] not in keep]
        for start in range(0, len(done), SQS_RECEIVE_MAX):
            chunk = done[start : start + SQS_RECEIVE_MAX]
            response = self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
            )
            for failure in response.get("Failed", []):
                # Redelivered later, and recognised as already stored by the ingest protocol.
                logger.warning("could not delete message: %s", failure.get("Message"))
        if keep:
            logger.info("%d of %d messages left for redelivery", len(keep), len(ids))
        return len(done)
