"""Maps ``measurement`` and ``db.measurement`` in SQL to the measurement's Parquet files.

The SQL is tokenized (strings, quoted identifiers and comments are single tokens, so nothing
inside them is ever touched), then every table reference after ``FROM``/``JOIN`` (and after commas
in a ``FROM`` list) that is not a CTE name or a table function is replaced by a scan expression
supplied by the caller. The reference keeps its name as alias so ``cpu.usage`` still resolves.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from arcs.errors import BadRequest

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<line_comment>--[^\n]*)
  | (?P<block_comment>/\*.*?\*/)
  | (?P<escape_string>[eE]'(?:[^'\\]|\\.|'')*')
  | (?P<unterminated_escape_string>[eE]')
  | (?P<string>'(?:[^']|'')*')
  | (?P<dollar>\$(?P<tag>[A-Za-z_]*)\$.*?\$(?P=tag)\$)
  | (?P<quoted>"(?:[^"]|"")*")
  | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)
  | (?P<punct>::|<=|>=|<>|!=|\|\||.)
    """,
    re.VERBOSE | re.DOTALL,
)
# A dollar quote's last group is its tag; an E'' string (backslash escapes) is a string like any other.
_KIND_OF_GROUP = {"tag": "dollar", "escape_string": "string"}
_TABLE_CONTEXT = {"from", "join"}
# Words that can follow a table reference and are not its alias.
_NOT_ALIAS = {
    "where",
    "group",
    "order",
    "limit",
    "offset",
    "having",
    "join",
    "inner",
    "left",
    "right",
    "full",
    "outer",
    "cross",
    "natural",
    "on",
    "using",
    "union",
    "except",
    "intersect",
    "window",
    "qualify",
    "as",
    "tablesample",
    "positional",
    "asof",
    "anti",
    "semi",
    "lateral",
    "pivot",
    "unpivot",
    "returning",
    "select",
    "values",
    "sample",
}

# Words after which "(" opens a subquery or a list rather than a function call.
_GROUPING_WORDS = {
    "in",
    "exists",
    "as",
    "from",
    "join",
    "any",
    "all",
    "some",
    "lateral",
    "values",
    "on",
    "using",
    "select",
    "where",
    "and",
    "or",
    "not",
    "union",
    "except",
    "intersect",
    "materialized",
    "with",
    "when",
    "then",
    "else",
    "by",
    "having",
    "recursive",
    "is",
}


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str


@dataclass(frozen=True, slots=True)
class TableRef:
    database: str | None
    measurement: str
    #: Names that qualify this table's columns in SQL (its alias, else its own name), lower case.
    qualifiers: tuple[str, ...] = field(default=(), compare=False)
    #: The WHERE clause of the SELECT block that reads this table (for time pruning).
    where: tuple[Token, ...] = field(default=(), compare=False)


def tokenize(sql: str) -> list[Token]:
    tokens = []
    pos = 0
    while pos < len(sql):
        match = _TOKEN.match(sql, pos)
        if match is None or match.lastgroup is None:
            raise BadRequest(f"cannot read SQL at character {pos + 1}")
        kind = _KIND_OF_GROUP.get(match.lastgroup, match.lastgroup)
        text = match.group()
        if kind == "unterminated_escape_string" or (kind == "punct" and text in ("'", '"')):
            raise BadRequest(f"unterminated {'string' if text == chr(39) else 'quoted identifier'} in SQL")
        if kind == "punct" and sql.startswith("/*", pos):
            raise BadRequest("unterminated comment in SQL")
        tokens.append(Token(kind, text))
        pos = match.end()
    return tokens


def _identifier(token: Token) -> str | None:
    if token.kind == "word":
        return token.text
    if token.kind == "quoted":
        return token.text[1:-1].replace('""', '"')
    return None


def _significant(tokens: list[Token], start: int) -> int:
    index = start
    while index < len(tokens) and tokens[index].kind in ("ws", "line_comment", "block_comment"):
        index += 1
    return index


def _cte_names(tokens: list[Token]) -> set[str]:
    """Names defined by ``WITH [RECURSIVE] name [(cols)] AS (...)`` at any depth."""
    names: set[str] = set()
    for index, token in enumerate(tokens):
        if token.kind != "word" or token.text.lower() != "with":
            continue
        cursor = _significant(tokens, index + 1)
        if cursor < len(tokens) and tokens[cursor].text.lower() == "recursive":
            cursor = _significant(tokens, cursor + 1)
        while cursor < len(tokens):
            name = _identifier(tokens[cursor])
            if name is None:
                break
            names.add(name.lower())
            cursor = _significant(tokens, cursor + 1)
            if cursor < len(tokens) and tokens[cursor].text == "(":
                cursor = _skip_parens(tokens, cursor)
                cursor = _significant(tokens, cursor)
            if cursor >= len(tokens) or tokens[cursor].text.lower() != "as":
                break
            cursor = _significant(tokens, cursor + 1)
            while cursor < len(tokens) and tokens[cursor].text.lower() in ("materialized", "not"):
                cursor = _significant(tokens, cursor + 1)
            if cursor >= len(tokens) or tokens[cursor].text != "(":
                break
            cursor = _significant(tokens, _skip_parens(tokens, cursor))
            if cursor < len(tokens) and tokens[cursor].text == ",":
                cursor = _significant(tokens, cursor + 1)
                continue
            break
    return names


def _skip_parens(tokens: list[Token], index: int) -> int:
    """Index just past the parenthesis group opening at ``index``."""
    depth = 0
    while index < len(tokens):
        text = tokens[index].text
        if tokens[index].kind == "punct":
            if text == "(":
                depth += 1
            elif text == ")":
                depth -= 1
                if depth == 0:
                    return index + 1
        index += 1
    raise BadRequest("unbalanced parentheses in SQL")


