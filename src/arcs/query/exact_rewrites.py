r"""Exact rewrites: the same result for every input, computed faster.

Two rewrites: the URL-domain regex below, and ``arg_max(x, time)`` (also ``arg_min``, ``max_by``,
``min_by``, ``argmax``, ``argmin``) read as ``arg_max(x, epoch_ns(time))``. DuckDB orders these
aggregates' second argument through generic sort keys for ``TIMESTAMP_NS``, the stored ``time``
(about five times slower than for a ``BIGINT``: "last value per host" over a day of 86,000 points
took 24 ms instead of 7 ms); ``epoch_ns`` keeps the order to the nanosecond and NULL as NULL. It
applies only where a bare ``time`` can only be the measurement's column: one ``SELECT`` from one
table, without an alias list, CTE or subquery (DuckDB binds a name inside an aggregate to the
table's column before a select alias), and only to the two-argument form.

Arc rewrites ClickBench Q29's URL-domain regex

    REGEXP_REPLACE(col, '^https?://(?:www\.)?([^/]+)/.*$', '\1')

into a ``LIKE`` / ``split_part`` ``CASE`` that runs in a fraction of the regex's time, but whose ``ELSE``
differs from the regex for strings the regex does not match. This module does the same rewrite with the regex's
exact result, also for ``REGEXP_EXTRACT(col, <same pattern> [, 0 | 1])``.

What DuckDB's RE2 does with that pattern (checked against DuckDB itself by
``tests/unit/test_exact_rewrites.py``):

* ``^`` and ``$`` are the start and the very end of the string (``$`` does not match before a final
  newline), ``https?://`` is case sensitive;
* ``[^/]+`` matches any characters but ``/``, newlines included, while ``.`` does not match ``\n``
  (but does match ``\r``, U+2028, U+0085...). So a string matches iff it starts with ``http://`` or
  ``https://``, the rest has a ``/`` that is not its first character, and no ``\n`` follows that
  first ``/``;
* the optional ``www.`` is greedy but gives way when the host would be empty: ``https://www./x``
  gives ``www.``; only one ``www.`` is dropped (``http://www.www.a/`` gives ``www.a``);
* on a match the whole string is matched, so ``REGEXP_REPLACE`` returns the host (group 1) and
  ``REGEXP_EXTRACT`` returns the host for group 1 and the whole string for group 0; without a match
  ``REGEXP_REPLACE`` returns the string unchanged and ``REGEXP_EXTRACT`` returns ``''``; NULL gives NULL.

Only calls whose first argument is a column (an identifier or a qualified identifier) are rewritten:
the column is read several times by the ``CASE``. The SQL is tokenized by ``arcs.query.sql_tokens`` (block
comments nest, as in DuckDB), so nothing inside string literals or comments is touched; the
result goes through the sandbox's check on DuckDB's own parse tree like any query. A query
with ``COLLATE`` anywhere is left alone: ``LIKE`` follows a column's collation, the regex does not
(and measurements, read from Parquet, carry none).

Column names stay what they were: every select-list item (at any depth: subqueries, CTEs) that
contains a rewritten call and has no alias is given, as alias, the name DuckDB would have given the
original item. That name is DuckDB's own printing of the item, obtained from its parser
(``arcs.query.sql_tree``: parsing only, nothing is bound or run).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from arcs.errors import BadRequest
from arcs.query.sql_tokens import Token, tokenize
from arcs.query.sql_tree import expression_sql, parse_select

URL_DOMAIN_PATTERN = r"'^https?://(?:www\.)?([^/]+)/.*$'"
_GROUP_ONE = r"'\1'"
MAX_CALLS = 64  # rewritten calls per query at most: each may need its select item named by DuckDB's parser
_TRIVIA = ("ws", "line_comment", "block_comment")
# Words that start a clause. Walking back from a call, the first one met at the call's own depth
# says whether the call is in a select list; walking forward, one of them ends a select item.
_CLAUSE_WORDS = {
    "select",
    "from",
    "where",
    "group",
    "by",
    "having",
    "order",
    "limit",
    "offset",
    "qualify",
    "window",
    "values",
    "on",
    "using",
    "returning",
    "set",
    "partition",
    "union",
    "except",
    "intersect",
    "into",
}


@dataclass(frozen=True, slots=True)
class _Call:
    start: int  # index of the function name
    end: int  # index just past the closing parenthesis
    function: str  # "regexp_replace" or "regexp_extract", lowercase
    column: str  # the identifier parts as written, joined by "."
    group: int  # the group returned on a match: 1 for REGEXP_REPLACE


def apply_exact_rewrites(sql: str) -> str:
    """``sql`` with every rewritable URL-domain regex call replaced by its exact ``CASE`` form, and
    ``time`` as the ordering argument of ``arg_max`` and its kin read as ``epoch_ns(time)``."""
    lowered = sql.lower()
    regex = URL_DOMAIN_PATTERN in sql
    ordered = "time" in lowered and any(name in lowered for name in ("arg_m", "argm", "max_by", "min_by"))
    if not regex and not ordered:
        return sql  # the common case: no tokenizing at all
    try:
        tokens = tokenize(sql)
    except BadRequest:
        return sql  # let the table rewriter report it, exactly as without this step
    # token index -> (index just past what is replaced, the text written instead)
    spans: dict[int, tuple[int, str]] = {}
    # A collated column would change what LIKE matches (NOCASE: 'HTTP://' too), not the regex.
    # Measurements carry no collation and SET is refused, so COLLATE in the query is the only way.
    if regex and not any(token.kind == "word" and token.text.lower() == "collate" for token in tokens):
        candidates = (i for i, t in enumerate(tokens) if t.kind == "word" and t.text[:7].lower() == "regexp_")
        for index in candidates:
            if (call := _match_call(tokens, index)) is not None:
                spans[index] = (call.end, url_domain_case(call.column, call.function, call.group))
    if ordered and _reads_one_measurement(sql):
        for index in range(len(tokens)):
            if (found := _stored_time_ordering(tokens, index)) is not None:
                spans[found[0]] = (found[1], f"epoch_ns({tokens[found[0]].text})")
    if not spans or len(spans) > MAX_CALLS:
        return sql  # beyond MAX_CALLS the calls stay: exact anyway, and the rewrite's work is bounded
    aliases: dict[int, str] = {}  # token index -> " AS name" to write just before that token
    items = {span for found in _select_items(tokens, set(spans)).values() for span in found}
    if len(items) > 2 * MAX_CALLS:
        return sql  # deeply nested selects: naming every enclosing item is not worth it
    for item_start, item_end in items:
        name = _unaliased_item_name("".join(t.text for t in tokens[item_start:item_end]))
        if name is not None:
            aliases[_previous_significant(tokens, item_end) + 1] = " AS " + _quote(name)
    out: list[str] = []
    index = 0
    while index < len(tokens):
        out.append(aliases.get(index, ""))
        span = spans.get(index)
        if span is None:
            out.append(tokens[index].text)
            index += 1
        else:
            out.append(span[1])
            index = span[0]
    out.append(aliases.get(len(tokens), ""))
    return "".join(out)


#: DuckDB's aggregates that pick a value by the order of their second argument (all spellings).
_ORDERED_BY_SECOND = frozenset({"arg_max", "argmax", "max_by", "arg_min", "argmin", "min_by"})


def _reads_one_measurement(sql: str) -> bool:
    """True when ``sql`` is one ``SELECT`` from one table, without an alias list, CTE or subquery:
    there, a bare ``time`` inside an aggregate is the measurement's stored time (a timestamp),
    since DuckDB binds a name in an aggregate to the table's column before any select alias."""
    try:
        node = parse_select(sql)["node"]
    except (BadRequest, KeyError, TypeError):
        return False
    table = node.get("from_table") or {}
    return (
        node.get("type") == "SELECT_NODE"
        and table.get("type") == "BASE_TABLE"
        and not table.get("column_name_alias")
        and not (node.get("cte_map") or {}).get("map")
        and not _has_class(node, "SUBQUERY")
    )


