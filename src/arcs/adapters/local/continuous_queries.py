"""Continuous queries' definitions, progress and executions in the SQLite file
(docs/continuous-queries.md): a part of ``SqliteCatalog``."""

from __future__ import annotations

from dataclasses import replace

from arcs.adapters.local.sqlite_database import Definitions, SqliteDatabase
from arcs.adapters.records import (
    CQ_EXECUTION_RETENTION,
    cq_from_json,
    cq_to_json,
    execution_from_json,
    execution_to_json,
)
from arcs.ports import ContinuousQuery, CQExecution


class SqliteContinuousQueries:
    """The Catalog port's continuous-query methods, over ``db`` (mixed into ``SqliteCatalog``)."""

    db: SqliteDatabase

    @property
    def _queries(self) -> Definitions:
        return Definitions(self.db, "continuous_queries", "query_id", "cq_executions")

    def create_continuous_query(self, query: ContinuousQuery, processed_until_us: int) -> ContinuousQuery | None:
        columns = {
            "database": query.database,
            "name": query.name,
            "version": query.version,
            "processed_until_us": processed_until_us,
        }
        query_id = self._queries.add(columns, lambda new: cq_to_json(replace(query, query_id=new)))
        return None if query_id is None else replace(query, query_id=query_id)

    def get_continuous_query(self, query_id: int) -> ContinuousQuery | None:
        raw = self._queries.get(query_id)
        return None if raw is None else cq_from_json(raw)

    def list_continuous_queries(self, database: str | None = None) -> list[ContinuousQuery]:
        return [cq_from_json(raw) for raw in self._queries.of_database(database)]

    def update_continuous_query(self, query: ContinuousQuery, expected_version: int) -> bool:
        stored = replace(query, version=expected_version + 1)
        columns = {"database": stored.database, "name": stored.name, "version": stored.version}
        return self._queries.replace(query.query_id, columns, cq_to_json(stored), {"version": expected_version})

    def delete_continuous_query(self, query_id: int) -> bool:
        return self._queries.delete(query_id)

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
        record = execution_to_json(execution)
        self._queries.put_execution(
            execution.query_id, execution.execution_id, execution.started_at, record, CQ_EXECUTION_RETENTION
        )

    def list_cq_executions(self, query_id: int, limit: int = 100) -> list[CQExecution]:
        return [execution_from_json(raw) for raw in self._queries.executions(query_id, limit)]
