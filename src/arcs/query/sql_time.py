"""Times in SQL as the stored ones are: UTC wall clocks, without a zone.

``time`` is stored as nanoseconds, which DuckDB holds only as ``TIMESTAMP_NS`` (without a zone:
its ``TIMESTAMPTZ`` has microseconds), and DuckDB refuses to compare a ``TIMESTAMP_NS`` with a
``TIMESTAMPTZ``. So ``WHERE time > now() - INTERVAL 1 HOUR`` would fail. Every connection runs in
UTC, where a ``TIMESTAMPTZ`` and its UTC wall clock (``TIMESTAMP``) are the same instant, so the
expressions that make a ``TIMESTAMPTZ`` are taken to that wall clock here, before the query runs:

* ``now()``, ``current_timestamp``, ``get_current_timestamp()``, ``transaction_timestamp()``,
  ``to_timestamp(...)``, ``make_timestamptz(...)`` -> ``(...)::TIMESTAMP``;
* ``TIMESTAMPTZ '...'`` (or ``TIMESTAMP WITH TIME ZONE '...'``) -> ``(TIMESTAMPTZ '...')::TIMESTAMP``;
* ``x::TIMESTAMPTZ`` -> ``x::TIMESTAMPTZ::TIMESTAMP``, ``CAST(x AS TIMESTAMPTZ)`` ->
  ``CAST(x AS TIMESTAMPTZ)::TIMESTAMP``.

The SQL is read token by token (strings, quoted identifiers, comments nested as DuckDB nests them),
so nothing inside strings, quoted identifiers or comments is touched; a text this reader cannot
follow is left as it is, for DuckDB's parser to judge. A ``TIMESTAMP`` compares with
``TIMESTAMP_NS`` and with the ``TIMESTAMPTZ`` of files an earlier version wrote, so both kinds of
files answer the same query.
"""

from __future__ import annotations

from arcs.errors import BadRequest
from arcs.query.sql_tokens import Token, tokenize

_CALLS = frozenset(
    {"now", "current_timestamp", "get_current_timestamp", "transaction_timestamp", "to_timestamp", "make_timestamptz"}
)
#: Calls whose TIMESTAMPTZ argument is read in a zone: ``timezone(zone, ts)``, and
#: ``time_bucket(width, ts, zone)`` (with an origin instead of a zone, it is rewritten as usual).
_ZONE_CALLS = frozenset({"timezone", "time_bucket"})
_TRIVIA = ("ws", "line_comment", "block_comment")
_WALL_CLOCK = "::TIMESTAMP"


def utc_wall_clock(sql: str) -> str:
    """``sql`` with its ``TIMESTAMPTZ`` expressions taken to the UTC wall clock (see the module)."""
    lowered = sql.lower()
    if "timestamp" not in lowered and "now" not in lowered and "time_bucket" not in lowered:
        return sql  # the common case: no tokenizing at all
    try:
        tokens = tokenize(sql)
    except BadRequest:
        return sql  # the table rewriter reports it, as without this step
    return "".join(_rewrite(tokens, 0, len(tokens), _zoned_operands(tokens)))