def _has_class(node: object, kind: str) -> bool:
    if isinstance(node, dict):
        return node.get("class") == kind or any(_has_class(value, kind) for value in node.values())
    if isinstance(node, list):
        return any(_has_class(value, kind) for value in node)
    return False


def _stored_time_ordering(tokens: list[Token], index: int) -> tuple[int, int] | None:
    """Where ``time`` stands as the second and last argument of ``arg_max(x, time)`` (or a kin)
    starting at ``index``: its token index and the index past it; None for any other call.

    The rewrite reads it as ``epoch_ns(time)``, the same order and the same NULLs: DuckDB orders
    ``arg_max``'s argument through its generic sort keys for ``TIMESTAMP_NS`` (about five times the
    time it takes for a ``BIGINT``)."""
    if not _is_word(tokens, index, _ORDERED_BY_SECOND):
        return None
    if _is_punct(tokens, _previous_significant(tokens, index), "."):
        return None
    cursor = _significant(tokens, index + 1)
    if not _is_punct(tokens, cursor, "("):
        return None
    depth, comma = 0, -1
    for position in range(cursor + 1, len(tokens)):
        token = tokens[position]
        if token.kind != "punct":
            continue
        if token.text in ("(", "["):
            depth += 1
        elif token.text in (")", "]") and depth > 0:
            depth -= 1
        elif token.text == ")":
            if comma < 0:
                return None
            argument = _significant(tokens, comma + 1)
            if _previous_significant(tokens, position) != argument or not _is_time(tokens[argument]):
                return None
            return argument, argument + 1
        elif token.text == "," and depth == 0:
            if comma >= 0:
                return None  # arg_max(x, time, n): a list of the top n, left as written
            comma = position
    return None


