"""Time pruning: the range of ``time`` a query's WHERE clause can possibly match, per table.

Only what is certain narrows the range. Conjuncts (``AND``) intersect, alternatives (``OR``)
take the hull, and a comparison of this table's ``time`` (``time``, ``alias.time``) with a
constant expression bounds it: ``<``, ``<=``, ``>``, ``>=``, ``=``, ``BETWEEN``. Anything else —
``NOT``, functions of ``time``, subqueries, other columns — leaves the range open, so pruning can
only ever skip partitions that hold no matching row.

Constant expressions (``'2024-01-01'``, ``TIMESTAMP '...'``, ``now() - INTERVAL '1 hour'``,
``current_date``, ...) are evaluated by DuckDB itself, and only when every word in them is on a
short list of time functions and keywords.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from arcs.rewriter import Token

_TIME = "time"
_COMPARISONS = {"<": "upper", "<=": "upper", ">": "lower", ">=": "lower", "=": "both"}
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}
_CONSTANT_WORDS = frozenset(
    {
        "now", "current_timestamp", "current_date", "localtimestamp", "get_current_timestamp", "interval",
        "timestamp", "timestamptz", "date", "with", "time", "zone", "to_timestamp", "epoch_ms", "make_timestamp",
        "date_trunc", "cast", "as", "varchar", "bigint", "integer", "microsecond", "microseconds", "millisecond",
        "milliseconds", "second", "seconds", "minute", "minutes", "hour", "hours", "day", "days", "week", "weeks",
        "month", "months", "year", "years", "us", "ms", "s", "m", "h", "d",
    }
)  # fmt: skip
# Words that make an expression's value move with the clock: its upper bound gets an hour of slack.
_CLOCK_WORDS = frozenset({"now", "current_timestamp", "current_date", "localtimestamp", "get_current_timestamp"})

Evaluate = Callable[[str], datetime | None]


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


def time_range(where: Sequence[Token], qualifiers: Sequence[str], evaluate: Evaluate) -> TimeRange:
    tokens = [t for t in where if t.kind not in ("ws", "line_comment", "block_comment")]
    if not tokens:
        return OPEN
    return _Analysis({q.lower() for q in qualifiers}, evaluate).range_of(tokens)


class _Analysis:
    def __init__(self, qualifiers: set[str], evaluate: Evaluate) -> None:
        self.qualifiers = qualifiers
        self.evaluate = evaluate

    def range_of(self, tokens: list[Token]) -> TimeRange:
        tokens = _unwrap(tokens)
        alternatives = _split(tokens, "or")
        if len(alternatives) > 1:
            result = self.range_of(alternatives[0])
            for alternative in alternatives[1:]:
                result = result.hull(self.range_of(alternative))
            return result
        conjuncts = _split(tokens, "and")
        if len(conjuncts) > 1:
            result = OPEN
            for conjunct in conjuncts:
                result = result.intersect(self.range_of(conjunct))
            return result
        return self._comparison(tokens)

    def _comparison(self, tokens: list[Token]) -> TimeRange:
        column_end = self._time_column(tokens, 0)
        if column_end is not None and column_end < len(tokens):
            operator = tokens[column_end].text.lower()
            rest = tokens[column_end + 1 :]
            if operator == "between":
                bounds = _split(rest, "and", between_aware=False)
                if len(bounds) == 2:
                    return TimeRange(self._value(bounds[0], "lower"), self._value(bounds[1], "upper"))
                return OPEN
            if operator in _COMPARISONS:
                return self._bound(operator, rest)
            return OPEN
        # constant OP time
        for index, token in enumerate(tokens):
            if (
                token.kind == "punct"
                and token.text in _COMPARISONS
                and self._time_column(tokens, index + 1) == len(tokens)
            ):
                return self._bound(_FLIPPED[token.text], tokens[:index])
        return OPEN

    def _bound(self, operator: str, expression: list[Token]) -> TimeRange:
        side = _COMPARISONS[operator]
        if side == "both":
            lower, upper = self._value(expression, "lower"), self._value(expression, "upper")
            return TimeRange(lower, upper)
        value = self._value(expression, side)
        return TimeRange(value, None) if side == "lower" else TimeRange(None, value)

    def _time_column(self, tokens: list[Token], start: int) -> int | None:
        """Index after ``time`` / ``qualifier.time`` of this table starting at ``start``, else None."""
        if start >= len(tokens):
            return None
        names = [_name(tokens[start])]
        end = start + 1
        if end + 1 < len(tokens) and tokens[end].text == "." and _name(tokens[end + 1]) is not None:
            names.append(_name(tokens[end + 1]))
            end += 2
        if names[-1] != _TIME:
            return None
        if len(names) == 2 and names[0] not in self.qualifiers:
            return None
        return end

    def _value(self, expression: list[Token], side: str) -> datetime | None:
        if not expression or not all(_constant(t) for t in expression):
            return None
        value = self.evaluate("".join(t.text if t.kind != "ws" else " " for t in _spaced(expression)))
        if value is None:
            return None
        if side == "upper" and any(t.kind == "word" and t.text.lower() in _CLOCK_WORDS for t in expression):
            # The query runs a moment after this evaluation: never cut off what arrives meanwhile.
            value += timedelta(hours=1)
        return value


def _name(token: Token) -> str | None:
    if token.kind == "word":
        return token.text.lower()
    if token.kind == "quoted":
        return token.text[1:-1].replace('""', '"').lower()
    return None


def _constant(token: Token) -> bool:
    if token.kind in ("string", "number"):
        return True
    if token.kind == "word":
        return token.text.lower() in _CONSTANT_WORDS
    return token.kind == "punct" and token.text in ("(", ")", "+", "-", "*", ",", "::", "'")


def _spaced(tokens: list[Token]) -> list[Token]:
    """Re-insert the spaces dropped between tokens, so the expression reads as written."""
    out: list[Token] = []
    for token in tokens:
        if out:
            out.append(Token("ws", " "))
        out.append(token)
    return out


def _unwrap(tokens: list[Token]) -> list[Token]:
    while len(tokens) >= 2 and tokens[0].text == "(" and _closing(tokens, 0) == len(tokens) - 1:
        tokens = tokens[1:-1]
    return tokens


def _closing(tokens: list[Token], start: int) -> int:
    depth = 0
    for index in range(start, len(tokens)):
        if tokens[index].kind == "punct" and tokens[index].text == "(":
            depth += 1
        elif tokens[index].kind == "punct" and tokens[index].text == ")":
            depth -= 1
            if depth == 0:
                return index
    return -1


def _split(tokens: list[Token], word: str, between_aware: bool = True) -> list[list[Token]]:
    """Split on ``word`` at parenthesis depth 0; the AND of ``x BETWEEN a AND b`` is not a split."""
    parts: list[list[Token]] = [[]]
    depth = 0
    pending_between = False
    for token in tokens:
        lowered = token.text.lower() if token.kind == "word" else ""
        if token.kind == "punct" and token.text == "(":
            depth += 1
        elif token.kind == "punct" and token.text == ")":
            depth -= 1
        elif depth == 0 and lowered == "between" and between_aware:
            pending_between = True
        elif depth == 0 and lowered == word:
            if word == "and" and pending_between:
                pending_between = False
            else:
                parts.append([])
                continue
        parts[-1].append(token)
    return parts
