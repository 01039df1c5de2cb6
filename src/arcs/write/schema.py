"""Measurement schemas: the stored type of every column, kept in the catalog.

A request may add columns; it may never change a stored column's type, except that integers
written into a float column widen (to the nearest float64, as InfluxDB and Arc convert them: an
integer beyond 2^53 loses its last bits). Whatever a client sends, a measurement stays queryable.
"""

from __future__ import annotations

import pyarrow as pa

from arcs.errors import BadRequest, Conflict
from arcs.ports import MeasurementSchema, SchemaCatalog
from arcs.write.batch import MeasurementRows, type_name

_MAX_CAS_ATTEMPTS = 20
#: Measurements one request may write: each is at least a file for ingest to write and, when new,
#: a schema for the catalog to store, so one request of thousands would hold ingest for a minute.
MAX_MEASUREMENTS_PER_REQUEST = 1_000
_MAX_ACCEPTED_SHAPES = 10_000
_MAX_SHAPES_PER_MEASUREMENT = 8


def widened(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """Integers as float64, each rounded to the nearest float (Arrow's safe cast refuses any
    integer beyond 2^53 instead)."""
    return values.cast(pa.float64(), safe=False)


def _widened_to(table: pa.Table, other: pa.Schema) -> pa.Table:
    """``table`` with its integer columns that ``other`` holds as floats widened."""
    for index, field in enumerate(table.schema):
        position = other.get_field_index(field.name)
        if field.type == pa.int64() and position >= 0 and other.field(position).type == pa.float64():
            table = table.set_column(index, field.name, widened(table.column(index)))
    return table


def _reconcile_part(part: MeasurementRows, stored: MeasurementSchema | None) -> tuple[MeasurementRows, bool]:
    """Cast ``part`` to the stored types; True when it brings columns the schema lacks."""
    known = stored.columns if stored else {}
    table = part.table
    adds = False
    for index, field in enumerate(table.schema):
        incoming = type_name(field.type)
        expected = known.get(field.name)
        if expected is None:
            clash = next((name for name in known if name.lower() == field.name.lower()), None)
            if clash is not None:
                # DuckDB resolves names without regard to case: both could never be queried.
                raise BadRequest(
                    f"measurement {part.measurement!r}: column {field.name!r} differs only in case from the "
                    f"stored column {clash!r}"
                )
            adds = True
        elif expected == incoming:
            continue
        elif expected == "float64" and incoming == "int64":
            table = table.set_column(index, field.name, widened(table.column(index)))
        else:
            raise BadRequest(
                f"measurement {part.measurement!r}: column {field.name!r} is {expected} in storage "
                f"but the request sends {incoming}"
            )
    if stored and not set(part.tags) <= set(stored.tags):
        adds = True
    if table is part.table:
        return part, adds
    return MeasurementRows(part.measurement, table, part.tags, part.time_range), adds


def _merged(stored: MeasurementSchema | None, database: str, part: MeasurementRows) -> MeasurementSchema:
    columns = dict(stored.columns) if stored else {}
    for field in part.table.schema:
        columns.setdefault(field.name, type_name(field.type))
    tags = tuple(dict.fromkeys((*(stored.tags if stored else ()), *part.tags)))
    return MeasurementSchema(database, part.measurement, columns, tags, stored.version if stored else 0)


class SchemaRegistry:
    """The catalog's schemas behind a per-process cache.

    The cache is safe because stored schemas only grow: a column's type, once stored, never
    changes. A cached schema may lack columns another process added since; adding one is a
    compare-and-set on the version, which then fails, and the fresh schema is read and checked.
    """

    def __init__(self, catalog: SchemaCatalog) -> None:
        self.catalog = catalog
        self._cache: dict[tuple[str, str], MeasurementSchema] = {}
        # Arrow schemas the cached schemas took as they are, by (database, measurement, tags): most
        # writes repeat one shape, and checking it again finds the same. (Compared, not hashed:
        # hashing an Arrow schema costs a hundred times more.)
        self._accepted: dict[tuple[str, str, tuple[str, ...]], list[pa.Schema]] = {}

    def get(self, database: str, measurement: str, fresh: bool = False) -> MeasurementSchema | None:
        key = (database, measurement)
        if fresh:
            self._accepted.clear()  # what the cache accepted may no longer hold
        elif key in self._cache:
            return self._cache[key]
        schema = self.catalog.get_schema(database, measurement)
        if schema is not None:
            self._cache[key] = schema
        return schema

    def apply(self, database: str, parts: list[MeasurementRows]) -> list[MeasurementRows]:
        return apply_schema(self, database, parts)

    def accepts(self, database: str, measurement: str, tags: tuple[str, ...], schema: pa.Schema) -> bool:
        """Whether rows of ``schema`` were taken as they are before (by this process's cache):
        they need neither a check nor a change to be stored."""
        return any(schema == accepted for accepted in self._accepted.get((database, measurement, tags), ()))

    def reconcile(
        self, database: str, part: MeasurementRows, fresh: bool
    ) -> tuple[MeasurementRows, MeasurementSchema | None, bool]:
        """``part`` cast to its stored schema (read afresh if ``fresh``), that schema (None when
        an accepted shape spared reading it), and True if the part adds to it."""
        key = (database, part.measurement, part.tags)
        schema = part.table.schema
        if not fresh and any(schema == accepted for accepted in self._accepted.get(key, ())):
            return part, None, False
        stored = self.get(database, part.measurement, fresh)
        reconciled, adds = _reconcile_part(part, stored)
        if not adds and reconciled is part:
            if len(self._accepted) >= _MAX_ACCEPTED_SHAPES:
                self._accepted.clear()
            shapes = self._accepted.setdefault(key, [])
            shapes[:] = [*shapes[-(_MAX_SHAPES_PER_MEASUREMENT - 1) :], schema]
        return reconciled, stored, adds


def apply_schema(registry: SchemaRegistry, database: str, parts: list[MeasurementRows]) -> list[MeasurementRows]:
    """Check every part against its stored schema, then record new columns; all-or-nothing.

    All parts are checked before any schema is written, so a conflict in the last part changes
    nothing. Schema updates are compare-and-set on a version: concurrent writers adding the same
    column with different types cannot both win.
    """
    merged = merge_parts(parts)
    for attempt in range(_MAX_CAS_ATTEMPTS):
        checked: list[tuple[MeasurementRows, MeasurementSchema | None, bool]] = []
        for part in merged.values():
            # The first try trusts the cache; a failed compare-and-set makes later tries read afresh.
            checked.append(registry.reconcile(database, part, fresh=attempt > 0))
        # Every new or widened schema of the request in one catalog write where the store allows:
        # a request of many new measurements costs one transaction, not one each.
        changes = [
            (_merged(stored, database, part), stored.version if stored else None)
            for part, stored, adds in checked
            if adds
        ]
        if not changes or registry.catalog.put_schemas(changes):
            return [part for part, _stored, _adds in checked]
    raise Conflict("the measurement schema kept changing under this request; retry it")


class SchemaPlan:
    """The schemas a sequence of requests would leave, worked out without storing any.

    A bulk import checks every chunk of a file against it before storing the first, so a file
    that conflicts anywhere changes nothing; ``reserve`` then records the columns the file adds
    in one catalog write, so storing its chunks cannot meet a conflict halfway.
    """

    def __init__(self, registry: SchemaRegistry, database: str) -> None:
        self.registry = registry
        self.database = database
        self.pending: dict[str, MeasurementSchema] = {}

    def check(self, parts: list[MeasurementRows]) -> None:
        """Raise BadRequest as ``apply_schema`` would, had the parts checked before been stored."""
        for part in merge_parts(parts).values():
            stored = self.pending.get(part.measurement) or self.registry.get(self.database, part.measurement)
            _reconciled, adds = _reconcile_part(part, stored)
            if adds:
                self.pending[part.measurement] = _merged(stored, self.database, part)

    def reserve(self) -> None:
        """Store the planned schemas: compare-and-set on the versions read, planned again if they moved."""
        for _attempt in range(_MAX_CAS_ATTEMPTS):
            changes: list[tuple[MeasurementSchema, int | None]] = []
            for name, planned in self.pending.items():
                stored = self.registry.get(self.database, name, fresh=True)
                known = stored.columns if stored else {}
                for column, kind in planned.columns.items():
                    if known.get(column, kind) != kind and not (known[column] == "float64" and kind == "int64"):
                        raise Conflict(
                            f"measurement {name!r}: column {column!r} became {known[column]} while the file was "
                            f"checked, which holds {kind}; nothing was stored"
                        )
                columns = {**planned.columns, **known}
                tags = tuple(dict.fromkeys((*(stored.tags if stored else ()), *planned.tags)))
                if stored is not None and columns == stored.columns and tags == stored.tags:
                    continue
                version = stored.version if stored else None
                changes.append((MeasurementSchema(self.database, name, columns, tags, version or 0), version))
            if not changes or self.registry.catalog.put_schemas(changes):
                return
        raise Conflict("the measurement schema kept changing under this import; retry it")


def merge_parts(parts: list[MeasurementRows]) -> dict[str, MeasurementRows]:
    """One part per measurement: items of a request naming one measurement more than once, joined."""
    merged: dict[str, MeasurementRows] = {}
    for part in parts:
        if part.measurement in merged:
            previous = merged[part.measurement]
            try:
                tables = [
                    _widened_to(previous.table, part.table.schema),
                    _widened_to(part.table, previous.table.schema),
                ]
                table = pa.concat_tables(tables, promote_options="permissive")
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise BadRequest(f"measurement {part.measurement!r}: items disagree on column types ({exc})") from exc
            part = MeasurementRows(part.measurement, table, tuple(dict.fromkeys((*previous.tags, *part.tags))))
        merged[part.measurement] = part
    if len(merged) > MAX_MEASUREMENTS_PER_REQUEST:
        raise BadRequest(
            f"the request writes {len(merged)} measurements; the limit is {MAX_MEASUREMENTS_PER_REQUEST} "
            "per request: split it"
        )
    return merged