def _is_time(token: Token) -> bool:
    if token.kind == "word":
        return token.text.lower() == "time"
    return token.kind == "quoted" and token.text == '"time"'


def url_domain_case(column: str, function: str = "regexp_replace", group: int = 1) -> str:
    r"""The ``CASE`` equal to ``function(column, URL_DOMAIN_PATTERN[, group])`` for every input.

    Each ``WHEN`` is one way the regex matches, on the scheme and on whether the optional ``www.``
    is taken; ``NOT ... LIKE '<scheme>%/%<newline>%'`` is "no newline after the first slash" (``.``
    does not match ``\n``). Every function used takes VARCHAR only, so a column of another type is
    cast implicitly, or rejected, exactly as by the regex function. The column must not carry a
    collation: ``LIKE`` follows one (``NOCASE`` makes ``'HTTP://'`` match), the regex does not.
    """
    c = column
    if function == "regexp_replace":
        matched_whole, unmatched = None, f"CAST({c} AS VARCHAR)"
    elif function == "regexp_extract" and group in (0, 1):
        # substr(c, 1, 0) is '' for a string and NULL for NULL, like the regex's "no match".
        matched_whole, unmatched = (f"CAST({c} AS VARCHAR)" if group == 0 else None), f"substr({c}, 1, 0)"
    else:
        raise ValueError(f"no exact rewrite for {function} group {group}")
    branches: list[str] = []
    for scheme in ("https://", "http://"):
        no_newline_after_slash = f"NOT {c} LIKE ('{scheme}%/%' || chr(10) || '%')"
        www_host = f"split_part(substr({c}, {len(scheme) + 5}), '/', 1)"
        plain_host = f"split_part(substr({c}, {len(scheme) + 1}), '/', 1)"
        branches.append(
            f"WHEN {c} LIKE '{scheme}www.%/%' AND NOT {c} LIKE '{scheme}www./%' AND {no_newline_after_slash} "
            f"THEN {matched_whole or www_host}"
        )
        branches.append(
            f"WHEN {c} LIKE '{scheme}%/%' AND NOT {c} LIKE '{scheme}/%' AND {no_newline_after_slash} "
            f"THEN {matched_whole or plain_host}"
        )
    return f"(CASE {' '.join(branches)} ELSE {unmatched} END)"


def _significant(tokens: list[Token], index: int) -> int:
    while index < len(tokens) and tokens[index].kind in _TRIVIA:
        index += 1
    return index


def _previous_significant(tokens: list[Token], index: int) -> int:
    """Index of the last significant token before ``index``; -1 when there is none."""
    index -= 1
    while index >= 0 and tokens[index].kind in _TRIVIA:
        index -= 1
    return index


def _is_punct(tokens: list[Token], index: int, text: str) -> bool:
    return 0 <= index < len(tokens) and tokens[index].kind == "punct" and tokens[index].text == text


def _is_word(tokens: list[Token], index: int, words: Collection[str]) -> bool:
    return 0 <= index < len(tokens) and tokens[index].kind == "word" and tokens[index].text.lower() in words


def _match_call(tokens: list[Token], index: int) -> _Call | None:
    """The rewritable call starting at ``index``, or None."""
    if not _is_word(tokens, index, ("regexp_replace", "regexp_extract")):
        return None
    function = tokens[index].text.lower()
    if _is_punct(tokens, _previous_significant(tokens, index), "."):
        return None  # schema.function(...) or column.function(...): the arguments mean something else
    cursor = _significant(tokens, index + 1)
    if not _is_punct(tokens, cursor, "("):
        return None
    parts: list[str] = []
    cursor = _significant(tokens, cursor + 1)
    while True:
        if cursor >= len(tokens) or tokens[cursor].kind not in ("word", "quoted"):
            return None
        parts.append(tokens[cursor].text)
        cursor = _significant(tokens, cursor + 1)
        if not _is_punct(tokens, cursor, "."):
            break
        cursor = _significant(tokens, cursor + 1)
    if not _is_punct(tokens, cursor, ","):
        return None
    cursor = _significant(tokens, cursor + 1)
    if cursor >= len(tokens) or tokens[cursor].kind != "string" or tokens[cursor].text != URL_DOMAIN_PATTERN:
        return None
    cursor = _significant(tokens, cursor + 1)
    if function == "regexp_replace":
        if not _is_punct(tokens, cursor, ","):
            return None
        cursor = _significant(tokens, cursor + 1)
        if cursor >= len(tokens) or tokens[cursor].kind != "string" or tokens[cursor].text != _GROUP_ONE:
            return None
        group = 1
        cursor = _significant(tokens, cursor + 1)
    elif _is_punct(tokens, cursor, ","):
        cursor = _significant(tokens, cursor + 1)
        if cursor >= len(tokens) or tokens[cursor].kind != "number" or tokens[cursor].text not in ("0", "1"):
            return None
        group = int(tokens[cursor].text)
        cursor = _significant(tokens, cursor + 1)
    else:
        group = 0
    if not _is_punct(tokens, cursor, ")"):
        return None
    return _Call(index, cursor + 1, function, ".".join(parts), group)


