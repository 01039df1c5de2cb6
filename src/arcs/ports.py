"""The ports: what the core needs from storage, queue and catalog. Each has a local and an AWS adapter.

The catalog holds everything small and transactional: measurement schemas, the databases, the
list of committed data files (readers list files here, never by globbing storage), the ingest
commit records and the per-write markers that make redelivery harmless (docs/ingest.md),
the continuous queries' definitions, progress and executions (docs/continuous-queries.md), and
compaction's leases, per-partition commit records and job journal (docs/compaction.md), and the
retention policies with their executions (docs/retention-and-delete.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, TYPE_CHECKING, Literal, Protocol

from arcs.layout import Tier

if TYPE_CHECKING:
    from arcs.write.batch import WriteBatch
    from arcs.write.ingest import IngestResult, QueuedWrite

CommitStatus = Literal["committed", "aborted"]
#: running: picked inputs, writing outputs; committed: the swap is stored, records not yet moved;
#: settled: records moved, input objects wait out the grace period; then done (or aborted, failed).
JobStatus = Literal["running", "committed", "settled", "done", "aborted", "failed"]
JobKind = Literal["compaction", "retention", "delete"]
ACTIVE_JOB_STATUSES: frozenset[str] = frozenset({"running", "committed", "settled"})


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    key: str
    size: int


class ObjectStore(Protocol):
    """Immutable objects by key (S3, S3 Express, or a local directory)."""

    def put(self, key: str, data: bytes) -> None: ...

    def put_if_absent(self, key: str, data: bytes | memoryview) -> bool:
        """Create ``key`` only if it does not exist (S3 ``If-None-Match: *``); False if it did."""
        ...

    def get(self, key: str) -> bytes:
        """Raises ``arcs.errors.NotFound`` for a missing key."""
        ...

    def exists(self, key: str) -> bool: ...

    def delete(self, key: str) -> None: ...

    def list(self, prefix: str) -> Iterator[ObjectInfo]: ...

    def url(self, key: str) -> str:
        """How DuckDB reads the object: a local path or an ``s3://`` URL."""
        ...


class DownloadStore(Protocol):
    """Objects a client fetches itself, from a URL that works for a short while (S3: a presigned GET)."""

    def put_download(self, key: str, data: bytes, content_type: str) -> None:
        """Store ``data`` so that fetching it answers ``content_type``."""
        ...

    def download_url(self, key: str, expires_in_s: int) -> str: ...


@dataclass(frozen=True, slots=True)
class UploadedFile:
    size: int
    etag: str


class UploadStore(Protocol):
    """Objects a client puts itself, to URLs that work for a short while (S3: presigned PUTs), and
    read back in ranges: how an import's file reaches the bucket without passing through Lambda."""

    def upload_url(self, key: str, expires_in_s: int) -> str: ...

    def start_multipart(self, key: str) -> str:
        """A multipart upload of ``key``; its id."""
        ...

    def part_url(self, key: str, upload_id: str, part_number: int, expires_in_s: int) -> str: ...

    def finish_multipart(self, key: str, upload_id: str, parts: Sequence[tuple[int, str]]) -> None:
        """Join the parts (number, ETag) into the object; a part missing or wrong is a 400."""
        ...

    def uploaded(self, key: str) -> UploadedFile | None:
        """The object's size and version tag (S3: its ETag); None if there is none."""
        ...

    def claim(self, key: str, etag: str, to_key: str) -> bool:
        """Copy ``key`` to ``to_key`` if it is still the version ``etag``: an upload URL stays
        valid for a while, and what is imported must be the file that was completed. False if
        the object changed or is gone."""
        ...

    def open_ranges(self, key: str, size: int) -> IO[bytes]:
        """The object as a seekable file, read in ranges."""
        ...


