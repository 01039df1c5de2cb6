"""Whether a system's result of a query equals the baseline's.

Strict, except where the SQL itself leaves the answer open:

- Values are compared position by position, column names aside (each dialect names expressions
  its own way; our path must also keep DuckDB's names, checked by the harness) — except that when
  both results have the same column names in another order (``SELECT *`` over DataFusion's view,
  which moves EventDate last), columns are matched by name. Integers of any width compare
  exactly; floats within a relative 1e-9 (summation order differs between engines and threads);
  dates and timestamps as instants in UTC (a DATE is its midnight; an integer against a timestamp
  is Unix seconds, as ClickHouse's DateTime reaches Arrow, and against a DATE days since 1970, as
  hits.parquet's raw EventDate); strings exactly.
- Columns the caller names as the system's own (our measurement's storage ``time`` column in
  ``SELECT *``) are left out when they are not in the baseline's result.
- ``ORDER BY ... LIMIT``: rows tied on the sort key may come in any order, and at the edges of the
  window (last key; first key too with OFFSET) different tied rows may be chosen. So the sequence of sort-key
  values must be equal, the rows of every key group strictly inside the window equal as multisets,
  and only the rows of the first and last key groups may differ (their key values may not). Where
  a sort key is not among the output columns, rows are compared as multisets only if the keys
  cannot be checked; the report says so.
- ``LIMIT`` without ``ORDER BY``: any rows of the full result are right; every row must be one of
  the baseline's full (unlimited) result, and their number must be equal.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
REL_TOL = 1e-9


@dataclass(frozen=True, slots=True)
class Shape:
    """What the query's text says about its result's order: sort keys as output positions."""

    ordered: bool
    limited: bool
    offset: bool
    keys: tuple[int, ...] | None  # None: a sort key is not an output column


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k not in ("query_location", "alias")}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def shape(sql: str, columns: Sequence[str]) -> Shape:
    """Sort keys of a single SELECT, matched to output columns on DuckDB's parse tree."""
    tree = json.loads(duckdb.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0])  # type: ignore[index]
    node = tree["statements"][0]["node"]
    orders = [m for m in node.get("modifiers", []) if m["type"] == "ORDER_MODIFIER"]
    limits = [m for m in node.get("modifiers", []) if m["type"] == "LIMIT_MODIFIER"]
    limited = bool(limits)
    offset = any(m.get("offset") for m in limits)
    if not orders:
        return Shape(False, limited, offset, ())
    select = node["select_list"]
    stripped = [_strip(item) for item in select]
    aliases = [str(item.get("alias", "")).lower() for item in select]
    lowered = [c.lower() for c in columns]
    keys: list[int] = []
    for order in orders[0]["orders"]:
        expression = order["expression"]
        position: int | None = None
        if expression["class"] == "CONSTANT" and expression["value"]["type"]["id"] in ("INTEGER", "BIGINT"):
            position = int(expression["value"]["value"]) - 1
        elif expression["class"] == "COLUMN_REF" and len(expression["column_names"]) == 1:
            name = expression["column_names"][0].lower()
            if name in aliases:
                position = aliases.index(name)
            elif name in lowered:
                position = lowered.index(name)
        if position is None and _strip(expression) in stripped:
            position = stripped.index(_strip(expression))
        if position is None or position >= len(columns):
            return Shape(True, limited, offset, None)
        keys.append(position)
    return Shape(True, limited, offset, tuple(keys))


def _value(value: Any, baseline_type: pa.DataType | None) -> Any:
    """A comparable form: instants as UTC microseconds, numbers as int or float, text as is."""
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return ("t", (moment - _EPOCH) // dt.timedelta(microseconds=1))
    if isinstance(value, dt.date):
        return ("t", (value - _EPOCH.date()).days * 86_400_000_000)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and baseline_type is not None and pa.types.is_date(baseline_type):
        return ("t", value * 86_400_000_000)
    if isinstance(value, int) and baseline_type is not None and pa.types.is_temporal(baseline_type):
        return ("t", value * 1_000_000)
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return value


def _rows(table: pa.Table, types: Sequence[pa.DataType | None]) -> list[tuple[Any, ...]]:
    columns = [[_value(v, types[i]) for v in column.to_pylist()] for i, column in enumerate(table.columns)]
    return [tuple(row) for row in zip(*columns, strict=True)] if columns else [() for _ in range(table.num_rows)]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return True
        return math.isclose(float(a), float(b), rel_tol=REL_TOL, abs_tol=1e-12)
    return bool(a == b)


def _same_row(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))


