"""The standalone server's SQLite file: how it is opened and the tables it holds.

The catalog (``catalog``, with its continuous-query and retention parts) and the token store
(``tokens``) are adapters over one ``SqliteDatabase``: one file, one writer at a time.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from arcs.adapters.records import sortable_time
from arcs.errors import DISK_FULL_RETRY_S, StorageFault

# The catalog's tables: schemas, databases, data files, write markers and commit records, leases and
# compaction's state, and the token store's.
_TABLES = """
CREATE TABLE IF NOT EXISTS measurements (
    database TEXT NOT NULL, measurement TEXT NOT NULL, columns TEXT NOT NULL, tags TEXT NOT NULL,
    version INTEGER NOT NULL, PRIMARY KEY (database, measurement));
CREATE TABLE IF NOT EXISTS databases (name TEXT PRIMARY KEY, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    database TEXT NOT NULL, measurement TEXT NOT NULL, hour TEXT NOT NULL, key TEXT NOT NULL,
    rows INTEGER NOT NULL, size INTEGER NOT NULL, min_time_us INTEGER NOT NULL,
    max_time_us INTEGER NOT NULL, commit_id TEXT NOT NULL,
    PRIMARY KEY (database, measurement, hour, key));
CREATE TABLE IF NOT EXISTS write_markers (write_id TEXT PRIMARY KEY, commit_id TEXT NOT NULL,
    updated_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS commits (commit_id TEXT PRIMARY KEY, status TEXT NOT NULL,
    files TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tokens (
    token_id TEXT PRIMARY KEY, name TEXT NOT NULL, description TEXT NOT NULL, lookup TEXT NOT NULL,
    salt BLOB NOT NULL, secret_hash BLOB NOT NULL, permissions TEXT NOT NULL, databases TEXT NOT NULL,
    created_at TEXT NOT NULL, expires_at TEXT, revoked INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS tokens_by_lookup ON tokens (lookup);
CREATE TABLE IF NOT EXISTS leases (name TEXT PRIMARY KEY, owner TEXT NOT NULL, until REAL NOT NULL);
CREATE TABLE IF NOT EXISTS compaction_state (
    database TEXT NOT NULL, measurement TEXT NOT NULL, hour TEXT NOT NULL, version INTEGER NOT NULL,
    job_id TEXT NOT NULL, settled INTEGER NOT NULL, inputs TEXT NOT NULL, outputs TEXT NOT NULL,
    PRIMARY KEY (database, measurement, hour));
CREATE TABLE IF NOT EXISTS compacted (
    database TEXT NOT NULL, measurement TEXT NOT NULL, hour TEXT NOT NULL, key TEXT NOT NULL,
    job_id TEXT NOT NULL, until REAL NOT NULL, PRIMARY KEY (database, measurement, hour, key));
CREATE TABLE IF NOT EXISTS compaction_jobs (job_id TEXT PRIMARY KEY, active INTEGER NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS compaction_jobs_active ON compaction_jobs (active, job_id);
"""

# Continuous queries (docs/continuous-queries.md).
_CQ_TABLES = """
CREATE TABLE IF NOT EXISTS continuous_queries (
    query_id INTEGER PRIMARY KEY AUTOINCREMENT, database TEXT NOT NULL, name TEXT NOT NULL, definition TEXT NOT NULL,
    version INTEGER NOT NULL, processed_until_us INTEGER, UNIQUE (database, name));
CREATE TABLE IF NOT EXISTS cq_executions (
    query_id INTEGER NOT NULL, execution_id TEXT NOT NULL, started_at TEXT NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (query_id, execution_id));
CREATE INDEX IF NOT EXISTS cq_executions_by_query ON cq_executions (query_id, started_at);
"""

# Retention policies (docs/retention-and-delete.md).
_RETENTION_TABLES = """
CREATE TABLE IF NOT EXISTS retention_policies (
    policy_id INTEGER PRIMARY KEY AUTOINCREMENT, database TEXT NOT NULL, name TEXT NOT NULL, definition TEXT NOT NULL,
    UNIQUE (database, name));
CREATE TABLE IF NOT EXISTS retention_executions (
    policy_id INTEGER NOT NULL, execution_id TEXT NOT NULL, started_at TEXT NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (policy_id, execution_id));
"""


def now_text() -> str:
    """The time now, as the tables keep it (ISO 8601, UTC)."""
    return datetime.now(UTC).isoformat()


class SqliteDatabase:
    """One SQLite file in WAL mode; a lock serializes writers across the server's threads."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._conn.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit is on disk before we acknowledge anything that depends on it.
        self._conn.execute("PRAGMA synchronous=FULL")
        for tables in (_TABLES, _CQ_TABLES, _RETENTION_TABLES):
            self._conn.executescript(tables)
        self._lock = threading.RLock()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self._conn
                    self._conn.execute("COMMIT")
                except BaseException:
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_FULL:
                    # The request changed nothing and may succeed once there is room again.
                    raise StorageFault(f"the catalog cannot be written: {exc}", DISK_FULL_RETRY_S) from exc
                raise

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """Several reads that see one state: writers wait for the lock."""
        with self._lock:
            yield self._conn

    def query(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class Definitions:
    """A table of definitions named uniquely within a database (continuous queries, retention
    policies: their JSON in ``definition``, under an id SQLite numbers) and the table of each one's
    executions. The names given are this module's callers' constants, never a client's text."""

    def __init__(self, db: SqliteDatabase, table: str, id_column: str, executions_table: str) -> None:
        self.db, self.table, self.id_column, self.executions_table = db, table, id_column, executions_table

    def add(self, columns: Mapping[str, object], definition: Callable[[int], object]) -> int | None:
        """A new definition with ``columns`` (its database and name among them), whose JSON is
        ``definition(its new id)``: the id, or None when the database has one of that name."""
        names, marks = ", ".join(columns), ", ".join("?" * len(columns))
        with self.db.transaction() as conn:
            cursor = conn.execute(
                f"INSERT OR IGNORE INTO {self.table} ({names}, definition) VALUES ({marks}, '')",
                tuple(columns.values()),
            )
            if cursor.rowcount != 1 or cursor.lastrowid is None:
                return None
            new_id = cursor.lastrowid
            conn.execute(
                f"UPDATE {self.table} SET definition=? WHERE {self.id_column}=?",
                (json.dumps(definition(new_id)), new_id),
            )
            return new_id

    def get(self, row_id: int) -> Any | None:
        """The definition (decoded JSON) numbered ``row_id``, or None."""
        rows = self.db.query(f"SELECT definition FROM {self.table} WHERE {self.id_column}=?", (row_id,))
        return json.loads(str(rows[0][0])) if rows else None

    def of_database(self, database: str | None) -> list[Any]:
        """The definitions of ``database`` by name, or of every database by database and name."""
        sql = f"SELECT definition FROM {self.table}"
        if database:
            rows = self.db.query(sql + " WHERE database=? ORDER BY name", (database,))
        else:
            rows = self.db.query(sql + " ORDER BY database, name")
        return [json.loads(str(row[0])) for row in rows]

    def replace(
        self,
        row_id: int,
        columns: Mapping[str, object],
        definition: object,
        expected: Mapping[str, object] | None = None,
    ) -> bool:
        """Definition ``row_id`` rewritten, with ``columns``, if its ``expected`` columns still hold
        those values; False when they do not, when it is gone, or when its new name is another's in
        its database."""
        expected = expected or {}
        sets = ", ".join(f"{name}=?" for name in (*columns, "definition"))
        where = " AND ".join(f"{name}=?" for name in (self.id_column, *expected))
        values = (*columns.values(), json.dumps(definition), row_id, *expected.values())
        with self.db.transaction() as conn:
            try:
                cursor = conn.execute(f"UPDATE {self.table} SET {sets} WHERE {where}", values)
            except sqlite3.IntegrityError:
                return False  # the new name is another's
            return cursor.rowcount == 1

    def delete(self, row_id: int) -> bool:
        """Definition ``row_id`` and its executions deleted; False when it was gone."""
        with self.db.transaction() as conn:
            conn.execute(f"DELETE FROM {self.executions_table} WHERE {self.id_column}=?", (row_id,))
            return conn.execute(f"DELETE FROM {self.table} WHERE {self.id_column}=?", (row_id,)).rowcount == 1

    def put_execution(
        self, row_id: int, execution_id: str, started_at: datetime, record: object, kept: timedelta
    ) -> None:
        """One execution's record, and the definition's records older than ``kept`` dropped: the
        history is bounded as DynamoDB's TTL bounds it."""
        horizon = sortable_time(datetime.now(UTC) - kept)
        with self.db.transaction() as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO {self.executions_table} VALUES (?, ?, ?, ?)",
                (row_id, execution_id, sortable_time(started_at), json.dumps(record)),
            )
            conn.execute(
                f"DELETE FROM {self.executions_table} WHERE {self.id_column}=? AND started_at < ?", (row_id, horizon)
            )

    def executions(self, row_id: int, limit: int) -> list[Any]:
        """The definition's latest ``limit`` execution records (decoded JSON), newest first."""
        rows = self.db.query(
            f"SELECT record FROM {self.executions_table} WHERE {self.id_column}=? "
            "ORDER BY started_at DESC, execution_id DESC LIMIT ?",
            (row_id, limit),
        )
        return [json.loads(str(row[0])) for row in rows]
