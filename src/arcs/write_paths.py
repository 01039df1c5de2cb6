"""Which paths are writes, and what a write's head alone can refuse.

Apart from the write routes (``arcs.routes.writes``), so that the authorizer and the HTTP fronts
judge a request by its head without importing the decoders.
"""

from __future__ import annotations

from collections.abc import Mapping

#: The write routes: InfluxDB's two, and Arc's under the prefix.
WRITE_PATHS = frozenset({"/write", "/api/v2/write"})
WRITE_PREFIX = "/api/v1/write/"


def is_write_path(path: str) -> bool:
    return path in WRITE_PATHS or path.startswith(WRITE_PREFIX)


def declared_too_large(method: str, path: str, headers: Mapping[str, str], limit: int) -> str | None:
    """Why a write is refused on its head alone: its declared ``Content-Length`` is over ``limit``.

    None for anything else (other routes, no declared length): the write path still checks the
    body it gets."""
    if method.upper() != "POST" or not is_write_path(path):
        return None
    declared = next((value.strip() for key, value in headers.items() if key.lower() == "content-length"), "")
    if declared.isdigit() and int(declared) > limit:
        return f"body is {declared} bytes; the limit is {limit}"
    return None
