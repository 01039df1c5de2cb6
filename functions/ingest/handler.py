"""SQS -> ingest: a batch of queued writes becomes hour-partitioned Parquet on S3.

Failures are reported per message (``ReportBatchItemFailures``): SQS redelivers only those, and
after ``maxReceiveCount`` moves them to the dead-letter queue, so nothing is silently dropped.
A batch is stored in groups of at most ``ARCS_INGEST_GROUP_BYTES`` decoded bytes, each written
to Parquet before the next is read (claim-checked bodies are fetched only then), so a batch of
large writes never outgrows the function's memory and is never failed back to SQS for its size.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from arcs.adapters.aws.queue import queued_write_from_sqs
from arcs.runtime import lambda_runtime
from arcs.tracing import traced_handler
from arcs.write.ingest import QueuedWrite

logger = Logger(service="arcs-ingest")
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


@logger.inject_lambda_context
@traced_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    runtime = lambda_runtime()
    writes: list[QueuedWrite] = []

    def stage(record: SQSRecord) -> None:
        sent = record.raw_event.get("attributes", {}).get("SentTimestamp")
        writes.append(queued_write_from_sqs(record.message_id, record.body, runtime.store, sent))

    with processor(records=event["Records"], handler=stage):
        processor.process()
    result = runtime.ingestor().ingest(writes)
    for handle, reason in result.poison.items():
        logger.error(
            "poison message; it goes to the DLQ after its retries", extra={"message_id": handle, "reason": reason}
        )
    failed = [item["itemIdentifier"] for item in processor.response()["batchItemFailures"]]
    failed += [*result.failed, *result.poison]
    logger.info(
        "ingested",
        extra={
            "committed": len(result.committed),
            "duplicates": len(result.already_done),
            "failed": len(failed),
            "files": len(result.files),
            "groups": result.groups,
            "largest_group_bytes": result.largest_group_bytes,
        },
    )
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failed]}