def _rounded(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A hashable form for multiset comparison (floats to 9 significant digits)."""
    return tuple(float(f"{v:.9g}") if isinstance(v, float) else v for v in row)


def _same_multiset(a: Sequence[tuple[Any, ...]], b: Sequence[tuple[Any, ...]]) -> bool:
    return Counter(map(_rounded, a)) == Counter(map(_rounded, b))


@dataclass(frozen=True, slots=True)
class Verdict:
    equal: bool
    reason: str = ""


def compare(
    sql: str,
    expected: pa.Table,
    actual: pa.Table,
    full_result: Callable[[], pa.Table] | None = None,
    own_columns: Sequence[str] = (),
) -> Verdict:
    """``actual`` against the baseline's ``expected`` for ``sql`` (the baseline's dialect).

    ``full_result`` gives the baseline's result without its LIMIT, for LIMIT without ORDER BY.
    """
    for name in own_columns:
        if name in actual.column_names and name not in expected.column_names:
            actual = actual.drop_columns([name])
    names = [n.lower() for n in expected.column_names]
    if [n.lower() for n in actual.column_names] != names and sorted(n.lower() for n in actual.column_names) == sorted(
        names
    ):
        lowered = [n.lower() for n in actual.column_names]
        actual = pa.table([actual.column(lowered.index(n)) for n in names], names=expected.column_names)
    if actual.num_columns != expected.num_columns:
        return Verdict(False, f"{actual.num_columns} columns, expected {expected.num_columns}")
    if actual.num_rows != expected.num_rows:
        return Verdict(False, f"{actual.num_rows} rows, expected {expected.num_rows}")
    types: list[pa.DataType | None] = list(expected.schema.types)
    want, got = _rows(expected, types), _rows(actual, types)
    if all(_same_row(a, b) for a, b in zip(want, got, strict=True)):
        return Verdict(True)
    form = shape(sql, expected.column_names)
    if not form.ordered:
        if form.limited and full_result is not None:
            pool = Counter(map(_rounded, _rows(full_result(), types)))
            missing = Counter(map(_rounded, got)) - pool
            return Verdict(not missing, f"rows not in the full result: {list(missing)[:3]}" if missing else "")
        return Verdict(_same_multiset(want, got), "rows differ (unordered)")
    if form.keys is None:
        return Verdict(_same_multiset(want, got), "rows differ (sort key not in the output)")
    return _compare_ordered(want, got, form.keys, form.limited, form.offset)


def _compare_ordered(
    want: list[tuple[Any, ...]], got: list[tuple[Any, ...]], keys: tuple[int, ...], limited: bool, offset: bool
) -> Verdict:
    def key(row: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(row[i] for i in keys)

    if not all(_same_row(key(a), key(b)) for a, b in zip(want, got, strict=True)):
        return Verdict(False, "sort keys differ")
    groups: list[tuple[int, int]] = []
    start = 0
    for index in range(1, len(want) + 1):
        if index == len(want) or not _same_row(key(want[index]), key(want[start])):
            groups.append((start, index))
            start = index
    for number, (first, stop) in enumerate(groups):
        # A window cut by LIMIT may end inside a key group, and by OFFSET begin inside one.
        edge = (limited and number == len(groups) - 1) or (offset and number == 0)
        if not edge and not _same_multiset(want[first:stop], got[first:stop]):
            return Verdict(False, f"rows {first}..{stop - 1} differ beyond tie order")
    return Verdict(True)


_LIMIT = re.compile(r"\s+LIMIT\s+\d+(\s+OFFSET\s+\d+)?\s*;?\s*$", re.IGNORECASE)


def without_limit(sql: str) -> str:
    return _LIMIT.sub("", sql)