class QueueDelivery(Protocol):
    """The reading side of the write queue: a batch of queued writes as the queue delivered it,
    and where each one's outcome goes back. The standalone server takes batches from its spool;
    on AWS Lambda's event source hands the ingest function a batch of SQS records, and the
    function's answer says which to deliver again. Ingest sees only this."""

    def writes(self) -> list[QueuedWrite]:
        """The batch, each write under its queue handle (a record that cannot be read is settled
        as failed by the delivery itself)."""
        ...

    def settle(self, result: IngestResult) -> None:
        """Acknowledge what ``result`` stored, keep what failed for redelivery (a dead letter past
        its attempts), and dead-letter the poison at once."""
        ...


class WriteQueue(Protocol):
    """Where the write edge puts an accepted request; ``enqueue`` returns once it is durable.

    ``batch`` is the envelope's content, decoded: a queue whose consumer runs in the same process
    may hand it over so the consumer need not read the envelope back.
    """

    def enqueue(self, write_id: str, envelope: bytes, batch: WriteBatch | None = None) -> None: ...


@dataclass(frozen=True, slots=True)
class MeasurementSchema:
    database: str
    measurement: str
    columns: dict[str, str]  # column -> storage type name (int64, float64, string, bool, timestamp)
    tags: tuple[str, ...] = ()
    version: int = 0


@dataclass(frozen=True, slots=True)
class FileRecord:
    database: str
    measurement: str
    hour: datetime
    key: str
    rows: int
    size: int
    min_time_us: int
    max_time_us: int
    commit_id: str


