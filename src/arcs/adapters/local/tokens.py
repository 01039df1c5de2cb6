"""API tokens in the SQLite file (the standalone server's token store; hashed at rest, arcs.auth.tokens)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from arcs.adapters.local.sqlite_database import SqliteDatabase
from arcs.ports import TokenRecord


class SqliteTokenStore:
    """The token store (records as ``arcs.auth.tokens`` makes them: secrets hashed) in the tokens table."""

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


def _ts(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _dt(value: object) -> datetime | None:
    return None if value is None else datetime.fromisoformat(str(value))
