"""The standalone server's claim on its data directory: one process at a time, under one name.

The name (``holder-id`` in the directory, made on first start) is what the server's compaction
leases say holds them, and it survives restarts. The claim is an exclusive ``flock`` on
``holder.lock``, which the kernel drops when the process ends however it ends (``kill -9``
included). So a process that has the claim knows every lease under the name is its own or a dead
predecessor's, and frees them at start instead of waiting out their expiry; and a second server on
the same directory (which would also share its spool and catalog) is refused before it starts.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from arcs.adapters.local.objects import replace_durably

_LOCK_FILE = "holder.lock"
_ID_FILE = "holder-id"
# Claims this process has: (the lock file's descriptor, kept open for the process's life; the name).
_held: dict[Path, tuple[int, str]] = {}
_claiming = threading.Lock()


class DataDirectoryBusy(RuntimeError):
    """Another process serves the data directory."""


def hold_data_directory(data_dir: Path) -> str:
    """Claim ``data_dir`` for this process (again: the same name); its holder name."""
    root = data_dir.resolve()
    with _claiming:
        if root in _held:
            return _held[root][1]
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / _LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise DataDirectoryBusy(f"another process is serving the data directory {root}") from exc
        name_file = root / _ID_FILE
        try:
            holder = name_file.read_text().strip()
        except FileNotFoundError:
            holder = ""
        if not holder:
            holder = f"server-{os.urandom(8).hex()}"
            replace_durably(name_file, holder.encode())
        _held[root] = (fd, holder)
        return holder