@dataclass(frozen=True, slots=True)
class CommitRecord:
    commit_id: str
    status: CommitStatus
    files: tuple[FileRecord, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class Partition:
    """What compaction works on: one hour of one measurement, or (``tier`` "day", "month") one day
    or month of it, ``hour`` then being the span's first hour, where its files are recorded."""

    database: str
    measurement: str
    hour: datetime
    tier: Tier = "hour"

    @property
    def name(self) -> str:
        moment = self.hour.strftime({"hour": "%Y-%m-%dT%H", "day": "%Y-%m-%d", "month": "%Y-%m"}[self.tier])
        return f"{self.database}/{self.measurement}/{moment}"


@dataclass(frozen=True, slots=True)
class CompactionState:
    """A partition's compaction commit record: one per partition, replaced by each commit.

    ``version`` counts the partition's commits. While ``settled`` is False the record names the
    committed job's inputs and outputs, and ``list_files`` shows the outputs instead of the inputs
    whatever the file records say; settling moves the file records and then drops the lists.
    """

    version: int
    job_id: str
    settled: bool
    inputs: tuple[str, ...] = ()
    outputs: tuple[FileRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class CompactionJob:
    """The journal of one compaction job (recovery reads the active ones) and its history entry."""

    job_id: str
    partition: Partition
    status: JobStatus
    started_at: datetime
    updated_at: datetime
    #: The partition's compaction version when the job picked its inputs; it commits base + 1.
    base_version: int = 0
    input_keys: tuple[str, ...] = ()
    output_keys: tuple[str, ...] = ()
    input_bytes: int = 0
    output_bytes: int = 0
    input_rows: int = 0
    output_rows: int = 0
    quarantined: tuple[str, ...] = ()
    #: When the inputs' objects may go: readers that listed them before the swap are done by then.
    delete_after: datetime | None = None
    error: str = ""
    #: What rewrote the partition: compaction, retention (inputs all its files, no outputs) or a delete.
    kind: JobKind = "compaction"
    #: A day or month job: each hour it took inputs from (and the span's first hour, where its outputs are
    #: recorded) with that hour's compaction version when it picked them; it commits each + 1.
    base_versions: tuple[tuple[datetime, int], ...] = ()

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_JOB_STATUSES


# The catalog's roles: each use case asks for the ones it uses; the adapters implement them all
# (``Catalog``), and the runtime holds one.


class SchemaCatalog(Protocol):
    """Schemas and databases: what can be written and queried."""

    def get_schema(self, database: str, measurement: str) -> MeasurementSchema | None: ...

    def put_schema(self, schema: MeasurementSchema, expected_version: int | None) -> bool:
        """Store ``schema`` with version ``expected_version + 1`` (or 1 when None, i.e. new).

        Returns False when someone else changed it first (compare-and-set on the version).
        """
        ...

    def put_schemas(self, changes: Sequence[tuple[MeasurementSchema, int | None]]) -> bool:
        """``put_schema`` for each of ``changes`` (a request's new and widened measurements), in as
        few catalog writes as the store allows; True when every one was stored. SQLite: one
        transaction, all or none. DynamoDB: transactions of up to 50 schemas, each all or none, in
        order; the first that fails ends it (False)."""
        ...

    def list_schemas(self, database: str | None = None) -> list[MeasurementSchema]: ...

    def create_database(self, name: str) -> bool:
        """False if it existed."""
        ...

    def list_databases(self) -> list[str]: ...

    def drop_database(self, name: str) -> bool:
        """Remove the database's schemas, then its file records, then the database itself.

        Schemas go first: a measurement without a schema is not queryable, so a crash midway
        never leaves part of a measurement's files visible. Calling it again finishes what a
        crashed call started. True if any of those entries existed. The data objects are the
        caller's to delete, after this returns (nothing lists them any more by then).
        """
        ...


class FileCatalog(Protocol):
    """The committed data files: readers list files here, never by globbing storage."""

    def put_files(self, files: Sequence[FileRecord]) -> None:
        """Idempotent: putting a record again changes nothing."""
        ...

    def list_files(
        self,
        database: str,
        measurement: str,
        first_hour: datetime | None = None,
        last_hour: datetime | None = None,
    ) -> list[FileRecord]:
        """The files readers see, in (hour, key) order.

        A partition whose compaction commit is not settled yet shows that commit's outputs and
        hides its inputs, whatever the file records say: one consistent view, never both, never
        neither (docs/compaction.md).
        """
        ...

    def delete_files(self, files: Sequence[FileRecord]) -> None:
        """Stop listing these files (a quarantined file), for good: like a compacted input's, the
        record stays retired, so a late ingest roll-forward cannot list it again. Idempotent."""
        ...


class IngestLedger(Protocol):
    """The ingest commit protocol's markers and commit records (docs/ingest.md)."""

    def get_markers(self, write_ids: Iterable[str]) -> dict[str, str]:
        """write id -> commit id of the attempt that claimed it."""
        ...

    def swap_marker(self, write_id: str, expected: str | None, commit_id: str) -> bool:
        """Point ``write_id`` at ``commit_id`` if it still points at ``expected`` (None: unset)."""
        ...

    def swap_markers(self, claims: Sequence[tuple[str, str | None]], commit_id: str) -> set[str]:
        """``swap_marker`` for many writes at once; returns the write ids claimed."""
        ...

    def get_commit(self, commit_id: str) -> CommitRecord | None: ...

    def put_commit_if_absent(self, record: CommitRecord) -> bool:
        """The commit point: exactly one of 'committed' and 'aborted' is ever stored for an id."""
        ...


class ContinuousQueryStore(Protocol):
    """Continuous queries' definitions, progress marks and executions (docs/continuous-queries.md)."""

    def create_continuous_query(self, query: ContinuousQuery, processed_until_us: int) -> ContinuousQuery | None:
        """Store a new query under a new id (``query.query_id`` is ignored) with its progress mark.

        Ids count up and are never reused. None if the name is taken in its database.
        """
        ...

    def get_continuous_query(self, query_id: int) -> ContinuousQuery | None: ...

    def list_continuous_queries(self, database: str | None = None) -> list[ContinuousQuery]:
        """By database, then name."""
        ...

    def update_continuous_query(self, query: ContinuousQuery, expected_version: int) -> bool:
        """Store ``query`` with version ``expected_version + 1`` if the stored one is at
        ``expected_version`` and its (possibly new) name is free; False otherwise."""
        ...

    def delete_continuous_query(self, query_id: int) -> bool:
        """Remove the definition, its name, its progress and its executions; False if unknown."""
        ...

    def get_cq_progress(self, query_id: int) -> int | None:
        """The end (epoch microseconds) of the last window the schedule processed."""
        ...

    def set_cq_progress(self, query_id: int, expected_us: int | None, processed_until_us: int) -> bool:
        """Compare-and-set the progress mark (None: whatever it is); False if it moved or the query is gone."""
        ...

    def put_cq_execution(self, execution: CQExecution) -> None: ...

    def list_cq_executions(self, query_id: int, limit: int = 100) -> list[CQExecution]:
        """Newest first."""


class CompactionJournal(Protocol):
    """Leases on partitions, compaction's per-partition commit records and its job journal
    (docs/compaction.md): what compaction, retention and delete rewrite under."""

    def acquire_lease(self, name: str, owner: str, ttl_s: float) -> bool:
        """Hold ``name`` for ``ttl_s`` seconds if it is free, expired, or already ``owner``'s (renewal)."""
        ...

    def release_lease(self, name: str, owner: str) -> None:
        """Free ``name`` if ``owner`` still holds it."""
        ...

    def release_leases(self, holder: str) -> list[str]:
        """Free every lease whose owner is ``holder``'s (``{holder}/...``), whatever its expiry; the
        names freed. Only for a holder known to be gone: its next incarnation reclaims them."""
        ...

    def get_compaction_state(self, partition: Partition) -> CompactionState | None: ...

    def commit_compaction(self, partition: Partition, state: CompactionState) -> bool:
        """The swap: store ``state`` (version n + 1, not settled) if the partition is at version n
        (none: 0) and settled. False when another job committed first."""
        ...

    def settle_compaction(self, partition: Partition, state: CompactionState) -> None:
        """Put the outputs' file records, delete the inputs', then mark ``state`` settled.

        Idempotent; does nothing once the partition has moved past ``state``.
        """
        ...

    def commit_compactions(self, commits: Sequence[tuple[Partition, CompactionState]]) -> bool:
        """A day's swap: ``commit_compaction`` for each hour, all in one transaction (SQLite
        transaction, DynamoDB ``TransactWriteItems``): every hour's record moves, or none does.
        False when any hour was not at its version - 1 or not settled."""
        ...

    def settle_compactions(self, commits: Sequence[tuple[Partition, CompactionState]]) -> None:
        """Settle a day's swap: put every output's record, retire every hour's inputs, and only
        then mark each record settled, so a record read settled means its files have moved.
        Idempotent; an hour whose record moved past its state is left alone."""
        ...

    def put_compaction_job(self, job: CompactionJob) -> None:
        """Store (or replace) a job's journal entry."""
        ...

    def get_compaction_job(self, job_id: str) -> CompactionJob | None: ...

    def list_compaction_jobs(self, active: bool = False, limit: int = 100) -> list[CompactionJob]:
        """Newest first; ``active``: only jobs not finished (what recovery looks at)."""
        ...


class RetentionStore(Protocol):
    """Retention policies and their executions (docs/retention-and-delete.md)."""

    def create_retention_policy(self, policy: RetentionPolicy) -> RetentionPolicy | None:
        """Store a new policy under a new id (``policy.policy_id`` is ignored); ids count up and are
        never reused. None if the name is taken in its database."""
        ...

    def get_retention_policy(self, policy_id: int) -> RetentionPolicy | None: ...

    def list_retention_policies(self, database: str | None = None) -> list[RetentionPolicy]:
        """By database, then name."""
        ...

    def update_retention_policy(self, policy: RetentionPolicy) -> bool:
        """Replace the stored policy of ``policy.policy_id``; False if it is gone or its (possibly
        new) name is another policy's in the database."""
        ...

    def delete_retention_policy(self, policy_id: int) -> bool:
        """Remove the policy, its name and its executions; False if unknown."""
        ...

    def put_retention_execution(self, execution: RetentionExecution) -> None: ...

    def list_retention_executions(self, policy_id: int, limit: int = 100) -> list[RetentionExecution]:
        """Newest first."""
        ...


class DataCatalog(SchemaCatalog, FileCatalog, Protocol):
    """What data exists, schemas and files: what queries, SHOW, delete and drop read."""


class IngestCatalog(SchemaCatalog, FileCatalog, IngestLedger, Protocol):
    """What ingest commits through: the protocol's markers and commits, then the files, with the
    schemas of what it commits (recreated when a dropped database took them)."""


class ContinuousQueryCatalog(SchemaCatalog, ContinuousQueryStore, Protocol):
    """What continuous queries use: their store, and the schemas of the measurements they read."""


class RetentionCatalog(DataCatalog, RetentionStore, ContinuousQueryStore, Protocol):
    """What retention uses: its policies, the files they expire, and the continuous queries'
    definitions and progress marks that its derived rules come from."""


class Catalog(
    SchemaCatalog, FileCatalog, IngestLedger, ContinuousQueryStore, CompactionJournal, RetentionStore, Protocol
):
    """The whole catalog, every role: what the adapters implement and the runtime holds."""


@dataclass(frozen=True, slots=True)
class TokenRecord:
    token_id: str
    name: str
    description: str
    lookup: str  # a short prefix of a fast hash: finds the record without the secret
    salt: bytes
    secret_hash: bytes  # slow salted hash (scrypt)
    permissions: tuple[str, ...]
    databases: tuple[str, ...]  # empty: all databases
    created_at: datetime
    expires_at: datetime | None = None
    revoked: bool = False


class TokenStore(Protocol):
    def put(self, record: TokenRecord, previous_lookup: str | None = None) -> None: ...

    def get(self, token_id: str) -> TokenRecord | None: ...

    def find(self, lookup: str) -> list[TokenRecord]: ...

    def list(self) -> list[TokenRecord]: ...

    def delete(self, token_id: str) -> bool: ...

    def is_empty(self) -> bool: ...


# --- continuous queries (docs/continuous-queries.md) ---------------------------------------------

CQExecutionKind = Literal["scheduled", "manual"]
CQExecutionStatus = Literal["succeeded", "failed"]


@dataclass(frozen=True, slots=True)
class ContinuousQuery:
    """A continuous query's definition, its fields named as the API names them (docs/continuous-queries.md)."""

    query_id: int
    name: str
    database: str
    source_measurement: str
    destination_measurement: str
    query: str  # holds {start_time} and {end_time}
    interval: str  # as given ("5m"); its length is ``interval_s``
    interval_s: int
    tag_columns: tuple[str, ...]
    retention_days: int | None
    delete_source_after_days: int | None
    is_active: bool
    created_at: datetime
    updated_at: datetime
    description: str = ""
    version: int = 1


@dataclass(frozen=True, slots=True)
class CQExecution:
    """One run of a continuous query over one time range ``[start_us, end_us)``."""

    execution_id: str
    query_id: int
    kind: CQExecutionKind
    start_us: int
    end_us: int
    status: CQExecutionStatus
    rows: int
    write_id: str | None  # None when there was nothing to write
    started_at: datetime
    duration_ms: float
    error: str = ""


# --- retention policies (docs/retention-and-delete.md) -------------------------------------------

RetentionKind = Literal["scheduled", "manual"]
RetentionStatus = Literal["succeeded", "partial", "failed", "dry_run"]


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """A retention policy, its fields named as the API names them; ``measurement`` None: the whole database."""

    policy_id: int
    name: str
    database: str
    measurement: str | None
    retention_days: int
    buffer_days: int
    is_active: bool
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class RetentionExecution:
    """One run of a policy: the partitions it removed (or would have, on a dry run)."""

    execution_id: str
    policy_id: int
    kind: RetentionKind
    dry_run: bool
    status: RetentionStatus
    cutoff_us: int
    partitions: int
    files: int
    rows: int
    bytes: int
    started_at: datetime
    duration_ms: float
    #: Partitions it could not remove this time (another job held them, or an error): the next run retries.
    skipped: tuple[str, ...] = ()
    error: str = ""
