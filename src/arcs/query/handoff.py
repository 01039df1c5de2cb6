"""Results too big for a synchronous Lambda response: stored, and fetched by the client from a URL.

Lambda returns at most 6 MiB, and what counts is the proxy response, a JSON document: a text body
travels as a JSON string (quotes and backslashes escaped, non-ASCII characters possibly as
``\\u`` escapes), a binary one (Arrow) as base64, a third larger. A body that would cost more
than the configured limit there is written under ``{prefix}/_arcs/results/`` and answered with
``303 See Other`` to a presigned URL: curl -L (without ``-X POST``, which would POST there too),
Python requests, httpx with ``follow_redirects=True``, Go's net/http and the browsers follow it
with a GET and receive the whole result. Only the AWS runtime needs this: the
standalone server has no such limit and answers inline. On AWS the query function streams its
answers (``arcs.http.streaming``), up to 200 MB: there a result is handed off only past that
(``ARCS_QUERY_STREAM_MAX_BYTES``); the limit above is the buffered answer's.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from arcs import metrics
from arcs.layout import result_key
from arcs.ports import DownloadStore


def proxy_body_cost(body: str | bytes) -> int:
    """What ``body`` costs in a Lambda proxy response: base64 for bytes, an escaped JSON string for text.

    Text is measured as ``json.dumps`` escapes it by default (non-ASCII as ``\\u`` escapes), the
    most any Lambda runtime makes of it; Python 3.12's runtime sends such characters as UTF-8.
    """
    if isinstance(body, bytes):
        return 4 * ((len(body) + 2) // 3)
    return len(json.dumps(body))


@dataclass(frozen=True, slots=True)
class HandedOff:
    url: str
    size: int
    expires_in_s: int


class ResultHandoff:
    def __init__(self, store: DownloadStore, prefix: str, inline_max_bytes: int, url_expiry_s: int) -> None:
        self.store = store
        self.prefix = prefix
        self.inline_max_bytes = inline_max_bytes
        self.url_expiry_s = url_expiry_s

    def too_big_to_answer(self, body: str | bytes) -> bool:
        # Escaping and base64 only ever grow a body: one bigger than the limit needs no measuring.
        return len(body) > self.inline_max_bytes or proxy_body_cost(body) > self.inline_max_bytes

    def hand_off(self, body: str | bytes, content_type: str, extension: str) -> HandedOff:
        """Store ``body`` under a fresh key; the URL the caller downloads it from."""
        data = body.encode() if isinstance(body, str) else body
        key = result_key(self.prefix, uuid.uuid4().hex, extension)
        self.store.put_download(key, data, content_type)
        metrics.record({metrics.RESULTS_HANDED_OFF: 1})
        return HandedOff(self.store.download_url(key, self.url_expiry_s), len(data), self.url_expiry_s)
