"""The query routes: SQL answered as JSON, as an Arrow IPC stream or as MessagePack."""

from __future__ import annotations

import base64
import json
import logging
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.errors import ArcsError, BadRequest, NotFound
from arcs.http.resolver import answer_streams, error_response, stream_answer
from arcs.http.route_docs import (
    DATABASE_HEADER,
    INTEGER,
    NUMBER,
    STRING,
    TRUE,
    array,
    binary_answer,
    binary_errors,
    component,
    doc,
    header_param,
    json_answer,
    json_body,
    nullable,
    obj,
    path_param,
    query_param,
)
from arcs.http.routes.request import RequestView
from arcs.names import DEFAULT_DATABASE, check_database, check_measurement
from arcs.query import response_encoding
from arcs.query.measurement_query import check_single_measurement_query, measurement_query_sql
from arcs.query.response_encoding import Coding
from arcs.query.results import (
    SizedBody,
    arrow_stream_body,
    json_document_body,
    to_arrow_stream,
    to_json_document,
    utc_zoned,
)
from arcs.query.service import QueryResult
from arcs.query.show import estimate_query

if TYPE_CHECKING:
    from arcs.runtime import Runtime

ARROW_STREAM = "application/vnd.apache.arrow.stream"
MSGPACK = "application/msgpack"
#: User agents of clients that follow no redirect (Arc's Python SDK uses httpx's default): a 303
#: would only end their request in an error, after storing a result nobody fetches.
NO_REDIRECT_AGENTS = ("arc-client-python/",)

logger = logging.getLogger(__name__)

# --- what the query routes take and answer (arcs.query.results builds the result document) ---------------

QUERY_REQUEST = component(
    "QueryRequest",
    obj(
        {
            "sql": {
                **STRING,
                "description": "one read-only statement (DuckDB SQL; SHOW DATABASES/TABLES/MEASUREMENTS)",
            },
            "database": nullable(
                {**STRING, "description": "the database unqualified names are in (else x-arc-database)"}
            ),
        },
        optional=("database",),
        closed=False,
    ),
)
QUERY_RESULT = component(
    "QueryResult",
    obj(
        {
            "success": TRUE,
            "columns": array(STRING),
            "data": {**array(array({})), "description": "the rows, each an array in the order of `columns`"},
            "row_count": INTEGER,
            "execution_time_ms": NUMBER,
            "timestamp": STRING,
        }
    ),
)
#: A result a Lambda response cannot hold, stored for the caller to GET (AWS, arcs local).
HANDOFF = component(
    "ResultHandoff",
    obj(
        {
            "success": TRUE,
            "result_url": STRING,
            "content_type": STRING,
            "size_bytes": INTEGER,
            "expires_in_s": INTEGER,
            "message": STRING,
        }
    ),
)
ESTIMATE = component(
    "QueryEstimate",
    obj(
        {
            "success": TRUE,
            "estimated_rows": nullable(INTEGER),
            "warning_level": STRING,
            "warning_message": nullable(STRING),
            "execution_time_ms": NUMBER,
        }
    ),
)
_HANDED_OFF = json_answer(
    HANDOFF,
    "the result is larger than a Lambda response holds: GET it from `Location`",
    {"Location": STRING, "X-Arc-Result-Content-Type": STRING},
)
_QUERY_BODY = json_body(
    QUERY_REQUEST, example={"sql": "SELECT host, usage FROM cpu ORDER BY time, host LIMIT 10", "database": "metrics"}
)
#: The JSON and MessagePack answers are compressed when the caller accepts it (arcs.query.response_encoding).
ACCEPT_ENCODING = header_param(
    "accept-encoding", "`zstd` (preferred) or `gzip` compresses the answer", example="zstd, gzip"
)
_ENCODED: dict[str, dict[str, Any]] = {
    "Content-Encoding": {"enum": ["zstd", "gzip"], "description": "when the request accepted one"},
    "Vary": {"const": "Accept-Encoding"},
}
_QUERY_ERRORS = (400, 401, 403, 404, 408, 413, 429, 503, 504)


