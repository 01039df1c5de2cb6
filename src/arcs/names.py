"""Validation of database, measurement and column names: what each may hold, and reserved databases."""

from __future__ import annotations

import re

from arcs.errors import BadRequest, Forbidden

DATABASE_RULE = re.compile(r"[a-zA-Z][a-zA-Z0-9_-]{0,63}")
MEASUREMENT_RULE = re.compile(r"[a-zA-Z][a-zA-Z0-9_-]{0,127}")
RESERVED_DATABASES = frozenset({"system", "internal", "_internal"})
MAX_COLUMN_NAME_BYTES = 128
# What a column name may not hold: control characters, and lone surrogates (not UTF-8 at all).
_BAD_NAME_CHARACTER = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")
MAX_COLUMNS = 1024
TIME_COLUMN = "time"
DEFAULT_DATABASE = "default"


def check_database(name: object) -> str:
    if not isinstance(name, str) or not DATABASE_RULE.fullmatch(name):
        raise BadRequest(f"invalid database name {_show(name)}: must match ^[a-zA-Z][a-zA-Z0-9_-]{{0,63}}$")
    if name.lower() in RESERVED_DATABASES:
        raise Forbidden(f"database name {name!r} is reserved")
    return name


def check_measurement(name: object) -> str:
    if not isinstance(name, str) or not MEASUREMENT_RULE.fullmatch(name):
        raise BadRequest(f"invalid measurement name {_show(name)}: must match ^[a-zA-Z][a-zA-Z0-9_-]{{0,127}}$")
    return name


def check_column(name: object, measurement: str) -> str:
    """Column names are free text in line protocol, so only what breaks storage is refused."""
    if not isinstance(name, str) or not name:
        raise BadRequest(f"measurement {measurement!r}: column names must be non-empty strings")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_COLUMN_NAME_BYTES:
        raise BadRequest(
            f"measurement {measurement!r}: column name {_show(name)} is longer than {MAX_COLUMN_NAME_BYTES} bytes"
        )
    if _BAD_NAME_CHARACTER.search(name):
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
            raise BadRequest(f"measurement {measurement!r}: column name {_show(name)} contains control characters")
        raise BadRequest(f"measurement {measurement!r}: column name {_show(name)} is not valid UTF-8")
    return name


def _show(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
