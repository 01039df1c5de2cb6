"""The SQL sandbox's statement check: one read-only statement, as DuckDB's own parser sees it.

The rest of the sandbox is DuckDB's configuration (``arcs.engine``): external access limited to
the data root, configuration locked.
"""

from __future__ import annotations

import duckdb

from arcs.engine import Engine
from arcs.errors import BadRequest


def check_read_only(engine: Engine, sql: str) -> None:
    try:
        statements = engine.connection().cursor().extract_statements(sql)
    except duckdb.Error as exc:
        raise BadRequest(f"SQL does not parse: {str(exc).splitlines()[0]}") from exc
    if len(statements) != 1:
        raise BadRequest(f"send exactly one statement; got {len(statements)}")
    if statements[0].type != duckdb.StatementType.SELECT:
        raise BadRequest(f"only SELECT queries are allowed; got {statements[0].type.name}")