def table_references(sql: str) -> list[TableRef]:
    refs: list[TableRef] = []

    def record(ref: TableRef) -> str:
        refs.append(ref)
        return ""

    rewrite_tables(sql, record)
    return refs


def rewrite_tables(sql: str, scan: Callable[[TableRef], str]) -> str:
    tokens = tokenize(sql)
    ctes = _cte_names(tokens)
    out: list[str] = []
    index = 0
    expecting_table = False
    in_from_list = False
    depth_of_from: list[int] = []
    depth = 0
    # True for each open parenthesis that is a function call: FROM inside one (EXTRACT(x FROM t),
    # SUBSTRING(s FROM 2)) names no table.
    call_parens: list[bool] = []
    previous = Token("ws", "")
    while index < len(tokens):
        token = tokens[index]
        lowered = token.text.lower() if token.kind == "word" else ""
        if token.kind == "punct" and token.text == "(":
            depth += 1
            call_parens.append(previous.kind in ("word", "quoted") and previous.text.lower() not in _GROUPING_WORDS)
        elif token.kind == "punct" and token.text == ")":
            depth -= 1
            if call_parens:
                call_parens.pop()
            while depth_of_from and depth_of_from[-1] > depth:
                depth_of_from.pop()
        if expecting_table and token.kind in ("word", "quoted"):
            ref, consumed = _parse_reference(tokens, index)
            expecting_table = False
            if ref is not None and ref.database is None and ref.measurement.lower() in ctes:
                ref = None
            if ref is None:
                out.extend(t.text for t in tokens[index:consumed])
            else:
                alias_index = _significant(tokens, consumed)
                has_alias = alias_index < len(tokens) and (
                    tokens[alias_index].kind == "quoted"
                    or (tokens[alias_index].kind == "word" and tokens[alias_index].text.lower() not in _NOT_ALIAS)
                    or tokens[alias_index].text.lower() == "as"
                )
                qualifier = ref.measurement
                if has_alias:
                    named = alias_index
                    if tokens[named].text.lower() == "as":
                        named = _significant(tokens, named + 1)
                    qualifier = (_identifier(tokens[named]) if named < len(tokens) else None) or qualifier
                ref = replace(ref, qualifiers=(qualifier.lower(),), where=_where_clause(tokens, consumed))
                replacement = scan(ref)
                out.append(replacement if has_alias else f"{replacement} AS {quote_identifier(ref.measurement)}")
            index = consumed
            continue
        if token.kind not in ("ws", "line_comment", "block_comment"):
            if (
                lowered in _TABLE_CONTEXT
                and not (call_parens and call_parens[-1])
                and not (lowered == "from" and previous.text.lower() == "distinct")
            ):
                expecting_table = True
                if lowered == "from":
                    in_from_list = True
                    depth_of_from.append(depth)
            elif token.kind == "punct" and token.text == "," and depth_of_from and depth_of_from[-1] == depth:
                expecting_table = in_from_list
            elif lowered in (
                "where",
                "group",
                "order",
                "limit",
                "having",
                "union",
                "except",
                "intersect",
                "window",
                "qualify",
                "on",
                "using",
                "select",
            ):
                if depth_of_from and depth_of_from[-1] == depth:
                    depth_of_from.pop()
                expecting_table = False
            elif expecting_table:
                expecting_table = False
            previous = token
        out.append(token.text)
        index += 1
    if depth != 0:
        raise BadRequest("unbalanced parentheses in SQL")
    return "".join(out)


_BLOCK_ENDS = {"union", "except", "intersect"}
_WHERE_ENDS = {"group", "order", "limit", "offset", "having", "window", "qualify", "fetch", *_BLOCK_ENDS}


def _where_clause(tokens: list[Token], start: int) -> tuple[Token, ...]:
    """The WHERE clause of the SELECT block a table reference ending at ``start`` belongs to."""
    depth = 0
    index = start
    where_at = None
    while index < len(tokens):
        token = tokens[index]
        word = token.text.lower() if token.kind == "word" else ""
        if token.kind == "punct" and token.text == "(":
            depth += 1
        elif token.kind == "punct" and token.text == ")":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and (token.text == ";" or word in (_WHERE_ENDS if where_at is not None else _BLOCK_ENDS)):
            break
        elif depth == 0 and word == "where" and where_at is None:
            where_at = index + 1
        index += 1
    return tuple(tokens[where_at:index]) if where_at is not None else ()


def _parse_reference(tokens: list[Token], index: int) -> tuple[TableRef | None, int]:
    """``name`` or ``db.name`` starting at ``index``; None when it is a table function or deeper path."""
    parts: list[str] = []
    cursor = index
    while True:
        name = _identifier(tokens[cursor]) if cursor < len(tokens) else None
        if name is None:
            return None, max(cursor, index + 1)
        parts.append(name)
        cursor += 1
        if cursor < len(tokens) and tokens[cursor].text == ".":
            cursor += 1
            continue
        break
    following = _significant(tokens, cursor)
    if following < len(tokens) and tokens[following].text == "(":
        return None, cursor  # a table function such as read_parquet(...): the sandbox decides
    if len(parts) == 1:
        return TableRef(None, parts[0]), cursor
    if len(parts) == 2:
        return TableRef(parts[0], parts[1]), cursor
    raise BadRequest(f"table {'.'.join(parts)!r}: use measurement or database.measurement")


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """The one place a value (a file path or URL) is interpolated into SQL."""
    return "'" + text.replace("'", "''") + "'"
