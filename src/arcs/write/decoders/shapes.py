"""The MessagePack/JSON object shapes a write may send: columnar, row, ``{"batch": [...]}``, bare array."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice, repeat
from operator import itemgetter
from typing import Any

import pyarrow as pa

from arcs.errors import BadRequest
from arcs.names import MAX_COLUMNS, TIME_COLUMN, check_measurement
from arcs.write.batch import MeasurementRows
from arcs.write.decoders.columns import Budget, build_rows, check_precision, shorten

MAX_ITEMS = 1_000_000


def rows_from_objects(
    document: Any, now_micros: int, precision: str | None, datetimes: bool = True
) -> list[MeasurementRows]:
    """``datetimes=False``: datetime values are a BadRequest (see ``column_array``)."""
    precision = check_precision(precision)
    items = _items(document)
    same = _uniform_rows(items, precision, datetimes)
    if same is not None:
        return [same.build(now_micros)]
    parts: list[MeasurementRows] = []
    row_groups: dict[str, _RowAccumulator] = {}
    budget = Budget()
    # Row-shaped bodies run this loop once per row: "item N" is only formatted for an error.
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadRequest(f"item {index}: expected an object, got {type(item).__name__}")
        if "columns" in item:
            parts.append(_columnar(item, f"item {index}", now_micros, precision, budget, datetimes))
        elif "fields" in item:
            measurement = item.get("m")
            accumulator = row_groups.get(measurement) if isinstance(measurement, str) else None
            if accumulator is None:
                if not isinstance(measurement, str):
                    raise BadRequest(f"item {index}: 'm' (the measurement) must be a string")
                try:
                    check_measurement(measurement)
                    budget.add_part(1)
                except BadRequest as exc:
                    raise BadRequest(f"item {index}: {exc.message}") from exc
                accumulator = row_groups[measurement] = _RowAccumulator(measurement, budget, datetimes)
            accumulator.add(item, index, precision)
        else:
            raise BadRequest(f"item {index}: expected a columnar object ('m', 'columns') or a row ('m', 'fields')")
    for accumulator in row_groups.values():
        parts.append(accumulator.build(now_micros))
    if not parts:
        raise BadRequest("the request holds no rows")
    return parts


def _uniform_rows(items: list[Any], precision: str | None, datetimes: bool) -> _RowAccumulator | None:
    """Rows of one measurement that all have the first row's keys, gathered a column at a time.

    The first row goes through ``_RowAccumulator.add`` (every check, every message); each later
    row would take its fast path, so appending their values column by column (``map`` with
    ``itemgetter``, in C) gives the same columns without a Python loop per row. ``None``, or a
    failed check, leaves the body to the row-by-row loop, which words any error.
    """
    count = len(items)
    if count < 2 or not all(map(isinstance, items, repeat(dict))):
        return None
    has = dict.__contains__
    first = items[0]
    measurement = first.get("m")
    if (
        not isinstance(measurement, str)
        or not all(map(has, items, repeat("fields")))
        or any(map(has, items, repeat("columns")))
        or any(map(has, items, repeat("precision")))
        or set(map(dict.get, items, repeat("m"))) != {measurement}
    ):
        return None
    fields = list(map(itemgetter("fields"), items))
    tags: list[Any] = list(map(dict.get, items, repeat("tags")))
    if not all(map(isinstance, fields, repeat(dict))) or not fields[0]:
        return None
    if tags.count(None) == count:
        tag_keys: Any = {}.keys()
    elif all(map(isinstance, tags, repeat(dict))) and tags[0]:
        tag_keys = tags[0].keys()
        if not all(map(tag_keys.__eq__, map(dict.keys, tags))):
            return None
    else:
        return None
    field_keys = fields[0].keys()
    if not all(map(field_keys.__eq__, map(dict.keys, fields))):
        return None
    if all(map(has, items, repeat("t"))):
        times = list(map(itemgetter("t"), items))
    elif not any(map(has, items, repeat("t"))):
        times = list(map(dict.get, items, repeat(TIME_COLUMN)))
    else:
        return None
    try:
        check_measurement(measurement)
        budget = Budget()
        budget.add_part(1)
        accumulator = _RowAccumulator(measurement, budget, datetimes)
        accumulator.add(first, 0, precision)
    except BadRequest:
        return None
    columns = accumulator.columns
    for key in tag_keys:
        columns[key].extend(map(itemgetter(key), islice(tags, 1, None)))
    for key in field_keys:
        columns[key].extend(map(itemgetter(key), islice(fields, 1, None)))
    accumulator.times[1:] = times[1:]
    accumulator.items.extend(range(1, count))
    accumulator.rows = count
    return accumulator


def _items(document: Any) -> list[Any]:
    if isinstance(document, list):
        items = document
    elif isinstance(document, dict) and "batch" in document:
        items = document["batch"]
        if not isinstance(items, list):
            raise BadRequest("'batch' must be an array")
    elif isinstance(document, dict):
        items = [document]
    else:
        raise BadRequest(f"expected an object or an array at the top level, got {type(document).__name__}")
    if len(items) > MAX_ITEMS:
        raise BadRequest(f"{len(items)} items in one request; the limit is {MAX_ITEMS}")
    return items


def _columnar(
    item: dict[str, Any], where: str, now_micros: int, precision: str | None, budget: Budget, datetimes: bool
) -> MeasurementRows:
    columns = item["columns"]
    if not isinstance(columns, dict) or not columns:
        raise BadRequest(f"{where}: 'columns' must be a non-empty object of arrays")
    try:
        budget.add_part(len(columns))
    except BadRequest as exc:
        raise BadRequest(f"{where}: {exc.message}") from exc
    for name, values in columns.items():
        if not isinstance(values, list):
            raise BadRequest(f"{where}: column {shorten(repr(name), 80)} must be an array")
    tags = item.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        raise BadRequest(f"{where}: 'tags' must be an array of column names")
    try:
        item_precision = check_precision(item.get("precision")) or precision
        return build_rows(item.get("m"), columns, tags, item_precision, now_micros, datetimes=datetimes)
    except BadRequest as exc:
        raise BadRequest(f"{where}: {exc.message}") from exc


class _RowAccumulator:
    """Gathers row-shaped objects of one measurement into columns, padding absent keys with null."""

    def __init__(self, measurement: str, budget: Budget, datetimes: bool) -> None:
        self.measurement = measurement
        self.budget = budget
        self.datetimes = datetimes
        self.times: list[Any] = []
        self.items: list[int] = []
        self.columns: dict[str, list[Any]] = {}
        self.tags: dict[str, None] = {}
        self.precision: str | None = None
        self.rows = 0
        self.aligned = False  # every column holds a value for every row so far (none awaits padding)

    def add(self, item: dict[str, Any], index: int, precision: str | None) -> None:
        # Once per row: the common case costs a few dict lookups; messages are formatted on error.
        item_precision = item.get("precision")
        if item_precision is None:
            item_precision = precision
        else:
            try:
                item_precision = check_precision(item_precision) or precision
            except BadRequest as exc:
                raise BadRequest(f"item {index}: {exc.message}") from exc
        if item_precision != self.precision:
            if self.rows:
                raise BadRequest(f"item {index}: rows of {self.measurement!r} mix precisions")
            self.precision = item_precision
        tags = item.get("tags") or {}
        fields = item["fields"]
        if not isinstance(tags, dict) or not isinstance(fields, dict):
            raise BadRequest(f"item {index}: 'tags' and 'fields' must be objects")
        if not fields:
            raise BadRequest(f"item {index}: a row needs at least one field")
        self.times.append(item["t"] if "t" in item else item.get(TIME_COLUMN))
        self.items.append(index)
        columns = self.columns
        if (
            self.aligned
            and len(tags) + len(fields) == len(columns)
            and self.tags.keys() >= tags.keys()
            and columns.keys() >= fields.keys()
            and (not tags or tags.keys().isdisjoint(fields))
        ):
            # The common row: every column is full so far and this row has exactly their keys
            # (set operations in C), so each gets one value; _put checked the keys when new.
            for key, value in tags.items():
                columns[key].append(value)
            for key, value in fields.items():
                columns[key].append(value)
            self.rows += 1
            return
        where = f"item {index}"
        for key, value in tags.items():
            if key in fields:
                raise BadRequest(f"{where}: {shorten(repr(key), 80)} is both a tag and a field")
            self.tags[key] = None
            self._put(key, value, where)
        for key, value in fields.items():
            self._put(key, value, where)
        self.rows += 1
        self.aligned = all(len(values) == self.rows for values in columns.values())

    def _put(self, key: Any, value: Any, where: str) -> None:
        if not isinstance(key, str):
            raise BadRequest(f"{where}: keys must be strings, got {shorten(repr(key), 80)}")
        if key == TIME_COLUMN:
            raise BadRequest(f"{where}: 'time' cannot be a tag or field")
        values = self.columns.get(key)
        if values is None:
            if len(self.columns) >= MAX_COLUMNS - 1:
                raise BadRequest(
                    f"{where}: measurement {self.measurement!r} has more than {MAX_COLUMNS - 1} tags and fields"
                )
            try:
                self.budget.add_columns(1)
            except BadRequest as exc:
                raise BadRequest(f"{where}: {exc.message}") from exc
            values = self.columns[key] = []
        if len(values) < self.rows:
            # Rows that lacked this key are null; padded only now, so sparse rows stay cheap.
            try:
                self.budget.add_empty_cells(self.rows - len(values))
            except BadRequest as exc:
                raise BadRequest(f"{where}: {exc.message}") from exc
            values.extend([None] * (self.rows - len(values)))
        values.append(value)

    def build(self, now_micros: int) -> MeasurementRows:
        for values in self.columns.values():
            if len(values) < self.rows:
                self.budget.add_empty_cells(self.rows - len(values))
                values.extend([None] * (self.rows - len(values)))
        columns: dict[str, Sequence[Any] | pa.Array] = {TIME_COLUMN: self.times, **self.columns}
        items = self.items
        return build_rows(
            self.measurement,
            columns,
            list(self.tags),
            self.precision,
            now_micros,
            null_time_is_now=True,
            label=lambda row: f"item {items[row]}",
            datetimes=self.datetimes,
        )
