"""The standalone server's adapters wired: everything under one data directory.

``data_dir/storage`` holds the data files (``DirectoryStore``), ``data_dir/spool`` the accepted
writes (``Spool``), ``data_dir/catalog.sqlite`` the catalog and the tokens (one ``SqliteDatabase``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from arcs.adapters.local.catalog import SqliteCatalog
from arcs.adapters.local.holder import hold_data_directory
from arcs.adapters.local.objects import DirectoryStore
from arcs.adapters.local.queue import Spool
from arcs.adapters.local.sqlite_database import SqliteDatabase
from arcs.adapters.local.tokens import SqliteTokenStore


@dataclass(frozen=True, slots=True)
class LocalParts:
    """What the standalone server's runtime is built on (``arcs.runtime.LocalRuntime``)."""

    store: DirectoryStore
    sqlite: SqliteDatabase
    catalog: SqliteCatalog
    tokens: SqliteTokenStore
    spool: Spool
    #: The only roots DuckDB may open (the data files).
    allowed_roots: list[str]
    #: The name this process's compaction leases carry; None unless it serves the directory.
    holder: str | None


def local_runtime_parts(data_dir: Path, serve: bool = False) -> LocalParts:
    """The adapters on ``data_dir`` (made if missing); ``serve``: the process serves it, so it claims
    the directory (``arcs.adapters.local.holder``) before anything in it is opened."""
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    # Claimed before the spool and catalog are opened: a second server must not touch them.
    holder = hold_data_directory(data_dir) if serve else None
    store = DirectoryStore(data_dir / "storage")
    sqlite = SqliteDatabase(data_dir / "catalog.sqlite")
    return LocalParts(
        store=store,
        sqlite=sqlite,
        catalog=SqliteCatalog(sqlite),
        tokens=SqliteTokenStore(sqlite),
        spool=Spool(data_dir / "spool"),
        allowed_roots=[str(store.root) + "/"],
        holder=holder,
    )
