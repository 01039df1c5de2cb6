"""Time pruning: the range of ``time`` a query's WHERE clause can possibly match, per table.

The predicate is DuckDB's parse tree of the WHERE that filters the table's scan (``arcs.query.rewriter``
finds it; a renamed column list, a sample or a join that pairs rows otherwise gives none). Only
what is certain narrows the range: conjuncts (``AND``) intersect, alternatives (``OR``) take the
hull, and a comparison of this table's ``time`` (``time``, ``alias.time``) with a constant
expression bounds it: ``<``, ``<=``, ``>``, ``>=``, ``=``, ``BETWEEN``. Anything else — ``NOT``,
functions of ``time``, subqueries, other columns — leaves the range open, so pruning can only ever
skip partitions that hold no matching row.

Constant expressions (``'2024-01-01'``, ``TIMESTAMP '...'``, ``now() - INTERVAL '1 hour'``, ...)
are printed by DuckDB's parser and evaluated by DuckDB itself, and only when they are literals,
casts and calls of a short list of time functions. (``current_date`` and ``current_timestamp``
without parentheses are column references to DuckDB's parser — a column of that name wins — so
they are not constants here; ``current_date()`` and ``now()`` are.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from arcs.query.sql_tree import expression_sql

_TIME = "time"
_COMPARISONS = {
    "COMPARE_LESSTHAN": "upper",
    "COMPARE_LESSTHANOREQUALTO": "upper",
    "COMPARE_GREATERTHAN": "lower",
    "COMPARE_GREATERTHANOREQUALTO": "lower",
    "COMPARE_EQUAL": "both",
}
_FLIPPED = {"upper": "lower", "lower": "upper", "both": "both"}
_CONSTANT_FUNCTIONS = frozenset(
    {
        "now", "current_timestamp", "get_current_timestamp", "transaction_timestamp", "current_date", "today",
        "localtimestamp", "to_timestamp", "epoch_ms", "make_timestamp", "make_timestamptz", "make_date",
        "date_trunc", "trunc", "+", "-", "*", "to_microseconds", "to_milliseconds", "to_seconds", "to_minutes",
        "to_hours", "to_days", "to_weeks", "to_months", "to_years",
    }
)  # fmt: skip
# Functions whose value moves with the clock: an upper bound using them gets an hour of slack.
_CLOCK_FUNCTIONS = frozenset(
    {"now", "current_timestamp", "get_current_timestamp", "transaction_timestamp", "current_date", "today"}
    | {"localtimestamp"}
)
#: Nesting of AND/OR/constants looked into; deeper predicates leave the range open.
MAX_DEPTH = 64
#: Distinct constant expressions evaluated per query; beyond, the range stays as wide as it is.
MAX_EVALUATIONS = 64
#: Predicate nodes looked at per query, over all its table references (hundreds of tables sharing
#: a WHERE of hundreds of conditions would cost their product): beyond, ranges stay open.
MAX_VISITS = 50_000

Evaluate = Callable[[str], datetime | None]


class TimeConstants:
    """The values of one query's constant time expressions, each printed and evaluated at most once
    however many table references share its WHERE (a FROM list of hundreds of tables)."""

    def __init__(self, evaluate: Evaluate) -> None:
        self.evaluate = evaluate
        self._printed: dict[int, str | None] = {}  # by node identity: the tree outlives this object
        self._values: dict[str, datetime | None] = {}
        self.visits_left = MAX_VISITS

    def value(self, expression: dict[str, Any]) -> datetime | None:
        key = id(expression)
        if key not in self._printed:
            self._printed[key] = expression_sql(expression)
        text = self._printed[key]
        if text is None:
            return None
        if text not in self._values:
            if len(self._values) >= MAX_EVALUATIONS:
                return None
            self._values[text] = self.evaluate(text)
        return self._values[text]


@dataclass(frozen=True, slots=True)
class TimeRange:
    lower: datetime | None = None
    upper: datetime | None = None

    @property
    def bounded(self) -> bool:
        return self.lower is not None or self.upper is not None

    def intersect(self, other: TimeRange) -> TimeRange:
        lower = max((b for b in (self.lower, other.lower) if b is not None), default=None)
        upper = min((b for b in (self.upper, other.upper) if b is not None), default=None)
        return TimeRange(lower, upper)

    def hull(self, other: TimeRange) -> TimeRange:
        lower = None if self.lower is None or other.lower is None else min(self.lower, other.lower)
        upper = None if self.upper is None or other.upper is None else max(self.upper, other.upper)
        return TimeRange(lower, upper)


OPEN = TimeRange()


def time_range(
    where: dict[str, Any] | None, qualifiers: Sequence[str], constants: TimeConstants | Evaluate
) -> TimeRange:
    """The times ``where`` (a parsed predicate, or None) can match for the table ``qualifiers`` name.

    ``constants``: the query's (shared by its table references), or a function evaluating one.
    """
    if not isinstance(where, dict):
        return OPEN
    if not isinstance(constants, TimeConstants):
        constants = TimeConstants(constants)
    return _Analysis({q.lower() for q in qualifiers}, constants).range_of(where, 0)


class _Analysis:
    def __init__(self, qualifiers: set[str], constants: TimeConstants) -> None:
        self.qualifiers = qualifiers
        self.constants = constants

    def range_of(self, node: dict[str, Any], depth: int) -> TimeRange:
        self.constants.visits_left -= 1
        if depth > MAX_DEPTH or self.constants.visits_left < 0:
            return OPEN
        kind = node.get("type")
        children = node.get("children") if node.get("class") == "CONJUNCTION" else None
        if isinstance(children, list) and children and all(isinstance(child, dict) for child in children):
            if kind == "CONJUNCTION_AND":
                result = OPEN
                for child in children:
                    result = result.intersect(self.range_of(child, depth + 1))
                return result
            if kind == "CONJUNCTION_OR":
                result = self.range_of(children[0], depth + 1)
                for child in children[1:]:
                    if not result.bounded:
                        break
                    result = result.hull(self.range_of(child, depth + 1))
                return result
            return OPEN
        if node.get("class") == "COMPARISON" and kind in _COMPARISONS:
            left, right = node.get("left"), node.get("right")
            if self._is_time(left):
                return self._bound(_COMPARISONS[kind], right)
            if self._is_time(right):
                return self._bound(_FLIPPED[_COMPARISONS[kind]], left)
            return OPEN
        if node.get("class") == "BETWEEN" and self._is_time(node.get("input")):
            return TimeRange(self._value(node.get("lower"), "lower"), self._value(node.get("upper"), "upper"))
        return OPEN

    def _bound(self, side: str, expression: Any) -> TimeRange:
        if side == "both":
            return TimeRange(self._value(expression, "lower"), self._value(expression, "upper"))
        value = self._value(expression, side)
        return TimeRange(value, None) if side == "lower" else TimeRange(None, value)

    def _is_time(self, node: Any) -> bool:
        """Whether ``node`` is this table's ``time`` column: ``time`` or ``qualifier.time``."""
        if not isinstance(node, dict) or node.get("class") != "COLUMN_REF":
            return False
        names = [str(name).lower() for name in node.get("column_names") or []]
        return names == [_TIME] or (len(names) == 2 and names[0] in self.qualifiers and names[1] == _TIME)

    def _value(self, expression: Any, side: str) -> datetime | None:
        clock = _constant(expression, 0)
        if clock is None:
            return None
        value = self.constants.value(expression)
        if value is not None and side == "upper" and clock:
            # The query runs a moment after this evaluation: never cut off what arrives meanwhile.
            value += timedelta(hours=1)
        return value


def _constant(node: Any, depth: int) -> bool | None:
    """None unless ``node`` is a constant expression; else whether its value moves with the clock."""
    if not isinstance(node, dict) or depth > MAX_DEPTH:
        return None
    kind = node.get("class")
    if kind == "CONSTANT":
        return False
    if kind == "CAST":
        cast_type = node.get("cast_type")
        if not isinstance(cast_type, dict) or cast_type.get("type_info") is not None:
            return None
        return _constant(node.get("child"), depth + 1)
    if kind == "FUNCTION":
        name = str(node.get("function_name", "")).lower()
        children = node.get("children")
        order = node.get("order_bys")
        plain = (
            name in _CONSTANT_FUNCTIONS
            and not node.get("schema")
            and not node.get("catalog")
            and node.get("filter") is None
            and not node.get("distinct")
            and not (isinstance(order, dict) and order.get("orders"))
            and isinstance(children, list)
        )
        if not plain or not isinstance(children, list):
            return None
        clock = name in _CLOCK_FUNCTIONS
        for child in children:
            moves = _constant(child, depth + 1)
            if moves is None:
                return None
            clock = clock or moves
        return clock
    return None
