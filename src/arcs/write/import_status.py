"""An import's id and its status record: what the status route reads, apart from the decoders.

The record is small JSON under ``{prefix}/_arcs/imports/{database}/{id}.json``, written as the
import runs (docs/import.md).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from typing import Any

from arcs import layout
from arcs.errors import BadRequest, NotFound
from arcs.ports import ObjectStore

_IMPORT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: Formats whose answer lists the measurements (Arc's line-protocol answer); the others answer
#: one measurement's partitions, time range and columns (Arc's CSV and Parquet answer).
_MANY_MEASUREMENTS = ("lp", "msgpack")


def check_import_id(value: str) -> str:
    if not _IMPORT_ID.fullmatch(value):
        raise BadRequest(
            f"invalid import id {repr(value)[:60]}: 1 to 128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return value


def chunk_write_id(database: str, import_id: str, number: int) -> str:
    """The write id of an import's chunk: the same in every run of the import, so stored once."""
    return hashlib.sha256(f"import\0{database}\0{import_id}\0{number}".encode()).hexdigest()[:32]


@dataclass
class ImportStatus:
    """An import's progress and outcome, as the status route answers it."""

    import_id: str
    database: str
    format: str
    options: dict[str, Any]
    state: str = "validating"  # validating -> storing -> done | failed
    sha256: str | None = None  # of the file as received: an id reused for another file is a 409
    bytes_total: int = 0
    bytes_read: int = 0  # decompressed bytes read by the current pass
    rows_checked: int = 0
    rows_imported: int = 0  # rows stored (committed) so far
    chunks: int = 0
    chunks_stored: int = 0
    measurements: list[str] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    time_min_ns: int | None = None
    time_max_ns: int | None = None
    hours: int = 0
    error: str | None = None
    error_status: int | None = None
    now_micros: int = 0  # lines without a timestamp take this time, in every run
    started_at: float = 0.0
    updated_at: float = 0.0
    finished_at: float | None = None
    upload: str | None = None  # where the file waits while the import is not finished
    upload_id: str | None = None  # the multipart upload the client puts it with, if it was split
    upload_etag: str | None = None  # the version completed: only that one is imported

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> ImportStatus:
        return cls(**json.loads(data))

    def public(self) -> dict[str, Any]:
        """What the status route shows."""
        hidden = ("now_micros", "upload", "upload_id", "upload_etag", "options")
        shown = {k: v for k, v in asdict(self).items() if k not in hidden}
        shown["options"] = {k: v for k, v in self.options.items() if k != "database"}
        shown["time_range_min"] = _rfc3339(self.time_min_ns)
        shown["time_range_max"] = _rfc3339(self.time_max_ns)
        return shown

    def result(self, duration_ms: int) -> dict[str, Any]:
        """Arc's answer to an import: its fields for line protocol, or for CSV and Parquet."""
        if self.format in _MANY_MEASUREMENTS:
            body: dict[str, Any] = {
                "database": self.database,
                "measurements": self.measurements,
                "rows_imported": self.rows_imported,
                "precision": self.options.get("precision") or "ns",
            }
        else:
            body = {
                "database": self.database,
                "measurement": self.options.get("measurement"),
                "rows_imported": self.rows_imported,
                "partitions_created": self.hours,
                "time_range_min": _rfc3339(self.time_min_ns),
                "time_range_max": _rfc3339(self.time_max_ns),
                "columns": self.columns,
            }
        return {**body, "duration_ms": duration_ms, "import_id": self.import_id}


def _rfc3339(nanos: int | None) -> str | None:
    if nanos is None:
        return None
    seconds, fraction = divmod(nanos, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{fraction:09d}Z"


#: An import's status record and its uploaded file, side by side under the imports folder; the
#: stack grants each function the one it touches by these suffixes.
RECORD_SUFFIX = ".json"
UPLOAD_SUFFIX = ".upload"


class ImportLedger:
    """The imports' status records, in the object store beside the data's other system keys."""

    def __init__(self, store: ObjectStore, prefix: str) -> None:
        self.store = store
        self.prefix = prefix
        # Arc's counters of this process's imports (``/api/v1/import/stats``).
        self._totals = {"total_requests": 0, "total_records": 0, "total_errors": 0}
        self._lock = threading.Lock()

    def count(self, requests: int = 0, records: int = 0, errors: int = 0) -> None:
        with self._lock:
            self._totals["total_requests"] += requests
            self._totals["total_records"] += records
            self._totals["total_errors"] += errors

    def totals(self) -> dict[str, int]:
        with self._lock:
            return dict(self._totals)

    def key(self, database: str, import_id: str) -> str:
        return layout.system_key(self.prefix, layout.IMPORTS_DIR, database, f"{import_id}{RECORD_SUFFIX}")

    def upload_key(self, database: str, import_id: str) -> str:
        """Where a client uploads the file of an import (S3), beside its status record."""
        return layout.system_key(self.prefix, layout.IMPORTS_DIR, database, f"{import_id}{UPLOAD_SUFFIX}")

    def get(self, database: str, import_id: str) -> ImportStatus | None:
        try:
            return ImportStatus.from_bytes(self.store.get(self.key(database, import_id)))
        except NotFound:
            return None

    def put(self, status: ImportStatus) -> None:
        status.updated_at = time.time()
        self.store.put(self.key(status.database, status.import_id), status.to_bytes())

    def unfinished(self) -> Iterator[ImportStatus]:
        for info in self.store.list(layout.system_key(self.prefix, layout.IMPORTS_DIR) + "/"):
            if info.key.endswith(RECORD_SUFFIX):
                with suppress(NotFound, ValueError, TypeError):
                    status = ImportStatus.from_bytes(self.store.get(info.key))
                    if status.state in ("validating", "storing") and status.upload_id is None:
                        yield status
