"""The authorizer: a good token's identity as context, a bad one refused, and a write declaring
more than reaches the edge denied before any function runs.

The world each test gets (``fn``): tests/functional/conftest.py and lambdas.py.
"""

from __future__ import annotations

import json
import string
from typing import Any

import pytest

from arcs.emulation.functions import LAMBDA_PAYLOAD_LIMIT
from arcs.errors import StorageFault
from arcs.settings import AWS_MAX_REQUEST_BYTES
from tests.functional.lambdas import EVENTS, Lambda, context

pytestmark = [
    pytest.mark.functional,
]


# --- the authorizer ----------------------------------------------------------------------------
def authorizer_event(**headers: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / "authorizer_request.json").read_text())
    event["headers"].update(headers)
    event["multiValueHeaders"].update({k: [v] for k, v in headers.items()})
    return event


def test_authorizer_allows_a_good_token_with_its_identity_as_context(fn: Lambda) -> None:
    result = fn.handlers.authorizer(authorizer_event(Authorization=f"Bearer {fn.token}"), context("arcs-authorizer"))
    (statement,) = result["policyDocument"]["Statement"]
    assert statement == {
        "Action": "execute-api:Invoke",
        "Effect": "Allow",
        "Resource": "arn:aws:execute-api:us-east-1:123456789012:abcdef1234/prod/*",
    }
    assert result["context"] == fn.caller and result["principalId"] == fn.caller["token_id"]
    assert "admin" in result["context"]["permissions"]
    json.dumps(result)  # API Gateway takes only JSON: context values must be plain strings


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer not-a-token"}, {"Authorization": "Basic !!!"}])
def test_authorizer_raises_unauthorized_for_a_bad_token(fn: Lambda, headers: dict[str, str]) -> None:
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        fn.handlers.authorizer(authorizer_event(**headers), context("arcs-authorizer"))


def _write_authorizer_event(path: str, method: str = "POST", **headers: str) -> dict[str, Any]:
    event = authorizer_event(**headers)
    event.update(resource=path, path=path, httpMethod=method)
    event["methodArn"] = f"arn:aws:execute-api:us-east-1:123456789012:abcdef1234/prod/{method}{path}"
    return event


@pytest.mark.parametrize("path", ["/api/v1/write/line-protocol", "/write", "/api/v2/write"])
def test_authorizer_denies_a_write_declaring_more_than_reaches_the_edge(fn: Lambda, path: str) -> None:
    """On AWS the body travels base64-encoded in a 6 MB invoke: the authorizer refuses what cannot fit,
    by its declared length, and the stack answers that Deny as a 413 (ACCESS_DENIED)."""
    limit = fn.runtime.settings.max_request_bytes
    assert limit == AWS_MAX_REQUEST_BYTES
    token = f"Bearer {fn.token}"
    over = _write_authorizer_event(path, **{"Authorization": token, "Content-Length": str(limit + 1)})
    result = fn.handlers.authorizer(over, context("arcs-authorizer"))
    [statement] = result["policyDocument"]["Statement"]
    # Only this request's method ARN: never a policy that could deny anything else.
    assert statement == {"Action": "execute-api:Invoke", "Effect": "Deny", "Resource": over["methodArn"]}
    assert result["context"] == {"error": f"body is {limit + 1} bytes; the limit is {limit}"}
    for fits in (
        _write_authorizer_event(path, **{"Authorization": token, "Content-Length": str(limit)}),
        _write_authorizer_event(path, **{"Authorization": token}),  # no declared length: the edge checks
        _write_authorizer_event("/api/v1/query", **{"Authorization": token, "content-length": str(limit + 1)}),
        _write_authorizer_event(path, "GET", **{"Authorization": token, "Content-Length": str(limit + 1)}),
    ):
        [statement] = fn.handlers.authorizer(fits, context("arcs-authorizer"))["policyDocument"]["Statement"]
        assert statement["Effect"] == "Allow", fits["path"]
    # A bad token is a 401 first, whatever the size.
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        fn.handlers.authorizer(_write_authorizer_event(path, **{"Content-Length": str(limit + 1)}), context("a"))


def test_authorizer_leaves_a_write_only_the_room_its_head_leaves_in_the_invoke(fn: Lambda) -> None:
    """Many short query parameters cost several event bytes each (twice, with their JSON around
    them): a write at the usual limit is then refused, and one the head leaves room for is not."""
    limit = fn.runtime.settings.max_request_bytes
    token = f"Bearer {fn.token}"
    crowded = _write_authorizer_event("/write", **{"Authorization": token, "Content-Length": str(limit)})
    letters = string.ascii_letters + string.digits
    keys = [a + b for a in letters for b in letters][:3300]  # "?ab&ac&...": 9,900 bytes of request line
    crowded["queryStringParameters"] = {"db": "metrics", **dict.fromkeys(keys, "")}
    crowded["multiValueQueryStringParameters"] = {k: [v] for k, v in crowded["queryStringParameters"].items()}
    denied = fn.handlers.authorizer(crowded, context("arcs-authorizer"))
    assert denied["policyDocument"]["Statement"][0]["Effect"] == "Deny"
    room = int(denied["context"]["error"].rsplit(" ", 1)[1])
    assert limit - 64 * 1024 < room < limit
    crowded["headers"]["Content-Length"] = str(room)
    crowded["multiValueHeaders"]["Content-Length"] = [str(room)]
    allowed = fn.handlers.authorizer(crowded, context("arcs-authorizer"))
    assert allowed["policyDocument"]["Statement"][0]["Effect"] == "Allow"


def test_the_edge_refuses_a_body_over_the_aws_limit_that_still_fits_the_invoke(fn: Lambda) -> None:
    """A chunked request declares no length; what reaches the edge over the limit is its own 413."""
    limit = fn.runtime.settings.max_request_bytes
    body = b"0" * (limit + 1)
    event = fn.api_event("POST", "/api/v1/write/line-protocol", body)
    assert len(json.dumps(event)) <= LAMBDA_PAYLOAD_LIMIT
    response = fn.handlers.edge(event, context("arcs-edge"))
    assert response["statusCode"] == 413
    assert json.loads(response["body"])["error"] == f"body is {limit + 1} bytes; the limit is {limit}"


def test_a_token_that_could_not_be_checked_is_an_authorizer_error_not_a_401(
    fn: Lambda, monkeypatch: pytest.MonkeyPatch
) -> None:
    def tokens_table_failing(token: str) -> Any:
        raise StorageFault("the tokens table did not answer")

    monkeypatch.setattr(fn.runtime.tokens, "verify", tokens_table_failing)
    # Raised as itself: API Gateway answers an authorizer's error 500, which a client retries.
    with pytest.raises(StorageFault):
        fn.handlers.authorizer(authorizer_event(Authorization=f"Bearer {fn.token}"), context("arcs-authorizer"))