def _rewrite(tokens: list[Token], start: int, stop: int, kept: dict[int, int]) -> list[str]:
    out: list[str] = []
    index = start
    while index < stop:
        if index in kept:  # an operand of AT TIME ZONE: read in that zone, as DuckDB reads it
            out += [t.text for t in tokens[index : kept[index]]]
            index = kept[index]
            continue
        token = tokens[index]
        word = token.text.lower() if token.kind == "word" else ""
        after = _significant(tokens, index + 1, stop)
        opens = after < stop and tokens[after].text == "("
        if word in _ZONE_CALLS and opens and not _follows_dot(tokens, index):
            end = _close(tokens, after, stop)
            if word == "timezone":
                # The zone is the point of these calls: their TIMESTAMPTZ stays one.
                out += [t.text for t in tokens[index:end]]
                index = end
                continue
            if _has_zone_argument(tokens, after, end):
                # Its TIMESTAMPTZ stays one too; a stored time (TIMESTAMP_NS, the UTC wall clock)
                # is made the instant it stands for, else DuckDB has no such call to choose.
                first, second = _top_level_commas(tokens, after, end)[:2]
                out += [t.text for t in tokens[index : first + 1]]
                out += ["(", *(t.text for t in tokens[first + 1 : second]), ")::TIMESTAMPTZ"]
                out += [t.text for t in tokens[second:end]]
                index = end
                continue
        if word in _CALLS and opens and not _follows_dot(tokens, index):
            end = _close(tokens, after, stop)
            if _zoned_after(tokens, end, stop):
                out += [t.text for t in tokens[index:end]]
            else:
                out += ["(", token.text, *(t.text for t in tokens[index + 1 : after + 1])]
                out += [*_rewrite(tokens, after + 1, end - 1, kept), ")", ")", _WALL_CLOCK]
            index = end
            continue
        if word == "current_timestamp" and not _follows_dot(tokens, index):
            out += [token.text] if _zoned_after(tokens, index + 1, stop) else ["(", token.text, ")", _WALL_CLOCK]
            index += 1
            continue
        if word in ("cast", "try_cast") and opens:
            end = _close(tokens, after, stop)
            inner = _rewrite(tokens, after + 1, end - 1, kept)
            zoned = _ends_with_zoned_type(tokens, after + 1, end - 1) and not _zoned_after(tokens, end, stop)
            out += [token.text, *(t.text for t in tokens[index + 1 : after + 1]), *inner, ")"]
            if zoned:
                out.append(_WALL_CLOCK)
            index = end
            continue
        length = _zoned_type(tokens, index, stop)
        if length:
            type_end = index + length
            literal = _significant(tokens, type_end, stop)
            previous = _previous_significant(tokens, index, start)
            if literal < stop and tokens[literal].kind == "string":
                zoned = _zoned_after(tokens, literal + 1, stop)
                text = [t.text for t in tokens[index : literal + 1]]
                out += text if zoned else ["(", *text, ")", _WALL_CLOCK]
                index = literal + 1
                continue
            if previous is not None and tokens[previous].text == "::":
                out += [t.text for t in tokens[index:type_end]]
                if not _zoned_after(tokens, type_end, stop):
                    out.append(_WALL_CLOCK)
                index = type_end
                continue
        out.append(token.text)
        index += 1
    return out


def _zoned_operands(tokens: list[Token]) -> dict[int, int]:
    """Where each operand of ``AT TIME ZONE`` starts, and where it ends (the ``AT``).

    The operand is the primary just before: a literal with its type, a call with its arguments, a
    parenthesised expression, a subscript, ``CASE ... END``, each with the casts that follow it.
    """
    operands: dict[int, int] = {}
    for at, token in enumerate(tokens):
        if token.kind != "word" or token.text.lower() != "at" or not _zoned_after(tokens, at, len(tokens)):
            continue
        start = _operand_start(tokens, at)
        if start is not None:
            operands[start] = max(operands.get(start, at), at)
    return operands


def _operand_start(tokens: list[Token], at: int) -> int | None:
    index = _previous_significant(tokens, at, 0)
    while index is not None:
        token = tokens[index]
        word = token.text.lower() if token.kind == "word" else ""
        before = _previous_significant(tokens, index, 0)
        if token.kind in ("word", "quoted") and before is not None and tokens[before].text == "::":
            index = _previous_significant(tokens, before, 0)  # a cast: its operand comes first
            continue
        if token.kind == "punct" and token.text in (")", "]"):
            opening = _opening(tokens, index)
            if opening is None:
                return None
            name = _previous_significant(tokens, opening, 0)
            if token.text == ")" and name is not None and tokens[name].kind == "word":
                return name  # a call (or a keyword before a parenthesis: kept whole all the same)
            if token.text == "]" and name is not None and tokens[name].text in (")", "]"):
                index = name  # a subscript of something
                continue
            return opening
        if word == "end":
            return _case_start(tokens, index)
        if token.kind == "string":
            typed = _previous_significant(tokens, index, 0)
            if typed is not None and tokens[typed].kind == "word":
                zone_start = _zoned_type_start(tokens, typed)
                return zone_start if zone_start is not None else index
            return index
        return index
    return None


def _opening(tokens: list[Token], closing: int) -> int | None:
    pairs = {")": "(", "]": "["}
    wanted = pairs[tokens[closing].text]
    depth = 0
    for index in range(closing, -1, -1):
        text = tokens[index].text if tokens[index].kind == "punct" else ""
        if text == tokens[closing].text:
            depth += 1
        elif text == wanted:
            depth -= 1
            if depth == 0:
                return index
    return None


def _case_start(tokens: list[Token], end: int) -> int | None:
    depth = 0
    for index in range(end, -1, -1):
        word = tokens[index].text.lower() if tokens[index].kind == "word" else ""
        if word == "end":
            depth += 1
        elif word == "case":
            depth -= 1
            if depth == 0:
                return index
    return None


