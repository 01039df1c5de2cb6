"""The write limit on AWS is the largest body whose proxy event fits one synchronous Lambda invoke.

With binary media types ``*/*`` API Gateway hands every body to Lambda base64-encoded, inside the
REST proxy event, and Lambda takes at most 6 MB (6,291,456 bytes) of event. Measured here on the
event's real shape with everything else at its largest: 10,240 bytes of request line and headers
(API Gateway's quota), every character needing escaping, and a token with 100 scopes.
"""

from __future__ import annotations

import base64
import json
import string
from pathlib import Path

from arcs.auth.tokens import MAX_NAME_CHARS, MAX_SCOPES, Principal
from arcs.settings import (
    API_GATEWAY_PAYLOAD_BYTES,
    AWS_MAX_REQUEST_BYTES,
    LAMBDA_SYNC_PAYLOAD_BYTES,
    Settings,
)
from arcs.write.paths import body_room

EVENT = Path(__file__).parents[1] / "functional" / "events" / "apigw_rest_proxy.json"
#: API Gateway REST: total size of the request line and header values.
HEADER_QUOTA_BYTES = 10_240


def _largest_event(body_bytes: int) -> bytes:
    event = json.loads(EVENT.read_text())
    quotes = '"' * (HEADER_QUOTA_BYTES // 2)  # half headers, half query: each appears twice
    event["headers"]["x-padding"] = quotes
    event["multiValueHeaders"]["x-padding"] = [quotes]
    event["queryStringParameters"] = {"q": quotes}
    event["multiValueQueryStringParameters"] = {"q": [quotes]}
    scopes = tuple(f"{'d' * 62}{i:02d}" for i in range(MAX_SCOPES))
    principal = Principal("t" * 32, "n" * MAX_NAME_CHARS, frozenset({"read", "write", "delete"}), scopes)
    event["requestContext"]["authorizer"] = principal.to_context()
    event["body"] = base64.b64encode(b"\0" * body_bytes).decode()
    event["isBase64Encoded"] = True
    return json.dumps(event).encode()


def test_the_largest_write_fits_one_invoke_whatever_else_the_request_carries() -> None:
    fits = _largest_event(AWS_MAX_REQUEST_BYTES)
    assert len(fits) <= LAMBDA_SYNC_PAYLOAD_BYTES
    # The margin left for fields API Gateway may add: more than a whole request context again.
    assert LAMBDA_SYNC_PAYLOAD_BYTES - len(fits) > 8 * 1024
    # What was promised before, API Gateway's 10 MiB, is nowhere near: even 4.5 MiB does not fit.
    assert len(_largest_event(9 * 1024 * 1024 // 2)) > LAMBDA_SYNC_PAYLOAD_BYTES


def test_the_aws_backend_defaults_to_the_aws_limit_and_the_standalone_server_to_api_gateways() -> None:
    assert AWS_MAX_REQUEST_BYTES == 4_669_440
    assert Settings.from_env({"ARCS_BACKEND": "aws"}).max_request_bytes == AWS_MAX_REQUEST_BYTES
    assert Settings.from_env({}).max_request_bytes == API_GATEWAY_PAYLOAD_BYTES == 10 * 1024 * 1024
    assert Settings.from_env({"ARCS_BACKEND": "aws", "ARCS_MAX_REQUEST_BYTES": "1000"}).max_request_bytes == 1000


def test_the_room_a_head_leaves_is_measured_on_the_event_so_a_crowded_head_still_fits() -> None:
    """3,300 two-letter query parameters (10 KB of request line) cost ~50 KB of event: the fixed limit
    no longer fits, the room the authorizer computes from its own event does."""
    letters = string.ascii_letters + string.digits
    query = dict.fromkeys([a + b for a in letters for b in letters][:3300], "")  # "?ab&ac&...": 9,900 bytes
    authorizer = json.loads((EVENT.parent / "authorizer_request.json").read_text())
    authorizer["queryStringParameters"] = query
    authorizer["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()}
    scopes = tuple(f"{'d' * 62}{i:02d}" for i in range(MAX_SCOPES))
    principal = Principal("t" * 32, "n" * MAX_NAME_CHARS, frozenset({"read", "write", "delete"}), scopes)
    room = body_room(authorizer, principal.to_context())
    assert room < AWS_MAX_REQUEST_BYTES

    edge = json.loads(EVENT.read_text())
    edge["headers"] = authorizer["headers"]
    edge["multiValueHeaders"] = authorizer["multiValueHeaders"]
    edge["queryStringParameters"] = query
    edge["multiValueQueryStringParameters"] = authorizer["multiValueQueryStringParameters"]
    edge["requestContext"]["authorizer"] = principal.to_context()
    for body_bytes, fits in ((room, True), (AWS_MAX_REQUEST_BYTES, False)):
        edge["body"] = base64.b64encode(b"\0" * body_bytes).decode()
        edge["isBase64Encoded"] = True
        # Spaced JSON, the longer of the two forms API Gateway might send.
        assert (len(json.dumps(edge)) <= LAMBDA_SYNC_PAYLOAD_BYTES) is fits
    # An ordinary head leaves room for the whole usual limit.
    plain = json.loads((EVENT.parent / "authorizer_request.json").read_text())
    assert body_room(plain, principal.to_context()) > AWS_MAX_REQUEST_BYTES


def test_a_declared_length_is_read_from_ascii_digits_only() -> None:
    from arcs.write.paths import declared_too_large

    path = "/api/v1/write/line-protocol"
    assert declared_too_large("POST", path, {"Content-Length": "11"}, 10) == "body is 11 bytes; the limit is 10"
    # Not a length API Gateway or an HTTP server would take: the edge judges the body it gets.
    for odd in ("²", "1" * 5000, "-1", "0x20", "1e9", ""):
        assert declared_too_large("POST", path, {"Content-Length": odd}, 10) is None
