"""Maps ``measurement`` and ``db.measurement`` in SQL to the measurement's Parquet files.

The tables a query names are read from DuckDB's own parse tree (``arcs.query.sql_tree``): a base-table
reference that is not a CTE in scope is a measurement. Each one is replaced, in the text, at the
position DuckDB's parser and tokenizer give for it, by a scan expression supplied by the caller;
the reference keeps its name as alias so ``cpu.usage`` still resolves. Nothing else of the text
changes, and no second reading of it is ever made: comments, quoting and strings mean what DuckDB
says they mean.

Each reference also carries what time pruning may use: the ``WHERE`` of the SELECT whose ``FROM``
scans it (through joins that keep that ``WHERE``'s meaning for it), and the names that qualify its
columns. Work is linear in the size of the tree.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import duckdb

from arcs.errors import BadRequest
from arcs.query.sql_tree import NO_LOCATION, parse_select

_MEASUREMENT_HINT = "queries read measurements by name: FROM measurement or FROM database.measurement"
# A name as DuckDB's tokenizer reads one: quoted (doubled quotes inside), or a bare word.
_NAME = re.compile(rb'"(?:[^"]|"")*"|[A-Za-z_\x80-\xff][A-Za-z0-9_$\x80-\xff]*')
# What may stand right before a table name: only then is the name a scan of its own in the text.
_BEFORE_TABLE_WORDS = {b"from", b"join"}
_BEFORE_TABLE_OPERATORS = {b",", b"("}
# Joins after which a row of the WHERE's SELECT still comes from one row of each side, so a
# predicate that rejects a side's row can be applied to that side's scan. SEMI and ANTI joins
# only expose their left side; POSITIONAL, ASOF and LATERAL joins pair rows otherwise.
_KEEPING_REF_TYPES = {"REGULAR", "NATURAL", "CROSS"}
_BOTH_SIDES_JOINS = {"INNER", "LEFT", "RIGHT", "FULL"}
_LEFT_SIDE_JOINS = {"SEMI", "ANTI"}


@dataclass(frozen=True, slots=True)
class TableRef:
    database: str | None
    measurement: str
    #: Names that qualify this table's columns in SQL (its alias, else its own name), lower case.
    qualifiers: tuple[str, ...] = field(default=(), compare=False)
    #: The parsed predicate that filters this table's rows where it is scanned, if pruning may use one.
    where: dict[str, Any] | None = field(default=None, compare=False)
    #: Its name's byte span in the SQL (UTF-8), and whether the text gives it an alias.
    span: tuple[int, int] = field(default=(0, 0), compare=False)
    aliased: bool = field(default=False, compare=False)


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    """One SELECT as DuckDB reads it: its parse tree and the measurements it names, in text order."""

    sql: str
    statement: dict[str, Any]
    references: tuple[TableRef, ...]


def parse_query(sql: str, statement: dict[str, Any] | None = None) -> ParsedQuery:
    """The query's measurement references; 400 for SQL that is not one SELECT or names tables oddly."""
    if statement is None:
        statement = parse_select(sql)
    return ParsedQuery(sql, statement, tuple(_references(sql, statement)))


def table_references(sql: str) -> list[TableRef]:
    return list(parse_query(sql).references)


def rewrite_tables(query: str | ParsedQuery, scan: Callable[[TableRef], str]) -> str:
    """The SQL with every measurement reference replaced by ``scan(ref)`` (aliased by its name)."""
    parsed = parse_query(query) if isinstance(query, str) else query
    data = parsed.sql.encode("utf-8")
    out: list[bytes] = []
    done = 0
    for ref in parsed.references:
        start, end = ref.span
        replacement = scan(ref) if ref.aliased else f"{scan(ref)} AS {quote_identifier(ref.measurement)}"
        out += [data[done:start], replacement.encode("utf-8")]
        done = end
    out.append(data[done:])
    return b"".join(out).decode("utf-8")


@dataclass(frozen=True, slots=True)
class _Found:
    node: dict[str, Any]
    visible_ctes: frozenset[str]
    where: dict[str, Any] | None


def _references(sql: str, statement: dict[str, Any]) -> list[TableRef]:
    found, cte_names = _base_tables(statement)
    refs: list[TableRef] = []
    text = _Text(sql)
    for item in found:
        node = item.node
        name = str(node.get("table_name") or "")
        schema = str(node.get("schema_name") or "")
        catalog = str(node.get("catalog_name") or "")
        if catalog:
            raise BadRequest(f"table {catalog}.{schema}.{name!r}: use measurement or database.measurement")
        if not schema and name.lower() in item.visible_ctes:
            continue  # a CTE of this query
        if not schema and name.lower() in cte_names:
            raise BadRequest(
                f"table {name!r} cannot be mapped to a measurement here: it is not a CTE in scope, but a CTE"
                f" of the same name is defined elsewhere in the query; rename that CTE. {_MEASUREMENT_HINT}"
            )
        span = text.name_span(int(node.get("query_location", NO_LOCATION)), [schema, name] if schema else [name])
        prunable = not node.get("column_name_alias") and node.get("sample") is None and node.get("at_clause") is None
        alias = str(node.get("alias") or "")
        refs.append(
            TableRef(
                schema or None,
                name,
                ((alias or name).lower(),),
                item.where if prunable else None,
                span,
                bool(alias),
            )
        )
    refs.sort(key=lambda ref: ref.span)
    return refs