class _Answers:
    """How a query's result goes back to the caller of one router: in the response, streamed as it
    is written, or stored for the caller to GET (a 303) when a Lambda response cannot hold it."""

    def __init__(self, runtime: Runtime, request: RequestView) -> None:
        self.runtime = runtime
        self.request = request

    def body_database(self, document: Mapping[str, Any]) -> str:
        """The body's ``database`` (absent, null or empty: the header's, else the default)."""
        named = document.get("database")
        if named is not None and not isinstance(named, str):
            raise BadRequest("'database' must be a database name (or absent: the x-arc-database header's)")
        return self.request.database(named or None)

    def run_query(self) -> QueryResult:
        caller = self.request.caller("read")
        document = self.request.json()
        return self.runtime.queries.run(document.get("sql"), self.body_database(document), caller)

    def negotiated_coding(self) -> Coding | None:
        return response_encoding.negotiate(self.request.header("accept-encoding"))

    def answer_streamed(
        self, body: SizedBody, content_type: str, extension: str, headers: dict[str, str], coding: Coding | None = None
    ) -> Response[Any]:
        """200 with the result streamed as it is written (compressed as a stream when ``coding``), or
        a 303 to it in storage past what Lambda streams (200 MB)."""
        if self.runtime.result_handoff is None or body.size <= self.runtime.settings.query_stream_max_bytes:
            pieces = body.pieces if coding is None else response_encoding.compress_pieces(body.pieces, coding)
            stream_answer(pieces)
            return Response(200, content_type, "", {**headers, **response_encoding.headers(coding)})
        self.refuse_unless_redirects_followed(body.size, self.runtime.settings.query_stream_max_bytes)
        return self.handed_off(b"".join(body.pieces), content_type, extension, headers)

    def answer(
        self,
        body: str | bytes,
        content_type: str,
        extension: str,
        headers: dict[str, str],
        coding: Coding | None = None,
    ) -> Response[Any]:
        """200 with the result (compressed when ``coding``: Lambda's limit holds the compressed
        body), or a 303 to it in storage when a Lambda response cannot hold it."""
        sent = body
        if coding is not None:
            sent = response_encoding.compress(body.encode() if isinstance(body, str) else body, coding)
            headers = {**headers, **response_encoding.headers(coding)}
        handoff = self.runtime.result_handoff
        if handoff is None or not handoff.too_big_to_answer(sent):
            return _response(200, content_type, sent, headers)
        self.refuse_unless_redirects_followed(len(sent), self.runtime.settings.query_inline_max_bytes)
        headers.pop("Content-Encoding", None)  # the stored result is not compressed
        return self.handed_off(body, content_type, extension, headers)

    def refuse_unless_redirects_followed(self, size: int, limit: int) -> None:
        """A 400 instead of a 303 for a client known to follow no redirect: it says why and what to do."""
        agent = self.request.header("user-agent") or ""
        if agent.startswith(NO_REDIRECT_AGENTS):
            raise BadRequest(
                f"the result ({size} bytes) is larger than one response carries here ({limit} bytes), and "
                f"this client ({agent.split()[0][:60]}) follows no redirect to it: narrow the query (a shorter "
                "time range, fewer columns, a LIMIT), or use a client that follows redirects"
            )

    def handed_off(
        self, body: str | bytes, content_type: str, extension: str, headers: dict[str, str]
    ) -> Response[Any]:
        """303 to the result, stored for the caller to GET."""
        handoff = self.runtime.result_handoff
        if handoff is None:
            raise RuntimeError("no storage to hand results off to")
        stored = handoff.hand_off(body, content_type, extension)
        explanation = {
            "success": True,
            "result_url": stored.url,
            "content_type": content_type,
            "size_bytes": stored.size,
            "expires_in_s": stored.expires_in_s,
            "message": (
                f"the result ({stored.size} bytes) is larger than a Lambda response holds; GET it from the "
                f"Location URL within {stored.expires_in_s} s (clients that follow redirects already do)"
            ),
        }
        return Response(
            303,
            "application/json",
            json.dumps(explanation, separators=(",", ":")),
            {**headers, "Location": stored.url, "X-Arc-Result-Content-Type": content_type},
        )

    def answer_json(self, result: QueryResult) -> Response[Any]:
        negotiated = self.negotiated_coding()
        vary = dict(response_encoding.VARY)
        if answer_streams():
            body = json_document_body(result, self.runtime.settings.query_max_result_bytes)
            return self.answer_streamed(body, "application/json", "json", vary, negotiated)
        # A str body: Powertools would send bytes base64-encoded, a third larger against Lambda's 6 MB.
        document = to_json_document(result, self.runtime.settings.query_max_result_bytes)
        return self.answer(document.decode(), "application/json", "json", vary, negotiated)


