"""Which paths are writes, and what a write's head alone can refuse.

Apart from the write routes (``arcs.http.routes.writes``), so that the authorizer and the HTTP fronts
judge a request by its head without importing the decoders.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

#: The write routes: InfluxDB's two, and Arc's under the prefix.
WRITE_PATHS = frozenset({"/write", "/api/v2/write"})
WRITE_PREFIX = "/api/v1/write/"
#: Bulk imports take a file at Arc's paths: writes too, whose body may be far larger.
IMPORT_PREFIX = "/api/v1/import/"
IMPORT_FORMATS = frozenset({"lp", "msgpack", "csv", "parquet"})
#: Every write route, all POST, all served by the write function: the CDK app declares exactly
#: these, and the emulated gateway routes by ``is_write_path``, which accepts exactly these and
#: what the prefix leaves to the write function to refuse.
WRITE_ROUTES: tuple[str, ...] = (
    f"{WRITE_PREFIX}msgpack",
    f"{WRITE_PREFIX}json",
    f"{WRITE_PREFIX}line-protocol",
    *sorted(WRITE_PATHS),
    *(f"{IMPORT_PREFIX}{kind}" for kind in sorted(IMPORT_FORMATS)),
)
#: Arc's own API: its clients send the token in the Authorization header, so the stack's cached
#: authorizer serves it, but for its writes (infra/authorizer.py).
ARC_API_PREFIX = "/api/v1"


_DECIMAL = re.compile(r"[0-9]{1,30}")
#: A synchronous Lambda invoke takes at most this much event JSON (AWS Lambda quotas: 6 MB).
LAMBDA_SYNC_PAYLOAD_BYTES = 6 * 1024 * 1024
#: What the edge function's event holds beyond the authorizer's own event and the context it
#: returns: the ``body`` and ``isBase64Encoded`` keys and the request context's few extra fields.
EDGE_EVENT_EXTRA_BYTES = 4096


def body_room(authorizer_event: Mapping[str, Any], context: Mapping[str, Any]) -> int:
    """The largest body the edge's event can still carry for this request, base64-encoded.

    The edge's event repeats what the authorizer's holds (headers and query parameters twice each,
    the request context) and adds the context the authorizer returns. Many short query parameters
    or headers cost several event bytes per byte of the request line, so a fixed body limit alone
    cannot promise the invoke fits. Measured with Python's spaced, ASCII-escaped JSON, which is at
    least as long as what API Gateway sends."""
    head = len(json.dumps(authorizer_event)) + len(json.dumps(context)) + EDGE_EVENT_EXTRA_BYTES
    return max(0, (LAMBDA_SYNC_PAYLOAD_BYTES - head) // 4 * 3)


def is_write_path(path: str) -> bool:
    return path in WRITE_PATHS or path.startswith(WRITE_PREFIX) or is_import_path(path)


def takes_cached_authorizer(path: str) -> bool:
    """Whether the stack's cached, Authorization-only authorizer guards ``path``: Arc's API but the
    writes. Every other path (writes, InfluxDB's) takes the uncached one, which reads the token
    from any of its places."""
    in_arc_api = path == ARC_API_PREFIX or path.startswith(ARC_API_PREFIX + "/")
    return in_arc_api and not is_write_path(path)


def is_import_path(path: str) -> bool:
    """A bulk import's file route (``POST``): its body is a file, streamed to disk where it can be."""
    return path.startswith(IMPORT_PREFIX) and path[len(IMPORT_PREFIX) :] in IMPORT_FORMATS


def declared_too_large(method: str, path: str, headers: Mapping[str, str], limit: int) -> str | None:
    """Why a write is refused on its head alone: its declared ``Content-Length`` is over ``limit``.

    None for anything else (other routes, no declared length): the write path still checks the
    body it gets."""
    if method.upper() != "POST" or not is_write_path(path):
        return None
    declared = next((value.strip(" \t") for key, value in headers.items() if key.lower() == "content-length"), "")
    # ASCII digits only (str.isdigit() takes "²", which int() refuses), and few enough for int().
    if _DECIMAL.fullmatch(declared) and int(declared) > limit:
        return f"body is {declared} bytes; the limit is {limit}"
    return None
