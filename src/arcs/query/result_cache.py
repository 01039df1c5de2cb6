"""The optional query result cache: in-process, bounded in bytes (least recently used goes first) and by age.

It can never serve the result of a file set that has since changed, because the key is made of
what decides a result: the SQL DuckDB runs, which names every file it reads (the rewriter puts
each measurement's pruned file list in place of its name), and the identity of each of those
files as the catalog lists them for this very query (key, size, rows, commit). A write that
commits a file, a compaction that swaps files, a database dropped and written again: each changes
the list, so the key, and the older result is never found again (it ages out). The catalog is read
for every query, cached or not; only DuckDB's work is saved.

The caller's database scopes are checked while the SQL is rewritten, before the cache is asked:
equal keys read equal files, so a hit gives a caller only what running the query would.

Some results depend on when the query runs, not only on the files: ``now()``, ``current_date``,
``random()``, ``uuid()``, ``USING SAMPLE``... Such queries are never cached: every function a query
calls must be one DuckDB's own catalog marks as consistent (same arguments, same result), and
no clock keyword, sample or function outside that list may appear.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

import duckdb
import pyarrow as pa

from arcs.ports import FileRecord
from arcs.query.engine import Engine
from arcs.query.sandbox import ALLOWED_TABLE_FUNCTIONS

#: Clock functions DuckDB 1.5 marks consistent although they read the clock.
_CLOCK_FUNCTIONS = frozenset({"current_localtime", "current_localtimestamp"})
#: SQL's clock keywords: DuckDB parses them as column names and binds them to the clock.
_CLOCK_KEYWORDS = frozenset(
    {"current_date", "current_time", "current_timestamp", "localtime", "localtimestamp", "current_localtimestamp"}
)


def cache_key(sql: str, database: str, files: Iterable[FileRecord], max_rows: int) -> str:
    """A digest of everything a cached result depends on (the SQL can be long: it lists the files)."""
    identity = sorted((f.key, f.size, f.rows, f.commit_id) for f in files)
    material = json.dumps([sql, database, max_rows, identity], separators=(",", ":"))
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()


class ResultCache:
    def __init__(self, max_bytes: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, int, pa.Table]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._consistent: frozenset[str] | None = None
        self.hits = 0
        self.misses = 0

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def get(self, key: str) -> pa.Table | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and self._clock() >= entry[0]:
                self._drop(key)
                entry = None
            if entry is None:
                self.misses += 1
                return None
            self.hits += 1
            self._entries.move_to_end(key)
            return entry[2]

    def put(self, key: str, table: pa.Table) -> None:
        size = table.get_total_buffer_size()
        if size > self.max_bytes:
            return  # it would evict everything else and still not fit
        with self._lock:
            if key in self._entries:
                self._drop(key)
            self._entries[key] = (self._clock() + self.ttl_s, size, table)
            self._bytes += size
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))

    def _drop(self, key: str) -> None:
        _expires_at, size, _table = self._entries.pop(key)
        self._bytes -= size

    def repeatable(self, engine: Engine, sql: str) -> bool:
        """True if ``sql`` (already through the sandbox) gives the same result on the same files at any time."""
        cursor = engine.connection().cursor()
        try:
            if self._consistent is None:
                self._consistent = _consistent_functions(cursor)
            row = cursor.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
        except duckdb.Error:
            return False
        finally:
            cursor.close()
        tree = json.loads(row[0]) if row is not None else None
        return isinstance(tree, dict) and tree.get("error") is False and _repeatable(tree, self._consistent)


def _consistent_functions(cursor: duckdb.DuckDBPyConnection) -> frozenset[str]:
    """Scalar and aggregate (and window) functions whose every overload DuckDB marks consistent."""
    rows = cursor.execute(
        "SELECT function_name FROM duckdb_functions() WHERE function_type IN ('scalar', 'aggregate') "
        "GROUP BY function_name HAVING bool_and(stability = 'CONSISTENT')"
    ).fetchall()
    return (frozenset(str(name).lower() for (name,) in rows) | ALLOWED_TABLE_FUNCTIONS) - _CLOCK_FUNCTIONS


def _repeatable(tree: Any, consistent: frozenset[str]) -> bool:
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        name = node.get("function_name")
        if isinstance(name, str) and name.lower() not in consistent:
            return False
        if node.get("sample") is not None:
            return False
        columns = node.get("column_names") if node.get("class") == "COLUMN_REF" else None
        if isinstance(columns, list) and len(columns) == 1 and str(columns[0]).lower() in _CLOCK_KEYWORDS:
            return False
        stack.extend(value for value in node.values() if isinstance(value, (dict, list)))
    return True
