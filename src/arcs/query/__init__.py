"""Queries: the query service, DuckDB and its sandbox, the SQL rewriter and pruning, answers from
the catalog, results on the wire, the result cache and hand-off."""
