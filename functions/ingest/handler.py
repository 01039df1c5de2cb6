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
from aws_lambda_powertools.utilities.typing import LambdaContext

from arcs.adapters.aws.queue import SqsDelivery
from arcs.runtime import lambda_runtime
from arcs.tracing import traced_handler
from arcs.write.ingest import ingest_delivery

logger = Logger(service="arcs-ingest")


@logger.inject_lambda_context
@traced_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    runtime = lambda_runtime()
    delivery = SqsDelivery(event["Records"], runtime.store)
    result = ingest_delivery(runtime.ingestor(), delivery)
    answer = delivery.response()
    logger.info(
        "ingested",
        extra={
            "committed": len(result.committed),
            "duplicates": len(result.already_done),
            "failed": len(answer["batchItemFailures"]),
            "files": len(result.files),
            "groups": result.groups,
            "largest_group_bytes": result.largest_group_bytes,
        },
    )
    return answer
