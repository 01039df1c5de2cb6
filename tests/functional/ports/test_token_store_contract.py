"""The TokenStore contract, on SQLite and on DynamoDB (moto)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from tests.functional.ports.contract import Ports, token

pytestmark = pytest.mark.functional


def test_tokens_put_find_get_list_delete(ports: Ports) -> None:
    tokens = ports.tokens
    assert tokens.is_empty()
    assert tokens.list() == []
    second = token("t2", "bbbb", 2, databases=("db1", "db2"), revoked=True)
    first = token("t1", "aaaa", 1, expires_at=datetime(2030, 1, 1, tzinfo=UTC), description="ci")
    tokens.put(second)
    tokens.put(first)
    assert not tokens.is_empty()
    assert tokens.get("t1") == first
    assert tokens.get("t2") == second
    assert tokens.get("t3") is None
    assert tokens.find("aaaa") == [first]
    assert tokens.find("zzzz") == []
    assert tokens.list() == [first, second]  # by creation time

    assert tokens.delete("t1")
    assert not tokens.delete("t1")
    assert tokens.get("t1") is None
    assert tokens.find("aaaa") == []
    assert tokens.list() == [second]


def test_token_lookup_changes_on_re_put(ports: Ports) -> None:
    tokens = ports.tokens
    original = token("t1", "aaaa", 1)
    tokens.put(original)
    rotated = replace(original, lookup="cccc", secret_hash=b"new-hash")
    tokens.put(rotated, previous_lookup="aaaa")
    assert tokens.find("aaaa") == []
    assert tokens.find("cccc") == [rotated]
    assert tokens.get("t1") == rotated
    # Without the hint the store still drops the old lookup.
    again = replace(rotated, lookup="dddd")
    tokens.put(again)
    assert tokens.find("cccc") == []
    assert tokens.find("dddd") == [again]
    assert tokens.list() == [again]


def test_tokens_sharing_a_lookup_are_all_found(ports: Ports) -> None:
    tokens = ports.tokens
    one, two = token("t1", "same", 1), token("t2", "same", 2)
    tokens.put(one)
    tokens.put(two)
    assert sorted(tokens.find("same"), key=lambda t: t.token_id) == [one, two]
