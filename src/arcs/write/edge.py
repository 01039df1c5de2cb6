"""The write edge: a request body -> validated, normalized batch, durable in the queue."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from arcs.errors import PayloadTooLarge
from arcs.names import check_database
from arcs.ports import SchemaCatalog, WriteQueue
from arcs.write.batch import ColumnarBody, MeasurementRows, WriteBatch
from arcs.write.decoders import WireFormat, columnar_lane, decode
from arcs.write.decoders.columns import check_precision
from arcs.write.decoders.compression import decompress
from arcs.write.schema import SchemaRegistry


@dataclass(frozen=True, slots=True)
class WriteRequest:
    kind: WireFormat
    body: bytes
    database: str
    content_encoding: str | None = None
    precision: str | None = None


class WriteService:
    def __init__(
        self,
        catalog: SchemaCatalog,
        queue: WriteQueue,
        max_request_bytes: int,
        max_decompressed_bytes: int,
        clock_ns: Callable[[], int] = time.time_ns,
        envelope_compression: str | None = None,
    ) -> None:
        self.schemas = SchemaRegistry(catalog)
        # SQS bills and caps message size, so queued envelopes are compressed there; a local
        # spool is not worth the CPU.
        self.envelope_compression = envelope_compression
        self.queue = queue
        self.max_request_bytes = max_request_bytes
        self.max_decompressed_bytes = max_decompressed_bytes
        self.clock_ns = clock_ns

    def accept(self, request: WriteRequest) -> WriteBatch:
        """Returns once the whole request is durable in the queue; raises and stores nothing otherwise."""
        database = check_database(request.database)
        precision = check_precision(request.precision)
        if len(request.body) > self.max_request_bytes:
            raise PayloadTooLarge(f"body is {len(request.body)} bytes; the limit is {self.max_request_bytes}")
        body = decompress(request.body, request.content_encoding, self.max_decompressed_bytes)
        laned = self._lane(request.kind, database, body, precision)
        if laned is not None:
            parts: list[MeasurementRows | ColumnarBody] = [laned]
        else:
            parts = list(self.schemas.apply(database, decode(request.kind, body, self.clock_ns() // 1000, precision)))
        # 128 random bits as 32 hex digits, a UUID's form at a third of uuid4's cost.
        batch = WriteBatch(os.urandom(16).hex(), database, tuple(parts))
        self.queue.enqueue(batch.write_id, batch.to_bytes(self.envelope_compression), batch)
        return batch

    def _lane(self, kind: WireFormat, database: str, body: bytes, precision: str | None) -> ColumnarBody | None:
        """The body to queue as sent (``columnar_lane``), when the lane takes it and the registry
        took its shape as it is; None for the general path. Queues that compress their envelopes
        (SQS) get decoded tables, which compress well; the body would be queued as it came."""
        if kind is not WireFormat.MSGPACK or self.envelope_compression is not None:
            return None
        scanned = columnar_lane.scan(body, precision)
        if scanned is None or not self.schemas.accepts(database, scanned.measurement, scanned.tags, scanned.schema):
            return None
        return scanned

    def enqueue_rows(self, write_id: str, database: str, parts: list[MeasurementRows]) -> WriteBatch:
        """Rows made on the server (a continuous query's result) as one write under a chosen id.

        The same checks and schema rules as a request's rows; a write id used before makes the
        ingest step store the rows once, however many times they are queued (docs/ingest.md).
        """
        batch = WriteBatch(write_id, check_database(database), tuple(self.schemas.apply(database, parts)))
        self.queue.enqueue(batch.write_id, batch.to_bytes(self.envelope_compression), batch)
        return batch
