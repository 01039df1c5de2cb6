"""Object storage on a local directory: the standalone server's data lives here."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

from arcs.errors import DiskFull, NotFound, StorageFault
from arcs.ports import ObjectInfo


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durably(path: Path, data: bytes | memoryview) -> Path:
    """Write ``data`` to a temporary sibling of ``path`` and fsync it; the caller publishes it.

    Plain descriptor calls rather than a buffered file: each call releases the interpreter's lock,
    and the buffered file's own (fstat, ioctl, lseek) made ingest's many small files wait for it
    again and again."""
    tmp = path.with_name(f".{path.name}.{os.urandom(8).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o666)
    except FileNotFoundError:
        # A new directory (a new hour or measurement): made only then, not checked per write.
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, flags, 0o666)
    try:
        view = memoryview(data).cast("B")
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk keeps no partial file behind
        raise
    finally:
        os.close(fd)
    return tmp


def replace_durably(path: Path, data: bytes | memoryview) -> None:
    """Write ``path`` whole or not at all, and be sure both the file and its name survive a crash."""
    tmp = write_durably(path, data)
    os.replace(tmp, path)
    fsync_dir(path.parent)


class DirectoryStore:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return Path(self.url(key))

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        try:
            replace_durably(path, data)
        except OSError as exc:
            raise _write_failed(key, exc) from exc

    def put_if_absent(self, key: str, data: bytes | memoryview) -> bool:
        path = self._path(key)
        try:
            tmp = write_durably(path, data)
            try:
                # link() refuses to replace an existing name: the local If-None-Match.
                os.link(tmp, path)
            except FileExistsError:
                return False
            finally:
                tmp.unlink()
            fsync_dir(path.parent)
            return True
        except OSError as exc:
            raise _write_failed(key, exc) from exc

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError as exc:
            raise NotFound(f"no object {key}") from exc

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        base = self.root / prefix
        start = base if base.is_dir() else base.parent
        if not start.exists():
            return
        for dirpath, _dirs, files in os.walk(start):
            for name in sorted(files):
                if name.startswith("."):
                    continue
                full = Path(dirpath) / name
                key = full.relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    yield ObjectInfo(key, full.stat().st_size)

    def url(self, key: str) -> str:
        # Called for every file a query reads and ingest writes: checking the key's parts is enough
        # to keep it inside the root (the data root holds no links), where resolving it costs a
        # dozen lstat calls.
        relative = key.rstrip("/")  # a directory's key names the directory
        if relative.startswith("/") or any(part in ("", ".", "..") for part in relative.split("/")):
            raise ValueError(f"key escapes the store: {key!r}")
        return f"{self.root}/{relative}"


def _write_failed(key: str, exc: OSError) -> StorageFault:
    """The error a write of ``key`` the disk refused raises: ``DiskFull`` when it had no room."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(f"cannot write {key}: {exc}")
    return StorageFault(f"cannot write {key}: {exc}")
