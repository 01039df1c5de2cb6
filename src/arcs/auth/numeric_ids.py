"""Integer ids for records whose own id is a string (tokens, executions), as Arc's API has them.

Arc numbers its tokens and executions (``"id": 1``) and its clients read the id as an integer.
Our records keep their string ids (a token's 16 hex digits, an execution's id), which are what
the stores are keyed by; the integer is derived from the string, so it is the same in every
runtime and store, needs no counter or column, and every record written before it existed has
one. 52 bits: exact in a double, so JavaScript clients (Grafana) read it unchanged.
"""

from __future__ import annotations

import hashlib

BITS = 52


def numeric_id(text: str) -> int:
    """The integer id of the record whose string id is ``text`` (stable, from 1 to 2**52)."""
    digest = hashlib.blake2b(text.encode(), digest_size=8, person=b"arcs-numeric-id").digest()
    return (int.from_bytes(digest) >> (64 - BITS)) or 1