def queries_router(runtime: Runtime) -> Router:
    router = Router()
    request = RequestView(router)
    answers = _Answers(runtime, request)

    @router.post(
        "/api/v1/query",
        **doc(
            "Run SQL; the result as JSON",
            "queries",
            {200: json_answer(QUERY_RESULT, "the result", _ENCODED), 303: _HANDED_OFF},
            parameters=[DATABASE_HEADER, ACCEPT_ENCODING],
            body=_QUERY_BODY,
            errors=_QUERY_ERRORS,
        ),
    )
    def query_json() -> Response[Any]:
        return answers.answer_json(answers.run_query())

    @router.post(
        "/api/v1/query/msgpack",
        **doc(
            "Run SQL; the result as Arc's columnar MessagePack (errors in MessagePack too)",
            "queries",
            {
                **binary_errors(MSGPACK, _QUERY_ERRORS),
                200: binary_answer(MSGPACK, "the result", _ENCODED),
                303: _HANDED_OFF,
            },
            parameters=[DATABASE_HEADER, ACCEPT_ENCODING],
            body=_QUERY_BODY,
            errors=(),
        ),
    )
    def query_msgpack() -> Response[Any]:
        """Arc's columnar MessagePack answer (``arcs.query.msgpack_results``); its errors in MessagePack too."""
        # Loaded with its first request: a query function that never answers one never pays for it.
        from arcs.query.msgpack_results import error_document as msgpack_error
        from arcs.query.msgpack_results import msgpack_body

        started = time.perf_counter()
        try:
            result = answers.run_query()
            negotiated = answers.negotiated_coding()
            vary = dict(response_encoding.VARY)
            body = msgpack_body(result, runtime.settings.query_max_result_bytes)
            if answer_streams():
                return answers.answer_streamed(body, MSGPACK, "msgpack", vary, negotiated)
            return answers.answer(b"".join(body.pieces), MSGPACK, "msgpack", vary, negotiated)
        except ArcsError as exc:
            (logger.warning if exc.client_error else logger.error)("msgpack query -> %d: %s", exc.status, exc.message)
            elapsed_ms = (time.perf_counter() - started) * 1000
            # The status and headers every route answers this error with; the body in MessagePack.
            headers = {k: str(v) for k, v in error_response(exc).headers.items() if k.lower() != "content-type"}
            return _response(exc.status, MSGPACK, msgpack_error(exc.message, elapsed_ms), headers)

    @router.post(
        "/api/v1/query/arrow",
        **doc(
            "Run SQL; the result as an Arrow IPC stream",
            "queries",
            {200: binary_answer(ARROW_STREAM, "the result", {"X-Arc-Execution-Time-Ms": STRING}), 303: _HANDED_OFF},
            parameters=[DATABASE_HEADER],
            body=_QUERY_BODY,
            errors=_QUERY_ERRORS,
        ),
    )
    def query_arrow() -> Response[Any]:
        result = answers.run_query()
        timing = {"X-Arc-Execution-Time-Ms": f"{result.execution_time_ms:.3f}"}
        table = utc_zoned(result.table)
        if answer_streams():
            return answers.answer_streamed(arrow_stream_body(table), ARROW_STREAM, "arrows", timing)
        return answers.answer(to_arrow_stream(table), ARROW_STREAM, "arrows", timing)

    @router.post(
        "/api/v1/query/estimate",
        **doc(
            "How many rows a query would read, from file statistics",
            "queries",
            {200: json_answer(ESTIMATE, "the estimate")},
            parameters=[DATABASE_HEADER],
            body=_QUERY_BODY,
        ),
    )
    def query_estimate() -> dict[str, Any]:
        started = time.perf_counter()
        caller = request.caller("read")
        document = request.json()
        estimate = estimate_query(
            document.get("sql"), answers.body_database(document), caller, runtime.catalog, runtime.store
        )
        return {
            "success": True,
            "estimated_rows": estimate.rows,
            "warning_level": estimate.warning_level,
            "warning_message": estimate.warning_message,
            "execution_time_ms": round((time.perf_counter() - started) * 1000, 3),
        }

    @router.get(
        "/api/v1/query/<measurement>",
        **doc(
            "A measurement's rows, without SQL",
            "queries",
            {200: json_answer(QUERY_RESULT, "the rows", _ENCODED), 303: _HANDED_OFF},
            parameters=[
                ACCEPT_ENCODING,
                path_param("measurement", "the measurement", example="cpu"),
                query_param("database", "the database (else x-arc-database, else `default`)", example="metrics"),
                DATABASE_HEADER,
                query_param("limit", "rows, at most (default 100)", {"type": "integer", "minimum": 1}),
                query_param("offset", "rows to skip (default 0)", {"type": "integer", "minimum": 0}),
                query_param("order_by", "a column, with ASC or DESC"),
                query_param("where", "one boolean SQL expression over the measurement's columns"),
            ],
            errors=_QUERY_ERRORS,
        ),
    )
    def query_measurement(measurement: str) -> Response[Any]:
        caller = request.caller("read")
        database = _request_database(request.param("database"), request.header("x-arc-database"))
        check_measurement(measurement)
        caller.require_database(database)
        schema = runtime.catalog.get_schema(database, measurement)
        if schema is None:
            raise NotFound(f"measurement {measurement!r} not found in database {database!r}")
        sql = measurement_query_sql(
            database,
            measurement,
            schema.columns,
            limit=_bounded_int(request.param("limit"), "limit", 100, 1, runtime.settings.query_max_rows),
            offset=_bounded_int(request.param("offset"), "offset", 0, 0, MAX_OFFSET),
            order_by=request.param("order_by"),
            where=request.param("where"),
        )
        check_single_measurement_query(sql, database, measurement)
        return answers.answer_json(runtime.queries.run(sql, database, caller))

    return router