@dataclass(slots=True)
class _Level:
    """One parenthesis depth of the forward pass: its last clause word and its current item."""

    clause: str | None
    item: int  # id of the current item (the tokens since the last "," or clause word)
    item_start: int
    empty: bool = True  # no significant token in the current item yet
    after_distinct: bool = False  # SELECT DISTINCT just met: an ON would open DISTINCT ON (...)
    distinct_on: bool = False  # in SELECT DISTINCT ON (...): the item starts after its ")"


def _select_items(tokens: list[Token], positions: set[int]) -> dict[int, list[tuple[int, int]]]:
    """``(start, end)`` token spans of every select-list item holding each of ``positions``.

    One forward pass keeps, for each open parenthesis depth, the last clause word met there and
    where the current item (since the last ``,`` or clause word) began. A position is in a
    select-list item at a depth whose last clause word is ``SELECT``; spans of enclosing queries
    come from the depths below. A ``WHERE`` of a ``FILTER``, the ``ORDER BY`` of an aggregate or the
    ``FROM`` of a subquery make their depth no select list, so the search goes on further out.
    """
    ends: dict[int, int] = {}
    found: dict[int, list[tuple[int, int]]] = {}  # position -> [(item id, start)], innermost first
    next_item = 0

    def new_level(clause: str | None, start: int) -> _Level:
        nonlocal next_item
        next_item += 1
        return _Level(clause, next_item, start)

    def close(level: _Level, index: int, clause: str | None) -> None:
        nonlocal next_item
        ends[level.item] = index
        next_item += 1
        level.clause, level.item, level.item_start, level.empty = clause, next_item, index + 1, True

    levels = [new_level(None, 0)]
    for index, token in enumerate(tokens):
        if index in positions:
            found[index] = [(lv.item, lv.item_start) for lv in reversed(levels) if lv.clause == "select"]
        if token.kind in _TRIVIA:
            continue
        level = levels[-1]
        lowered = token.text.lower() if token.kind == "word" else ""
        after_distinct, level.after_distinct = level.after_distinct, False
        if token.kind == "punct" and token.text == "(":
            level.empty = level.empty and level.distinct_on
            levels.append(new_level(None, index + 1))
        elif token.kind == "punct" and token.text == ")":
            ends[level.item] = index
            if len(levels) > 1:
                levels.pop()
                if levels[-1].distinct_on:
                    levels[-1].item_start, levels[-1].distinct_on = index + 1, False
        elif lowered == "on" and after_distinct:
            level.distinct_on = True
        elif token.kind == "punct" and token.text in (",", ";"):
            close(level, index, level.clause if token.text == "," else None)
        elif lowered in _CLAUSE_WORDS:
            close(level, index, lowered)
        elif lowered in ("distinct", "all") and level.clause == "select" and level.empty:
            level.item_start = index + 1  # SELECT DISTINCT: the item starts after it
            level.after_distinct = lowered == "distinct"
        else:
            level.empty = False
    for level in levels:
        ends.setdefault(level.item, len(tokens))
    return {position: [(start, ends[item]) for item, start in items] for position, items in found.items()}


def _unaliased_item_name(item: str) -> str | None:
    """The column name DuckDB gives the select item ``item``; None when it has an alias or is unclear."""
    try:
        select_list = parse_select(f"SELECT {item.strip()}")["node"]["select_list"]
        if len(select_list) != 1 or select_list[0]["alias"] or _has_star(select_list[0]):
            return None
    except (BadRequest, KeyError, IndexError, TypeError):
        return None
    return expression_sql(select_list[0])


def _has_star(node: object) -> bool:
    """True when a parsed expression holds ``*`` or ``COLUMNS(...)``: it names many columns."""
    if isinstance(node, dict):
        return node.get("class") == "STAR" or any(_has_star(value) for value in node.values())
    if isinstance(node, list):
        return any(_has_star(value) for value in node)
    return False


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
