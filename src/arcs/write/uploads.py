"""An import's file as it arrives: a raw body, or the ``file`` field of a multipart form (Arc's
clients send ``curl -F file=@export.lp``), passed on piece by piece as it is read, never whole;
the standalone server writes it to a file of its own (``UploadFile``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import Any

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from arcs.errors import DISK_FULL_RETRY_S, BadRequest, PayloadTooLarge, StorageFault

#: The form field Arc reads the file from.
FILE_FIELD = b"file"


class FileBody:
    """Feeds the file's bytes to ``sink`` as the body arrives, counting and hashing them."""

    def __init__(self, content_type: str | None, sink: Callable[[bytes], object], limit: int) -> None:
        self.sink = sink
        self.limit = limit
        self.size = 0
        self._hash = hashlib.sha256()
        self._found = False
        mime, params = parse_options_header(content_type or "")
        self.multipart = mime == b"multipart/form-data"
        self._parser: MultipartParser | None = None
        if self.multipart:
            boundary = params.get(b"boundary")
            if not boundary:
                raise BadRequest("a multipart/form-data body needs a boundary in its Content-Type")
            self._parser = MultipartParser(boundary, self._callbacks())  # type: ignore[arg-type]
        self._field = b""
        self._value = b""
        self._in_file = False
        self._disposition = b""

    def _callbacks(self) -> dict[str, Callable[..., None]]:
        def on_header_field(data: bytes, start: int, end: int) -> None:
            self._field += data[start:end]

        def on_header_value(data: bytes, start: int, end: int) -> None:
            self._value += data[start:end]

        def on_header_end() -> None:
            if self._field.lower() == b"content-disposition":
                self._disposition = self._value
            self._field, self._value = b"", b""

        def on_headers_finished() -> None:
            _kind, params = parse_options_header(self._disposition)
            if params.get(b"name") == FILE_FIELD and self._found:
                # Importing one and dropping the other would acknowledge what was never checked.
                raise BadRequest("the form holds more than one 'file' field: send one file per import")
            self._in_file = params.get(b"name") == FILE_FIELD
            self._disposition = b""

        def on_part_data(data: bytes, start: int, end: int) -> None:
            if self._in_file:
                self._take(data[start:end])

        def on_part_end() -> None:
            if self._in_file:
                self._found = True
            self._in_file = False

        return {
            "on_header_field": on_header_field,
            "on_header_value": on_header_value,
            "on_header_end": on_header_end,
            "on_headers_finished": on_headers_finished,
            "on_part_data": on_part_data,
            "on_part_end": on_part_end,
        }

    def _take(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.limit:
            raise PayloadTooLarge(f"the file exceeds the import limit of {self.limit} bytes")
        self._hash.update(data)
        self.sink(data)

    def write(self, data: bytes) -> None:
        if self._parser is None:
            self._take(data)
            return
        try:
            self._parser.write(data)
        except MultipartParseError as exc:
            raise BadRequest(f"the multipart/form-data body is malformed: {exc}") from None

    def finish(self) -> None:
        """The body ended: a form must have held a whole ``file`` field, and the file some bytes."""
        if self._parser is not None:
            try:
                self._parser.finalize()
            except MultipartParseError as exc:
                raise BadRequest(f"the multipart/form-data body is malformed: {exc}") from None
            if self._in_file:
                raise BadRequest("the multipart/form-data body ends inside its file field (truncated)")
            if not self._found:
                raise BadRequest("no file uploaded: use multipart/form-data with field name 'file'")
        if self.size == 0:
            raise BadRequest("file is empty")

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()


class UploadFile:
    """An import's file written to a file of its own in ``directory`` as it arrives, and removed
    when done with; a disk that cannot keep it is a 503 (``StorageFault``), nothing imported."""

    def __init__(self, directory: Path, content_type: str | None, max_bytes: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{os.urandom(12).hex()}.upload"
        with _disk_faults():
            self._sink = open(self.path, "wb")  # noqa: SIM115 (closed by finish or __exit__)
        self.body = FileBody(content_type, self._sink.write, max_bytes)

    def __enter__(self) -> UploadFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        with suppress(OSError):  # the upload is dropped anyway
            self._sink.close()
        self.path.unlink(missing_ok=True)

    def write(self, piece: bytes) -> None:
        with _disk_faults():
            self.body.write(piece)

    def finish(self) -> dict[str, Any]:
        """The body ended: the file checked whole, flushed and synced to disk (blocking). Returns what
        the import route reads (``arcs.http.routes.imports``)."""
        self.body.finish()
        # Closing flushes what the file still buffers, so a full disk may show only then.
        with _disk_faults():
            self._sink.flush()
            os.fsync(self._sink.fileno())
            self._sink.close()
        return {"path": str(self.path), "sha256": self.body.sha256, "bytes": self.body.size}


@contextmanager
def _disk_faults() -> Iterator[None]:
    """A full (or failing) disk as the 503 it is: the file cannot be kept, nothing was imported."""
    try:
        yield
    except OSError as exc:
        raise StorageFault(f"the file cannot be kept on disk: {exc}", retry_after_s=DISK_FULL_RETRY_S) from exc
