"""The slow-query log: a query that ran longer than ``ARCS_SLOW_QUERY_MS`` leaves one JSON line.

The line says what an operator needs to find and judge the query: its run time, the files and
bytes it read, the rows it answered, its status, the database, the caller's token name and id
(never the token itself) and the start of its SQL, bounded so a large statement cannot flood the
log. Every runtime logs it the same way: the standalone server to its log, each Lambda function
to CloudWatch Logs (a metric filter or Logs Insights can find ``"event": "slow_query"``).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass

from arcs.auth.tokens import Principal

#: The name operators filter the log on (docs/operations.md), apart from the module's path.
logger = logging.getLogger("arcs.slow_queries")

#: The most characters of a query's SQL the line carries.
SQL_EXCERPT_CHARS = 300
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class QueryOutcome:
    """What one query did, as the query service measured it."""

    sql: str
    database: str
    principal: Principal
    status: str  # the HTTP status it ends with
    elapsed_ms: float
    files: int
    bytes_read: int
    rows: int


def excerpt(sql: str, limit: int = SQL_EXCERPT_CHARS) -> str:
    """``sql`` on one line, cut to ``limit`` characters (an ellipsis marks a cut)."""
    flat = _SPACE.sub(" ", sql).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def log_if_slow(outcome: QueryOutcome, threshold_ms: float) -> bool:
    """Log ``outcome`` if it took longer than ``threshold_ms`` (0: never); whether it did."""
    if threshold_ms <= 0 or outcome.elapsed_ms < threshold_ms:
        return False
    line = {
        "event": "slow_query",
        "elapsed_ms": round(outcome.elapsed_ms, 1),
        "threshold_ms": threshold_ms,
        "status": outcome.status,
        "database": outcome.database,
        "token_name": outcome.principal.name,
        "token_id": outcome.principal.token_id,
        "files": outcome.files,
        "bytes_read": outcome.bytes_read,
        "rows": outcome.rows,
        "sql": excerpt(outcome.sql),
    }
    logger.warning("%s", json.dumps(line, ensure_ascii=False, separators=(",", ":")))
    return True