def _zoned_type_start(tokens: list[Token], last: int) -> int | None:
    """The first token of a type name ending at ``last`` (``TIMESTAMPTZ`` or ``TIMESTAMP WITH TIME ZONE``)."""
    word = tokens[last].text.lower()
    if word == "timestamptz" or word == "timestamp":
        return last
    if word != "zone":
        return None
    index: int | None = last
    for expected in ("time", "with", "timestamp"):
        index = _previous_significant(tokens, index, 0) if index is not None else None
        if index is None or tokens[index].text.lower() != expected:
            return None
    return index


def _zoned_after(tokens: list[Token], index: int, stop: int) -> bool:
    """Whether ``AT TIME ZONE`` follows: it turns a TIMESTAMPTZ into that zone's wall clock, which
    compares with stored times as it is, so the TIMESTAMPTZ must stay one."""
    for expected in ("at", "time", "zone"):
        index = _significant(tokens, index, stop)
        if index >= stop or tokens[index].kind != "word" or tokens[index].text.lower() != expected:
            return False
        index += 1
    return True


def _has_zone_argument(tokens: list[Token], opening: int, end: int) -> bool:
    """Whether a ``time_bucket(width, ts, ...)`` call has a third argument that is a zone (a string)."""
    commas = _top_level_commas(tokens, opening, end)
    if len(commas) < 2:
        return False
    third = _significant(tokens, commas[1] + 1, end)
    return third < end and tokens[third].kind == "string"


def _top_level_commas(tokens: list[Token], opening: int, end: int) -> list[int]:
    """The indexes of the commas that separate the arguments of the call opening at ``opening``."""
    depth = 0
    commas = []
    for index in range(opening, end):
        text = tokens[index].text if tokens[index].kind == "punct" else ""
        if text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
        elif text == "," and depth == 1:
            commas.append(index)
    return commas


def _zoned_type(tokens: list[Token], index: int, stop: int) -> int:
    """How many tokens the zoned timestamp type starting at ``index`` spans (0: none there)."""
    word = tokens[index].text.lower() if tokens[index].kind == "word" else ""
    if word == "timestamptz":
        return 1
    if word != "timestamp":
        return 0
    cursor = index
    for expected in ("with", "time", "zone"):
        cursor = _significant(tokens, cursor + 1, stop)
        if cursor >= stop or tokens[cursor].kind != "word" or tokens[cursor].text.lower() != expected:
            return 0
    return cursor + 1 - index


def _ends_with_zoned_type(tokens: list[Token], start: int, stop: int) -> bool:
    """Whether a CAST's inside ``tokens[start:stop]`` ends ``AS <zoned timestamp type>``."""
    for index in range(stop - 1, start - 1, -1):
        if tokens[index].kind in _TRIVIA:
            continue
        word = tokens[index].text.lower() if tokens[index].kind == "word" else ""
        if word == "timestamptz":
            begin = index
        elif word == "zone":
            begin = index
            while begin > start and not (tokens[begin].kind == "word" and tokens[begin].text.lower() == "timestamp"):
                begin -= 1
            if _zoned_type(tokens, begin, stop) != index + 1 - begin:
                return False
        else:
            return False
        previous = _previous_significant(tokens, begin, start)
        return previous is not None and tokens[previous].kind == "word" and tokens[previous].text.lower() == "as"
    return False


def _significant(tokens: list[Token], index: int, stop: int) -> int:
    while index < stop and tokens[index].kind in _TRIVIA:
        index += 1
    return index


def _previous_significant(tokens: list[Token], index: int, start: int) -> int | None:
    index -= 1
    while index >= start and tokens[index].kind in _TRIVIA:
        index -= 1
    return index if index >= start else None


def _follows_dot(tokens: list[Token], index: int) -> bool:
    """A qualified name (``t.now``) is a column, not the function."""
    previous = _previous_significant(tokens, index, 0)
    return previous is not None and tokens[previous].text == "."


def _close(tokens: list[Token], opening: int, stop: int) -> int:
    """The index just past the parenthesis that closes the one at ``opening``."""
    depth = 0
    for index in range(opening, stop):
        if tokens[index].kind == "punct" and tokens[index].text == "(":
            depth += 1
        elif tokens[index].kind == "punct" and tokens[index].text == ")":
            depth -= 1
            if depth == 0:
                return index + 1
    raise BadRequest("unbalanced parentheses in SQL")
