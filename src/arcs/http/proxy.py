"""HTTP request <-> API Gateway REST proxy event, for the runtimes that are not behind API Gateway."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

#: Where a runtime that builds its own events hands the routes the request body as bytes
#: (``requestContext``): API Gateway carries a binary body in base64, which within one process is a
#: copy each way, held under the interpreter's lock (about 3 ms for a 500 KB write).
BODY_BYTES_CONTEXT = "arcsBodyBytes"


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    headers: dict[str, str]
    body: bytes
    #: The rest of the body, sent as it comes after ``body`` (chunked): a streamed response. An
    #: exception from it cuts the response short, as a broken stream does.
    stream: Iterator[bytes] | None = None


@dataclass(frozen=True, slots=True)
class Admission:
    """What the check of a request's head decided, before its body is read: a refusal, or whose
    request it is."""

    refusal: HttpResponse | None = None
    #: The caller (a token's id) whose bodies in flight are counted; None: not counted.
    caller: str | None = None


def proxy_event(
    method: str,
    path: str,
    query_string: str,
    headers: Mapping[str, str],
    body: bytes,
    authorizer_context: Mapping[str, str] | None = None,
    source_ip: str = "127.0.0.1",
    body_as_bytes: bool = False,
) -> dict[str, Any]:
    """The event API Gateway would send for this request (binary media types: ``*/*``); with
    ``body_as_bytes``, the body is in ``requestContext`` as it came instead (``BODY_BYTES_CONTEXT``)."""
    pairs = parse_qsl(query_string, keep_blank_values=True)
    single: dict[str, str] = {}
    multi: dict[str, list[str]] = {}
    for key, value in pairs:
        single[key] = value
        multi.setdefault(key, []).append(value)
    header_map = dict(headers)
    context: dict[str, Any] = {
        "resourcePath": path,
        "httpMethod": method.upper(),
        "path": path,
        "stage": "local",
        "requestId": str(uuid.uuid4()),
        "requestTimeEpoch": int(time.time() * 1000),
        "identity": {"sourceIp": source_ip},
        "authorizer": dict(authorizer_context) if authorizer_context else None,
    }
    if body_as_bytes:
        context[BODY_BYTES_CONTEXT] = body
    return {
        "resource": path,
        "path": path,
        "httpMethod": method.upper(),
        "headers": header_map,
        "multiValueHeaders": {key: [value] for key, value in header_map.items()},
        "queryStringParameters": single or None,
        "multiValueQueryStringParameters": multi or None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": context,
        "body": base64.b64encode(body).decode("ascii") if body and not body_as_bytes else None,
        "isBase64Encoded": bool(body) and not body_as_bytes,
    }


def http_response(result: Mapping[str, Any]) -> HttpResponse:
    headers = {str(k): str(v) for k, v in (result.get("headers") or {}).items()}
    for key, values in (result.get("multiValueHeaders") or {}).items():
        headers[str(key)] = ", ".join(str(v) for v in values)
    raw = result.get("body") or ""
    body = base64.b64decode(raw) if result.get("isBase64Encoded") else str(raw).encode("utf-8")
    return HttpResponse(int(result["statusCode"]), headers, body)