def _base_tables(statement: dict[str, Any]) -> tuple[list[_Found], set[str]]:
    """Every base-table reference with the CTE names in scope there and the WHERE that filters it,
    and the names of every CTE of the query."""
    found: list[_Found] = []
    cte_names: set[str] = set()
    stack: list[tuple[Any, frozenset[str], dict[str, Any] | None]] = [(statement, frozenset(), None)]
    while stack:
        node, scope, where = stack.pop()
        if isinstance(node, list):
            stack.extend((item, scope, None) for item in node)
            continue
        if not isinstance(node, dict):
            continue
        ctes = node.get("cte_map")
        if isinstance(ctes, dict) and ctes.get("map"):
            # A CTE sees the CTEs before it (and itself only through a recursive node); the body
            # of the query sees them all. DuckDB resolves any other name in its catalog.
            visible = set(scope)
            for entry in ctes["map"]:
                stack.append((entry.get("value"), frozenset(visible), None))
                visible.add(str(entry.get("key", "")).lower())
            cte_names |= visible
            scope = frozenset(visible)
            node = {key: value for key, value in node.items() if key != "cte_map"}
        kind = node.get("type")
        if kind == "RECURSIVE_CTE_NODE":
            own = str(node.get("cte_name", "")).lower()
            cte_names.add(own)
            stack.append((node.get("right"), scope | {own}, None))
            node = {key: value for key, value in node.items() if key != "right"}
        if kind == "BASE_TABLE" and "table_name" in node:
            found.append(_Found(node, scope, where))
            continue
        if kind == "SELECT_NODE" and "from_table" in node:
            # A sample of the FROM is drawn before the WHERE filters it: pruning would change it.
            kept = node.get("where_clause") if node.get("sample") is None else None
            stack.append((node.get("from_table"), scope, kept if isinstance(kept, dict) else None))
            node = {key: value for key, value in node.items() if key != "from_table"}
        elif kind == "JOIN" and "left" in node and "right" in node:
            keeps = node.get("ref_type") in _KEEPING_REF_TYPES
            join = node.get("join_type")
            left = where if keeps and join in _BOTH_SIDES_JOINS | _LEFT_SIDE_JOINS else None
            right = where if keeps and join in _BOTH_SIDES_JOINS else None
            stack += [(node["left"], scope, left), (node["right"], scope, right)]
            node = {key: value for key, value in node.items() if key not in ("left", "right")}
        stack.extend((value, scope, None) for value in node.values() if isinstance(value, (dict, list)))
    return found, cte_names


class _Text:
    """The SQL's bytes and DuckDB's tokens of it, to find a table name where the parser says it is."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.data = sql.encode("utf-8")
        self._starts: list[int] | None = None
        self._kinds: list[Any] = []

    def _tokens(self) -> tuple[list[int], list[Any]]:
        if self._starts is None:
            tokens = duckdb.tokenize(self.sql)
            self._starts = [position for position, _ in tokens]
            self._kinds = [kind for _, kind in tokens]
        return self._starts, self._kinds

    def name_span(self, location: int, parts: list[str]) -> tuple[int, int]:
        """The bytes of ``parts`` (``[name]`` or ``[database, name]``) written from ``location``."""
        starts, kinds = self._tokens()
        index = bisect.bisect_left(starts, location)
        shown = ".".join(parts)
        if location == NO_LOCATION or index >= len(starts) or starts[index] != location:
            raise self._unmapped(shown)
        if kinds[index] == duckdb.token_type.string_const:
            raise BadRequest(f"FROM {shown!r}: files and URLs cannot be read; {_MEASUREMENT_HINT}")
        if not self._before_table(index):
            raise self._unmapped(shown)
        end = location
        for number, part in enumerate(parts):
            at = index + 2 * number
            if number and not (at - 1 < len(starts) and self.data[starts[at - 1] : starts[at - 1] + 1] == b"."):
                raise self._unmapped(shown)
            match = _NAME.match(self.data, starts[at]) if at < len(starts) else None
            if match is None or _unquoted(match.group()) != part:
                raise self._unmapped(shown)
            end = match.end()
        return location, end

    def _before_table(self, index: int) -> bool:
        """Whether the token before a table name is ``FROM``, ``JOIN``, ``,`` or ``(``."""
        if index == 0:
            return False
        start = self._starts[index - 1] if self._starts is not None else 0
        kind = self._kinds[index - 1]
        if kind == duckdb.token_type.operator:
            return self.data[start : start + 1] in _BEFORE_TABLE_OPERATORS
        word = _NAME.match(self.data, start)
        return kind == duckdb.token_type.keyword and word is not None and word.group().lower() in _BEFORE_TABLE_WORDS

    @staticmethod
    def _unmapped(shown: str) -> BadRequest:
        return BadRequest(
            f"table {shown!r} cannot be mapped to a measurement here: only FROM, JOIN and comma lists"
            f" name measurements (not TABLE, PIVOT or UNPIVOT statements, DESCRIBE...); {_MEASUREMENT_HINT}"
        )


def _unquoted(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    return text[1:-1].replace('""', '"') if text.startswith('"') else text


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """The one place a value (a file path or URL) is interpolated into SQL."""
    return "'" + text.replace("'", "''") + "'"
