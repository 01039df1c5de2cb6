"""SQL text as tokens, for the few steps that change a query's text before DuckDB parses it.

Strings (with ``E''`` escapes and dollar quotes), quoted identifiers and comments are tokens of
their own, block comments nesting as DuckDB nests them, so a step that rewrites words never
touches what is inside them. Whitespace and comments are kept: the tokens' texts join back to the
SQL. Where the text matters to a query's meaning (tables, time predicates), DuckDB's own parse
tree is read instead (``arcs.query.sql_tree``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from arcs.errors import BadRequest
from arcs.query.sql_tree import block_comment_end

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<line_comment>--[^\n]*)
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


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str


def tokenize(sql: str) -> list[Token]:
    """The SQL's tokens, whitespace and comments included; 400 for an unterminated string or comment."""
    tokens = []
    pos = 0
    while pos < len(sql):
        if sql.startswith("/*", pos):
            end = block_comment_end(sql, pos)
            tokens.append(Token("block_comment", sql[pos:end]))
            pos = end
            continue
        match = _TOKEN.match(sql, pos)
        if match is None or match.lastgroup is None:
            raise BadRequest(f"cannot read SQL at character {pos + 1}")
        kind = _KIND_OF_GROUP.get(match.lastgroup, match.lastgroup)
        text = match.group()
        if kind == "unterminated_escape_string" or (kind == "punct" and text in ("'", '"')):
            raise BadRequest(f"unterminated {'string' if text == chr(39) else 'quoted identifier'} in SQL")
        tokens.append(Token(kind, text))
        pos = match.end()
    return tokens
