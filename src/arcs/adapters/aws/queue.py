"""The write queue on SQS, with claim-check objects for envelopes too big for a message.

A message body is JSON text: ``{"id": write_id, "inline": base64(envelope)}``, or, above
``claim_check_bytes``, ``{"id": write_id, "claim": key}`` where ``key`` is an object under the
system prefix (``{prefix}/_arcs/claims/{write_id}.bin``) that no data glob can reach. The ingest
handler deletes the claim object once the write is committed.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from arcs.errors import BadRequest, StorageFault
from arcs.layout import SYSTEM_DIR, system_key
from arcs.ports import ObjectStore

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from mypy_boto3_sqs import SQSClient

    from arcs.write.batch import WriteBatch
    from arcs.write.ingest import IngestResult, QueuedWrite

logger = logging.getLogger(__name__)

CLAIMS_DIR = "claims"
# SQS's hard cap on a message; the JSON wrapper around the base64 text needs a little room.
SQS_MAX_MESSAGE_BYTES = 1024 * 1024
_WRAPPER_ROOM = 1024


def claim_key(prefix: str, write_id: str) -> str:
    return system_key(prefix, CLAIMS_DIR, f"{write_id}.bin")


def _inline_fits(size: int) -> bool:
    return 4 * ((size + 2) // 3) + _WRAPPER_ROOM <= SQS_MAX_MESSAGE_BYTES


class SqsWriteQueue:
    def __init__(
        self,
        sqs_client: SQSClient,
        queue_url: str,
        store: ObjectStore,
        claim_prefix: str,
        claim_check_bytes: int,
    ) -> None:
        self.client = sqs_client
        self.queue_url = queue_url
        self.store = store
        self.claim_prefix = claim_prefix
        self.claim_check_bytes = claim_check_bytes

    def enqueue(self, write_id: str, envelope: bytes, batch: WriteBatch | None = None) -> None:
        # ``batch`` is not needed: the ingest function reads the message in another process.
        if "/" in write_id or not write_id:
            raise ValueError(f"bad write id {write_id!r}")
        if len(envelope) > self.claim_check_bytes or not _inline_fits(len(envelope)):
            key = claim_key(self.claim_prefix, write_id)
            # The object is durable before the message that points at it exists.
            self.store.put(key, envelope)
            body = {"id": write_id, "claim": key}
        else:
            body = {"id": write_id, "inline": base64.b64encode(envelope).decode("ascii")}
        try:
            self.client.send_message(QueueUrl=self.queue_url, MessageBody=json.dumps(body))
        except (ClientError, BotoCoreError) as exc:
            raise StorageFault(f"cannot queue write {write_id}: {exc}") from exc


def _is_claim_key(key: str) -> bool:
    # Only claim objects may be loaded: a forged body must not read arbitrary keys.
    parts = key.split("/")
    return (
        len(parts) >= 3
        and parts[-3:-1] == [SYSTEM_DIR, CLAIMS_DIR]
        and parts[-1].endswith(".bin")
        and all(part not in ("", ".", "..") for part in parts)
    )


def read_queued_body(body: str, store: ObjectStore) -> tuple[str, Callable[[], bytes], str | None]:
    """Parse a queued message: (write id, a loader of the envelope, the claim key or None).

    The loader is lazy so a redelivered, already committed write never fetches its claim.
    """
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise BadRequest(f"queued message is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise BadRequest("queued message must be a JSON object")
    write_id = data.get("id")
    if not isinstance(write_id, str) or not write_id:
        raise BadRequest("queued message has no write id")
    inline, claim = data.get("inline"), data.get("claim")
    if (inline is None) == (claim is None):
        raise BadRequest(f"queued write {write_id} must carry exactly one of 'inline' and 'claim'")
    if inline is not None:
        if not isinstance(inline, str):
            raise BadRequest(f"queued write {write_id}: 'inline' must be base64 text")
        try:
            envelope = base64.b64decode(inline, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BadRequest(f"queued write {write_id}: 'inline' is not valid base64") from exc
        return write_id, lambda: envelope, None
    if not isinstance(claim, str) or not _is_claim_key(claim):
        raise BadRequest(f"queued write {write_id}: {claim!r} is not a claim-check key")
    key = claim
    return write_id, lambda: store.get(key), key


def queued_write_from_sqs(
    message_id: str, body: str, store: ObjectStore, sent_timestamp_ms: str | None = None
) -> QueuedWrite:
    """An SQS record -> the ingest protocol's view of it; the claim-check object goes once committed.
    ``sent_timestamp_ms``: the record's ``SentTimestamp`` attribute, when the queue was written to."""
    from arcs.write.ingest import QueuedWrite  # lazy: it loads pyarrow.parquet, which only the ingest function needs

    write_id, load, claim = read_queued_body(body, store)
    cleanup = (lambda: store.delete(claim)) if claim else None
    queued_at = int(sent_timestamp_ms) / 1000 if sent_timestamp_ms and sent_timestamp_ms.isdigit() else None
    return QueuedWrite(message_id, write_id, load, cleanup, queued_at=queued_at)


class SqsDelivery:
    """A batch of SQS records as Lambda's event source hands it to the ingest function
    (``ports.QueueDelivery``). ``response()`` is the function's answer: the records SQS delivers
    again (``ReportBatchItemFailures``), and after ``maxReceiveCount`` moves to the dead-letter queue."""

    def __init__(self, records: list[dict[str, Any]], store: ObjectStore) -> None:
        from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType

        self.records = records
        self.store = store
        # Powertools' processor: a record that cannot even be read is failed back on its own.
        self.processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        self.failed: list[str] = []

    def writes(self) -> list[QueuedWrite]:
        staged: list[QueuedWrite] = []

        def stage(record: SQSRecord) -> None:
            sent = record.raw_event.get("attributes", {}).get("SentTimestamp")
            staged.append(queued_write_from_sqs(record.message_id, record.body, self.store, sent))

        with self.processor(records=self.records, handler=stage):
            self.processor.process()
        self.failed = [str(item["itemIdentifier"]) for item in self.processor.response()["batchItemFailures"]]
        return staged

    def settle(self, result: IngestResult) -> None:
        for handle, reason in result.poison.items():
            logger.error("poison message %s (%s); it goes to the DLQ after its retries", handle, reason)
        self.failed += [*result.failed, *result.poison]

    def response(self) -> dict[str, list[dict[str, str]]]:
        return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in self.failed]}
