"""The catalog on the standalone server's SQLite file: schemas, databases, data files, the write
markers and commit records of ingest's protocol (docs/ingest.md), leases and compaction's state.
Continuous queries and retention policies are its parts in ``continuous_queries`` and
``retention``; the file and its tables are ``sqlite_database``'s."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from datetime import datetime

from arcs.adapters.local.continuous_queries import SqliteContinuousQueries
from arcs.adapters.local.retention import SqliteRetentionPolicies
from arcs.adapters.local.sqlite_database import SqliteDatabase, now_text
from arcs.adapters.records import (
    apply_compactions,
    file_from_json,
    file_to_json,
    job_from_json,
    job_to_json,
)
from arcs.adapters.records import hour_text as _hour_text
from arcs.adapters.records import hour_value as _hour_value
from arcs.ports import (
    CommitRecord,
    CompactionJob,
    CompactionState,
    FileRecord,
    MeasurementSchema,
    Partition,
)

#: How long a compacted file's key is remembered: longer than a queued write can be redelivered.
TOMBSTONE_TTL_S = 15 * 24 * 3600.0


class _Stale(Exception):
    """A schema or compaction record changed since the caller read it: its transaction stores nothing."""


class SqliteCatalog(SqliteContinuousQueries, SqliteRetentionPolicies):
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
        return self.put_schemas([(schema, expected_version)])

    def put_schemas(self, changes: Sequence[tuple[MeasurementSchema, int | None]]) -> bool:
        try:
            with self.db.transaction() as conn:
                for schema, expected_version in changes:
                    row = conn.execute(
                        "SELECT version FROM measurements WHERE database=? AND measurement=?",
                        (schema.database, schema.measurement),
                    ).fetchone()
                    if (None if row is None else int(row[0])) != expected_version:
                        raise _Stale  # rolls back what this transaction stored before it
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
                for database in {schema.database for schema, _version in changes}:
                    conn.execute("INSERT OR IGNORE INTO databases VALUES (?, ?)", (database, now_text()))
        except _Stale:
            return False
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
            return conn.execute("INSERT OR IGNORE INTO databases VALUES (?, ?)", (name, now_text())).rowcount == 1

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
        now = now_text()
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
                    now_text(),
                ),
            )
            return cursor.rowcount == 1

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

    def release_leases(self, holder: str) -> list[str]:
        prefix = f"{holder}/"
        held = "FROM leases WHERE substr(owner, 1, ?) = ?"
        with self.db.transaction() as conn:
            rows = conn.execute(f"SELECT name {held}", (len(prefix), prefix)).fetchall()
            conn.execute(f"DELETE {held}", (len(prefix), prefix))
        return sorted(name for (name,) in rows)

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
        return self.commit_compactions([(partition, state)])

    def commit_compactions(self, commits: Sequence[tuple[Partition, CompactionState]]) -> bool:
        try:
            self._commit_compactions(commits)
        except _Stale:
            return False
        return True

    def _commit_compactions(self, commits: Sequence[tuple[Partition, CompactionState]]) -> None:
        with self.db.transaction() as conn:
            for partition, state in commits:
                row = conn.execute(
                    "SELECT version, settled FROM compaction_state WHERE database=? AND measurement=? AND hour=?",
                    _partition_key(partition),
                ).fetchone()
                current, settled = (0, 1) if row is None else (int(row[0]), int(row[1]))
                if current != state.version - 1 or not settled:
                    raise _Stale  # an hour moved: the rollback leaves every record as it was
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

    def settle_compaction(self, partition: Partition, state: CompactionState) -> None:
        self.settle_compactions([(partition, state)])

    def settle_compactions(self, commits: Sequence[tuple[Partition, CompactionState]]) -> None:
        # One transaction: the records move and the commit records empty together.
        with self.db.transaction() as conn:
            pending: list[tuple[Partition, CompactionState]] = []
            for partition, state in commits:
                row = conn.execute(
                    "SELECT version, job_id, settled FROM compaction_state "
                    "WHERE database=? AND measurement=? AND hour=?",
                    _partition_key(partition),
                ).fetchone()
                if row is not None and (int(row[0]), str(row[1])) == (state.version, state.job_id) and not int(row[2]):
                    pending.append((partition, state))
            if not pending:
                return
            conn.executemany(
                "INSERT OR IGNORE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [_file_row(f) for _partition, state in pending for f in state.outputs],
            )
            now = time.time()
            for partition, state in pending:
                conn.executemany(
                    "DELETE FROM files WHERE database=? AND measurement=? AND hour=? AND key=?",
                    [(*_partition_key(partition), key) for key in state.inputs],
                )
                conn.executemany(
                    "INSERT OR IGNORE INTO compacted VALUES (?, ?, ?, ?, ?, ?)",
                    [(*_partition_key(partition), key, state.job_id, now + TOMBSTONE_TTL_S) for key in state.inputs],
                )
                conn.execute(
                    "UPDATE compaction_state SET settled=1, inputs='[]', outputs='[]' "
                    "WHERE database=? AND measurement=? AND hour=?",
                    _partition_key(partition),
                )
            conn.execute("DELETE FROM compacted WHERE until < ?", (now,))

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