def _response(status: int, content_type: str, body: str | bytes, headers: dict[str, str]) -> Response[Any]:
    """A Response whose bytes go out as they are (base64 in the proxy result), whatever their type:
    Powertools would serialize a bytes body of a JSON type (a compressed document) as JSON."""
    if isinstance(body, str):
        return Response(status, content_type, body, headers)
    response: Response[Any] = Response(status, content_type, base64.b64encode(body).decode("ascii"), headers)
    response.base64_encoded = True
    return response


# --- GET /api/v1/query/{measurement} --------------------------------------------------------------

MAX_OFFSET = 10**15
_INTEGER = re.compile(r"\s*\d{1,19}\s*")


def _request_database(param: str | None, header: str | None) -> str:
    """``?database=``, else the ``x-arc-database`` header, else ``default``; both must agree when both are given."""
    if param and header and param != header:
        raise BadRequest(f"database {param!r} in the query string disagrees with x-arc-database {header!r}")
    return check_database(param or header or DEFAULT_DATABASE)


def _bounded_int(value: str | None, name: str, default: int, low: int, high: int) -> int:
    if value is None or value == "":
        return default
    if not _INTEGER.fullmatch(value) or not low <= int(value) <= high:
        raise BadRequest(f"'{name}' must be an integer from {low} to {high}")
    return int(value)
