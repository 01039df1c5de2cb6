"""The catalog and token store on one SQLite file (the standalone server's adapters)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from arcs.adapters.records import (
    CQ_EXECUTION_RETENTION,
    RETENTION_EXECUTION_RETENTION,
    apply_compactions,
    cq_from_json,
    cq_to_json,
    execution_from_json,
    execution_to_json,
    file_from_json,
    file_to_json,
    job_from_json,
    job_to_json,
    policy_from_json,
    policy_to_json,
    retention_execution_from_json,
    retention_execution_to_json,
    sortable_time,
)
from arcs.adapters.records import hour_text as _hour_text
from arcs.adapters.records import hour_value as _hour_value
from arcs.ports import (
    CommitRecord,
    CompactionJob,
    CompactionState,
    ContinuousQuery,
    CQExecution,
    FileRecord,
    MeasurementSchema,
    Partition,
    RetentionExecution,
    RetentionPolicy,
    TokenRecord,
)

_SCHEMA = """
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

#: How long a compacted file's key is remembered: longer than a queued write can be redelivered.
TOMBSTONE_TTL_S = 15 * 24 * 3600.0


def _now() -> str:
    return datetime.now(UTC).isoformat()


class SqliteDatabase:
    """One SQLite file in WAL mode; a lock serializes writers across the server's threads."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._conn.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit is on disk before we acknowledge anything that depends on it.
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.executescript(_SCHEMA)
        self._conn.executescript(_CQ_SCHEMA)
        self._conn.executescript(_RETENTION_SCHEMA)
        self._lock = threading.RLock()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

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


class SqliteCatalog:
    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db

    def get_schema(self, database: str, measurement: str) -> MeasurementSchema | None:
        rows = self.db.query(
            "SELECT columns, tags, version FROM measurements WHERE database=? AND measurement=?",
            (database, measurement),
        )
        if not rows:
            return None
        columns, tags, version = rows[0]
        return MeasurementSchema(
            database, measurement, json.loads(str(columns)), tuple(json.loads(str(tags))), int(version)
        )

    def put_schema(self, schema: MeasurementSchema, expected_version: int | None) -> bool:
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT version FROM measurements WHERE database=? AND measurement=?",
                (schema.database, schema.measurement),
            ).fetchone()
            current = None if row is None else int(row[0])
            if current != expected_version:
                return False
            conn.execute(
                "INSERT OR REPLACE INTO measurements VALUES (?, ?, ?, ?, ?)",
                (
                    schema.database,
                    schema.measurement,
                    json.dumps(schema.columns),
                    json.dumps(list(schema.tags)),
                    (expected_version or 0) + 1,
                ),
            )
            conn.execute("INSERT OR IGNORE INTO databases VALUES (?, ?)", (schema.database, _now()))
            return True

    def list_schemas(self, database: str | None = None) -> list[MeasurementSchema]:
        sql = "SELECT database, measurement FROM measurements"
        rows = (
            self.db.query(sql + " WHERE database=? ORDER BY 2", (database,))
            if database
            else self.db.query(sql + " ORDER BY 1, 2")
        )
        schemas = [self.get_schema(str(db), str(m)) for db, m in rows]
        return [schema for schema in schemas if schema is not None]

    def create_database(self, name: str) -> bool:
        with self.db.transaction() as conn:
            return conn.execute("INSERT OR IGNORE INTO databases VALUES (?, ?)", (name, _now())).rowcount == 1

    def list_databases(self) -> list[str]:
        return [str(row[0]) for row in self.db.query("SELECT name FROM databases ORDER BY name")]

    def drop_database(self, name: str) -> bool:
        # One transaction: readers see the whole database or none of it.
        with self.db.transaction() as conn:
            removed = 0
            tables = (
                ("measurements", "database"),
                ("files", "database"),
                ("compaction_state", "database"),
                ("databases", "name"),
            )
            for table, column in tables:
                removed += conn.execute(f"DELETE FROM {table} WHERE {column}=?", (name,)).rowcount
            return removed > 0

    def put_files(self, files: Sequence[FileRecord]) -> None:
        # A file compaction replaced is never listed again, even when a late ingest roll-forward
        # puts its record once more (docs/compaction.md, "Ingest composes").
        with self.db.transaction() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO files SELECT ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE NOT EXISTS "
                "(SELECT 1 FROM compacted WHERE database=?1 AND measurement=?2 AND hour=?3 AND key=?4)",
                [_file_row(f) for f in files],
            )

    def list_files(
        self,
        database: str,
        measurement: str,
        first_hour: datetime | None = None,
        last_hour: datetime | None = None,
    ) -> list[FileRecord]:
        where = "WHERE database=? AND measurement=?"
        params: list[object] = [database, measurement]
        if first_hour is not None:
            where += " AND hour >= ?"
            params.append(_hour_text(first_hour))
        if last_hour is not None:
            where += " AND hour <= ?"
            params.append(_hour_text(last_hour))
        with self.db.snapshot() as conn:
            rows = conn.execute(f"SELECT * FROM files {where} ORDER BY hour, key", params).fetchall()
            pending = conn.execute(
                f"SELECT version, job_id, inputs, outputs FROM compaction_state {where} AND settled = 0", params
            ).fetchall()
        files = [
            FileRecord(str(db), str(m), _hour_value(str(h)), str(k), int(r), int(s), int(lo), int(hi), str(c))
            for db, m, h, k, r, s, lo, hi, c in rows
        ]
        return apply_compactions(files, [_state(v, j, i, o, 0) for v, j, i, o in pending])

    def delete_files(self, files: Sequence[FileRecord]) -> None:
        until = time.time() + TOMBSTONE_TTL_S
        with self.db.transaction() as conn:
            keys = [(f.database, f.measurement, _hour_text(f.hour), f.key) for f in files]
            conn.executemany("DELETE FROM files WHERE database=? AND measurement=? AND hour=? AND key=?", keys)
            conn.executemany(
                "INSERT OR IGNORE INTO compacted VALUES (?, ?, ?, ?, 'deleted', ?)", [(*k, until) for k in keys]
            )

    def get_markers(self, write_ids: Iterable[str]) -> dict[str, str]:
        with self.db.snapshot() as conn:
            return self._markers(conn, list(write_ids))

    @staticmethod
    def _markers(conn: sqlite3.Connection, ids: list[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for write_id, commit_id in conn.execute(
                f"SELECT write_id, commit_id FROM write_markers WHERE write_id IN ({marks})", chunk
            ):
                found[str(write_id)] = str(commit_id)
        return found

    def swap_markers(self, claims: Sequence[tuple[str, str | None]], commit_id: str) -> set[str]:
        won: set[str] = set()
        now = _now()
        fresh = [write_id for write_id, expected in claims if expected is None]
        with self.db.transaction() as conn:
            if fresh:
                # New writes (the common case) in one statement; when some marker existed already,
                # the ones this attempt holds are those naming its commit id, which no other has.
                cursor = conn.executemany(
                    "INSERT OR IGNORE INTO write_markers VALUES (?, ?, ?)", [(w, commit_id, now) for w in fresh]
                )
                if cursor.rowcount == len(fresh):
                    won.update(fresh)
                else:
                    won.update(w for w, held in self._markers(conn, fresh).items() if held == commit_id)
            for write_id, expected in claims:
                if expected is not None:
                    cursor = conn.execute(
                        "UPDATE write_markers SET commit_id=?, updated_at=? WHERE write_id=? AND commit_id=?",
                        (commit_id, now, write_id, expected),
                    )
                    if cursor.rowcount == 1:
                        won.add(write_id)
        return won

    def swap_marker(self, write_id: str, expected: str | None, commit_id: str) -> bool:
        return write_id in self.swap_markers([(write_id, expected)], commit_id)

    def get_commit(self, commit_id: str) -> CommitRecord | None:
        rows = self.db.query("SELECT status, files FROM commits WHERE commit_id=?", (commit_id,))
        if not rows:
            return None
        status, files = rows[0]
        return CommitRecord(
            commit_id,
            status,
            tuple(file_from_json(f) for f in json.loads(str(files))),
        )

    def put_commit_if_absent(self, record: CommitRecord) -> bool:
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO commits VALUES (?, ?, ?, ?)",
                (
                    record.commit_id,
                    record.status,
                    json.dumps([file_to_json(f) for f in record.files]),
                    _now(),
                ),
            )
            return cursor.rowcount == 1

    # --- continuous queries (docs/continuous_queries.md) ---------------------------------------
    def create_continuous_query(self, query: ContinuousQuery, processed_until_us: int) -> ContinuousQuery | None:
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO continuous_queries (database, name, definition, version, processed_until_us) "
                "VALUES (?, ?, '', ?, ?)",
                (query.database, query.name, query.version, processed_until_us),
            )
            if cursor.rowcount != 1 or cursor.lastrowid is None:
                return None
            stored = replace(query, query_id=cursor.lastrowid)
            conn.execute(
                "UPDATE continuous_queries SET definition=? WHERE query_id=?",
                (json.dumps(cq_to_json(stored)), stored.query_id),
            )
            return stored

    def get_continuous_query(self, query_id: int) -> ContinuousQuery | None:
        rows = self.db.query("SELECT definition FROM continuous_queries WHERE query_id=?", (query_id,))
        return cq_from_json(json.loads(str(rows[0][0]))) if rows else None

    def list_continuous_queries(self, database: str | None = None) -> list[ContinuousQuery]:
        sql = "SELECT definition FROM continuous_queries"
        rows = (
            self.db.query(sql + " WHERE database=? ORDER BY name", (database,))
            if database
            else self.db.query(sql + " ORDER BY database, name")
        )
        return [cq_from_json(json.loads(str(row[0]))) for row in rows]

    def update_continuous_query(self, query: ContinuousQuery, expected_version: int) -> bool:
        stored = replace(query, version=expected_version + 1)
        with self.db.transaction() as conn:
            try:
                cursor = conn.execute(
                    "UPDATE continuous_queries SET database=?, name=?, definition=?, version=? "
                    "WHERE query_id=? AND version=?",
                    (
                        stored.database,
                        stored.name,
                        json.dumps(cq_to_json(stored)),
                        stored.version,
                        stored.query_id,
                        expected_version,
                    ),
                )
            except sqlite3.IntegrityError:
                return False  # the new name is another query's
            return cursor.rowcount == 1

    def delete_continuous_query(self, query_id: int) -> bool:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM cq_executions WHERE query_id=?", (query_id,))
            return conn.execute("DELETE FROM continuous_queries WHERE query_id=?", (query_id,)).rowcount == 1

    def get_cq_progress(self, query_id: int) -> int | None:
        rows = self.db.query("SELECT processed_until_us FROM continuous_queries WHERE query_id=?", (query_id,))
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def set_cq_progress(self, query_id: int, expected_us: int | None, processed_until_us: int) -> bool:
        sql = "UPDATE continuous_queries SET processed_until_us=? WHERE query_id=?"
        params: list[object] = [processed_until_us, query_id]
        if expected_us is not None:
            sql += " AND processed_until_us=?"
            params.append(expected_us)
        with self.db.transaction() as conn:
            return conn.execute(sql, params).rowcount == 1

    def put_cq_execution(self, execution: CQExecution) -> None:
        horizon = sortable_time(datetime.now(UTC) - CQ_EXECUTION_RETENTION)
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO cq_executions VALUES (?, ?, ?, ?)",
                (
                    execution.query_id,
                    execution.execution_id,
                    sortable_time(execution.started_at),
                    json.dumps(execution_to_json(execution)),
                ),
            )
            # The history is bounded as DynamoDB's TTL bounds it.
            conn.execute("DELETE FROM cq_executions WHERE query_id=? AND started_at < ?", (execution.query_id, horizon))

    def list_cq_executions(self, query_id: int, limit: int = 100) -> list[CQExecution]:
        rows = self.db.query(
            "SELECT record FROM cq_executions WHERE query_id=? ORDER BY started_at DESC, execution_id DESC LIMIT ?",
            (query_id, limit),
        )
        return [execution_from_json(json.loads(str(row[0]))) for row in rows]

    # --- compaction ------------------------------------------------------------------------------
    def acquire_lease(self, name: str, owner: str, ttl_s: float) -> bool:
        now = time.time()
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO leases VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE SET owner=excluded.owner, "
                "until=excluded.until WHERE leases.until < ? OR leases.owner = excluded.owner",
                (name, owner, now + ttl_s, now),
            )
            return cursor.rowcount == 1

    def release_lease(self, name: str, owner: str) -> None:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM leases WHERE name=? AND owner=?", (name, owner))

    def get_compaction_state(self, partition: Partition) -> CompactionState | None:
        rows = self.db.query(
            "SELECT version, job_id, inputs, outputs, settled FROM compaction_state "
            "WHERE database=? AND measurement=? AND hour=?",
            _partition_key(partition),
        )
        if not rows:
            return None
        version, job_id, inputs, outputs, settled = rows[0]
        return _state(version, job_id, inputs, outputs, settled)

    def commit_compaction(self, partition: Partition, state: CompactionState) -> bool:
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT version, settled FROM compaction_state WHERE database=? AND measurement=? AND hour=?",
                _partition_key(partition),
            ).fetchone()
            current, settled = (0, 1) if row is None else (int(row[0]), int(row[1]))
            if current != state.version - 1 or not settled:
                return False
            conn.execute(
                "INSERT OR REPLACE INTO compaction_state VALUES (?, ?, ?, ?, ?, 0, ?, ?)",
                (
                    *_partition_key(partition),
                    state.version,
                    state.job_id,
                    json.dumps(list(state.inputs)),
                    json.dumps([file_to_json(f) for f in state.outputs]),
                ),
            )
            return True

    def settle_compaction(self, partition: Partition, state: CompactionState) -> None:
        # One transaction: the records move and the commit record empties together.
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT version, job_id, settled FROM compaction_state WHERE database=? AND measurement=? AND hour=?",
                _partition_key(partition),
            ).fetchone()
            if row is None or (int(row[0]), str(row[1])) != (state.version, state.job_id) or int(row[2]):
                return
            conn.executemany(
                "INSERT OR IGNORE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [_file_row(f) for f in state.outputs],
            )
            conn.executemany(
                "DELETE FROM files WHERE database=? AND measurement=? AND hour=? AND key=?",
                [(*_partition_key(partition), key) for key in state.inputs],
            )
            now = time.time()
            conn.executemany(
                "INSERT OR IGNORE INTO compacted VALUES (?, ?, ?, ?, ?, ?)",
                [(*_partition_key(partition), key, state.job_id, now + TOMBSTONE_TTL_S) for key in state.inputs],
            )
            conn.execute("DELETE FROM compacted WHERE until < ?", (now,))
            conn.execute(
                "UPDATE compaction_state SET settled=1, inputs='[]', outputs='[]' "
                "WHERE database=? AND measurement=? AND hour=?",
                _partition_key(partition),
            )

    def put_compaction_job(self, job: CompactionJob) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO compaction_jobs VALUES (?, ?, ?)",
                (job.job_id, int(job.active), json.dumps(job_to_json(job))),
            )

    def get_compaction_job(self, job_id: str) -> CompactionJob | None:
        rows = self.db.query("SELECT body FROM compaction_jobs WHERE job_id=?", (job_id,))
        return job_from_json(json.loads(str(rows[0][0]))) if rows else None

    def list_compaction_jobs(self, active: bool = False, limit: int = 100) -> list[CompactionJob]:
        sql = "SELECT body FROM compaction_jobs" + (" WHERE active = 1" if active else "")
        rows = self.db.query(sql + " ORDER BY job_id DESC LIMIT ?", (limit,))
        return [job_from_json(json.loads(str(body))) for (body,) in rows]

    # --- retention policies (docs/retention_and_delete.md) ---------------------------------------
    def create_retention_policy(self, policy: RetentionPolicy) -> RetentionPolicy | None:
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO retention_policies (database, name, definition) VALUES (?, ?, '')",
                (policy.database, policy.name),
            )
            if cursor.rowcount != 1 or cursor.lastrowid is None:
                return None
            stored = replace(policy, policy_id=cursor.lastrowid)
            conn.execute(
                "UPDATE retention_policies SET definition=? WHERE policy_id=?",
                (json.dumps(policy_to_json(stored)), stored.policy_id),
            )
            return stored

    def get_retention_policy(self, policy_id: int) -> RetentionPolicy | None:
        rows = self.db.query("SELECT definition FROM retention_policies WHERE policy_id=?", (policy_id,))
        return policy_from_json(json.loads(str(rows[0][0]))) if rows else None

    def list_retention_policies(self, database: str | None = None) -> list[RetentionPolicy]:
        sql = "SELECT definition FROM retention_policies"
        rows = (
            self.db.query(sql + " WHERE database=? ORDER BY name", (database,))
            if database
            else self.db.query(sql + " ORDER BY database, name")
        )
        return [policy_from_json(json.loads(str(row[0]))) for row in rows]

    def update_retention_policy(self, policy: RetentionPolicy) -> bool:
        with self.db.transaction() as conn:
            try:
                cursor = conn.execute(
                    "UPDATE retention_policies SET database=?, name=?, definition=? WHERE policy_id=?",
                    (policy.database, policy.name, json.dumps(policy_to_json(policy)), policy.policy_id),
                )
            except sqlite3.IntegrityError:
                return False  # the new name is another policy's
            return cursor.rowcount == 1

    def delete_retention_policy(self, policy_id: int) -> bool:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM retention_executions WHERE policy_id=?", (policy_id,))
            return conn.execute("DELETE FROM retention_policies WHERE policy_id=?", (policy_id,)).rowcount == 1

    def put_retention_execution(self, execution: RetentionExecution) -> None:
        horizon = sortable_time(datetime.now(UTC) - RETENTION_EXECUTION_RETENTION)
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO retention_executions VALUES (?, ?, ?, ?)",
                (
                    execution.policy_id,
                    execution.execution_id,
                    sortable_time(execution.started_at),
                    json.dumps(retention_execution_to_json(execution)),
                ),
            )
            conn.execute(
                "DELETE FROM retention_executions WHERE policy_id=? AND started_at < ?", (execution.policy_id, horizon)
            )

    def list_retention_executions(self, policy_id: int, limit: int = 100) -> list[RetentionExecution]:
        rows = self.db.query(
            "SELECT record FROM retention_executions WHERE policy_id=? "
            "ORDER BY started_at DESC, execution_id DESC LIMIT ?",
            (policy_id, limit),
        )
        return [retention_execution_from_json(json.loads(str(row[0]))) for row in rows]


def _file_row(f: FileRecord) -> tuple[object, ...]:
    hour = _hour_text(f.hour)
    return (f.database, f.measurement, hour, f.key, f.rows, f.size, f.min_time_us, f.max_time_us, f.commit_id)


def _partition_key(partition: Partition) -> tuple[str, str, str]:
    return (partition.database, partition.measurement, _hour_text(partition.hour))


def _state(version: object, job_id: object, inputs: object, outputs: object, settled: object) -> CompactionState:
    return CompactionState(
        int(str(version)),
        str(job_id),
        bool(int(str(settled))),
        tuple(json.loads(str(inputs))),
        tuple(file_from_json(f) for f in json.loads(str(outputs))),
    )


def _ts(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _dt(value: object) -> datetime | None:
    return None if value is None else datetime.fromisoformat(str(value))


class SqliteTokenStore:
    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db

    def _record(self, row: tuple[Any, ...]) -> TokenRecord:
        tid, name, desc, lookup, salt, digest, perms, dbs, created, expires, revoked = row
        return TokenRecord(
            token_id=str(tid),
            name=str(name),
            description=str(desc),
            lookup=str(lookup),
            salt=bytes(salt),
            secret_hash=bytes(digest),
            permissions=tuple(json.loads(str(perms))),
            databases=tuple(json.loads(str(dbs))),
            created_at=_dt(created) or datetime.now(UTC),
            expires_at=_dt(expires),
            revoked=bool(revoked),
        )

    def put(self, record: TokenRecord, previous_lookup: str | None = None) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO tokens VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.token_id,
                    record.name,
                    record.description,
                    record.lookup,
                    record.salt,
                    record.secret_hash,
                    json.dumps(list(record.permissions)),
                    json.dumps(list(record.databases)),
                    _ts(record.created_at),
                    _ts(record.expires_at),
                    int(record.revoked),
                ),
            )

    def get(self, token_id: str) -> TokenRecord | None:
        rows = self.db.query("SELECT * FROM tokens WHERE token_id=?", (token_id,))
        return self._record(rows[0]) if rows else None

    def find(self, lookup: str) -> list[TokenRecord]:
        return [self._record(row) for row in self.db.query("SELECT * FROM tokens WHERE lookup=?", (lookup,))]

    def list(self) -> list[TokenRecord]:
        return [self._record(row) for row in self.db.query("SELECT * FROM tokens ORDER BY created_at")]

    def delete(self, token_id: str) -> bool:
        with self.db.transaction() as conn:
            return conn.execute("DELETE FROM tokens WHERE token_id=?", (token_id,)).rowcount == 1

    def is_empty(self) -> bool:
        return not self.db.query("SELECT 1 FROM tokens LIMIT 1")


# --- continuous queries (docs/continuous_queries.md) ---------------------------------------------

_CQ_SCHEMA = """
CREATE TABLE IF NOT EXISTS continuous_queries (
    query_id INTEGER PRIMARY KEY AUTOINCREMENT, database TEXT NOT NULL, name TEXT NOT NULL, definition TEXT NOT NULL,
    version INTEGER NOT NULL, processed_until_us INTEGER, UNIQUE (database, name));
CREATE TABLE IF NOT EXISTS cq_executions (
    query_id INTEGER NOT NULL, execution_id TEXT NOT NULL, started_at TEXT NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (query_id, execution_id));
CREATE INDEX IF NOT EXISTS cq_executions_by_query ON cq_executions (query_id, started_at);
"""


# --- retention policies (docs/retention_and_delete.md) -------------------------------------------

_RETENTION_SCHEMA = """
CREATE TABLE IF NOT EXISTS retention_policies (
    policy_id INTEGER PRIMARY KEY AUTOINCREMENT, database TEXT NOT NULL, name TEXT NOT NULL, definition TEXT NOT NULL,
    UNIQUE (database, name));
CREATE TABLE IF NOT EXISTS retention_executions (
    policy_id INTEGER NOT NULL, execution_id TEXT NOT NULL, started_at TEXT NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (policy_id, execution_id));
"""
