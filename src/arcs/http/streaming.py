"""Responses streamed from Lambda through API Gateway (integration transfer mode ``STREAM``).

API Gateway invokes the function with ``InvokeWithResponseStream`` and reads what the function
writes as: a JSON document of the response's metadata (``statusCode``, ``headers``,
``multiValueHeaders``, ``cookies``), 8 NUL bytes, then the body as it comes; the metadata must be
within the first 16 KB. Lambda streams up to 200 MB, the first 6 MB at full speed and the rest
at 2 MB/s at most; API Gateway holds a stream open up to 15 minutes and closes one idle for 5
minutes (Regional endpoints). docs/aws-limits.md cites each figure.

This module is both sides of that format: the function's (``StreamedResponse.encoded``), and the
reader the local emulation's gateway uses (``read_prelude``).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

#: Between the metadata and the body.
DELIMITER = b"\0" * 8
#: The metadata and its delimiter must be within the stream's first 16 KB.
PRELUDE_MAX_BYTES = 16 * 1024
#: Lambda's most for a streamed response (200 MB; 20 MB before July 2025), as the 6 MB of a
#: buffered one is counted: in MiB.
LAMBDA_STREAM_MAX_BYTES = 200 * 1024 * 1024
#: Lambda streams the first 6 MB uncapped, then at 2 MB/s at most.
LAMBDA_STREAM_UNCAPPED_BYTES = 6 * 1024 * 1024
LAMBDA_STREAM_BYTES_PER_S = 2 * 1024 * 1024
#: API Gateway: a stream lasts at most 15 minutes, and is closed after 5 minutes without a byte
#: (Regional and private endpoints; 30 s on edge-optimized ones).
API_GATEWAY_STREAM_MAX_S = 15 * 60
API_GATEWAY_STREAM_IDLE_S = 5 * 60
#: The largest body streamed: what Lambda streams less the room of the metadata.
STREAM_BODY_MAX_BYTES = LAMBDA_STREAM_MAX_BYTES - PRELUDE_MAX_BYTES
#: The pieces a body is written in: large enough to amortize, small enough to bound memory.
CHUNK_BYTES = 1024 * 1024
#: How long a query may compute before the first byte of its answer: API Gateway closes a stream
#: idle for 5 minutes, so that, less the time to send the answer's head (or its error).
QUERY_BUDGET_S = API_GATEWAY_STREAM_IDLE_S - 5
#: Lambda's longest invocation.
LAMBDA_MAX_TIMEOUT_S = 900
#: Between the query's budget and the function's timeout: the query is interrupted, and answers, first.
TIMEOUT_MARGIN_S = 4


def stream_seconds(size: int) -> float:
    """How long Lambda takes, at least, to stream ``size`` bytes: past 6 MB, 2 MB a second."""
    return max(0, size - LAMBDA_STREAM_UNCAPPED_BYTES) / LAMBDA_STREAM_BYTES_PER_S


def query_function_timeout_s(max_result_bytes: int | None, budget_s: float = QUERY_BUDGET_S) -> int:
    """The query function's timeout: a query's budget, the margin, and the time to stream the largest
    result it may answer (larger ones are handed off), within Lambda's 15 minutes."""
    if budget_s <= 0:
        return LAMBDA_MAX_TIMEOUT_S  # no budget: as long as Lambda allows
    largest = min(max_result_bytes or LAMBDA_STREAM_MAX_BYTES, LAMBDA_STREAM_MAX_BYTES)
    return min(LAMBDA_MAX_TIMEOUT_S, math.ceil(budget_s + TIMEOUT_MARGIN_S + stream_seconds(largest)))


@dataclass(frozen=True)
class StreamedResponse:
    """A response whose body is written piece by piece, as the pieces are made."""

    status: int
    headers: Mapping[str, str]
    body: Iterable[bytes]

    def prelude(self) -> bytes:
        """The metadata API Gateway reads first, with its delimiter."""
        metadata = {"statusCode": self.status, "headers": dict(self.headers)}
        encoded = json.dumps(metadata, separators=(",", ":")).encode() + DELIMITER
        if len(encoded) > PRELUDE_MAX_BYTES:
            raise ValueError(f"the response's metadata is {len(encoded)} bytes; API Gateway reads {PRELUDE_MAX_BYTES}")
        return encoded

    def encoded(self) -> Iterator[bytes]:
        """What the function writes on its response stream: the metadata, then the body."""
        yield self.prelude()
        for chunk in self.body:
            if chunk:
                yield chunk


def from_proxy_result(result: Mapping[str, Any]) -> StreamedResponse:
    """A buffered proxy response (what Powertools resolves) as a streamed one of one piece."""
    headers = {str(k): str(v) for k, v in (result.get("headers") or {}).items()}
    for key, values in (result.get("multiValueHeaders") or {}).items():
        headers[str(key)] = ", ".join(str(v) for v in values)
    raw = result.get("body") or ""
    body = base64.b64decode(raw) if result.get("isBase64Encoded") else str(raw).encode("utf-8")
    return StreamedResponse(int(result["statusCode"]), headers, [body])


def chunked(data: bytes, size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """``data`` in pieces of at most ``size`` bytes, without copying it."""
    view = memoryview(data)
    for start in range(0, len(view), size):
        yield bytes(view[start : start + size])


class MalformedStream(ValueError):
    """What a function wrote is not the streamed proxy format."""


def read_prelude(pieces: Iterator[bytes]) -> tuple[int, dict[str, str], bytes]:
    """The status and headers at the head of a function's stream, and the body bytes read past them.

    As API Gateway reads it: the delimiter must come within the first 16 KB, and what precedes it
    must be a JSON object with a ``statusCode``.
    """
    head = b""
    while DELIMITER not in head:
        if len(head) > PRELUDE_MAX_BYTES:
            break
        piece = next(pieces, None)
        if piece is None:
            break
        head += piece
    metadata, found, rest = head.partition(DELIMITER)
    if not found or len(metadata) + len(DELIMITER) > PRELUDE_MAX_BYTES:
        raise MalformedStream(f"no metadata and delimiter within the first {PRELUDE_MAX_BYTES} bytes")
    try:
        document = json.loads(metadata)
        status = int(document["statusCode"])
    except (ValueError, TypeError, KeyError) as exc:
        raise MalformedStream(f"the metadata is not a JSON object with a statusCode: {exc}") from exc
    headers = {str(k): str(v) for k, v in (document.get("headers") or {}).items()}
    for key, values in (document.get("multiValueHeaders") or {}).items():
        headers[str(key)] = ", ".join(str(v) for v in values)
    cookies = document.get("cookies") or []
    if cookies:
        headers["Set-Cookie"] = ", ".join(str(c) for c in cookies)
    return status, headers, rest
