"""Every route of the HTTP API, by the function API Gateway sends it to, and the tasks function's
tasks: what the smoke must call (a unit test checks the lists against the routers and the handler).
"""

from __future__ import annotations

#: Every route of the HTTP API, by the function API Gateway sends it to; the smoke calls each.
WRITE_ROUTES = frozenset(
    {
        ("POST", "/api/v1/write/line-protocol"),
        ("POST", "/api/v1/write/json"),
        ("POST", "/api/v1/write/msgpack"),
        ("POST", "/write"),
        ("POST", "/api/v2/write"),
        ("POST", "/api/v1/import/<kind>"),
    }
)
QUERY_ROUTES = frozenset(
    {
        ("GET", "/health"),
        ("HEAD", "/health"),
        ("GET", "/ready"),
        ("HEAD", "/ready"),
        ("GET", "/ping"),
        ("HEAD", "/ping"),
        ("POST", "/api/v1/query"),
        ("POST", "/api/v1/query/arrow"),
        ("POST", "/api/v1/query/msgpack"),
        ("POST", "/api/v1/query/estimate"),
        ("GET", "/api/v1/openapi.json"),
        ("GET", "/api/v1/query/<measurement>"),
        ("GET", "/api/v1/auth/verify"),
        ("POST", "/api/v1/auth/tokens"),
        ("GET", "/api/v1/auth/tokens"),
        ("GET", "/api/v1/auth/tokens/<token_id>"),
        ("PATCH", "/api/v1/auth/tokens/<token_id>"),
        ("DELETE", "/api/v1/auth/tokens/<token_id>"),
        ("POST", "/api/v1/auth/tokens/<token_id>/rotate"),
        ("POST", "/api/v1/auth/tokens/<token_id>/revoke"),
        ("GET", "/api/v1/databases"),
        ("POST", "/api/v1/databases"),
        ("GET", "/api/v1/databases/<name>"),
        ("GET", "/api/v1/databases/<name>/measurements"),
        ("DELETE", "/api/v1/databases/<name>"),
        ("GET", "/api/v1/measurements"),
        ("GET", "/api/v1/compaction/status"),
        ("GET", "/api/v1/compaction/stats"),
        ("GET", "/api/v1/compaction/candidates"),
        ("GET", "/api/v1/compaction/jobs"),
        ("GET", "/api/v1/compaction/history"),
        ("POST", "/api/v1/compaction/trigger"),
        ("GET", "/api/v1/continuous_queries"),
        ("POST", "/api/v1/continuous_queries"),
        ("GET", "/api/v1/continuous_queries/<query_id>"),
        ("PUT", "/api/v1/continuous_queries/<query_id>"),
        ("PATCH", "/api/v1/continuous_queries/<query_id>"),
        ("DELETE", "/api/v1/continuous_queries/<query_id>"),
        ("POST", "/api/v1/continuous_queries/<query_id>/execute"),
        ("GET", "/api/v1/continuous_queries/<query_id>/executions"),
        ("GET", "/api/v1/retention"),
        ("POST", "/api/v1/retention"),
        ("GET", "/api/v1/retention/<policy_id>"),
        ("PUT", "/api/v1/retention/<policy_id>"),
        ("PATCH", "/api/v1/retention/<policy_id>"),
        ("DELETE", "/api/v1/retention/<policy_id>"),
        ("POST", "/api/v1/retention/<policy_id>/execute"),
        ("POST", "/api/v1/retention/run"),
        ("GET", "/api/v1/retention/<policy_id>/executions"),
        ("POST", "/api/v1/delete"),
        ("GET", "/api/v1/delete/config"),
        ("GET", "/api/v1/import/status/<ident>"),
        ("GET", "/api/v1/import/stats"),
        ("POST", "/api/v1/import/uploads"),
        ("POST", "/api/v1/import/uploads/<ident>/complete"),
    }
)
ROUTES = WRITE_ROUTES | QUERY_ROUTES
#: The tasks function's tasks: the schedules' constant inputs, and the trigger route's event.
SCHEDULED_TASKS = ("compaction", "continuous_queries", "retention")
#: The tasks function's task an upload's completion invokes it with.
IMPORT_TASK = "import"
